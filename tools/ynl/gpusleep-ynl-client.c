// SPDX-License-Identifier: GPL-2.0
/*
 * A small client of the gpusleep generic netlink family built on the
 * library the kernel's ynl-gen-c generates from
 * Documentation/netlink/specs/gpusleep.yaml, and on libynl
 * (tools/net/ynl/lib of a kernel source tree). tools/ynl/build.sh builds it.
 *
 *   gpusleep-ynl-client [--until STATE] [--timeout SECONDS]
 *
 * Joins the "events" group, dumps every domain (one "domain ..." line each),
 * prints "ready", then with --until prints one "event ..." line per state
 * notification until one enters STATE (exit 0) or SECONDS pass (exit 1).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ynl.h>
#include "gpusleep-user.h"

static void print_result(const struct gpusleep_state_ntf_rsp *n)
{
	const struct gpusleep_op_result *r = &n->result;

	if (!n->_present.result)
		return;
	printf(" result kind=%s error=%d reason=%s done=0x%x",
	       r->_present.kind ? gpusleep_op_kind_str(r->kind) : "?",
	       r->_present.error ? r->error : 0,
	       r->_present.reason ? gpusleep_reason_str(r->reason) : "?",
	       r->_present.done_tags ? r->done_tags : 0);
}

static int listen_until(struct ynl_sock *ys, const char *until, int timeout)
{
	time_t end = time(NULL) + timeout;
	struct pollfd p = { .fd = ynl_socket_get_fd(ys), .events = POLLIN };

	while (time(NULL) < end) {
		struct ynl_ntf_base_type *b;
		int r = poll(&p, 1, 1000);

		if (r < 0 && errno != EINTR) {
			perror("gpusleep-ynl-client: poll");
			return 1;
		}
		if (r <= 0)
			continue;
		if (ynl_ntf_check(ys) < 0) {
			fprintf(stderr, "gpusleep-ynl-client: reading events: %s\n",
				ys->err.msg);
			return 1;
		}
		while ((b = ynl_ntf_dequeue(ys))) {
			struct gpusleep_state_ntf *ntf = (void *)b;
			const struct gpusleep_state_ntf_rsp *n = &ntf->obj;
			int done;

			if (b->cmd != GPUSLEEP_CMD_STATE_NTF) {
				ynl_ntf_free(b);
				continue;
			}
			printf("event id=%u %s->%s op=%llu", n->id,
			       gpusleep_dstate_str(n->from_state),
			       gpusleep_dstate_str(n->state),
			       (unsigned long long)n->op_id);
			print_result(n);
			printf("\n");
			fflush(stdout);
			done = !strcmp(gpusleep_dstate_str(n->state), until);
			ynl_ntf_free(b);
			if (done)
				return 0;
		}
	}
	fprintf(stderr, "gpusleep-ynl-client: no domain entered %s in %d s\n",
		until, timeout);
	return 1;
}

int main(int argc, char **argv)
{
	struct gpusleep_get_list *doms;
	const char *until = NULL;
	struct ynl_error yerr;
	struct ynl_sock *ys;
	int timeout = 60, i, rc = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--until") && i + 1 < argc) {
			until = argv[++i];
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: %s [--until STATE] [--timeout SECONDS]\n",
				argv[0]);
			return 2;
		}
	}

	ys = ynl_sock_create(&ynl_gpusleep_family, &yerr);
	if (!ys) {
		fprintf(stderr, "gpusleep-ynl-client: opening the %s family: %s\n",
			GPUSLEEP_GENL_NAME, yerr.msg);
		return 1;
	}
	/* join before the dump, so that no transition falls between them */
	if (until && ynl_subscribe(ys, GPUSLEEP_MCGRP_EVENTS)) {
		fprintf(stderr, "gpusleep-ynl-client: joining %s: %s\n",
			GPUSLEEP_MCGRP_EVENTS, ys->err.msg);
		ynl_sock_destroy(ys);
		return 1;
	}

	doms = gpusleep_get_dump(ys);
	if (!doms) {
		fprintf(stderr, "gpusleep-ynl-client: dump of domains: %s\n",
			ys->err.msg);
		ynl_sock_destroy(ys);
		return 1;
	}
	ynl_dump_foreach(doms, d)
		printf("domain id=%u name=%s gpu=%s state=%s released=0x%x\n",
		       d->id, d->name ? d->name : "", d->gpu ? d->gpu : "",
		       gpusleep_dstate_str(d->state), d->released);
	gpusleep_get_list_free(doms);
	printf("ready\n");
	fflush(stdout);

	if (until)
		rc = listen_until(ys, until, timeout);
	ynl_sock_destroy(ys);
	return rc;
}
