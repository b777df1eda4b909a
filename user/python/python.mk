# SPDX-License-Identifier: GPL-2.0
#
# Python bindings (user/python/gpusleep, stdlib + ctypes only); included by
# the top Makefile. Provides:
#   $(BUILD)/python/uapi_layout  prints the C layout of every struct the
#                                bindings mirror (tests compare ctypes)
#   python-install               the package into $(PY_SITEDIR), with
#                                _install.py naming $(PREFIX)/lib as the
#                                place of libgpusleep.so.0 and
#                                $(PY_HOOKDIR) that of the hook libraries
#                                (user/user.mk's, installed there: the
#                                drop-in's configure_subprocess finds
#                                them); run by install
#   python-uninstall             run by uninstall
#   wheel                        $(PY_DIST)/*.whl: gpusleep with
#                                libgpusleep.so.0 bundled ($(PY_WHEEL_PLAT):
#                                $(PY_WHEEL_LIB), below),
#                                gpusleep-torch-memory-saver (with the
#                                hook libraries beside its package,
#                                built for it: $(PY_TMS_LIBS), tagged
#                                $(PY_WHEEL_PLAT) too) and
#                                gpusleep-vllm (pure), built offline with
#                                Debian's setuptools and wheel (pip
#                                --no-build-isolation); part of all when
#                                they are installed
#   $(PY_VENV)                   a new venv (not seeing the system's
#                                packages) with the three wheels installed
#                                by pip, offline: tests/vm-py/test_py_dist.py
#                                runs the package from it in the VM
#   HOST_TESTS += tests/host/test_python.py tests/host/test_tms_dropin.py
#                 tests/host/test_tms_pinned.py, test_weights.py
#                 (gpusleep.weights), test_weight_docs.py
#                 (docs/weight-updates.md vs the engines), test_wheel.py
#                 (the wheel's tag, auditwheel, a clean venv, glibc 2.31)
#   VM_TESTS   += tests/vm-py/test_*.py (TAP; SKIP without /dev/gpusleep)
# PY_SITEDIR: /usr/lib/python3/dist-packages for PREFIX=/usr (Debian's own
# directory), else $(PREFIX)/lib/pythonX.Y/dist-packages, which Debian's
# /usr/bin/python3 has on sys.path for PREFIX=/usr/local (the Debian
# python3 does not look in /usr/local/lib/python3/dist-packages).

