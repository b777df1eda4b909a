# SPDX-License-Identifier: GPL-2.0
#
# gpusleep top-level Makefile. Targets:
#   all (default)  module (gpusleep.ko at the repo root), userspace from the
#                  fragments user/user.mk and tools/tools.mk, kselftests
#   check          deps, build, lint, host tests, VM suite (+ debug kernel)
#   lint           checkpatch --strict and sparse on the module
#   nlgen          kmod/gpusleep-nl-gen.[ch], uapi/linux/gpusleep_netlink.h
#                  from the netlink spec (the kernel's ynl-gen-c)
#   patches        the module as a kernel patch series (KSRC=, OUT=)
#   demo           deps (the demo's only), build what it runs, tools/demo.sh
#                  in the VM
#   vm-shell       a shell in the VM: gpusleep.ko loaded, gpusleepctl and
#                  the Python package on the path
#   install, uninstall, clean
# Variables: KDIR (kernel build tree), DEBUG_KERNEL=0 (skip the debug-kernel
# suite in check), PREFIX, DESTDIR, VM_TIMEOUT, TEST_TIMEOUT.
#
# Fragments (user/user.mk, tools/tools.mk) are plain make included here. They
# may use BUILD, CC, CFLAGS, LDFLAGS, KSFT_INC, KSFT_CFLAGS, KSFT_STAMP, and
# append to:
#   ALL_TARGETS  files built by `make all`
#   HOST_TESTS   executables run natively by `make check` (kselftest TAP)
#   VM_TESTS     executables run inside the VM by `make check`
# CFLAGS uses -std=gnu11, not c11: kselftest_harness.h needs GNU extensions
# (typeof, statement expressions, __attribute__((constructor))).

BUILD		:= build

# The test VM sees this machine's root but mounts a /tmp of its own: a tree
# under /tmp cannot boot it. Say so before anything is built.
VM_GOALS	:= check check-vm check-vm-only check-vm-6.12 check-debug \
		   check-harness demo vm-shell
ifneq ($(filter $(VM_GOALS),$(MAKECMDGOALS)),)
ifneq ($(filter /tmp /tmp/%,$(CURDIR)),)
$(error this tree is in $(CURDIR), under /tmp, which the test VM cannot see \
(the guest has a /tmp of its own). Clone it elsewhere, e.g. \
`git clone $(CURDIR) ~/gpusleep`, and run `make $(firstword \
$(filter $(VM_GOALS),$(MAKECMDGOALS)))` there)
endif
endif
CC		?= cc
CFLAGS		:= -std=gnu11 -O2 -g -Wall -Wextra -Werror -Iuapi
LDFLAGS		?=
KSFT_INC	:= $(BUILD)/kselftest
PREFIX		?= /usr/local
DESTDIR		?=
UDEVRULESDIR	?= /etc/udev/rules.d
SYSTEMDUNITDIR	?= /lib/systemd/system
# node_exporter's textfile directory (Debian's prometheus-node-exporter)
TEXTFILEDIR	?= /var/lib/prometheus/node-exporter
# The one place the version is written: dkms.conf (Kbuild reads it too,
# for MODULE_VERSION).
VERSION		:= $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)

# The kernel to build the module against: the running kernel's tree when it
# exists, else the newest installed Debian headers.
ifeq ($(origin KDIR),undefined)
KDIR := $(shell d=/lib/modules/$$(uname -r)/build; \
	if [ -f $$d/Makefile ]; then echo $$d; else \
	ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n1; fi)
endif
# Its release string, e.g. 6.1.0-57-amd64 (the VM boots /boot/vmlinuz-KVER).
KVER := $(shell sed -n 's/.*UTS_RELEASE "\(.*\)"/\1/p' \
	$(KDIR)/include/generated/utsrelease.h 2>/dev/null)
LINUX_SRC_TAR	?= $(lastword $(sort $(wildcard /usr/src/linux-source-*.tar.xz)))

