/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpusleepctl: what the files of tools/gpusleepctl/ share.
 *
 *   main.c      command table, global options, usage
 *   output.c    one output layer for text and --json (output.h)
 *   domain.c    sysfs reading: the field table, ids, DOMAIN -> id (domain.h)
 *   show.c      list, status
 *   ops.c       release, resume, wait (/dev/gpusleep as a controller)
 *   group.c     release/resume/wait --group NAME (a group opened by
 *               name), group list / show (sysfs)
 *   nl.c        the generic netlink family: sockets, policies, dump
 *   monitor.c   monitor (netlink events)
 *   metrics.c   the Prometheus exposition (metrics)
 *   exporter.c  metrics --textfile: keep a node_exporter textfile current
 *   arbiter.c   acquire, reclaim, leases (docs/arbiter.md)
 */
#ifndef GPUSLEEPCTL_H
#define GPUSLEEPCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status (gpusleepctl(8)). */
#define EX_OK		0
#define EX_FAILED	1
#define EX_USAGE	2
#define EX_NOTFOUND	3
#define EX_PERM		4

#define SYSFS_DEFAULT	"/sys/class/gpusleep"

extern const char *prog;
extern const char *sysfs_root;	/* GPUSLEEP_SYSFS or SYSFS_DEFAULT */
extern const char *dev_path;	/* GPUSLEEP_DEVICE, NULL: GS_DEVICE_PATH */
extern bool opt_json;		/* -j, --json (global or the command's) */
extern bool opt_bytes;		/* -p, --bytes: raw numbers in text */

/*
 * What main() prints under --json when a command failed without printing
 * an object of its own: the first errmsg() and what the failing code knew.
 */
struct json_err {
	bool printed;		/* an object went to stdout (out_end_line) */
	int err;		/* -errno, 0: from the exit status */
	const char *reason;	/* lower case, or NULL */
	const char *kind;	/* "release", "resume", or NULL */
	bool has_domain, has_tags;
	uint32_t domain;
	char name[64];
	char group[64];
	char tags[160];		/* comma list */
	char msg[512];
};
extern struct json_err jerr;

/* On stderr ("gpusleepctl: ..."), and the first one kept in jerr.msg. */
void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int errno_exit(int err);
/* --timeout S: 1..max seconds into *secs; 0 and junk said and refused. */
int parse_timeout(const char *arg, unsigned long max, unsigned long *secs);
/* --tags LIST names no tag (""): say so, -1. dflt: what leaving it means. */
int check_tag_list(const char *list, const char *dflt);

/* Options of list, status, group: --json, --bytes and --help only. */
int parse_json_opt(int argc, char **argv, const char *usage);

const char *kind_name(uint32_t kind);
/* Why an operation failed, for a person (the peer's errno when it has). */
void failure_text(uint32_t reason, int32_t error, char *buf, size_t len);

int cmd_list(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_release(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_group(int argc, char **argv);
/* One release or resume of every rank of group name; an exit status. */
int group_op(const char *name, bool release, const char *tag_list,
	     uint32_t flags, uint32_t timeout_ms);
/* wait --group: the result of group op (0: the newest); an exit status. */
int group_wait(const char *name, uint64_t op, uint32_t timeout_ms);
/* Controller access refused (-EPERM/-EACCES): say why and what to do. */
void perm_hint(const char *what, uint32_t id);
/* Attach to domain id as a controller: the fd, or an exit status < 0. */
int attach_controller(uint32_t id, const char *what);
/* /dev/gpusleep could not be opened: say why and what to do. */
int dev_open_failed(int err);
int cmd_metrics(int argc, char **argv);
int cmd_acquire(int argc, char **argv);
int cmd_reclaim(int argc, char **argv);
int cmd_leases(int argc, char **argv);

#endif
