// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleepctl: look at and control gpusleep domains on this node.
 *
 *   list / status      read /sys/class/gpusleep/ (text or --json)
 *   group list / show  the groups of ranks, from sysfs
 *   release / resume   attach as a controller through /dev/gpusleep
 *   wait               eventfd (OP_DONE) + epoll, then GPUSLEEP_IOC_WAIT
 *   monitor            the "gpusleep" generic netlink family, group "events"
 *   metrics            Prometheus text exposition from sysfs; --textfile
 *                      keeps a node_exporter textfile current
 *   acquire / reclaim  GPUSLEEP_IOC_RECLAIM on /dev/gpusleep (a lease fd
 *                      held while a command runs); leases from sysfs
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
#include "output.h"

const char *prog = "gpusleepctl";
const char *sysfs_root = SYSFS_DEFAULT;
const char *dev_path;
bool opt_json;
bool opt_bytes;
struct json_err jerr;

void errmsg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (!jerr.msg[0]) {	/* the first says what went wrong */
		va_start(ap, fmt);
		vsnprintf(jerr.msg, sizeof(jerr.msg), fmt, ap);
		va_end(ap);
	}
}

/*
 * Under --json, a command that failed without printing its own object
 * prints this one: {"error":-errno,"status":N,"message":"..."} and what
 * the failing code knew (reason, kind, domain, tags).
 */
static void json_error_out(int status)
{
	struct out o;

	out_init(&o, stdout, true);
	out_obj_open(&o, NULL);
	out_s64(&o, "error", NULL, jerr.err ? jerr.err :
		status == EX_NOTFOUND ? -ENOENT :
		status == EX_PERM ? -EPERM :
		status == EX_USAGE ? -EINVAL : -EIO);
	out_u64(&o, "status", NULL, (uint64_t)status);
	out_str(&o, "message", NULL, jerr.msg[0] ? jerr.msg :
		status == EX_USAGE ? "usage error (see --help)" : "failed");
	if (jerr.reason)
		out_str(&o, "reason", NULL, jerr.reason);
	if (jerr.kind)
		out_str(&o, "kind", NULL, jerr.kind);
	if (jerr.has_domain)
		out_domain(&o, "domain", NULL, jerr.domain, jerr.name);
	if (jerr.group[0])
		out_str(&o, "group", NULL, jerr.group);
	if (jerr.has_tags)
		out_tags(&o, "tags", NULL, jerr.tags);
	out_obj_close(&o);
	out_end_line(&o);
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

int parse_json_opt(int argc, char **argv, const char *usage)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "bytes", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "jph", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt_json = true;
			break;
		case 'p':
			opt_bytes = true;
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

int parse_timeout(const char *arg, unsigned long max, unsigned long *secs)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || *end || end == arg || arg[0] == '-') {
		errmsg("--timeout %s: not a number of seconds", arg);
		return -1;
	}
	if (!v) {
		errmsg("--timeout 0: give a number of seconds, 1 or more (leave --timeout out for the module's default deadlines)");
		return -1;
	}
	if (v > max) {
		errmsg("--timeout %s: at most %lu seconds", arg, max);
		return -1;
	}
	*secs = v;
	return 0;
}

int check_tag_list(const char *list, const char *dflt)
{
	if (list[strspn(list, ", \t")])
		return 0;
	errmsg("--tags '%s': no tag named (an empty variable?); name the tags, or leave --tags out for %s",
	       list, dflt);
	return -1;
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
	{ "group", cmd_group },
	{ "monitor", cmd_monitor },
	{ "metrics", cmd_metrics },
	{ "acquire", cmd_acquire },
	{ "reclaim", cmd_reclaim },
	{ "leases", cmd_leases },
};

static const char main_usage[] =
	"Usage: gpusleepctl [-j|--json] [-p|--bytes] COMMAND [ARGS]\n"
	"       gpusleepctl -V|--version | -h|--help\n"
	"Commands:\n"
	"  list                               the domains of this node\n"
	"  status [DOMAIN]                    everything sysfs says about them\n"
	"  release DOMAIN|--group NAME [-t|--tags T] [-a|--abort-inflight]\n"
	"          [-T|--timeout S] [-n|--no-wait]\n"
	"  resume DOMAIN|--group NAME [-t|--tags T] [-T|--timeout S] [-n|--no-wait]\n"
	"  wait DOMAIN|--group NAME [OP] [-T|--timeout S]\n"
	"                                     wait for an operation's result\n"
	"  group list | group show NAME       the groups of ranks of this node\n"
	"  monitor [DOMAIN|--group NAME] [-t|--timestamp] [-c|--count N]\n"
	"                                     print state transitions as they happen\n"
	"  metrics [--textfile DIR [--once] [--interval S]]\n"
	"                                     Prometheus text exposition\n"
	"  acquire -g|--gpu GPU -s|--size N [-P|--priority P] [-- COMMAND...]\n"
	"                                     hold memory taken from other tenants\n"
	"                                     while COMMAND runs (or until signalled)\n"
	"  reclaim -g|--gpu GPU -s|--size N [-P|--priority P]\n"
	"                                     take memory from other tenants for good\n"
	"  leases                             the leases holding domains' tags\n"
	"-j, --json   JSON output (also accepted after the command); a refusal\n"
	"             prints {\"error\":-errno,\"status\":N,\"message\":...}\n"
	"-p, --bytes  raw numbers: bytes and microseconds, not 14.0 GiB, 31.2 ms\n"
	"DOMAIN is an id or a name. COMMAND --help for more.\n"
	"Exit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 permission denied.\n";

static void print_version(void)
{
	printf("gpusleepctl %s, gpusleep API %d\n", GS_VERSION,
	       GPUSLEEP_API_VERSION);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "bytes", no_argument, NULL, 'p' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env, *cmd;
	size_t i;
	int c, ret;

	env = getenv("GPUSLEEP_SYSFS");
	if (env && *env)
		sysfs_root = env;
	env = getenv("GPUSLEEP_DEVICE");
	if (env && *env)
		dev_path = env;
	env = getenv("GPUSLEEP_MODULE_PARAMS");
	if (env && *env)
		modparams_root = env;
	/* Global options, before the command (as ip -j): stop at it. */
	while ((c = getopt_long(argc, argv, "+jpVh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			opt_json = true;
			break;
		case 'p':
			opt_bytes = true;
			break;
		case 'V':
			print_version();
			return EX_OK;
		case 'h':
			fputs(main_usage, stdout);
			return EX_OK;
		default:
			fputs(main_usage, stderr);
			ret = EX_USAGE;
			goto out;
		}
	}
	if (optind >= argc) {
		errmsg("no command given");
		fputs(main_usage, stderr);
		ret = EX_USAGE;
		goto out;
	}
	cmd = argv[optind];
	if (!strcmp(cmd, "help")) {
		fputs(main_usage, stdout);
		return EX_OK;
	}
	if (!strcmp(cmd, "version")) {
		print_version();
		return EX_OK;
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmd, cmds[i].name))
			break;
	if (i == sizeof(cmds) / sizeof(cmds[0])) {
		errmsg("unknown command '%s' (gpusleepctl --help lists them)",
		       cmd);
		fputs(main_usage, stderr);
		ret = EX_USAGE;
		goto out;
	}
	ret = cmds[i].fn(argc - optind, argv + optind);
out:
	fflush(stdout);
	if (opt_json && ret != EX_OK && !jerr.printed)
		json_error_out(ret);
	return ret;
}
