# SPDX-License-Identifier: GPL-2.0
#
# Python bindings (user/python/gpusleep, stdlib + ctypes only); included by
# the top Makefile. Provides:
#   $(BUILD)/python/uapi_layout  prints the C layout of every struct the
#                                bindings mirror (tests compare ctypes)
#   python-install               the package into $(PY_SITEDIR), with
#                                _install.py naming $(PREFIX)/lib as the
#                                place of libgpusleep.so.0; run by install
#   python-uninstall             run by uninstall
#   HOST_TESTS += tests/host/test_python.py
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

$(PY_LAYOUT): tests/vm-py/uapi_layout.c uapi/linux/gpusleep.h user/include/libgpusleep.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iuser/include -o $@ $<

ALL_TARGETS	+= $(PY_LAYOUT)
HOST_TESTS	+= $(wildcard tests/host/test_python.py)
VM_TESTS	+= $(sort $(wildcard tests/vm-py/test_*.py))

.PHONY: python-install python-uninstall
install: python-install
uninstall: python-uninstall

python-install:
	install -d $(DESTDIR)$(PY_SITEDIR)/gpusleep
	install -m 644 $(PY_PKG_SRCS) $(DESTDIR)$(PY_SITEDIR)/gpusleep/
	printf '# Written by make python-install.\nLIBDIR = "%s"\n' \
		'$(PREFIX)/lib' > $(DESTDIR)$(PY_SITEDIR)/gpusleep/_install.py
	chmod 644 $(DESTDIR)$(PY_SITEDIR)/gpusleep/_install.py

python-uninstall:
	rm -rf $(DESTDIR)$(PY_SITEDIR)/gpusleep
