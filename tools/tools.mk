# SPDX-License-Identifier: GPL-2.0
#
# Node tooling; included by the top Makefile (BUILD, CC, CFLAGS). Builds:
#   $(BUILD)/bin/gpusleepctl   tools/gpusleepctl/*.c (one file per concern,
#                              see gpusleepctl.h), with libgpusleep.a and
#                              libnl-3 / libnl-genl-3 (pkg-config)
# and registers the VM test scripts of tests/vm/ (VM_TESTS) and the host
# tests of the exporter and of the Prometheus rules in packaging/prometheus/
# (HOST_TESTS; promtool comes with Debian's prometheus package).

GS_NL_CFLAGS	:= $(shell pkg-config --cflags libnl-genl-3.0 2>/dev/null || \
			echo -I/usr/include/libnl3)
GS_NL_LIBS	:= $(shell pkg-config --libs libnl-genl-3.0 2>/dev/null || \
			echo -lnl-genl-3 -lnl-3)
GS_CTL		:= $(BUILD)/bin/gpusleepctl
GS_CTL_SRCS	:= $(sort $(wildcard tools/gpusleepctl/*.c))
GS_CTL_OBJS	:= $(GS_CTL_SRCS:tools/%.c=$(BUILD)/tools/%.o)

$(BUILD)/tools/gpusleepctl/%.o: tools/gpusleepctl/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iuser/include $(GS_NL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tools/gpusleepctl/main.o: CFLAGS += -DGS_VERSION='"$(VERSION)"'

$(GS_CTL): $(GS_CTL_OBJS) $(BUILD)/lib/libgpusleep.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(GS_CTL_OBJS) $(BUILD)/lib/libgpusleep.a \
		$(LDFLAGS) $(GS_NL_LIBS) -lpthread -luring -ldl

ALL_TARGETS	+= $(GS_CTL)
HOST_TESTS	+= tests/host/test_ctl_exporter.py tests/host/test_packaging.sh \
		   tests/host/test_dashboard.py tests/host/test_ctl_format.py \
		   tests/host/test_docs.py
# Scripts run in the VM as they are; they find gpusleepctl in $(BUILD)/bin.
VM_TESTS	+= tests/vm/ctl_test.py tests/vm/exporter_test.py
# the docs' sessions that need the module (<!-- session: vm -->)
VM_TESTS	+= tests/vm/docs_test.py

.PHONY: gpusleepctl
gpusleepctl: $(GS_CTL)

-include $(GS_CTL_OBJS:.o=.d)
