/* SPDX-License-Identifier: GPL-2.0 */
/*
 * gpusleepctl: what the files of tools/gpusleepctl/ share.
 *
 *   main.c      command table, global options, usage
 *   output.c    one output layer for text and --json (output.h)
 *   domain.c    sysfs reading: the field table, ids, DOMAIN -> id (domain.h)
 *   show.c      list, status
 *   ops.c       release, resume, wait (/dev/gpusleep as a controller)
 *   group.c     release/resume --group NAME (a group opened by name)
 *   nl.c        the generic netlink family: sockets, policies, dump
 *   monitor.c   monitor (netlink events)
 *   metrics.c   the Prometheus exposition (metrics)
 *   exporter.c  metrics --textfile: keep a node_exporter textfile current
 */
#ifndef GPUSLEEPCTL_H
#define GPUSLEEPCTL_H

#include <stdbool.h>
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

void errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int errno_exit(int err);

/* Options of list and status: --json and --help only. */
int parse_json_opt(int argc, char **argv, bool *json, const char *usage);

const char *kind_name(uint32_t kind);

int cmd_list(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_release(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
/* One release or resume of every rank of group name; an exit status. */
int group_op(const char *name, bool release, const char *tag_list,
	     uint32_t flags, uint32_t timeout_ms, bool json);
int cmd_metrics(int argc, char **argv);

#endif
