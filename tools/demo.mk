# SPDX-License-Identifier: GPL-2.0
#
# The demo (make demo, tools/demo.sh, docs/demo.md) and make vm-shell;
# included by the top Makefile after user/user.mk and tools/tools.mk, whose
# $(GS_A), $(GS_SO), $(GS_LIBS) and $(GS_CTL) it uses. Builds, not installed:
#   $(BUILD)/demo/engine    tools/demo/engine.c: the toy engine + agent
#   $(BUILD)/demo/trainer   tools/demo/trainer.c: the RL trainer (controller)
# tools/demo/plot.py draws the run (demo.svg); tools/demo.sh runs it.
# Both targets install only the demo's packages (tools/deps.sh --demo) and
# build only what they run (not the tests, which need the kernel source),
# then boot the distribution kernel with gpusleep.ko loaded: make demo runs
# tools/demo.sh (DEMO_ARGS are its options), make vm-shell gives you a
# shell there (tools/vm/shell.sh). A sub-make does the rest after deps.sh,
# so that KDIR and KVER are found on a machine that had no headers before.

DEMO_BINS	:= $(BUILD)/demo/engine $(BUILD)/demo/trainer
DEMO_CFLAGS	:= $(CFLAGS) -Iuser/include -Itools/demo -pthread -MMD -MP

$(DEMO_BINS): $(BUILD)/demo/%: tools/demo/%.c tools/demo/demo.h $(GS_A)
	@mkdir -p $(@D)
	$(CC) $(DEMO_CFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

ALL_TARGETS	+= $(DEMO_BINS)
# tools/demo/plot.py (the demo's SVG) on a made-up run
HOST_TESTS	+= tests/host/test_demo_plot.py

-include $(DEMO_BINS:=.d)

DEMO_NEEDS	:= module $(DEMO_BINS) $(GS_CTL) $(GS_SO) $(GS_LIBDIR)/$(GS_SONAME)
DEMO_VM		:= tools/vm/run.sh --module gpusleep.ko --kernel /boot/vmlinuz-$(KVER)

.PHONY: demo-run vm-shell-run
demo:
	@tools/deps.sh --demo
	@$(MAKE) --no-print-directory demo-run

demo-run: $(DEMO_NEEDS)
	@$(DEMO_VM) --out $(BUILD)/vm/demo -- sh tools/demo.sh $(DEMO_ARGS)

vm-shell:
	@tools/deps.sh --demo
	@$(MAKE) --no-print-directory vm-shell-run

vm-shell-run: $(DEMO_NEEDS)
	@$(DEMO_VM) --interactive --out $(BUILD)/vm/shell -- sh tools/vm/shell.sh
