// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: domains and their fds.
 *
 * A domain is created with its engine fd; agents and controllers attach and
 * get fds of their own (anon inodes, after KVM's VM fds). Every fd holds a
 * kref on the domain. Closing the engine fd kills the domain: it leaves the
 * id table and its sysfs directory, and every waiter wakes. The domain's
 * memory goes with the last fd.
 */
#include <linux/anon_inodes.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/errno.h>
#include <linux/err.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/nsproxy.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <net/net_namespace.h>

#include "gpusleep.h"

static const struct file_operations gs_domain_fops;

/*
 * Domains come from a cache of their own: a struct gs_domain is a little
 * over 4 KiB, which kmalloc would round up to 8 KiB per domain. Charged
 * to the creator's memory cgroup, as GFP_KERNEL_ACCOUNT would be.
 */
static struct kmem_cache *gs_domain_cache;

int gs_domains_cache_init(void)
{
	gs_domain_cache = kmem_cache_create("gpusleep_domain",
					    sizeof(struct gs_domain), 0,
					    SLAB_ACCOUNT, NULL);
	return gs_domain_cache ? 0 : -ENOMEM;
}

void gs_domains_cache_exit(void)
{
	kmem_cache_destroy(gs_domain_cache);
}

/*
 * The creating process exited (the last of its threads): the domain ends
 * with it, as when its last close of the engine fd passes flush. That
 * close does not pass when the fd table is shared (CLONE_FILES) and
 * lives on in another process; the process's exit is still seen here.
 * Runs without a reference: gs_domain_free() stops the wake-ups, then
 * waits for this work, before it frees anything.
 */
static void gs_owner_exit_work(struct work_struct *work)
{
	struct gs_domain *d = container_of(work, struct gs_domain, owner_work);
	struct task_struct *t;
	bool gone;

	rcu_read_lock();
	t = pid_task(d->owner_pid, PIDTYPE_TGID);
	gone = !t || (READ_ONCE(t->exit_state) && thread_group_empty(t));
	rcu_read_unlock();
	if (gone)
		gs_domain_kill(d);
}

/* owner_pid's exit wait queue woke (atomic context): look, later. */
static int gs_owner_wake(struct wait_queue_entry *wq, unsigned int mode,
			 int sync, void *key)
{
	struct gs_domain *d = container_of(wq, struct gs_domain, owner_wait);

	schedule_work(&d->owner_work);
	return 0;
}

static void gs_owner_watch(struct gs_domain *d)
{
	if (d->shared)
		return;
	INIT_WORK(&d->owner_work, gs_owner_exit_work);
	init_waitqueue_func_entry(&d->owner_wait, gs_owner_wake);
	add_wait_queue(&d->owner_pid->wait_pidfd, &d->owner_wait);
}

static void gs_owner_unwatch(struct gs_domain *d)
{
	if (d->shared)
		return;
	remove_wait_queue(&d->owner_pid->wait_pidfd, &d->owner_wait);
	cancel_work_sync(&d->owner_work);
}

static void gs_domain_free(struct kref *kref)
{
	struct gs_domain *d = container_of(kref, struct gs_domain, kref);

	gs_owner_unwatch(d);
	/* No fd is left: nobody can arm the timer any more. */
	cancel_delayed_work_sync(&d->timeout_work);
	cancel_delayed_work_sync(&d->sysfs_work);
	WARN_ON(!list_empty(&d->efds));
	WARN_ON(!list_empty(&d->waiters));
	mutex_destroy(&d->lock);
	put_net(d->net);
	gs_user_uncharge(d->charged, GS_UC_DOMAINS);
	put_pid(d->owner_pid);
	put_cred(d->cred);
	kmem_cache_free(gs_domain_cache, d);
}

void gs_domain_put(struct gs_domain *d)
{
	kref_put(&d->kref, gs_domain_free);
}

struct gs_domain *gs_domain_create(const struct gpusleep_create *req,
				   const struct gs_tagset *ts)
{
	struct gs_uid charged = gs_user_current();
	struct gs_domain *d;
	int ret;

	ret = gs_user_charge(charged, GS_UC_DOMAINS);
	if (ret)
		return ERR_PTR(ret);
	d = gs_fault() ? NULL : kmem_cache_zalloc(gs_domain_cache, GFP_KERNEL);
	if (!d) {
		gs_user_uncharge(charged, GS_UC_DOMAINS);
		return ERR_PTR(-ENOMEM);
	}
	kref_init(&d->kref);
	memcpy(d->name, req->name, sizeof(d->name));
	memcpy(d->gpu, req->gpu, sizeof(d->gpu));
	d->caps = req->caps;
	d->tags = *ts;
	d->owner = current_euid();
	d->charged = charged;
	d->cred = get_current_cred();
	d->owner_pid = get_pid(task_tgid(current));
	d->shared = req->flags & GPUSLEEP_CREATEF_SHARED;
	d->net = get_net(current->nsproxy->net_ns);
	mutex_init(&d->lock);
	d->state = GPUSLEEP_S_AWAKE;
	d->next_op_id = 1;
	d->active_ns = ktime_get_ns();	/* awake since its creation */
	gs_evq_init(&d->engine_q);
	gs_evq_init(&d->agent_q);
	INIT_LIST_HEAD(&d->efds);
	INIT_LIST_HEAD(&d->waiters);
	init_waitqueue_head(&d->op_wq);
	INIT_DELAYED_WORK(&d->timeout_work, gs_op_timeout_work);
	gs_sysfs_init_domain(d);
	gs_owner_watch(d);
	return d;
}

/*
 * Who may reach a domain by its id. Domain ids are global and listed in
 * sysfs, and containers without a user namespace share euids (root, most
 * often), so the owner's euid alone is not enough: the caller must also
 * be in the creator's user and pid namespaces. CAP_SYS_ADMIN in the
 * initial user namespace may do anything. Anyone else needs a grant.
 */
bool gs_may_control_ns(const struct gs_domain *d, const struct cred *cred,
		       struct pid_namespace *ns)
{
	return uid_eq(cred->euid, d->owner) &&
	       cred->user_ns == d->cred->user_ns &&
	       ns == ns_of_pid(d->owner_pid);
}

bool gs_may_control(const struct gs_domain *d, const struct cred *cred)
{
	return gs_may_control_ns(d, cred, task_active_pid_ns(current));
}

bool gs_may_attach(const struct gs_domain *d, u32 role)
{
	if (capable(CAP_SYS_ADMIN))
		return true;
	if (!gs_may_control(d, current_cred()))
		return false;
	/* The agent maps the engine's memory: the engine's process only. */
	return role != GPUSLEEP_ROLE_AGENT || d->shared ||
	       task_tgid(current) == d->owner_pid;
}

static const char *gs_role_name(u32 role)
{
	switch (role) {
	case GPUSLEEP_ROLE_ENGINE:
		return "[gpusleep-engine]";
	case GPUSLEEP_ROLE_AGENT:
		return "[gpusleep-agent]";
	default:
		return "[gpusleep-controller]";
	}
}

/*
 * Make an fd of the given role for d. The reference the caller holds on d
 * passes to the new file on success. For the agent role the slot is taken
 * under the lock before the fd is installed.
 */
int gs_domain_open_fd(struct gs_domain *d, u32 role, bool granted)
{
	struct gs_uid uid = gs_user_current();
	struct gs_file *gf;
	struct file *file;
	int fd, ret;

	if (role != GPUSLEEP_ROLE_ENGINE && !granted && !gs_may_attach(d, role))
		return -EPERM;

	/* The engine fd comes with its domain, charged as one. */
	if (role != GPUSLEEP_ROLE_ENGINE) {
		ret = gs_user_charge(uid, GS_UC_FDS);
		if (ret)
			return ret;
	}
	gf = gs_kzalloc(sizeof(*gf), GFP_KERNEL_ACCOUNT);
	if (!gf) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	gf->d = d;
	gf->role = role;
	gf->uid = uid;

	fd = gs_fault() ? -EMFILE : get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}
	file = gs_fault() ? ERR_PTR(-ENOMEM) :
		anon_inode_getfile(gs_role_name(role), &gs_domain_fops, gf,
				   O_RDWR);
	if (IS_ERR(file)) {
		ret = PTR_ERR(file);
		goto err_put_fd;
	}

	if (role != GPUSLEEP_ROLE_ENGINE) {
		/* Nothing new attaches to a dying domain. */
		mutex_lock(&d->lock);
		if (d->dead)
			ret = -ENOENT;
		else if (role == GPUSLEEP_ROLE_AGENT && d->agent)
			ret = -EBUSY;
		else
			ret = 0;
		gf->seen_done = d->last_done_id;
		if (!ret && role == GPUSLEEP_ROLE_AGENT) {
			struct gs_change c = { .from = d->state };

			d->agent = gf;
			gs_announce(d, &c);
		}
		mutex_unlock(&d->lock);
		if (ret) {
			/* The file owns gf and the reference now; fput ends both. */
			kref_get(&d->kref);
			fput(file);
			put_unused_fd(fd);
			return ret;
		}
	}
	fd_install(fd, file);
	return fd;

err_put_fd:
	put_unused_fd(fd);
err_free:
	kfree(gf);
err_uncharge:
	if (role != GPUSLEEP_ROLE_ENGINE)
		gs_user_uncharge(uid, GS_UC_FDS);
	return ret;
}

