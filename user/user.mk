# SPDX-License-Identifier: GPL-2.0
#
# libgpusleep and its tests; included by the top Makefile, which provides
# BUILD, CC, CFLAGS (and may provide LDFLAGS, KSFT_INC, KSFT_CFLAGS,
# KSFT_STAMP). Builds:
#   $(BUILD)/lib/libgpusleep.so.0.$(VERSION) (the library), .so.0 (the
#   soname link, what programs load), .so (the link -lgpusleep finds),
#   libgpusleep.a, libgpusleep.pc (pkg-config; installed by make install)
#   $(BUILD)/lib/torch_memory_saver_hook_mode_*.abi3.so (user/tms/hook.c)
#   $(BUILD)/tests/host/NAME       tests/host/NAME.c (HOST_TESTS)
#   $(BUILD)/tests/host-asan/NAME  the same with ASan+UBSan (HOST_TESTS)
#   $(BUILD)/tests/vm-user/NAME    tests/vm-user/NAME.c (VM_TESTS)
#   tests/host/test_libdist.sh: the links, SONAME and .pc (HOST_TESTS)
# tests/host/*cuda* and the stand-ins (fake_*) belong to user/cuda.mk.
#
# user/backend_cuda.c is compiled in, with HAVE_CUDA=1, unless CUDA=0: it
# needs no CUDA toolkit (user/gs_cuda.h declares the Driver API subset it
# calls; the driver is loaded at run time), so it builds on any Linux.
# CUDA=0 builds without the CUDA backend on purpose (gs_backend_cuda_new
# then fails with ENOSYS). Where a toolkit's cuda.h is found
# (tools/find-cuda-h.sh), tests/host/test_cuda_decls.sh checks gs_cuda.h
# against it.

GS_LIBDIR	:= $(BUILD)/lib
GS_OBJDIR	:= $(BUILD)/user
GS_SONAME	:= libgpusleep.so.0
# liburing when it is there (the agent's io_uring loop); without it (a GPU
# machine with only the CUDA toolkit, bench/gpu/check.sh) the agent polls
GS_HAVE_URING	:= $(shell printf '\043include <liburing.h>\n' | \
			$(CC) -E -x c - >/dev/null 2>&1 && echo 1 || echo 0)
GS_LIBS		:= -lpthread $(if $(filter 1,$(GS_HAVE_URING)),-luring) -ldl
GS_ASAN		:= -fsanitize=address,undefined -fno-omit-frame-pointer
GS_KSFT_CFLAGS	:= $(if $(KSFT_CFLAGS),$(KSFT_CFLAGS),-isystem $(KSFT_INC))

