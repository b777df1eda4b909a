// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: look at and control gpusleep domains on this node.
 *
 *   list / status      read /sys/class/gpusleep/ (text or --json)
 *   release / resume   attach as a controller through /dev/gpusleep
 *   wait               eventfd (OP_DONE) + epoll, then GPUSLEEP_IOC_WAIT
 *   monitor            the "gpusleep" generic netlink family, group "events"
 *   metrics            Prometheus text exposition from sysfs; --textfile
 *                      keeps a node_exporter textfile current
 *
 * This file holds the command table and what every command shares; each
 * concern has its own file (gpusleepctl.h lists them).
 *
 * Exit status: 0 ok, 1 the operation failed or was refused, 2 usage,
 * 3 no such domain or no module, 4 permission denied. See gpusleepctl(8).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/gpusleep.h>

#include "gpusleepctl.h"
#include "metrics.h"

const char *prog = "gpusleepctl";
const char *sysfs_root = SYSFS_DEFAULT;
const char *dev_path;

void errmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The exit status an errno from the device or the id table stands for. */
int errno_exit(int err)
{
	switch (err) {
	case ENOENT:
	case ENODEV:
	case ENXIO:
		return EX_NOTFOUND;
	case EPERM:
	case EACCES:
		return EX_PERM;
	default:
		return EX_FAILED;
	}
}

int parse_json_opt(int argc, char **argv, bool *json, const char *usage)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			*json = true;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(EX_OK);
		default:
			fputs(usage, stderr);
			return -1;
		}
	}
	return 0;
}

static const struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
} cmds[] = {
	{ "list", cmd_list },
	{ "status", cmd_status },
	{ "release", cmd_release },
	{ "resume", cmd_resume },
	{ "wait", cmd_wait },
	{ "monitor", cmd_monitor },
	{ "metrics", cmd_metrics },
};

static const char main_usage[] =
	"Usage: gpusleepctl COMMAND [ARGS]\n"
	"Commands:\n"
	"  list [--json]                      the domains of this node\n"
	"  status [DOMAIN] [--json]           everything sysfs says about them\n"
	"  release DOMAIN|--group NAME [--tags T] [--abort-inflight] [--timeout S]\n"
	"                 [--no-wait] [--json]\n"
	"  resume DOMAIN|--group NAME [--tags T] [--timeout S] [--no-wait] [--json]\n"
	"  wait DOMAIN [OP] [--timeout S] [--json]\n"
	"                                     wait for an operation's result\n"
	"  monitor [--json] [--count N]       print state transitions as they happen\n"
	"  metrics [--textfile DIR [--once] [--interval S]]\n"
	"                                     Prometheus text exposition\n"
	"DOMAIN is an id or a name. COMMAND --help for more.\n"
	"Exit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 permission denied.\n";

int main(int argc, char **argv)
{
	const char *env, *cmd;
	size_t i;

	env = getenv("GPUSLEEP_SYSFS");
	if (env && *env)
		sysfs_root = env;
	env = getenv("GPUSLEEP_DEVICE");
	if (env && *env)
		dev_path = env;
	env = getenv("GPUSLEEP_MODULE_PARAMS");
	if (env && *env)
		modparams_root = env;
	if (argc < 2) {
		fputs(main_usage, stderr);
		return EX_USAGE;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		fputs(main_usage, stdout);
		return EX_OK;
	}
	if (!strcmp(cmd, "--version")) {
		printf("gpusleepctl, gpusleep API %d\n", GPUSLEEP_API_VERSION);
		return EX_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	errmsg("unknown command '%s'", cmd);
	fputs(main_usage, stderr);
	return EX_USAGE;
}