void gs_domain_kill(struct gs_domain *d)
{
	/* Lock order: the id table first, then the domain. */
	gs_ids_remove(d);
	gs_sysfs_remove(d);
	mutex_lock(&d->lock);
	if (!d->dead)
		gs_op_engine_gone(d);
	mutex_unlock(&d->lock);
	cancel_delayed_work_sync(&d->timeout_work);
}

/* Does the calling process act for the engine of d? */
bool gs_engine_here(const struct gs_domain *d)
{
	return d->shared || task_tgid(current) == d->owner_pid;
}

struct gs_domain *gs_domain_from_fd(int fd)
{
	struct gs_file *gf;
	struct gs_domain *d;
	struct file *file;

	file = fget(fd);
	if (!file)
		return ERR_PTR(-EBADF);
	if (file->f_op != &gs_domain_fops) {
		fput(file);
		return ERR_PTR(-EINVAL);
	}
	gf = file->private_data;
	if (gf->role == GPUSLEEP_ROLE_AGENT) {
		fput(file);
		return ERR_PTR(-EPERM);
	}
	d = gf->d;
	kref_get(&d->kref);
	fput(file);
	return d;
}

static int gs_same_file(const void *p, struct file *file, unsigned int fd)
{
	return p == file;
}

/*
 * Every close of an engine fd, in any process, passes here (close, exec,
 * exit). Unless the domain is shared, it dies with its creating process:
 * when the creator closes its last copy of the engine fd, even if a
 * forked child still holds one (Python multiprocessing, a fork without
 * exec). id is the fd table being closed from; the closed fd has already
 * left it, so another copy still in it is found by iterate_fd().
 */
