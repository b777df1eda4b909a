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
/* How gs_report() sends GPUSLEEP_IOC_REPORT (the same for the tests). */
typedef int (*gs_report_fn)(int fd, const struct gpusleep_report *r);
extern GS_HIDDEN gs_report_fn gs_report_hook;

struct gs_mm;
/*
 * The agent's kick: the memory manager writes 1 to efd (an eventfd; -1:
 * none) whenever gs_mm_generation() moves, so that the agent's thread
 * sends a new report. One agent per mm: the newest wins.
 */
GS_HIDDEN void gs_mm_set_notify(struct gs_mm *mm, int efd);
GS_HIDDEN void gs_mm_clear_notify(struct gs_mm *mm, int efd);

#endif /* GPUSLEEP_USER_INTERNAL_H */
