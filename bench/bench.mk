# SPDX-License-Identifier: GPL-2.0
#
# Benchmarks (docs/benchmarks.md); included by the top Makefile after
# user/user.mk, whose GS_A, GS_LIBS and GS_CUDA_H it uses. Not run by
# `make check`, but built by it (`make all`).
#   make bench       build, run bench_host natively, run every benchmark
#                    in one VM boot with the module, print the table and
#                    write build/bench/results.json
#   make bench-build only build them
#   make bench-docs  put the latest run into the docs (JSON, chart, tables)
# BENCH_ONLY="bench_state bench_roundtrip" runs only those; BENCH_STRICT=0
# reports a missed target without failing (the last line of the run is
# "N met, M missed", and the status is non-zero when one was missed).
# BENCH_REPEAT=N runs every comparison N times as a whole (default 3) and
# reports each ratio as median [min-max]; BENCH_SCALE=F multiplies the
# repetition counts inside each (default 1); BENCH_SMP=N
# sets the guest's vCPUs (default 1, see bench/run.sh).
#
# bench/gpu/bench_cuda (benchmark 6, for a machine with a GPU) is built
# unless CUDA=0 (user/gs_cuda.h: no toolkit needed), and `make bench` runs
# it with --dry-run against the tests' stand-in libcuda.

BENCH_DIR	:= $(BUILD)/bench
BENCH_NAMES	:= bench_state bench_roundtrip bench_fanout bench_host bench_scale \
		   bench_group bench_node bench_arbiter
BENCH_BINS	:= $(BENCH_NAMES:%=$(BENCH_DIR)/%)
BENCH_CFLAGS	:= $(CFLAGS) -Iuser/include -Ibench -MMD -MP
BENCH_GPU	:= $(if $(GS_CUDA_H),$(BENCH_DIR)/gpu/bench_cuda)
# benchmark 6m: an H100-sized cycle modelled on the stand-in libcuda
BENCH_MODEL	:= $(if $(GS_CUDA_H),$(BENCH_DIR)/bench_model)
ALL_TARGETS	+= $(BENCH_MODEL)
# Built by `make all` too (so by make check), so that they cannot rot.
ALL_TARGETS	+= $(BENCH_BINS)
# The docs' tables and chart against the committed run (no benchmark runs).
HOST_TESTS	+= tests/host/test_bench_report.py

$(BENCH_BINS): $(BENCH_DIR)/%: bench/%.c bench/bench.h $(GS_A)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -o $@ $< $(GS_A) $(LDFLAGS) $(GS_LIBS)

$(BENCH_DIR)/gpu/bench_cuda: bench/gpu/bench_cuda.c bench/bench.h $(GS_A)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Iuser -o $@ $< $(GS_A) \
		$(LDFLAGS) $(GS_LIBS)

$(BENCH_DIR)/bench_model: bench/bench_model.c bench/bench.h $(GS_A) \
		$(GS_CUDA_FAKE) user/gs_cuda.h tests/host/fake_libcuda.h
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -Iuser -Itests/host \
		-DFAKECUDA_LIB='"$(abspath $(GS_CUDA_FAKE))"' -o $@ $< $(GS_A) \
		$(LDFLAGS) $(GS_LIBS)

.PHONY: bench bench-build bench-model
bench-build: $(BENCH_BINS) $(BENCH_GPU) $(BENCH_MODEL) \
	$(if $(BENCH_GPU),$(GS_CUDA_FAKE))

# benchmark 6m alone: its rows, as make bench records them
bench-model: $(BENCH_MODEL)
	@mkdir -p $(BENCH_DIR)
	$(BENCH_MODEL) | tee $(BENCH_DIR)/model.jsonl
	python3 bench/report.py $(BENCH_DIR)/model.json $(BENCH_DIR)/model.jsonl

BENCH_REPEAT	?= 3
BENCH_SCALE	?= 1
BENCH_SMP	?= 1
BENCH_CMD	= make bench BENCH_REPEAT=$(BENCH_REPEAT) BENCH_SCALE=$(BENCH_SCALE) \
		  BENCH_SMP=$(BENCH_SMP)$(if $(BENCH_ONLY), BENCH_ONLY="$(BENCH_ONLY)")

bench: module bench-build
	BENCH_SCALE=$(BENCH_SCALE) BENCH_SMP=$(BENCH_SMP) BENCH_REPEAT=$(BENCH_REPEAT) \
		BENCH_GPU=$(BENCH_GPU) BENCH_MODEL=$(BENCH_MODEL) \
		BENCH_ONLY="$(BENCH_ONLY)" \
		BENCH_STRICT=$(BENCH_STRICT) BENCH_CMD='$(BENCH_CMD)' \
		KERNEL=/boot/vmlinuz-$(KVER) bench/run.sh

# The latest run into the docs: its JSON and chart committed under docs/,
# the tables between the markers of README.md and docs/benchmarks.md
# rendered from it (tests/host/test_bench_report.py checks they agree).
.PHONY: bench-docs
bench-docs:
	@test -f $(BENCH_DIR)/results.json || \
		{ echo "bench-docs: no $(BENCH_DIR)/results.json: run make bench"; exit 1; }
	cp $(BENCH_DIR)/results.json docs/bench-results.json
	python3 bench/report.py --svg docs/bench-results.json docs/bench-results.svg
	python3 bench/report.py --update docs/bench-results.json README.md docs/benchmarks.md

-include $(BENCH_BINS:=.d) $(BENCH_GPU:=.d) $(BENCH_MODEL:=.d)