static int gs_domain_flush(struct file *file, fl_owner_t id)
{
	struct gs_file *gf = file->private_data;
	struct gs_domain *d = gf->d;

	if (gf->role != GPUSLEEP_ROLE_ENGINE || d->shared ||
	    task_tgid(current) != d->owner_pid)
		return 0;
	if (id && iterate_fd(id, 0, gs_same_file, file))
		return 0;
	gs_domain_kill(d);
	return 0;
}

static int gs_domain_release(struct inode *inode, struct file *file)
{
	struct gs_file *gf = file->private_data;
	struct gs_domain *d = gf->d;

	if (gf->role == GPUSLEEP_ROLE_ENGINE)
		gs_domain_kill(d);
	mutex_lock(&d->lock);
	gs_efd_drop_owner(d, gf);
	if (gf->role == GPUSLEEP_ROLE_AGENT && d->agent == gf)
		gs_op_agent_gone(d);
	mutex_unlock(&d->lock);
	if (gf->role != GPUSLEEP_ROLE_ENGINE)
		gs_user_uncharge(gf->uid, GS_UC_FDS);
	kfree(gf);
	gs_domain_put(d);
	return 0;
}

static struct gs_evq *gs_file_queue(struct gs_file *gf)
{
	switch (gf->role) {
	case GPUSLEEP_ROLE_ENGINE:
		return &gf->d->engine_q;
	case GPUSLEEP_ROLE_AGENT:
		return &gf->d->agent_q;
	default:
		return NULL;
	}
}

