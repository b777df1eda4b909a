# SPDX-License-Identifier: GPL-2.0
#
# The CUDA backend's tests; included by user/user.mk (after its own rules),
# whose variables it uses: GS_CUDA_H (user/gs_cuda.h, empty with CUDA=0), GS_A,
# GS_ASAN_A, GS_ASAN, GS_LIBS, GS_TEST_CFLAGS, and from the top Makefile
# BUILD, CC, CFLAGS, LDFLAGS, KSFT_STAMP. Builds:
#   $(BUILD)/tests/host/fakecuda/libcuda.so.1  the stand-in driver
#                                              (tests/host/fake_libcuda.c),
#                                              unless CUDA=0
#   $(BUILD)/tests/host/fakenvml/libnvidia-ml.so.1  the stand-in NVML
#                                              (tests/host/fake_libnvml.c),
#                                              with it
#   $(BUILD)/tests/host/fakecudart/libcudart.so.12  a stand-in CUDA
#                                              runtime, and a client of it
#                                              (libcudart_client.so)
#   $(BUILD)/tests/host/NAME       tests/host/test_*cuda*.c (HOST_TESTS)
#   $(BUILD)/tests/host-asan/NAME  the same with ASan+UBSan (HOST_TESTS)
# Built with CUDA=0 the tests are still built; they skip every
# test, since libgpusleep's gs_backend_cuda_new() then fails with -ENOSYS.
# The tests find the stand-in by its absolute path, compiled in
# (FAKECUDA_LIB), or at run time in the environment variable FAKECUDA_LIB;
# the stand-in NVML likewise (FAKENVML_LIB).

GS_CUDA_FAKE	:= $(BUILD)/tests/host/fakecuda/libcuda.so.1
GS_NVML_FAKE	:= $(BUILD)/tests/host/fakenvml/libnvidia-ml.so.1
GS_CUDA_SRCS	:= $(sort $(wildcard tests/host/test_*cuda*.c))
GS_CUDA_BINS	:= $(GS_CUDA_SRCS:tests/host/%.c=$(BUILD)/tests/host/%)
GS_CUDA_ASAN	:= $(GS_CUDA_SRCS:tests/host/%.c=$(BUILD)/tests/host-asan/%)
GS_CUDA_TCFLAGS	:= $(GS_TEST_CFLAGS) -Itests/host \
		   -DFAKECUDA_LIB='"$(abspath $(GS_CUDA_FAKE))"' \
		   -DFAKENVML_LIB='"$(abspath $(GS_NVML_FAKE))"'

ifneq ($(GS_CUDA_H),)
GS_CUDA_TDEPS	:= $(GS_CUDA_FAKE) $(GS_NVML_FAKE)

# -fvisibility is left at default: the stand-in exports what it defines.
$(GS_CUDA_FAKE): tests/host/fake_libcuda.c tests/host/fake_libcuda.h \
		$(GS_CUDA_H)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iuser -Itests/host -fPIC -shared \
		-Wl,-soname,libcuda.so.1 -o $@ $< $(LDFLAGS) -lpthread

$(GS_NVML_FAKE): tests/host/fake_libnvml.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $< \
		$(LDFLAGS)

ALL_TARGETS	+= $(GS_CUDA_FAKE) $(GS_NVML_FAKE)
# the GPU check's dry run over the stand-in (bench/gpu/check.py)
HOST_TESTS	+= tests/host/test_gpu_check.sh
endif

# A stand-in CUDA runtime (libcudart.so.12) and a library calling it as
# PyTorch does, through its PLT, for torch_memory_saver's hook libraries
# (tests/host/test_tms_hook.py, tests/vm-py/test_py_tms_preload.py);
# built with or without cuda.h.
GS_CUDART_FAKE	:= $(BUILD)/tests/host/fakecudart/libcudart.so.12
GS_CUDART_CLIENT := $(BUILD)/tests/host/fakecudart/libcudart_client.so
$(GS_CUDART_FAKE): tests/host/fake_libcudart.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -shared -fvisibility=hidden \
		-Wl,-soname,libcudart.so.12 -o $@ $< $(LDFLAGS) -lpthread
$(GS_CUDART_CLIENT): tests/host/fake_cudart_client.c $(GS_CUDART_FAKE)
	$(CC) $(CFLAGS) -fPIC -shared -fvisibility=hidden -o $@ $< \
		-L$(@D) -l:libcudart.so.12 -Wl,--enable-new-dtags,-rpath,'$$ORIGIN' \
		$(LDFLAGS)
ALL_TARGETS	+= $(GS_CUDART_FAKE) $(GS_CUDART_CLIENT)
# the hook libraries (user/user.mk) over them and the stand-in driver,
# against torch_memory_saver 0.0.10's and the runtime's headers
HOST_TESTS	+= tests/host/test_tms_hook.py

$(GS_CUDA_BINS): $(BUILD)/tests/host/%: tests/host/%.c $(GS_A) $(KSFT_STAMP) \
		$(GS_CUDA_TDEPS)
	@mkdir -p $(@D)
	$(CC) $(GS_CUDA_TCFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

$(GS_CUDA_ASAN): $(BUILD)/tests/host-asan/%: tests/host/%.c $(GS_ASAN_A) \
		$(KSFT_STAMP) $(GS_CUDA_TDEPS)
	@mkdir -p $(@D)
	$(CC) $(GS_CUDA_TCFLAGS) $(GS_ASAN) -o $@ $< $(GS_ASAN_A) $(LDFLAGS) \
		$(GS_LIBS)

ALL_TARGETS	+= $(GS_CUDA_BINS) $(GS_CUDA_ASAN)
HOST_TESTS	+= $(GS_CUDA_BINS) $(GS_CUDA_ASAN)

.PHONY: cuda-tests
cuda-tests: $(GS_CUDA_BINS) $(GS_CUDA_ASAN)

-include $(GS_CUDA_BINS:=.d) $(GS_CUDA_ASAN:=.d)
