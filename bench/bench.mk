# SPDX-License-Identifier: GPL-2.0
#
# Benchmarks (docs/benchmarks.md); included by the top Makefile after
# user/user.mk, whose GS_A, GS_LIBS and GS_CUDA_H it uses. Not run by
# `make check`, but built by it (`make all`).
#   make bench       build, run bench_host natively, run every benchmark
#                    in one VM boot with the module, print the table and
#                    write build/bench/results.json
#   make bench-build only build them
# BENCH_REPEAT=N runs every comparison N times as a whole (default 3) and
# reports each ratio as median [min-max]; BENCH_SCALE=F multiplies the
# repetition counts inside each (default 1); BENCH_SMP=N
# sets the guest's vCPUs (default 1, see bench/run.sh).
#
# bench/gpu/bench_cuda (benchmark 6, for a machine with a GPU) is built when
# cuda.h is found, and `make bench` runs it with --dry-run against the
# tests' stand-in libcuda.

BENCH_DIR	:= $(BUILD)/bench
BENCH_NAMES	:= bench_state bench_roundtrip bench_fanout bench_host bench_scale \
		   bench_group
BENCH_BINS	:= $(BENCH_NAMES:%=$(BENCH_DIR)/%)
BENCH_CFLAGS	:= $(CFLAGS) -Iuser/include -Ibench -MMD -MP
BENCH_GPU	:= $(if $(GS_CUDA_H),$(BENCH_DIR)/gpu/bench_cuda)
# Built by `make all` too (so by make check), so that they cannot rot.
ALL_TARGETS	+= $(BENCH_BINS)

$(BENCH_BINS): $(BENCH_DIR)/%: bench/%.c bench/bench.h $(GS_A)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

$(BENCH_DIR)/gpu/bench_cuda: bench/gpu/bench_cuda.c bench/bench.h $(GS_A)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -I$(dir $(GS_CUDA_H)) -o $@ $< $(GS_A) \
		$(LDFLAGS) $(GS_LIBS)

.PHONY: bench bench-build
bench-build: $(BENCH_BINS) $(BENCH_GPU) $(if $(BENCH_GPU),$(GS_CUDA_FAKE))

bench: module bench-build
	BENCH_SCALE=$(BENCH_SCALE) BENCH_SMP=$(BENCH_SMP) BENCH_REPEAT=$(BENCH_REPEAT) \
		BENCH_GPU=$(BENCH_GPU) \
		KERNEL=/boot/vmlinuz-$(KVER) bench/run.sh

-include $(BENCH_BINS:=.d) $(BENCH_GPU:=.d)