static ssize_t gs_domain_read(struct file *file, char __user *buf,
			      size_t count, loff_t *ppos)
{
	struct gs_file *gf = file->private_data;
	struct gs_domain *d = gf->d;
	struct gs_evq *q = gs_file_queue(gf);
	struct gpusleep_event ev, out;
	bool got, dead;
	int ret;

	if (!q || count < GPUSLEEP_EVENT_SIZE_VER0)
		return -EINVAL;
	/*
	 * Whole records only: the largest version that fits the buffer (a
	 * reader built against an older struct gets that version, never the
	 * start of a newer one cut short), and size says which.
	 */
	count = count >= sizeof(ev) ? sizeof(ev) : GPUSLEEP_EVENT_SIZE_VER0;
	if (gf->role == GPUSLEEP_ROLE_ENGINE && !gs_engine_here(d))
		return READ_ONCE(d->dead) ? 0 : -EPERM;
	for (;;) {
		mutex_lock(&d->lock);
		got = gs_evq_pop(q, &ev);
		dead = d->dead || (gf->role == GPUSLEEP_ROLE_AGENT &&
				   d->agent != gf);
		mutex_unlock(&d->lock);
		if (got)
			break;
		if (dead)
			return 0;
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		ret = wait_event_interruptible(q->wq, READ_ONCE(q->count) ||
					       READ_ONCE(d->dead));
		if (ret)
			return ret;
	}
	out = ev;
	out.size = count;
	/* An absolute CLOCK_MONOTONIC time, as the reader's clock reads it. */
	if (out.deadline_ns)
		out.deadline_ns = gs_mono_for_reader(out.deadline_ns);
	if (gs_copy_to_user(buf, &out, count)) {
		/* Unseen: back in line if still current (op.c decides). */
		mutex_lock(&d->lock);
		if (!d->dead)
			gs_op_unread(d, q, &ev);
		mutex_unlock(&d->lock);
		return -EFAULT;
	}
	return count;
}

static __poll_t gs_domain_poll(struct file *file, poll_table *wait)
{
	struct gs_file *gf = file->private_data;
	struct gs_domain *d = gf->d;
	struct gs_evq *q = gs_file_queue(gf);
	__poll_t mask = 0;

	if (q)
		poll_wait(file, &q->wq, wait);
	else
		poll_wait(file, &d->op_wq, wait);
	if (q && READ_ONCE(q->count))
		mask |= EPOLLIN | EPOLLRDNORM;
	/* A controller: an operation finished since it last fetched one. */
	if (!q && READ_ONCE(d->last_done_id) > READ_ONCE(gf->seen_done))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(d->dead))
		mask |= EPOLLHUP;
	return mask;
}

static bool gs_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

/* This fd has fetched the result of operation id (for poll()). */
static void gs_seen(struct gs_file *gf, u64 id)
{
	gs_seen_upto(&gf->seen_done, id);
}

int gs_waiter_add(struct gs_domain *d, u64 id, struct gs_waiter *w)
{
	lockdep_assert_held(&d->lock);
	w->op_id = id;
	w->done = false;
	if (d->last_done_id >= id) {
		if (gs_op_result(d, id, &w->res))
			return -ENOENT;
		w->done = true;
		return 0;
	}
	/* Operations finish in id order: an unfinished one is in flight. */
	list_add_tail(&w->node, &d->waiters);
	return 0;
}

int gs_waiter_wait(struct mutex *lock, wait_queue_head_t *wq,
		   struct gs_waiter *w, ktime_t deadline)
{
	int ret;

	ret = gs_wait_until(*wq, READ_ONCE(w->done), deadline);

	mutex_lock(lock);
	if (w->done)
		ret = 0;	/* finished meanwhile: the result wins */
	else
		list_del_init(&w->node);	/* nothing is kept */
	mutex_unlock(lock);
	return ret;
}

/*
 * RELEASE, RESUME. Blocking, the call waits for the operation it started
 * and returns its outcome; interrupted by any signal (a stop signal too,
 * as epoll_wait(2) is), it returns -EINTR with op_id written before the
 * wait, never -ERESTARTSYS: a restart would start another operation. The
 * operation goes on; the caller waits for it by id (WAIT). Nothing of the
 * call is kept (docs/blocking-and-lifetimes.md).
 */
