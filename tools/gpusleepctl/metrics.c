// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl metrics: every domain's state and counters in the Prometheus
 * text exposition format (version 0.0.4), for node_exporter's textfile
 * collector. Conventions: base units (seconds, bytes), counters end in
 * _total, no operation id as a value, no sample (rather than a 0) for what
 * never happened, identity in an info metric whose labels join with DCGM
 * (pci_bus_id, UUID).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpusleepctl.h"
#include "metrics.h"

const char *modparams_root = "/sys/module/gpusleep/parameters";

/* s as a label value (escaped) in dst. */
static void label_esc(char *dst, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < len; s++) {
		if (*s == '\\' || *s == '"') {
			dst[o++] = '\\';
			dst[o++] = *s;
		} else if (*s == '\n') {
			dst[o++] = '\\';
			dst[o++] = 'n';
		} else {
			dst[o++] = *s;
		}
	}
	dst[o] = '\0';
}

/* {domain="1",name="llm0"[,EXTRA]} */
static void prom_labels(FILE *f, const struct domain *d, const char *extra)
{
	char name[2 * GS_STR_LEN];

	label_esc(name, sizeof(name), d->name);
	fprintf(f, "{domain=\"%u\",name=\"%s\"", d->id, name);
	if (extra)
		fprintf(f, ",%s", extra);
	fputc('}', f);
}

static void help_type(FILE *f, const char *name, const char *type,
		      const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static bool is_pci(const char *t, unsigned int *dom, unsigned int *bus,
		   unsigned int *dev, unsigned int *fn)
{
	int n = 0;

	if (sscanf(t, "%x:%x:%x.%x%n", dom, bus, dev, fn, &n) == 4 && !t[n])
		return true;
	*dom = 0;
	n = 0;
	return sscanf(t, "%x:%x.%x%n", bus, dev, fn, &n) == 3 && !t[n];
}

void gpu_identity(const char *gpu, char *pci, size_t pci_len,
		  char *uuid, size_t uuid_len)
{
	char buf[GS_STR_LEN], *tok, *save;
	unsigned int dom, bus, dev, fn;

	pci[0] = uuid[0] = '\0';
	snprintf(buf, sizeof(buf), "%s", gpu);
	for (tok = strtok_r(buf, ",; \t", &save); tok;
	     tok = strtok_r(NULL, ",; \t", &save)) {
		if (!strncmp(tok, "GPU-", 4) && tok[4] && !uuid[0])
			snprintf(uuid, uuid_len, "%s", tok);
		else if (!pci[0] && is_pci(tok, &dom, &bus, &dev, &fn) &&
			 bus < 256 && dev < 32 && fn < 8)
			snprintf(pci, pci_len, "%08X:%02X:%02X.%X", dom, bus,
				 dev, fn);
	}
}

/* One sample (or one per tag / state) of field f for domain d. */
static void field_samples(FILE *f, const struct domain *d,
			  const struct field *fl)
{
	const char *s = FIELD_PTR(d, fl);
	char lab[64], tag[GPUSLEEP_TAG_NAME_LEN], val[24];
	size_t i;

	switch (fl->kind) {
	case K_STATE:
		for (i = 0; i < n_state_names; i++) {
			snprintf(lab, sizeof(lab), "state=\"%s\"", state_names[i]);
			fputs(fl->metric, f);
			prom_labels(f, d, lab);
			fprintf(f, " %d\n", !strcmp(s, state_names[i]));
		}
		break;
	case K_TAGS:
		/* one sample per tag the domain declared */
		for (i = 0; !list_item(d->tags, i, tag, sizeof(tag)); i++) {
			snprintf(lab, sizeof(lab), "tag=\"%s\"", tag);
			fputs(fl->metric, f);
			prom_labels(f, d, lab);
			fprintf(f, " %d\n", has_tag(s, tag));
		}
		break;
	case K_TAGU64:
		for (i = 0; !list_item(d->tags, i, tag, sizeof(tag)) &&
			    !list_item(s, i, val, sizeof(val)); i++) {
			snprintf(lab, sizeof(lab), "tag=\"%s\"", tag);
			fputs(fl->metric, f);
			prom_labels(f, d, lab);
			fprintf(f, " %s\n", val);
		}
		break;
	case K_TAGSTR:
		/* one sample per tag, 1, the word in the label mlabel */
		for (i = 0; !list_item(d->tags, i, tag, sizeof(tag)) &&
			    !list_item(s, i, val, sizeof(val)); i++) {
			char w[32];

			label_esc(w, sizeof(w), val);
			snprintf(lab, sizeof(lab), "tag=\"%s\",%s=\"%s\"", tag,
				 fl->mlabel, w);
			fputs(fl->metric, f);
			prom_labels(f, d, lab);
			fputs(" 1\n", f);
		}
		break;
	case K_S64:
		fputs(fl->metric, f);
		prom_labels(f, d, NULL);
		fprintf(f, " %lld\n", (long long)(int64_t)FIELD_U64(d, fl));
		break;
	case K_BOOL:
	case K_OP:
		fputs(fl->metric, f);
		prom_labels(f, d, fl->mlabel);
		fprintf(f, " %d\n", FIELD_U64(d, fl) != 0);
		break;
	case K_U64:
		fputs(fl->metric, f);
		prom_labels(f, d, fl->mlabel);
		fprintf(f, " %llu\n", (unsigned long long)FIELD_U64(d, fl));
		break;
	case K_RES:
		s = (const char *)d + fl->aux_off;
		if (!s[0] || !strcmp(s, "unknown"))
			break;
		snprintf(lab, sizeof(lab), "source=\"%.16s\"", s);
		fputs(fl->metric, f);
		prom_labels(f, d, lab);
		fprintf(f, " %llu\n", (unsigned long long)FIELD_U64(d, fl));
		break;
	case K_US:
		if (field_never(d, fl))
			break;
		fputs(fl->metric, f);
		prom_labels(f, d, fl->mlabel);
		fprintf(f, " %.6f\n", (double)FIELD_U64(d, fl) / 1e6);
		break;
	case K_STR:
		break;
	}
}

static void class_sample(FILE *f, const struct domain *d, const char *cls,
			 uint64_t v)
{
	char lab[32];

	snprintf(lab, sizeof(lab), "class=\"%s\"", cls);
	fputs("gpusleep_resident_class_bytes", f);
	prom_labels(f, d, lab);
	fprintf(f, " %llu\n", (unsigned long long)v);
}

/* A number from a file (a sysfs class file, a module parameter). */
static bool file_u64(const char *dir, const char *name, unsigned long long *v)
{
	char path[PATH_MAX], buf[32], *end;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return false;
	}
	fclose(f);
	errno = 0;
	*v = strtoull(buf, &end, 10);
	return !errno && end != buf;
}

