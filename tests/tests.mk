# SPDX-License-Identifier: GPL-2.0
#
# Tests: included by the top Makefile.
#
# Every tests/vm/NAME.c is a kselftest built as build/tests/vm/NAME; those
# plus $(VM_TESTS) form the VM suite, which `make check` runs in one VM boot
# of the distribution kernel (and once more on the debug kernel when
# tools/vm/debug-kernel.sh exists and DEBUG_KERNEL is not 0).

CHECK_DIR	:= $(BUILD)/check
VM_SUITE_OUT	?= $(BUILD)/vm/suite
VM_TIMEOUT	?= 1200
TEST_TIMEOUT	?= 300
DEBUG_KERNEL	?= 1
MAKE_SUB	:= $(MAKE) -s --no-print-directory

VM_TEST_SRCS	:= $(sort $(wildcard tests/vm/*.c))
VM_TEST_BINS	:= $(VM_TEST_SRCS:tests/vm/%.c=$(BUILD)/tests/vm/%)
VM_SUITE	= $(VM_TEST_BINS) $(VM_TESTS)
HARNESS_KSFT	:= $(BUILD)/tests/harness/ksft-fail
# The netlink spec is the source: the uAPI header and the policies follow;
# the kernel's own YNL client drives the module with it.
HOST_TESTS	+= tests/host/test_netlink_spec.py
# The quickstart's traps: a tree under /tmp, the demo's packages.
HOST_TESTS	+= tests/host/test_quickstart.sh
VM_TESTS	+= tests/vm/ynl_test.py
# and a C client built on what its ynl-gen-c generates (skipped without one)
VM_TESTS	+= tests/vm/ynl_client_test.py
# The pinned engine and trainer releases (tests/engines/pins.txt), read by
# the integration tests; fetched once into $(ENGINES), then offline.
ENGINES		:= $(BUILD)/engines
HOST_TESTS	+= tests/host/test_engines.py
# the stand-ins of the engines against the pinned modules they replace
HOST_TESTS	+= tests/host/test_standins.py
# SGLang's scheduler patch and hook against the pinned sglang
HOST_TESTS	+= tests/host/test_sglang.py
# vLLM's sleep-mode allocator, backend and plugin against the pinned vllm
HOST_TESTS	+= tests/host/test_vllm.py
# the trainers' call sites docs/integrations/trainers.md cites
HOST_TESTS	+= tests/host/test_trainers.py
# Containers and Kubernetes (docs/deployment.md): the CDI spec against the
# CDI schema, the manifests against the Kubernetes API schemas; the driver
# container's entrypoint in the VM.
HOST_TESTS	+= tests/host/test_deploy.py
# The docs' pictures are what tools/figures draws.
HOST_TESTS	+= tests/host/test_figures.py
VM_TESTS	+= tests/vm/driver_test.sh

kselftests: $(VM_TEST_BINS) $(HARNESS_KSFT) $(BUILD)/ynl/.built

# stamped only once built (without a kernel source tree it says SKIP)
$(BUILD)/ynl/.built: Documentation/netlink/specs/gpusleep.yaml \
		tools/ynl/build.sh tools/ynl/gpusleep-ynl-client.c $(wildcard uapi/linux/*.h)
	@tools/ynl/build.sh $(BUILD)/ynl && if [ -x $(@D)/gpusleep-ynl-client ]; then touch $@; fi

$(BUILD)/tests/vm/%: tests/vm/%.c $(KSFT_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(KSFT_CFLAGS) -I$(<D) -MMD -MP -o $@ $< $(LDFLAGS) -lpthread

$(BUILD)/tests/harness/%: tests/harness/%.c $(KSFT_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(KSFT_CFLAGS) -I$(<D) -MMD -MP -o $@ $< $(LDFLAGS) -lpthread

-include $(VM_TEST_BINS:=.d) $(HARNESS_KSFT:=.d)

# ---------------------------------------------------------------- check
# Each check-* phase prints TAP result lines and never fails by itself;
# tests/tap-summary.sh numbers them, prints the summary and sets the status.
.PHONY: check-lint check-host check-vm check-harness check-debug check-vm-only \
	check-kernels check-vm-6.12 check-dkms check-patches pycache \
	engines check-engines \
	lint-checkpatch lint-sparse harness-warnmod debug-module

# Python bytecode for the VM, whose read-only root keeps Python from
# caching it: compiled here into $(PYCACHE) (PYTHONPYCACHEPREFIX's layout),
# which tools/vm/guest.sh copies into the guest's own cache. Our packages
# and tests, and the YNL library of every kernel source tree under build/
# (ynl_test). A stale file is only recompiled in the guest.
PYCACHE		:= $(BUILD)/pycache
pycache:
	@PYTHONPYCACHEPREFIX=$(CURDIR)/$(PYCACHE) python3 -m compileall -q \
		$(CURDIR)/user/python $(CURDIR)/tests/vm $(CURDIR)/tests/vm-py \
		$(wildcard $(CURDIR)/$(BUILD)/kernels/*/src/tools/net/ynl \
			$(CURDIR)/$(BUILD)/debug-kernel/src-*/tools/net/ynl) \
		> $(BUILD)/pycache.log 2>&1 || \
		echo "# pycache: some files did not compile (see $(BUILD)/pycache.log)"

# The debug kernel (about 13 CPU-minutes to build) is built niced in the
# background while the phases before check-debug run: the VM suites leave
# most of both cores idle (the guests wait on the tests' answers), so its
# build costs little wall time.
DEBUG_WANTED	= { [ "$(DEBUG_KERNEL)" != 0 ] && [ -f tools/vm/debug-kernel.sh ]; }

check:
	@tools/deps.sh --kernels
	@mkdir -p $(CHECK_DIR)
	@exec 9> $(BUILD)/.check.lock; \
	flock -n 9 || { echo "check: waiting for another make check in this tree"; flock 9; }; \
	$(MAKE) --no-print-directory all || exit 1; \
	{ dk=""; \
	  if $(DEBUG_WANTED); then \
		echo "# debug: building the debug kernel in the background, niced (log: $(CHECK_DIR)/debug-kernel.log)"; \
		rm -f $(CHECK_DIR)/debug-kernel.rc; \
		{ nice -n 19 bash tools/vm/debug-kernel.sh \
			> $(CHECK_DIR)/debug-kernel.out 2> $(CHECK_DIR)/debug-kernel.log; \
		  echo $$? > $(CHECK_DIR)/debug-kernel.rc; } < /dev/null > /dev/null 2>&1 & dk=$$!; \
	  fi; \
	  $(MAKE_SUB) check-lint; \
	  $(MAKE_SUB) check-kernels; \
	  $(MAKE_SUB) check-dkms; \
	  $(MAKE_SUB) check-engines; \
	  $(MAKE_SUB) check-host; \
	  $(MAKE_SUB) check-vm; \
	  $(MAKE_SUB) check-vm-6.12; \
	  $(MAKE_SUB) check-harness; \
	  if [ -n "$$dk" ]; then wait $$dk; fi; \
	  $(MAKE_SUB) check-patches; \
	  $(MAKE_SUB) check-debug DEBUG_BUILT=$${dk:+1}; } 2>&1 | tests/tap-summary.sh

# The VM suite alone, summarised (used by the harness self-tests).
check-vm-only: kselftests
	@$(MAKE_SUB) check-vm 2>&1 | tests/tap-summary.sh

lint: lint-checkpatch lint-sparse

# --strict everywhere; uAPI headers may not use BIT() (a kernel-internal
# macro), so that one check is off for them.
CHECKPATCH := $(BUILD)/checkpatch/checkpatch.pl --no-tree --strict --show-types
lint-checkpatch: $(LINUX_SRC_STAMP)
	$(CHECKPATCH) -f $(filter-out kmod/gs_conftest.h,$(wildcard kmod/*.[ch]))
	$(CHECKPATCH) --ignore BIT_MACRO -f $(wildcard uapi/linux/*.h)

# sparse over every file (C=2), in a copy so the real build is untouched.
lint-sparse:
	rm -rf $(BUILD)/kmod-sparse
	mkdir -p $(BUILD)/kmod-sparse
	cp -r Kbuild kmod uapi dkms.conf $(BUILD)/kmod-sparse/
	$(MAKE) -C $(KDIR) M=$(CURDIR)/$(BUILD)/kmod-sparse C=2 CHECK=sparse \
		modules > $(BUILD)/kmod-sparse/build.log 2>&1 || \
		{ cat $(BUILD)/kmod-sparse/build.log; exit 1; }
	@if grep -E '(warning|error):' $(BUILD)/kmod-sparse/build.log; then \
		echo "sparse: warnings (above)"; exit 1; fi

check-lint:
	@mkdir -p $(CHECK_DIR)
	@for t in checkpatch sparse; do \
		if $(MAKE_SUB) lint-$$t > $(CHECK_DIR)/lint-$$t.log 2>&1; then \
			echo "ok - lint: $$t"; \
		else \
			echo "not ok - lint: $$t (see $(CHECK_DIR)/lint-$$t.log)"; \
			grep -E '^(ERROR|WARNING|CHECK)|^#[0-9]+: FILE:|(warning|error):' \
				$(CHECK_DIR)/lint-$$t.log | head -n 40 | sed 's/^/#   /'; \
		fi; \
	done

# The pinned releases: downloaded once (build/engines/dl keeps them), each
# checked against its sha256, unpacked for the tests to read.
engines:
	@tests/engines/fetch.py --out $(ENGINES)

check-engines:
	@mkdir -p $(CHECK_DIR)
	@if tests/engines/fetch.py --out $(ENGINES) > $(CHECK_DIR)/engines.log 2>&1; then \
		echo "ok - engines: the pinned releases fetched and unpacked"; \
	else \
		echo "not ok - engines: fetching the pinned releases (see $(CHECK_DIR)/engines.log)"; \
		sed 's/^/#   /' $(CHECK_DIR)/engines.log; \
	fi

check-host:
	@if [ -n "$(strip $(HOST_TESTS))" ]; then \
		tests/run-in-vm.sh --prefix 'host: ' --timeout $(TEST_TIMEOUT) \
			--out $(CHECK_DIR)/host $(HOST_TESTS) || true; \
	else \
		echo "ok - host: host tests # SKIP none defined yet"; \
	fi

check-vm: pycache
	@tools/vm/suite.sh --prefix '' --out $(VM_SUITE_OUT) \
		--vm-timeout $(VM_TIMEOUT) --test-timeout $(TEST_TIMEOUT) \
		--module gpusleep.ko --kernel /boot/vmlinuz-$(KVER) \
		-- $(VM_SUITE) || true

# A small module whose init hits WARN_ON(1), for the harness self-test.
harness-warnmod:
	rm -rf $(BUILD)/tests/harness/warnmod
	mkdir -p $(BUILD)/tests/harness
	cp -r tests/harness/warnmod $(BUILD)/tests/harness/
	$(MAKE) -C $(KDIR) M=$(CURDIR)/$(BUILD)/tests/harness/warnmod modules

check-harness: $(HARNESS_KSFT)
	@if $(MAKE_SUB) harness-warnmod > $(CHECK_DIR)/harness-warnmod.log 2>&1; then \
		KVER=$(KVER) tests/harness/selftest.sh || true; \
	else \
		echo "not ok - harness: building warnmod (see $(CHECK_DIR)/harness-warnmod.log)"; \
	fi

# Debian's stock 6.12 (bookworm-backports; tools/kernels.sh fetches the
# image, its modules and headers into build/kernels/6.12/): the module is
# built against its headers in build/kmod-6.12/ and the whole VM suite runs
# on it, booted with its own virtio/9p modules, test names prefixed "6.12: ".
KMOD_612	:= $(BUILD)/kmod-6.12
check-vm-6.12: pycache
	@mkdir -p $(CHECK_DIR); \
	if ! tools/kernels.sh 6.12 > $(CHECK_DIR)/kernels-6.12.log 2>&1; then \
		echo "ok - 6.12: vm suite # SKIP cannot fetch Debian's 6.12 (see $(CHECK_DIR)/kernels-6.12.log)"; \
		exit 0; \
	fi; \
	. $(BUILD)/kernels/6.12/env; \
	rm -rf $(KMOD_612); mkdir -p $(KMOD_612); \
	cp -r Kbuild kmod uapi dkms.conf $(KMOD_612)/; \
	rm -f $(KMOD_612)/kmod/gs_conftest.h*; \
	if ! env -u MAKEFLAGS -u MAKELEVEL $(MAKE) -C "$$KDIR" \
		M=$(CURDIR)/$(KMOD_612) modules > $(CHECK_DIR)/kmod-6.12.log 2>&1; then \
		echo "not ok - 6.12: building gpusleep.ko for $$KVER (see $(CHECK_DIR)/kmod-6.12.log)"; \
		tail -n 20 $(CHECK_DIR)/kmod-6.12.log | sed 's/^/# /'; \
		exit 0; \
	fi; \
	tools/vm/suite.sh --prefix '6.12: ' --out $(BUILD)/vm/6.12 \
		--vm-timeout $(VM_TIMEOUT) --test-timeout $(TEST_TIMEOUT) \
		--module $(KMOD_612)/gpusleep.ko --kernel "$$KERNEL" \
		--modules "$$MODROOT/lib/modules/$$KVER" -- $(VM_SUITE) || true

# DKMS as the README says it (add, build for 6.1 and 6.12, remove --all),
# leaving /usr/src, /var/lib/dkms and any MOK key as they were.
check-dkms:
	@tests/dkms.sh

# The module as a kernel patch series (tests/patches.sh, docs/upstream.md):
# git am onto linux-source-6.12, checkpatch, every prefix builds, module
# and built-in with W=1 C=1, the kselftests in their place, ynl-regen.
check-patches:
	@tests/patches.sh --out $(BUILD)/patches-check

# Compile tests: gpusleep.ko with W=1 against 6.1 (the machine's headers),
# 5.10, 6.12, 7.3.
check-kernels:
	@tests/kernels.sh --out $(BUILD)/compile

# Debug kernel: tools/vm/debug-kernel.sh prints the directory holding
# bzImage and a tree prepared for external modules; the module is built
# against it in build/kmod-debug/ so gpusleep.ko stays the distro build.
debug-module:
	rm -rf $(BUILD)/kmod-debug
	mkdir -p $(BUILD)/kmod-debug
	cp -r Kbuild kmod uapi dkms.conf $(BUILD)/kmod-debug/
	$(MAKE) -C $(DEBUG_KDIR) M=$(CURDIR)/$(BUILD)/kmod-debug \
		GPUSLEEP_FAULT_INJECTION=y modules

# The debug kernel is there for the module: KASAN, lockdep, kmemleak and
# UBSAN over every kernel path, which the kselftests, the agent and the
# Python tests that drive the module reach. Tests whose own subject is
# userspace (the CLI's output, the exporter, the wheel's install, the
# guides' examples) add no kernel path and cost minutes there (each
# process start is slow under KASAN): they run on 6.1 and 6.12 only.
DEBUG_SKIP	:= tests/vm/ctl_test.py tests/vm/exporter_test.py \
		   tests/vm-py/test_py_dist.py tests/vm-py/test_py_guides.py

# Also there, on the kernel of the source the patch series applies to:
# two kselftests through the kernel's own runner (run_kselftest.sh, as
# installed by check-patches), tests/vm/ksft_runner_test.sh.
check-debug:
	@mkdir -p $(CHECK_DIR); \
	if [ "$(DEBUG_KERNEL)" = 0 ]; then \
		echo "ok - debug: debug-kernel suite # SKIP DEBUG_KERNEL=0"; \
	elif [ ! -f tools/vm/debug-kernel.sh ]; then \
		echo "ok - debug: debug-kernel suite # SKIP no tools/vm/debug-kernel.sh yet"; \
	else \
		if [ "$(DEBUG_BUILT)" = 1 ]; then \
			rc=$$(cat $(CHECK_DIR)/debug-kernel.rc 2>/dev/null || echo 1); \
		else \
			echo "# debug: building the debug kernel (log: $(CHECK_DIR)/debug-kernel.log)"; \
			bash tools/vm/debug-kernel.sh > $(CHECK_DIR)/debug-kernel.out \
				2> $(CHECK_DIR)/debug-kernel.log; rc=$$?; \
		fi; \
		if [ "$$rc" = 0 ]; then \
			dk=$$(tail -n1 $(CHECK_DIR)/debug-kernel.out); \
		else dk=""; fi; \
		bz=""; \
		for f in "$$dk/bzImage" "$$dk/arch/x86/boot/bzImage"; do \
			if [ -n "$$dk" ] && [ -f "$$f" ]; then bz=$$f; break; fi; \
		done; \
		if [ -z "$$bz" ]; then \
			echo "not ok - debug: building the debug kernel (see $(CHECK_DIR)/debug-kernel.log)"; \
			tail -n 20 $(CHECK_DIR)/debug-kernel.log | sed 's/^/# /'; \
		elif ! $(MAKE_SUB) debug-module DEBUG_KDIR="$$dk" \
			> $(CHECK_DIR)/kmod-debug.log 2>&1; then \
			echo "not ok - debug: building gpusleep.ko for the debug kernel (see $(CHECK_DIR)/kmod-debug.log)"; \
			tail -n 20 $(CHECK_DIR)/kmod-debug.log | sed 's/^/# /'; \
		else \
			$(MAKE_SUB) pycache; \
			for t in $(filter $(DEBUG_SKIP),$(VM_SUITE)); do \
				echo "ok - debug: $$t # SKIP userspace only: runs on 6.1 and 6.12"; \
			done; \
			tools/vm/suite.sh --prefix 'debug: ' --out $(BUILD)/vm/debug \
				--vm-timeout $(VM_TIMEOUT) --test-timeout $(TEST_TIMEOUT) \
				--module $(BUILD)/kmod-debug/gpusleep.ko \
				--kernel "$$bz" --modules none -- \
				$(filter-out $(DEBUG_SKIP),$(VM_SUITE)) \
				tests/vm/ksft_runner_test.sh || true; \
		fi; \
	fi
