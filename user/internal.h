/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* user/internal.h: libgpusleep internals shared between its files and tests. */
#ifndef GPUSLEEP_USER_INTERNAL_H
#define GPUSLEEP_USER_INTERNAL_H

#include <linux/gpusleep.h>

#define GS_HIDDEN __attribute__((visibility("hidden")))

/*
 * How gs_complete() sends GPUSLEEP_IOC_COMPLETE. The host tests, which feed
 * records to gs_engine/gs_agent through a socketpair, point it at a function
 * that records the answer instead (they link the static library).
 */
typedef int (*gs_complete_fn)(int fd, const struct gpusleep_complete *c);
extern GS_HIDDEN gs_complete_fn gs_complete_hook;

#endif /* GPUSLEEP_USER_INTERNAL_H */