/* Node-wide: leases, reclaims, the host-RAM budget (docs/arbiter.md). */
static void node_metrics(FILE *f)
{
	unsigned long long v;

	if (file_u64(sysfs_root, "leases", &v)) {
		help_type(f, "gpusleep_leases", "gauge",
			  "Leases held now (taken by a reclaim and not yet given back).");
		fprintf(f, "gpusleep_leases %llu\n", v);
	}
	if (file_u64(sysfs_root, "reclaims", &v)) {
		help_type(f, "gpusleep_reclaims_total", "counter",
			  "Reclaims asked for since the module was loaded.");
		fprintf(f, "gpusleep_reclaims_total %llu\n", v);
	}
	if (file_u64(modparams_root, "host_budget_bytes", &v)) {
		help_type(f, "gpusleep_host_budget_bytes", "gauge",
			  "The node's limit on host RAM held in backups (0: none).");
		fprintf(f, "gpusleep_host_budget_bytes %llu\n", v);
	}
	if (file_u64(modparams_root, "host_used_bytes", &v)) {
		help_type(f, "gpusleep_host_used_bytes", "gauge",
			  "Host RAM the node's budget counts now (backups and kept staging of every domain).");
		fprintf(f, "gpusleep_host_used_bytes %llu\n", v);
	}
}

/* A module parameter in ms as seconds; false when unreadable. */
static bool modparam_s(const char *name, double *v)
{
	char path[PATH_MAX], buf[32], *end;
	unsigned long ms;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", modparams_root, name);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return false;
	}
	fclose(f);
	errno = 0;
	ms = strtoul(buf, &end, 10);
	if (errno || end == buf)
		return false;
	*v = (double)ms / 1000;
	return true;
}