PYTHON		?= /usr/bin/python3
PY_PKG_SRCS	:= $(sort $(wildcard user/python/gpusleep/*.py))
PY_VER		:= $(shell $(PYTHON) -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)
ifeq ($(PREFIX),/usr)
PY_SITEDIR	?= /usr/lib/python3/dist-packages
else
PY_SITEDIR	?= $(PREFIX)/lib/$(PY_VER)/dist-packages
endif
PY_LAYOUT	:= $(BUILD)/python/uapi_layout
PY_DIST		:= $(BUILD)/python/dist
PY_STAGE	:= $(BUILD)/python/stage
PY_DISTS	:= dist-tms dist-vllm
PY_VENV		:= $(BUILD)/python/venv
PY_DIST_SRCS	:= user/python/pyproject.toml user/python/setup.py \
		   user/python/README.md user/python/gpusleep/py.typed \
		   $(PY_PKG_SRCS) $(foreach d,$(PY_DISTS),$(shell find \
		   user/python/$(d) -name '*.py' -o -name '*.toml' -o -name py.typed))
PY_HAVE_WHEEL	:= $(shell $(PYTHON) -c 'import setuptools, wheel, pip' \
			2>/dev/null && echo 1)

$(PY_LAYOUT): tests/vm-py/uapi_layout.c uapi/linux/gpusleep.h user/include/libgpusleep.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iuser/include -o $@ $<

ALL_TARGETS	+= $(PY_LAYOUT)
ifeq ($(PY_HAVE_WHEEL),1)
ALL_TARGETS	+= $(PY_DIST)/.stamp $(PY_VENV)/.stamp
endif

# The wheel's library: libgpusleep's objects linked with liburing in (the
# static archive of Debian's liburing-dev: no liburing.so.2 is needed
# where the wheel goes; its symbols stay inside, --exclude-libs) and with
# user/python/glibc_compat.c (no glibc symbol version past 2.17, so that
# it loads where the tag says: docs/python.md, Install). PY_WHEEL_PLAT is
# the one place the tag is written (setup.py takes it from the
# environment); tests/host/test_wheel.py has auditwheel check it.
ifeq ($(shell uname -m),x86_64)
PY_WHEEL_PLAT	:= manylinux_2_17_x86_64.manylinux2014_x86_64
PY_COMPAT_O	:= $(BUILD)/python/glibc_compat.o
PY_URING_A	:= -Wl,--push-state,-Bstatic -luring -Wl,--pop-state
PY_WHEEL_LIBS	:= -Wl,--exclude-libs,ALL \
		   $(if $(filter 1,$(GS_HAVE_URING)),$(PY_URING_A)) \
		   -Wl,--push-state,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2 -Wl,--pop-state
else
PY_WHEEL_PLAT	:= linux_$(shell uname -m)
PY_WHEEL_LIBS	:= $(GS_LIBS)
endif
PY_WHEEL_LIB	:= $(BUILD)/python/wheel-lib/$(GS_SONAME)

$(BUILD)/python/glibc_compat.o: user/python/glibc_compat.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fPIC -c -o $@ $<

$(PY_WHEEL_LIB): $(GS_OBJS) $(PY_COMPAT_O)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared -Wl,-soname,$(GS_SONAME) -Wl,--no-undefined \
		-o $@ $^ $(LDFLAGS) $(PY_WHEEL_LIBS)

# The drop-in wheel's hook libraries: user/tms/hook.c as user/user.mk
# builds it (no libgpusleep linked: it loads the gpusleep wheel's at run
# time), with glibc_compat.c (dlopen, dladdr... at their GLIBC_2.2.5
# versions) and glibc's old libraries named, as the library above.
PY_TMS_DIR	:= $(BUILD)/python/wheel-tms
PY_TMS_OLDLIBS	:= -Wl,--push-state,--no-as-needed -l:libpthread.so.0 \
		   -l:libdl.so.2 -Wl,--pop-state
PY_TMS_LDLIBS	:= $(if $(PY_COMPAT_O),$(PY_TMS_OLDLIBS),-ldl -lpthread)
PY_TMS_LIBS	:=
define PY_TMS_RULE
PY_TMS_LIBS	+= $(PY_TMS_DIR)/$(call GS_TMS_NAME,$(1),$(2))
$(PY_TMS_DIR)/$(call GS_TMS_NAME,$(1),$(2)): user/tms/hook.c \
		user/include/libgpusleep.h $(PY_COMPAT_O)
	@mkdir -p $$(@D)
	$$(CC) $(GS_TMS_CFLAGS) $(call GS_TMS_DEFS,$(1),$(2),$(3)) -shared \
		-Wl,--no-undefined -o $$@ $$< $(PY_COMPAT_O) $(LDFLAGS) \
		$(PY_TMS_LDLIBS)
endef
$(call GS_TMS_EACH,PY_TMS_RULE)

# Each distribution is copied to $(PY_STAGE) and built there (setuptools
# writes build/ and *.egg-info beside the sources); the library goes into
# the package as libgpusleep.so.0 (the file, under the soname).
$(PY_DIST)/.stamp: $(PY_DIST_SRCS) $(PY_WHEEL_LIB) $(PY_TMS_LIBS)
	rm -rf $(PY_STAGE) $(PY_DIST)
	mkdir -p $(PY_STAGE)/gpusleep $(PY_DIST)
	cp user/python/pyproject.toml user/python/setup.py user/python/README.md $(PY_STAGE)/
	cp $(PY_PKG_SRCS) user/python/gpusleep/py.typed $(PY_STAGE)/gpusleep/
	cp $(PY_WHEEL_LIB) $(PY_STAGE)/gpusleep/libgpusleep.so.0
	set -e; for d in $(PY_DISTS); do \
		mkdir -p $(PY_STAGE)/$$d; \
		(cd user/python/$$d && find . -name '*.py' -o -name '*.toml' -o -name py.typed | \
			cpio -pdm --quiet ../../../$(PY_STAGE)/$$d); done
	cp $(PY_TMS_LIBS) $(PY_STAGE)/dist-tms/
	set -e; for d in . $(PY_DISTS); do \
		GPUSLEEP_WHEEL_PLAT=$(PY_WHEEL_PLAT) PIP_NO_INDEX=1 \
		$(PYTHON) -m pip wheel -q --no-build-isolation --no-deps \
			-w $(PY_DIST) $(PY_STAGE)/$$d; done
	touch $@

# --without-pip: the system's pip installs into it (pip --python)
$(PY_VENV)/.stamp: $(PY_DIST)/.stamp
	rm -rf $(PY_VENV)
	$(PYTHON) -m venv --without-pip $(PY_VENV)
	PIP_NO_INDEX=1 $(PYTHON) -m pip --python $(PY_VENV)/bin/python install -q \
		--no-deps $(PY_DIST)/*.whl
	touch $@

.PHONY: wheel
wheel: $(PY_DIST)/.stamp $(PY_VENV)/.stamp
HOST_TESTS	+= $(wildcard tests/host/test_python.py tests/host/test_weights.py \
		     tests/host/test_weight_docs.py tests/host/test_wheel.py) \
		   tests/host/test_tms_dropin.py tests/host/test_tms_pinned.py
VM_TESTS	+= $(sort $(wildcard tests/vm-py/test_*.py))

.PHONY: python-install python-uninstall
install: python-install
uninstall: python-uninstall

# the hook libraries' directory of an install: they load PREFIX/lib's
# libgpusleep.so.0 from there (user/tms/hook.c: DIR/../)
PY_HOOKDIR	= $(PREFIX)/lib/gpusleep

python-install: $(GS_TMS_LIBS)
	install -d $(DESTDIR)$(PY_SITEDIR)/gpusleep
	install -m 644 $(PY_PKG_SRCS) user/python/gpusleep/py.typed \
		$(DESTDIR)$(PY_SITEDIR)/gpusleep/
	printf '# Written by make python-install.\nLIBDIR = "%s"\nHOOKDIR = "%s"\n' \
		'$(PREFIX)/lib' '$(PY_HOOKDIR)' \
		> $(DESTDIR)$(PY_SITEDIR)/gpusleep/_install.py
	chmod 644 $(DESTDIR)$(PY_SITEDIR)/gpusleep/_install.py
	install -d $(DESTDIR)$(PY_HOOKDIR)
	install -m 644 $(GS_TMS_LIBS) $(DESTDIR)$(PY_HOOKDIR)/

python-uninstall:
	rm -rf $(DESTDIR)$(PY_SITEDIR)/gpusleep
	rm -f $(addprefix $(DESTDIR)$(PY_HOOKDIR)/,$(notdir $(GS_TMS_LIBS)))
	-rmdir $(DESTDIR)$(PY_HOOKDIR) 2>/dev/null