static long gs_ioc_op(struct gs_file *gf, unsigned int cmd,
		      const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gs_waiter w = { .node = LIST_HEAD_INIT(w.node) };
	struct gpusleep_op req;
	bool block;
	long ret;

	if (gf->role == GPUSLEEP_ROLE_AGENT)
		return -EPERM;
	ret = gs_uarg_in(ua, &req, sizeof(req));
	if (ret)
		return ret;
	/* The request's own form first, before any state is read. */
	ret = gs_op_req_valid(cmd == GPUSLEEP_IOC_RELEASE ? GPUSLEEP_OP_RELEASE :
			      GPUSLEEP_OP_RESUME, &req);
	if (ret)
		return gs_uarg_out(ua, &req, sizeof(req)) ? -EFAULT : ret;
	block = !(req.flags & GPUSLEEP_OPF_NONBLOCK);

	mutex_lock(&d->lock);
	if (d->dead)
		ret = -ENODEV;
	else if (cmd == GPUSLEEP_IOC_RELEASE)
		ret = gs_op_release(d, &req);
	else
		ret = gs_op_resume(d, &req);
	/* Registered under the same lock: no result can slip by. */
	if (!ret && block)
		ret = gs_waiter_add(d, req.op_id, &w);
	mutex_unlock(&d->lock);
	if (ret == -ENODEV)
		return ret;

	/* Tell the caller the id (or why it was refused) before waiting. */
	if (gs_uarg_out(ua, &req, sizeof(req))) {
		ret = -EFAULT;
		goto out_unwait;
	}
	if (ret || !block)
		return ret;

	if (!w.done) {
		ret = gs_waiter_wait(&d->lock, &d->op_wq, &w, 0);
		if (ret)
			return -EINTR;	/* op_id is written: WAIT for it */
	}
	req.reason = w.res.reason;
	if (gs_uarg_out(ua, &req, sizeof(req)))
		return -EFAULT;
	gs_seen(gf, w.op_id);
	return w.res.error ? gs_reason_errno(w.res.reason) : 0;

out_unwait:
	mutex_lock(&d->lock);
	list_del_init(&w.node);
	mutex_unlock(&d->lock);
	return ret;
}

/*
 * WAIT. Interrupted, it writes result.op_id (the operation it waited for,
 * 0 resolved; the rest of result zero) and leaves its inputs as they
 * were. Only a wait for a named op_id without a deadline is restarted
 * (-ERESTARTSYS: after a stop signal, or a handler with SA_RESTART): the
 * restart asks exactly what the first call asked. A wait for the newest
 * (op_id 0) could resolve to another operation, and a relative timeout
 * would start again: those return -EINTR, and the caller goes on with
 * result.op_id and what is left of its own deadline.
 */
static long gs_ioc_wait(struct gs_file *gf, const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gs_waiter w = { .node = LIST_HEAD_INIT(w.node) };
	struct gpusleep_wait wt;
	ktime_t deadline = 0;
	long ret;
	u64 id;

	ret = gs_uarg_in(ua, &wt, sizeof(wt));
	if (ret)
		return ret;
	/* result is output only and ignored on input. */
	if (wt.pad || !gs_zero(wt.reserved, sizeof(wt.reserved)))
		return -EINVAL;

	mutex_lock(&d->lock);
	id = wt.op_id ? wt.op_id : d->next_op_id - 1;
	ret = (!id || id >= d->next_op_id) ? -ENOENT : 0;
	if (!ret)
		ret = gs_waiter_add(d, id, &w);
	mutex_unlock(&d->lock);
	if (ret)
		return ret;
	if (wt.timeout_ms)
		deadline = ktime_add_ms(ktime_get(), wt.timeout_ms);

	if (!w.done) {
		ret = gs_waiter_wait(&d->lock, &d->op_wq, &w, deadline);
		if (ret == -ERESTARTSYS) {
			if (!wt.op_id || wt.timeout_ms)
				ret = -EINTR;
			memset(&wt.result, 0, sizeof(wt.result));
			wt.result.op_id = id;
			if (gs_uarg_out(ua, &wt, sizeof(wt)))
				return -EFAULT;
		}
		if (ret)
			return ret;
	}
	wt.op_id = w.op_id;
	wt.result = w.res;
	if (gs_uarg_out(ua, &wt, sizeof(wt)))
		return -EFAULT;
	gs_seen(gf, w.op_id);
	return 0;
}