int metrics_write(FILE *f, bool up, const struct domain *ds, size_t n,
		  const struct metrics_extra *x)
{
	char pci[32], uuid[GS_STR_LEN];
	size_t i, j, k;
	double v;

	help_type(f, "gpusleep_up", "gauge",
		  "1 if the gpusleep module is loaded (its sysfs class exists).");
	fprintf(f, "gpusleep_up %d\n", up);
	if (x) {
		help_type(f, "gpusleep_engine_deaths_total", "counter",
			  "Engines seen dying (domain state dead) since the exporter started.");
		fprintf(f, "gpusleep_engine_deaths_total %llu\n", x->deaths);
		help_type(f, "gpusleep_engine_deaths_released_total", "counter",
			  "Engines seen dying while some tag was released, since the exporter started.");
		fprintf(f, "gpusleep_engine_deaths_released_total %llu\n",
			x->deaths_released);
		help_type(f, "gpusleep_exporter_events_lost_total", "counter",
			  "Times the exporter's netlink socket overran and it read everything again.");
		fprintf(f, "gpusleep_exporter_events_lost_total %llu\n", x->lost);
	}
	if (!up)
		return ferror(f) ? -EIO : 0;

	help_type(f, "gpusleep_domains", "gauge", "Domains alive on this node.");
	fprintf(f, "gpusleep_domains %zu\n", n);
	if (modparam_s("drain_timeout_ms", &v)) {
		help_type(f, "gpusleep_drain_timeout_seconds", "gauge",
			  "The module's default deadline for an engine to drain.");
		fprintf(f, "gpusleep_drain_timeout_seconds %g\n", v);
	}
	if (modparam_s("step_timeout_ms", &v)) {
		help_type(f, "gpusleep_step_timeout_seconds", "gauge",
			  "The module's default deadline for each other step.");
		fprintf(f, "gpusleep_step_timeout_seconds %g\n", v);
	}

	help_type(f, "gpusleep_domain_info", "gauge",
		  "Domain identity, value 1: the gpu string the engine declared, its PCI bus id and GPU UUID (as DCGM labels them), the owner.");
	for (i = 0; i < n; i++) {
		char lab[3 * GS_STR_LEN + 160], g[2 * GS_STR_LEN], u[2 * GS_STR_LEN];

		gpu_identity(ds[i].gpu, pci, sizeof(pci), uuid, sizeof(uuid));
		label_esc(g, sizeof(g), ds[i].gpu);
		label_esc(u, sizeof(u), uuid);
		snprintf(lab, sizeof(lab),
			 "gpu_ident=\"%s\",pci_bus_id=\"%s\",UUID=\"%s\",owner_uid=\"%llu\"",
			 g, pci, u, (unsigned long long)ds[i].owner_uid);
		fputs("gpusleep_domain_info", f);
		prom_labels(f, &ds[i], lab);
		fputs(" 1\n", f);
	}
	if (x && x->state_since) {
		help_type(f, "gpusleep_domain_state_since_timestamp_seconds",
			  "gauge",
			  "Unix time the domain entered its current state, as the exporter saw it (its start, for a state older than that).");
		for (i = 0; i < n; i++) {
			if (x->state_since[i] < 0)
				continue;
			fputs("gpusleep_domain_state_since_timestamp_seconds", f);
			prom_labels(f, &ds[i], NULL);
			fprintf(f, " %.3f\n", x->state_since[i]);
		}
	}

	node_metrics(f);
	/* What is left on the GPU, by class (issue 34 item 5). */
	help_type(f, "gpusleep_resident_class_bytes", "gauge",
		  "What the domain's process holds on the GPU, by class, from its agent's newest report: tags (mapped now), torch (PyTorch's reserved memory outside the regions), graphs (graph pools outside them), other (the rest of the process: context, NCCL...; only from NVML's per-process figure).");
	for (i = 0; i < n; i++) {
		struct left l;

		if (!domain_left(&ds[i], &l))
			continue;
		class_sample(f, &ds[i], "tags", l.tags);
		class_sample(f, &ds[i], "torch", l.torch);
		class_sample(f, &ds[i], "graphs", l.graphs);
		if (l.other_known)
			class_sample(f, &ds[i], "other", l.other);
	}
	if (x && x->leases) {
		help_type(f, "gpusleep_lease_since_timestamp_seconds", "gauge",
			  "Unix time the exporter first saw the lease hold a domain's tags (its start, for one older than that).");
		for (i = 0; i < x->nr_leases; i++)
			fprintf(f, "gpusleep_lease_since_timestamp_seconds{lease=\"%llu\"} %.3f\n",
				x->leases[i].id, x->leases[i].since);
	}
	if (x) {
		help_type(f, "gpusleep_reclaim_results_total", "counter",
			  "Reclaims seen ending (netlink), by result: taken (the bytes asked for) or shortfall.");
		fprintf(f, "gpusleep_reclaim_results_total{result=\"taken\"} %llu\n",
			x->reclaims_taken);
		fprintf(f, "gpusleep_reclaim_results_total{result=\"shortfall\"} %llu\n",
			x->reclaims_short);
		help_type(f, "gpusleep_reclaimed_bytes_total", "counter",
			  "Device memory the reclaims seen ending took (netlink), bytes.");
		fprintf(f, "gpusleep_reclaimed_bytes_total %llu\n",
			x->reclaimed_bytes);
	}

	/* The field table's metrics; fields sharing a name stay together. */
	for (k = 0; k < FLD_COUNT; k++) {
		const struct field *fl = &domain_fields[k];
		bool seen = false;

		if (!fl->metric)
			continue;
		for (j = 0; j < k && !seen; j++)
			seen = domain_fields[j].metric &&
			       !strcmp(domain_fields[j].metric, fl->metric);
		if (seen)
			continue;
		help_type(f, fl->metric, fl->mtype, fl->help);
		for (i = 0; i < n; i++)
			for (j = k; j < FLD_COUNT; j++)
				if (domain_fields[j].metric &&
				    !strcmp(domain_fields[j].metric, fl->metric) &&
				    (ds[i].present & (1ULL << j)))
					field_samples(f, &ds[i], &domain_fields[j]);
	}
	return ferror(f) ? -EIO : 0;
}