CUDA		?= 1
# gpusleep's own declarations of the Driver API (empty: CUDA=0)
GS_CUDA_H	:= $(if $(filter-out 0,$(CUDA)),user/gs_cuda.h)
# where a toolkit's cuda.h is looked for (issue 21), for the check below
HOST_TESTS	+= tests/host/test_find_cuda_h.sh
# the variants other machines build: no liburing (issue 34), no cuda.h
# (issue 36); gpusleep's CUDA declarations against cuda.h where it is
HOST_TESTS	+= tests/host/test_build_variants.sh tests/host/test_cuda_decls.sh
GS_SRCS		:= $(filter-out user/backend_cuda.c,$(sort $(wildcard user/*.c)))
GS_LIB_CFLAGS	:= $(CFLAGS) -fPIC -Iuser -Iuser/include -DGS_HAVE_URING=$(GS_HAVE_URING)
ifneq ($(GS_CUDA_H),)
GS_SRCS		+= user/backend_cuda.c
GS_LIB_CFLAGS	+= -DHAVE_CUDA=1
endif

GS_OBJS		:= $(GS_SRCS:user/%.c=$(GS_OBJDIR)/pic/%.o)
GS_ASAN_OBJS	:= $(GS_SRCS:user/%.c=$(GS_OBJDIR)/asan/%.o)
GS_REAL		:= $(GS_LIBDIR)/$(GS_SONAME).$(VERSION)
GS_SO		:= $(GS_LIBDIR)/libgpusleep.so
GS_PC		:= $(GS_LIBDIR)/libgpusleep.pc
GS_A		:= $(GS_LIBDIR)/libgpusleep.a
GS_ASAN_A	:= $(GS_LIBDIR)/asan/libgpusleep.a

$(GS_OBJDIR)/pic/%.o: user/%.c
	@mkdir -p $(@D)
	$(CC) $(GS_LIB_CFLAGS) -MMD -MP -c -o $@ $<

$(GS_OBJDIR)/asan/%.o: user/%.c
	@mkdir -p $(@D)
	$(CC) $(GS_LIB_CFLAGS) $(GS_ASAN) -MMD -MP -c -o $@ $<

$(GS_REAL): $(GS_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(GS_SONAME) -Wl,--no-undefined \
		-o $@ $^ $(LDFLAGS) $(GS_LIBS)

# links, not copies; a tree built before they were links has files there
$(GS_LIBDIR)/$(GS_SONAME): $(GS_REAL)
	ln -sfn $(notdir $<) $@

$(GS_SO): $(GS_LIBDIR)/$(GS_SONAME)
	rm -f $@
	ln -sfn $(GS_SONAME) $@

# PREFIX as make install uses it; the private libraries for static links
# (make install-lib writes it again, with the install's PREFIX)
GS_PC_GEN	= sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
		  -e 's|@LIBS_PRIVATE@|$(GS_LIBS)|g' user/libgpusleep.pc.in
$(GS_PC): user/libgpusleep.pc.in dkms.conf
	@mkdir -p $(@D)
	$(GS_PC_GEN) > $@

$(GS_A): $(GS_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

$(GS_ASAN_A): $(GS_ASAN_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS	+= $(GS_REAL) $(GS_SO) $(GS_LIBDIR)/$(GS_SONAME) $(GS_A) $(GS_PC)

# torch_memory_saver's hook libraries (user/tms/hook.c), under the names
# torch_memory_saver 0.0.10's wheel ships (and slime looks for): mode
# preload (cudaMalloc/cudaFree for LD_PRELOAD) and torch (a pluggable
# allocator), each unsuffixed and for the CUDA runtimes 12 and 13. They
# do not link libgpusleep: they load it with dlopen (the process's copy,
# else the gpusleep package's beside them, $GPUSLEEP_LIB, the one beside
# them (build/lib here), make install's, the system's: user/tms/hook.c).
# These are this machine's (build/lib, make python-install); the
# gpusleep-torch-memory-saver wheel ships its own build of them
# (user/python/python.mk: PY_TMS_LIBS).
GS_TMS_CFLAGS	:= $(CFLAGS) -fPIC -fvisibility=hidden -Iuser/include
GS_TMS_LIBS	:=
# $(1) mode, $(2) suffix, $(3) PRELOAD or TORCH, $(4) more flags
GS_TMS_NAME	= torch_memory_saver_hook_mode_$(1)$(2).abi3.so
GS_TMS_DEFS	= -DTMS_HOOK_$(3) $(if $(2),-DTMS_CUDART='"libcudart.so.$(2:_cu%=%)"')
define GS_TMS_RULE
GS_TMS_LIBS	+= $(GS_LIBDIR)/$(call GS_TMS_NAME,$(1),$(2))
$(GS_LIBDIR)/$(call GS_TMS_NAME,$(1),$(2)): user/tms/hook.c user/include/libgpusleep.h
	@mkdir -p $$(@D)
	$$(CC) $(GS_TMS_CFLAGS) $(call GS_TMS_DEFS,$(1),$(2),$(3)) -shared \
		-Wl,--no-undefined -o $$@ $$< $(LDFLAGS) -ldl -lpthread
endef
# mode:suffix:kind ("-": no suffix); $(call GS_TMS_EACH,RULE) evaluates
# RULE for each (python.mk's wheel build too)
GS_TMS_VARIANTS	:= preload:-:PRELOAD preload:_cu12:PRELOAD preload:_cu13:PRELOAD \
		   torch:-:TORCH torch:_cu12:TORCH torch:_cu13:TORCH
GS_TMS_W	= $(patsubst -,,$(word $(1),$(subst :, ,$(2))))
GS_TMS_EACH	= $(foreach v,$(GS_TMS_VARIANTS),$(eval $(call $(1),$(call \
		  GS_TMS_W,1,$(v)),$(call GS_TMS_W,2,$(v)),$(call GS_TMS_W,3,$(v)))))
$(call GS_TMS_EACH,GS_TMS_RULE)
ALL_TARGETS	+= $(GS_TMS_LIBS)
.PHONY: tms-hooks
tms-hooks: $(GS_TMS_LIBS)

# ------------------------------------------------------------------ tests
GS_HOST_SRCS	:= $(sort $(foreach f,$(wildcard tests/host/*.c), \
			$(if $(or $(findstring cuda,$(notdir $(f))), \
				  $(filter fake_%,$(notdir $(f)))),,$(f))))
GS_HOST_BINS	:= $(GS_HOST_SRCS:tests/host/%.c=$(BUILD)/tests/host/%)
GS_HOST_ASAN	:= $(GS_HOST_SRCS:tests/host/%.c=$(BUILD)/tests/host-asan/%)
GS_VMU_SRCS	:= $(sort $(wildcard tests/vm-user/*.c))
GS_VMU_BINS	:= $(GS_VMU_SRCS:tests/vm-user/%.c=$(BUILD)/tests/vm-user/%)
GS_TEST_CFLAGS	:= $(CFLAGS) $(GS_KSFT_CFLAGS) -Iuser -Iuser/include -MMD -MP

$(GS_HOST_BINS): $(BUILD)/tests/host/%: tests/host/%.c $(GS_A) $(KSFT_STAMP)
	@mkdir -p $(@D)
	$(CC) $(GS_TEST_CFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

$(GS_HOST_ASAN): $(BUILD)/tests/host-asan/%: tests/host/%.c $(GS_ASAN_A) $(KSFT_STAMP)
	@mkdir -p $(@D)
	$(CC) $(GS_TEST_CFLAGS) $(GS_ASAN) -o $@ $< $(GS_ASAN_A) $(LDFLAGS) $(GS_LIBS)

$(GS_VMU_BINS): $(BUILD)/tests/vm-user/%: tests/vm-user/%.c $(GS_A) $(KSFT_STAMP)
	@mkdir -p $(@D)
	$(CC) $(GS_TEST_CFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

ALL_TARGETS	+= $(GS_HOST_BINS) $(GS_HOST_ASAN) $(GS_VMU_BINS)
HOST_TESTS	+= $(GS_HOST_BINS) $(GS_HOST_ASAN) tests/host/test_libdist.sh
VM_TESTS	+= $(GS_VMU_BINS)

.PHONY: libgpusleep
libgpusleep: $(GS_REAL) $(GS_SO) $(GS_LIBDIR)/$(GS_SONAME) $(GS_A) $(GS_PC)

-include $(GS_OBJS:.o=.d) $(GS_ASAN_OBJS:.o=.d) $(GS_HOST_BINS:=.d) \
	$(GS_HOST_ASAN:=.d) $(GS_VMU_BINS:=.d)

-include user/cuda.mk