static long gs_ioc_complete(struct gs_file *gf, const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gs_group *g = NULL;
	struct gpusleep_complete c;
	long ret;

	if (gf->role == GPUSLEEP_ROLE_CONTROLLER ||
	    (gf->role == GPUSLEEP_ROLE_ENGINE && !gs_engine_here(d)))
		return -EPERM;
	ret = gs_uarg_in(ua, &c, sizeof(c));
	if (ret)
		return ret;
	/*
	 * Resident memory is the agent's to say, after a pause, with whose
	 * view it is: never bytes without a source.
	 */
	if (c.pad || c.resident_source > GPUSLEEP_RESIDENT_DEVICE ||
	    (c.resident_bytes && !c.resident_source) ||
	    ((c.resident_source || c.resident_bytes) &&
	     (gf->role != GPUSLEEP_ROLE_AGENT ||
	      c.type != GPUSLEEP_EV_PAUSE_TAG)))
		return -EINVAL;
	/* The answer's own form, before the domain's state is read. */
	ret = gs_op_complete_valid(&c);
	if (ret)
		return ret;

	mutex_lock(&d->lock);
	if (d->dead) {
		ret = -ENODEV;
	} else if (gf->role == GPUSLEEP_ROLE_AGENT && d->agent != gf) {
		ret = -ENOTCONN;
	} else {
		/*
		 * The answer a group waits for (a drain, an unmap): this
		 * thread moves the group on itself after the unlock rather
		 * than waking a kworker for it.
		 */
		d->group_defer = true;
		ret = gs_op_complete(d, gf, &c);
		d->group_defer = false;
		g = gs_group_due(d);
	}
	mutex_unlock(&d->lock);
	if (g)
		gs_group_answered(g);
	return ret;
}

/* The commands of a domain fd, with the first size of their struct. */
static const struct {
	unsigned int cmd;
	size_t ver0;
} gs_domain_cmds[] = {
	{ GPUSLEEP_IOC_RELEASE,		GPUSLEEP_OP_SIZE_VER0 },
	{ GPUSLEEP_IOC_RESUME,		GPUSLEEP_OP_SIZE_VER0 },
	{ GPUSLEEP_IOC_IS_SLEEPING,	0 },
	{ GPUSLEEP_IOC_GET_STATE,	GPUSLEEP_STATE_SIZE_VER0 },
	{ GPUSLEEP_IOC_WAIT,		GPUSLEEP_WAIT_SIZE_VER0 },
	{ GPUSLEEP_IOC_EVENTFD,		GPUSLEEP_EVENTFD_SIZE_VER0 },
	{ GPUSLEEP_IOC_COMPLETE,	GPUSLEEP_COMPLETE_SIZE_VER0 },
	{ GPUSLEEP_IOC_GRANT,		GPUSLEEP_GRANT_SIZE_VER0 },
	{ GPUSLEEP_IOC_GET_TAGS,	GPUSLEEP_TAGS_SIZE_VER0 },
	{ GPUSLEEP_IOC_REPORT,		GPUSLEEP_REPORT_SIZE_VER0 },
	{ GPUSLEEP_IOC_SET_TENANT,	GPUSLEEP_TENANT_SET_SIZE_VER0 },
	{ GPUSLEEP_IOC_GET_TENANT,	GPUSLEEP_TENANT_SIZE_VER0 },
};

/* The known command cmd is (any struct size from its first on), or 0. */
static unsigned int gs_domain_cmd(unsigned int cmd, unsigned long arg,
				  struct gs_uarg *ua, int *err)
{
	unsigned int i;

	*err = -ENOTTY;
	for (i = 0; i < ARRAY_SIZE(gs_domain_cmds); i++) {
		if (_IOC_TYPE(cmd) != _IOC_TYPE(gs_domain_cmds[i].cmd) ||
		    _IOC_NR(cmd) != _IOC_NR(gs_domain_cmds[i].cmd))
			continue;
		*err = gs_uarg_init(ua, cmd, arg, gs_domain_cmds[i].cmd,
				    gs_domain_cmds[i].ver0);
		return *err ? 0 : gs_domain_cmds[i].cmd;
	}
	return 0;
}

