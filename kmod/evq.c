// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: the bounded queues of event records read by the engine and the
 * agent. A ring of fixed-size records; the caller holds domain->lock.
 */
#include <linux/errno.h>
#include <linux/string.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/wait.h>

#include "gpusleep.h"

void gs_evq_init(struct gs_evq *q)
{
	memset(q, 0, sizeof(*q));
	init_waitqueue_head(&q->wq);
}

int gs_evq_push(struct gs_evq *q, const struct gpusleep_event *ev)
{
	struct gpusleep_event *slot;

	if (q->count == GS_EVQ_LEN) {
		q->dropped++;
		return -ENOBUFS;
	}
	slot = &q->rec[(q->head + q->count) % GS_EVQ_LEN];
	*slot = *ev;
	slot->size = sizeof(*slot);	/* the reader learns what we have */
	q->count++;
	if (q->hold)
		q->due = true;
	else
		gs_evq_wake(q);
	return 0;
}

void gs_evq_wake(struct gs_evq *q)
{
	wake_up_interruptible_poll(&q->wq, EPOLLIN | EPOLLRDNORM);
}

void gs_evq_hold(struct gs_evq *q)
{
	q->hold = true;
}

bool gs_evq_unhold(struct gs_evq *q)
{
	bool due = q->due;

	q->hold = false;
	q->due = false;
	return due;
}

bool gs_evq_pop(struct gs_evq *q, struct gpusleep_event *ev)
{
	if (!q->count)
		return false;
	*ev = q->rec[q->head];
	q->head = (q->head + 1) % GS_EVQ_LEN;
	q->count--;
	return true;
}

/*
 * Put back, first in line, a record that could not be copied to its
 * reader (op.c decided it is still current). A newer record of its type
 * queued meanwhile says what holds now: it stays, with the tags of the
 * one put back added, so the queue never holds two of a type.
 */
void gs_evq_unpop(struct gs_evq *q, const struct gpusleep_event *ev)
{
	unsigned int i;

	for (i = 0; i < q->count; i++) {
		struct gpusleep_event *e = &q->rec[(q->head + i) % GS_EVQ_LEN];

		if (e->type == ev->type) {
			e->tags |= ev->tags;
			return;
		}
	}
	if (q->count == GS_EVQ_LEN) {
		q->dropped++;
		return;
	}
	q->head = (q->head + GS_EVQ_LEN - 1) % GS_EVQ_LEN;
	q->rec[q->head] = *ev;
	q->count++;
}

/* Remove the i-th queued record, keeping the order of the others. */
static void gs_evq_remove(struct gs_evq *q, unsigned int i)
{
	for (; i + 1 < q->count; i++)
		q->rec[(q->head + i) % GS_EVQ_LEN] =
			q->rec[(q->head + i + 1) % GS_EVQ_LEN];
	q->count--;
}

/*
 * Take back an unread record of op_id and type. True if it was still
 * queued (the reader never saw it).
 */
bool gs_evq_withdraw(struct gs_evq *q, u64 op_id, u32 type)
{
	unsigned int i;

	for (i = 0; i < q->count; i++) {
		struct gpusleep_event *ev = &q->rec[(q->head + i) % GS_EVQ_LEN];

		if (ev->op_id == op_id && ev->type == type) {
			gs_evq_remove(q, i);
			return true;
		}
	}
	return false;
}

/*
 * Take back every unread record of type, whatever its operation; their
 * tags are added to *tags (when not NULL), for the record replacing them.
 */
bool gs_evq_withdraw_type(struct gs_evq *q, u32 type, u32 *tags)
{
	unsigned int i = 0;
	bool any = false;

	while (i < q->count) {
		const struct gpusleep_event *ev =
			&q->rec[(q->head + i) % GS_EVQ_LEN];

		if (ev->type == type) {
			if (tags)
				*tags |= ev->tags;
			gs_evq_remove(q, i);
			any = true;
		} else {
			i++;
		}
	}
	return any;
}

void gs_evq_clear(struct gs_evq *q)
{
	q->head = 0;
	q->count = 0;
}
