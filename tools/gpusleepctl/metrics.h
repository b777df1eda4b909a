/* SPDX-License-Identifier: GPL-2.0 */
/* gpusleepctl: the Prometheus text exposition (metrics.c). */
#ifndef GPUSLEEPCTL_METRICS_H
#define GPUSLEEPCTL_METRICS_H

#include <stdbool.h>
#include <stdio.h>

#include "domain.h"

/* A lease the exporter has seen hold tags, and since when (Unix time). */
struct lease_seen {
	unsigned long long id;
	double since;
};

/* What only a long-running exporter knows (exporter.c). */
struct metrics_extra {
	const double *state_since;	/* per domain: Unix time, < 0 unknown */
	unsigned long long deaths;	/* engines seen dying */
	unsigned long long deaths_released; /* ... with tags released */
	unsigned long long lost;	/* event overruns (ENOBUFS) */
	const struct lease_seen *leases;	/* held now, by id */
	size_t nr_leases;
	unsigned long long reclaims_taken;	/* RECLAIM_NTF ends seen */
	unsigned long long reclaims_short;
	unsigned long long reclaimed_bytes;
};

/*
 * The PCI bus id and GPU UUID in a domain's gpu string, which the engine
 * declares: tokens separated by ',', ';' or blanks; a PCI address
 * [DOMAIN:]BB:DD.F becomes nvidia-smi's form 0000000D:BB:DD.F (upper
 * case), a token starting with "GPU-" is the UUID. Empty when absent.
 */
void gpu_identity(const char *gpu, char *pci, size_t pci_len,
		  char *uuid, size_t uuid_len);

/*
 * Write the exposition of n domains on f. up: the module's sysfs class
 * exists (without it only gpusleep_up 0 is written). x: NULL for a
 * one-shot. Returns 0, or -errno when f failed.
 */
int metrics_write(FILE *f, bool up, const struct domain *ds, size_t n,
		  const struct metrics_extra *x);

/*
 * metrics --textfile DIR: keep DIR/gpusleep.prom current (exporter.c).
 * once: write it one time. Returns an exit status.
 */
int exporter_run(const char *dir, bool once, unsigned int interval_s);

/* Module parameters: GPUSLEEP_MODULE_PARAMS or /sys/module/gpusleep/parameters. */
extern const char *modparams_root;

#endif