# Files from the kernel source tarball: kselftest headers and checkpatch.
LINUX_SRC_FILES := tools/testing/selftests/kselftest_harness.h \
	tools/testing/selftests/kselftest.h scripts/checkpatch.pl \
	scripts/spelling.txt scripts/const_structs.checkpatch
LINUX_SRC_STAMP := $(BUILD)/.linux-src.stamp
# For kselftest-harness programs: depend on $(KSFT_STAMP), compile with
# $(KSFT_CFLAGS). -isystem because the kselftest headers are not clean
# under -Wextra (unused parameters); our own code keeps all warnings, except
# -Wsign-compare, which the harness's EXPECT_*(constant, field) macros trip.
KSFT_STAMP	:= $(LINUX_SRC_STAMP)
KSFT_CFLAGS	:= -isystem $(KSFT_INC) -Wno-sign-compare

ALL_TARGETS	:=
HOST_TESTS	:=
VM_TESTS	:=


.DEFAULT_GOAL := all
.PHONY: all module userspace kselftests check lint demo vm-shell install \
	uninstall install-lib uninstall-lib clean deps nlgen patches

-include user/user.mk tools/tools.mk
-include user/python/python.mk
-include tools/demo.mk
-include bench/bench.mk
include tests/tests.mk

all: module userspace kselftests