static const char metrics_usage[] =
	"Usage: gpusleepctl metrics [--textfile DIR [--once] [--interval S]]\n"
	"Print every domain's state and counters in the Prometheus text format\n"
	"(without the module: gpusleep_up 0 only, exit 0).\n"
	"--textfile DIR: keep DIR/gpusleep.prom current for node_exporter's\n"
	"textfile collector: rewritten atomically on every netlink event and\n"
	"every S seconds (default 15); runs until SIGTERM or SIGINT.\n"
	"--once: write DIR/gpusleep.prom once and exit.\n";

int cmd_metrics(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "textfile", required_argument, NULL, 't' },
		{ "once", no_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dir = NULL;
	unsigned long interval = 15;
	struct domain *ds;
	bool once = false, interval_set = false;
	size_t n;
	char *end;
	int c, r;

	optind = 0;
	while ((c = getopt_long(argc, argv, "t:oi:h", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			dir = optarg;
			break;
		case 'o':
			once = true;
			break;
		case 'i':
			errno = 0;
			interval = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || !interval ||
			    interval > 86400) {
				errmsg("--interval %s: not a number of seconds (1 to 86400)",
				       optarg);
				return EX_USAGE;
			}
			interval_set = true;
			break;
		case 'h':
			fputs(metrics_usage, stdout);
			return EX_OK;
		default:
			fputs(metrics_usage, stderr);
			return EX_USAGE;
		}
	}
	if (optind != argc || (!dir && (once || interval_set))) {
		fputs(metrics_usage, stderr);
		return EX_USAGE;
	}
	if (dir)
		return exporter_run(dir, once, (unsigned int)interval);

	/* Without the module: gpusleep_up 0 only, as the exporter writes. */
	r = domain_load_all(&ds, &n);
	if (r == -ENOENT) {
		ds = NULL;
		n = 0;
	} else if (r) {
		errmsg("%s: %s", sysfs_root, strerror(-r));
		return EX_FAILED;
	}
	r = metrics_write(stdout, ds != NULL, ds, n, NULL);
	free(ds);
	if (!r && fflush(stdout))
		r = -errno;
	if (r) {
		errmsg("standard output: %s", strerror(-r));
		return EX_FAILED;
	}
	return EX_OK;
}