/* GRANT: the engine makes an fd of a role for whom it trusts. */
static long gs_ioc_grant(struct gs_file *gf, const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gpusleep_grant g;
	int ret;

	if (gf->role != GPUSLEEP_ROLE_ENGINE || !gs_engine_here(d))
		return -EPERM;
	ret = gs_uarg_in(ua, &g, sizeof(g));
	if (ret)
		return ret;
	if (g.flags || !gs_zero(g.reserved, sizeof(g.reserved)) ||
	    (g.role != GPUSLEEP_ROLE_AGENT &&
	     g.role != GPUSLEEP_ROLE_CONTROLLER))
		return -EINVAL;
	if (READ_ONCE(d->dead))
		return -ENODEV;
	kref_get(&d->kref);	/* passes to the new fd */
	ret = gs_domain_open_fd(d, g.role, true);
	if (ret < 0)
		gs_domain_put(d);
	return ret;
}

/* GET_TAGS: the declaration, with each tag's generation (any role). */
static noinline_for_stack long gs_ioc_get_tags(struct gs_file *gf,
					       const struct gs_uarg *ua)
{
	struct gs_domain *d = gf->d;
	struct gpusleep_tags t;

	mutex_lock(&d->lock);
	gs_tags_fill(d, &t);
	mutex_unlock(&d->lock);
	return gs_uarg_out(ua, &t, sizeof(t)) ? -EFAULT : 0;
}

static long gs_domain_ioctl(struct file *file, unsigned int cmd,
			    unsigned long arg)
{
	struct gs_file *gf = file->private_data;
	struct gs_domain *d = gf->d;
	struct gpusleep_state st;
	struct gpusleep_eventfd efd;
	struct gs_uarg ua;
	int ret;

	/* The one-word question first: no argument, no lock. */
	if (cmd == GPUSLEEP_IOC_IS_SLEEPING)
		return arg ? -EINVAL : !!READ_ONCE(d->released);
	switch (gs_domain_cmd(cmd, arg, &ua, &ret)) {
	case GPUSLEEP_IOC_RELEASE:
		return gs_ioc_op(gf, GPUSLEEP_IOC_RELEASE, &ua);
	case GPUSLEEP_IOC_RESUME:
		return gs_ioc_op(gf, GPUSLEEP_IOC_RESUME, &ua);
	case GPUSLEEP_IOC_IS_SLEEPING:
		if (arg)
			return -EINVAL;
		return READ_ONCE(d->released) ? 1 : 0;
	case GPUSLEEP_IOC_GET_STATE:
		mutex_lock(&d->lock);
		gs_fill_state(d, &st);
		mutex_unlock(&d->lock);
		if (gs_uarg_out(&ua, &st, sizeof(st)))
			return -EFAULT;
		gs_seen(gf, st.last.op_id);
		return 0;
	case GPUSLEEP_IOC_WAIT:
		return gs_ioc_wait(gf, &ua);
	case GPUSLEEP_IOC_EVENTFD:
		ret = gs_uarg_in(&ua, &efd, sizeof(efd));
		return ret ? ret : gs_efd_set(d, gf, &efd);
	case GPUSLEEP_IOC_COMPLETE:
		return gs_ioc_complete(gf, &ua);
	case GPUSLEEP_IOC_GRANT:
		return gs_ioc_grant(gf, &ua);
	case GPUSLEEP_IOC_GET_TAGS:
		return gs_ioc_get_tags(gf, &ua);
	case GPUSLEEP_IOC_REPORT:
		return gs_ioc_report(gf, &ua);
	case GPUSLEEP_IOC_SET_TENANT:
		/* The tenant's own statement: its engine's, in its process. */
		if (gf->role != GPUSLEEP_ROLE_ENGINE || !gs_engine_here(d))
			return -EPERM;
		return gs_ioc_set_tenant(gf, &ua);
	case GPUSLEEP_IOC_GET_TENANT:
		return gs_ioc_get_tenant(gf, &ua);
	default:
		return ret;	/* -ENOTTY, or -EINVAL for a struct too small */
	}
}

static const struct file_operations gs_domain_fops = {
	.owner		= THIS_MODULE,
	.flush		= gs_domain_flush,
	.release	= gs_domain_release,
	.read		= gs_domain_read,
	.poll		= gs_domain_poll,
	.unlocked_ioctl	= gs_domain_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};