# kbuild decides what to rebuild; always ask it.
module:
	@test -n "$(KDIR)" -a -f "$(KDIR)/Makefile" || \
		{ echo "no kernel build tree (KDIR=$(KDIR)); run tools/deps.sh" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

userspace: $(ALL_TARGETS)

# The kernel's netlink code and uAPI header, from the spec, by the kernel's
# own generator (tools/ynl/nlgen.sh; test_netlink_spec checks them).
nlgen:
	tools/ynl/nlgen.sh

# The module as a kernel patch series (docs/upstream.md): against the
# kernel source tree KSRC, into OUT (default build/patches).
patches:
	@test -n "$(KSRC)" || \
		{ echo "usage: make patches KSRC=<kernel source tree> [OUT=dir]" >&2; exit 1; }
	tools/upstream/mkpatches.py $(KSRC) $(or $(OUT),$(BUILD)/patches)

deps:
	tools/deps.sh

$(LINUX_SRC_STAMP):
	@test -n "$(LINUX_SRC_TAR)" || \
		{ echo "no /usr/src/linux-source-*.tar.xz; run tools/deps.sh" >&2; exit 1; }
	@mkdir -p $(BUILD)
	@echo "  EXTRACT $(notdir $(LINUX_SRC_TAR)): kselftest headers, checkpatch"
	@top=$$(tar -tJf $(LINUX_SRC_TAR) | head -n1 | cut -d/ -f1) && \
	tar -xJf $(LINUX_SRC_TAR) -C $(BUILD) \
		--transform="s,^$$top/tools/testing/selftests/,kselftest/," \
		--transform="s,^$$top/scripts/,checkpatch/," \
		$(addprefix $$top/,$(LINUX_SRC_FILES))
	@touch $@

# The library alone, for a machine that builds against it without the
# module (a container, a venv's host): libgpusleep and its links, the
# headers, a .pc whose prefix is this install's PREFIX (not the one the
# tree was built with), then ldconfig so the loader finds the soname.
install-lib: $(GS_REAL) $(GS_SO) $(GS_LIBDIR)/$(GS_SONAME) $(GS_A)
	install -d $(DESTDIR)$(PREFIX)/include/linux
	install -m 644 uapi/linux/gpusleep.h uapi/linux/gpusleep_netlink.h \
		$(DESTDIR)$(PREFIX)/include/linux/
	install -m 644 user/include/libgpusleep.h $(DESTDIR)$(PREFIX)/include/
	set -e; for f in $(BUILD)/lib/libgpusleep.so* $(BUILD)/lib/libgpusleep.a; do \
		[ -e $$f ] || continue; \
		install -d $(DESTDIR)$(PREFIX)/lib; \
		if [ -L $$f ]; then cp -P $$f $(DESTDIR)$(PREFIX)/lib/; \
		else install -m 644 $$f $(DESTDIR)$(PREFIX)/lib/; fi; done
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig
	$(GS_PC_GEN) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libgpusleep.pc
	if [ -z "$(DESTDIR)" ] && command -v ldconfig > /dev/null; then ldconfig; fi

uninstall-lib:
	rm -f $(DESTDIR)$(PREFIX)/include/linux/gpusleep.h \
		$(DESTDIR)$(PREFIX)/include/linux/gpusleep_netlink.h \
		$(DESTDIR)$(PREFIX)/include/libgpusleep.h
	rm -f $(DESTDIR)$(PREFIX)/lib/libgpusleep.so* $(DESTDIR)$(PREFIX)/lib/libgpusleep.a \
		$(DESTDIR)$(PREFIX)/lib/pkgconfig/libgpusleep.pc
	if [ -z "$(DESTDIR)" ] && command -v ldconfig > /dev/null; then ldconfig; fi

install: all install-lib
	$(MAKE) -C $(KDIR) M=$(CURDIR) INSTALL_MOD_PATH=$(DESTDIR) modules_install
	if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi
	install -d $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 644 tools/gpusleepctl.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	set -e; for f in $(BUILD)/bin/*; do \
		[ -f $$f ] && [ -x $$f ] || continue; \
		install -d $(DESTDIR)$(PREFIX)/bin; \
		install -m 755 $$f $(DESTDIR)$(PREFIX)/bin/; done
	install -d $(DESTDIR)$(UDEVRULESDIR)
	install -m 644 packaging/60-gpusleep.rules $(DESTDIR)$(UDEVRULESDIR)/
	install -d $(DESTDIR)$(PREFIX)/share/doc/gpusleep
	install -m 644 packaging/gpusleep.conf $(DESTDIR)$(PREFIX)/share/doc/gpusleep/
	install -d $(DESTDIR)$(PREFIX)/share/doc/gpusleep/prometheus
	install -m 644 packaging/prometheus/gpusleep-rules.yml \
		packaging/prometheus/gpusleep-rules.test.yml \
		$(DESTDIR)$(PREFIX)/share/doc/gpusleep/prometheus/
	install -d $(DESTDIR)$(PREFIX)/share/doc/gpusleep/grafana
	install -m 644 packaging/grafana/gpusleep.json \
		$(DESTDIR)$(PREFIX)/share/doc/gpusleep/grafana/
	install -d $(DESTDIR)$(SYSTEMDUNITDIR)
	sed -e 's|@BINDIR@|$(PREFIX)/bin|g' -e 's|@TEXTFILEDIR@|$(TEXTFILEDIR)|g' \
		packaging/gpusleep-exporter.service.in > $(BUILD)/gpusleep-exporter.service
	install -m 644 $(BUILD)/gpusleep-exporter.service $(DESTDIR)$(SYSTEMDUNITDIR)/
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl daemon-reload; fi

uninstall: uninstall-lib
	rm -f $(DESTDIR)/lib/modules/$(KVER)/updates/gpusleep.ko \
		$(DESTDIR)/lib/modules/$(KVER)/extra/gpusleep.ko
	if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi
	rm -f $(DESTDIR)$(PREFIX)/share/man/man8/gpusleepctl.8
	for f in $(BUILD)/bin/*; do \
		[ -f $$f ] && rm -f $(DESTDIR)$(PREFIX)/bin/$${f##*/}; done; true
	rm -f $(DESTDIR)$(UDEVRULESDIR)/60-gpusleep.rules
	rm -f $(DESTDIR)$(SYSTEMDUNITDIR)/gpusleep-exporter.service
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl daemon-reload; fi
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/gpusleep

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean > /dev/null
	rm -rf $(BUILD)
