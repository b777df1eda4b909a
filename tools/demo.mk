# SPDX-License-Identifier: GPL-2.0
#
# The demo (make demo, tools/demo.sh, docs/demo.md); included by the top
# Makefile after user/user.mk, whose $(GS_A) and $(GS_LIBS) it uses.
# Builds, not installed:
#   $(BUILD)/demo/engine    tools/demo/engine.c: the toy engine + agent
#   $(BUILD)/demo/trainer   tools/demo/trainer.c: the RL trainer (controller)
# tools/demo/plot.py draws the run (demo.svg); tools/demo.sh runs it.

DEMO_BINS	:= $(BUILD)/demo/engine $(BUILD)/demo/trainer
DEMO_CFLAGS	:= $(CFLAGS) -Iuser/include -Itools/demo -pthread -MMD -MP

$(DEMO_BINS): $(BUILD)/demo/%: tools/demo/%.c tools/demo/demo.h $(GS_A)
	@mkdir -p $(@D)
	$(CC) $(DEMO_CFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

ALL_TARGETS	+= $(DEMO_BINS)
# tools/demo/plot.py (the demo's SVG) on a made-up run
HOST_TESTS	+= tests/host/test_demo_plot.py

-include $(DEMO_BINS:=.d)
