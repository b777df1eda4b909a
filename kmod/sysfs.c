// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: /sys/class/gpusleep/ for node tooling.
 *
 * One device per live domain, /sys/class/gpusleep/domain<ID>/, with one
 * read-only ASCII value per file (docs/ABI/testing/sysfs-class-gpusleep).
 * The attributes come from the class's dev_groups, so they exist before the
 * KOBJ_ADD uevent. The class itself has "version" and "domains".
 *
 * show() takes domain->lock. The device is therefore never removed under
 * that lock: gs_sysfs_remove() runs from the engine fd's release before the
 * lock is taken, and device_unregister() waits for every show() in flight.
 * gs_sysfs_changed() runs under domain->lock; it only calls kernfs_notify()
 * (an RCU read section, a spinlock and queue_work()) on nodes looked up
 * at creation, when their value changed, or queues its own work to.
 */
#include <linux/device.h>
#include <linux/kdev_t.h>
#include <linux/kernfs.h>
#include <linux/pid.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/uidgid.h>

#include "compat.h"
#include "gpusleep.h"

/* Everything a show() needs, copied under domain->lock. */
struct gs_snap {
	struct gpusleep_state st;
	struct gs_counters cnt;
	u32 last_reason;
	u64 last_release_ns;
	u64 last_resume_ns;
};

static void gs_snap(struct gs_domain *d, struct gs_snap *s)
{
	mutex_lock(&d->lock);
	gs_fill_state(d, &s->st);
	s->cnt = d->cnt;
	s->last_reason = d->last_reason;
	s->last_release_ns = d->last_release_ns;
	s->last_resume_ns = d->last_resume_ns;
	mutex_unlock(&d->lock);
}

static struct gs_domain *gs_dev_domain(struct device *dev)
{
	return dev_get_drvdata(dev);
}

/* Fixed at creation: no lock needed. */
static ssize_t id_show(struct device *dev, struct device_attribute *attr,
		       char *buf)
{
	return sysfs_emit(buf, "%u\n", gs_dev_domain(dev)->id);
}
static DEVICE_ATTR_RO(id);

static ssize_t name_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%s\n", gs_dev_domain(dev)->name);
}
static DEVICE_ATTR_RO(name);

static ssize_t gpu_show(struct device *dev, struct device_attribute *attr,
			char *buf)
{
	return sysfs_emit(buf, "%s\n", gs_dev_domain(dev)->gpu);
}
static DEVICE_ATTR_RO(gpu);

static ssize_t owner_uid_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  from_kuid_munged(&init_user_ns,
					   gs_dev_domain(dev)->owner));
}
static DEVICE_ATTR_RO(owner_uid);

/* The name of the group the domain is a rank of, or empty. */
static ssize_t group_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);
	char name[GPUSLEEP_NAME_LEN] = "";

	mutex_lock(&d->lock);
	if (d->group)
		gs_group_name(d->group, name, sizeof(name));
	mutex_unlock(&d->lock);
	return sysfs_emit(buf, "%s\n", name);
}
static DEVICE_ATTR_RO(group);

/*
 * The node-wide id of that group (0: none), as CREATE_GROUP and OPEN_GROUP
 * return it: names are scoped to their creator, ids tell groups apart.
 */
static ssize_t group_id_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);
	u32 id = 0;

	mutex_lock(&d->lock);
	if (d->group)
		id = gs_group_id(d->group);
	mutex_unlock(&d->lock);
	return sysfs_emit(buf, "%u\n", id);
}
static DEVICE_ATTR_RO(group_id);

static ssize_t owner_pid_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	/* In the reader's pid namespace; 0 where the creator is not seen. */
	return sysfs_emit(buf, "%d\n", pid_vnr(gs_dev_domain(dev)->owner_pid));
}
static DEVICE_ATTR_RO(owner_pid);

static ssize_t state_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct gs_snap s;

	gs_snap(gs_dev_domain(dev), &s);
	return sysfs_emit(buf, "%s\n", gs_state_name(s.st.state));
}
static DEVICE_ATTR_RO(state);

/* A tag set as a comma-separated list of the domain's names, in order. */
static ssize_t gs_emit_tags(struct gs_domain *d, char *buf, u32 tags)
{
	char names[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN];

	gs_tags_format(d, tags, names, sizeof(names));
	return sysfs_emit(buf, "%s\n", names);
}

/* A tag set of the snapshot (a field of its state), as names. */
#define GS_TAGS_ATTR(_name, _field)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct gs_domain *d = gs_dev_domain(dev);			\
	struct gs_snap s;						\
									\
	gs_snap(d, &s);							\
	return gs_emit_tags(d, buf, s.st._field);			\
}									\
static DEVICE_ATTR_RO(_name)

GS_TAGS_ATTR(released_tags, released);
GS_TAGS_ATTR(unconfirmed_tags, unconfirmed);
GS_TAGS_ATTR(shortfall_tags, shortfall);

#define GS_FLAG_ATTR(_name, _flag)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct gs_snap s;						\
									\
	gs_snap(gs_dev_domain(dev), &s);				\
	return sysfs_emit(buf, "%d\n", !!(s.st.flags & (_flag)));	\
}									\
static DEVICE_ATTR_RO(_name)

GS_FLAG_ATTR(drain_pending, GPUSLEEP_SF_DRAIN_PENDING);
GS_FLAG_ATTR(agent_attached, GPUSLEEP_SF_AGENT_ATTACHED);
GS_FLAG_ATTR(kv_release_allowed, GPUSLEEP_SF_KV_RELEASE_ALLOWED);

/* A u64 of the snapshot, as an expression of s. */
#define GS_U64_ATTR(_name, _expr)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct gs_snap s;						\
									\
	gs_snap(gs_dev_domain(dev), &s);				\
	return sysfs_emit(buf, "%llu\n", (unsigned long long)(_expr));	\
}									\
static DEVICE_ATTR_RO(_name)

GS_U64_ATTR(op_in_flight, s.st.op_in_flight);
GS_U64_ATTR(releases, s.cnt.releases);
GS_U64_ATTR(resumes, s.cnt.resumes);
GS_U64_ATTR(failures, s.cnt.failures);
GS_U64_ATTR(cancels, s.cnt.cancels);
GS_U64_ATTR(timeouts, s.cnt.timeouts);
GS_U64_ATTR(shortfalls, s.cnt.shortfalls);
GS_U64_ATTR(last_release_us, div_u64(s.last_release_ns, NSEC_PER_USEC));
GS_U64_ATTR(last_resume_us, div_u64(s.last_resume_ns, NSEC_PER_USEC));
/* The declaration: names and kinds, one per tag in order; no lock. */
static ssize_t tags_show(struct device *dev, struct device_attribute *attr,
			 char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);

	return gs_emit_tags(d, buf, d->tags.all);
}
static DEVICE_ATTR_RO(tags);

static ssize_t tag_kinds_show(struct device *dev,
			      struct device_attribute *attr, char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);
	int len = 0;
	u32 i;

	for (i = 0; i < d->tags.nr; i++)
		len += sysfs_emit_at(buf, len, "%s%s", i ? "," : "",
				     gs_tag_kind_name(d->tags.tag[i].kind));
	return len + sysfs_emit_at(buf, len, "\n");
}
static DEVICE_ATTR_RO(tag_kinds);

/* An array of the snapshot, one value per declared tag, in order. */
#define GS_TAG_U64S_ATTR(_name, _array)					\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct gs_domain *d = gs_dev_domain(dev);			\
	struct gs_snap s;						\
	int len = 0;							\
	u32 i;								\
									\
	gs_snap(d, &s);							\
	for (i = 0; i < d->tags.nr; i++)				\
		len += sysfs_emit_at(buf, len, "%s%llu", i ? "," : "",	\
				     (unsigned long long)s.st._array[i]); \
	return len + sysfs_emit_at(buf, len, "\n");			\
}									\
static DEVICE_ATTR_RO(_name)

GS_TAG_U64S_ATTR(tag_bytes_released, bytes_released);
GS_TAG_U64S_ATTR(tag_freed_bytes, freed_bytes);
GS_TAG_U64S_ATTR(tag_generations, generation);

GS_U64_ATTR(resident_bytes, s.st.resident_bytes);

/* Whose view resident_bytes is. */
static ssize_t resident_source_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	static const char * const names[] = {
		[0]				= "unknown",
		[GPUSLEEP_RESIDENT_PROCESS]	= "process",
		[GPUSLEEP_RESIDENT_DEVICE]	= "device",
	};
	struct gs_snap s;
	u32 src;

	gs_snap(gs_dev_domain(dev), &s);
	src = s.st.resident_source;
	return sysfs_emit(buf, "%s\n",
			  src < ARRAY_SIZE(names) ? names[src] : "unknown");
}
static DEVICE_ATTR_RO(resident_source);

/* ----------------------------------------------------- the tenant */

/* A value of the tenant, read under domain->lock into a u64. */
#define GS_TENANT_ATTR(_name, _fmt, _type, _expr)			\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	struct gs_domain *d = gs_dev_domain(dev);			\
	_type v;							\
									\
	mutex_lock(&d->lock);						\
	v = (_expr);							\
	mutex_unlock(&d->lock);						\
	return sysfs_emit(buf, _fmt "\n", v);				\
}									\
static DEVICE_ATTR_RO(_name)

GS_TENANT_ATTR(priority, "%d", int, d->priority);
GS_TENANT_ATTR(yieldable, "%d", int,
	       !!(d->tenant_flags & GPUSLEEP_TENF_YIELDABLE));
GS_TENANT_ATTR(host_bytes, "%llu", unsigned long long, d->host_charged);
GS_TENANT_ATTR(lease_id, "%llu", unsigned long long, d->lease_id);
GS_TENANT_ATTR(resident_torch_bytes, "%llu", unsigned long long,
	       d->reported ? d->report.torch_reserved_bytes : 0);
GS_TENANT_ATTR(resident_graph_bytes, "%llu", unsigned long long,
	       d->reported ? d->report.graph_pool_bytes : 0);
GS_TENANT_ATTR(resident_process_bytes, "%llu", unsigned long long,
	       d->reported ? d->report.process_bytes : 0);

static const char *gs_resident_name(u32 src)
{
	switch (src) {
	case GPUSLEEP_RESIDENT_PROCESS:
		return "process";
	case GPUSLEEP_RESIDENT_DEVICE:
		return "device";
	default:
		return "unknown";
	}
}

static ssize_t resident_process_source_show(struct device *dev,
					    struct device_attribute *attr,
					    char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);
	u32 src;

	mutex_lock(&d->lock);
	src = d->reported ? d->report.process_source : 0;
	mutex_unlock(&d->lock);
	return sysfs_emit(buf, "%s\n", gs_resident_name(src));
}
static DEVICE_ATTR_RO(resident_process_source);

/* The GPU's UUID as reported (8-4-4-4-12 hex), empty before a report. */
static ssize_t gpu_uuid_show(struct device *dev,
			     struct device_attribute *attr, char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);
	u8 uuid[16];
	bool reported;

	mutex_lock(&d->lock);
	reported = d->reported;
	memcpy(uuid, d->report.gpu_uuid, sizeof(uuid));
	mutex_unlock(&d->lock);
	if (!reported)
		return sysfs_emit(buf, "\n");
	return sysfs_emit(buf, "%pUb\n", uuid);
}
static DEVICE_ATTR_RO(gpu_uuid);

static ssize_t leased_tags_show(struct device *dev,
				struct device_attribute *attr, char *buf)
{
	struct gs_domain *d = gs_dev_domain(dev);
	u32 tags;

	mutex_lock(&d->lock);
	tags = d->leased;
	mutex_unlock(&d->lock);
	return gs_emit_tags(d, buf, tags);
}
static DEVICE_ATTR_RO(leased_tags);

/* The report's tags, one value per declared tag (empty before a report). */
static ssize_t gs_emit_report(struct device *dev, char *buf,
			      const char *(*name)(const struct gpusleep_report_tag *),
			      u64 (*val)(const struct gpusleep_report_tag *))
{
	struct gs_domain *d = gs_dev_domain(dev);
	struct gpusleep_report_tag t[GPUSLEEP_MAX_TAGS];
	bool reported;
	int len = 0;
	u32 i;

	mutex_lock(&d->lock);
	reported = d->reported;
	memcpy(t, d->report.tags, sizeof(t));
	mutex_unlock(&d->lock);
	for (i = 0; reported && i < d->tags.nr; i++) {
		if (name)
			len += sysfs_emit_at(buf, len, "%s%s", i ? "," : "",
					     name(&t[i]));
		else
			len += sysfs_emit_at(buf, len, "%s%llu", i ? "," : "",
					     (unsigned long long)val(&t[i]));
	}
	return len + sysfs_emit_at(buf, len, "\n");
}

static const char *gs_policy_name(const struct gpusleep_report_tag *t)
{
	return t->policy == GPUSLEEP_POLICY_BACKUP ? "backup" : "discard";
}

static const char *gs_content_name(const struct gpusleep_report_tag *t)
{
	switch (t->content) {
	case GPUSLEEP_CONTENT_KEPT:
		return "kept";
	case GPUSLEEP_CONTENT_ZEROED:
		return "zeroed";
	default:
		return "undefined";
	}
}

static u64 gs_tag_verified(const struct gpusleep_report_tag *t)
{
	return !!(t->flags & GPUSLEEP_RTF_VERIFIED);
}

static u64 gs_tag_size(const struct gpusleep_report_tag *t)
{
	return t->size_bytes;
}

static u64 gs_tag_mapped(const struct gpusleep_report_tag *t)
{
	return t->mapped_bytes;
}

static u64 gs_tag_host(const struct gpusleep_report_tag *t)
{
	return t->host_bytes;
}

#define GS_REPORT_ATTR(_name, _namefn, _valfn)				\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return gs_emit_report(dev, buf, _namefn, _valfn);		\
}									\
static DEVICE_ATTR_RO(_name)

GS_REPORT_ATTR(tag_policy, gs_policy_name, NULL);
GS_REPORT_ATTR(tag_content, gs_content_name, NULL);
GS_REPORT_ATTR(tag_verified, NULL, gs_tag_verified);
GS_REPORT_ATTR(tag_size_bytes, NULL, gs_tag_size);
GS_REPORT_ATTR(tag_mapped_bytes, NULL, gs_tag_mapped);
GS_REPORT_ATTR(tag_host_bytes, NULL, gs_tag_host);

static ssize_t last_error_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	struct gs_snap s;

	gs_snap(gs_dev_domain(dev), &s);
	return sysfs_emit(buf, "%s\n", gs_reason_name(s.last_reason));
}
static DEVICE_ATTR_RO(last_error);

static struct attribute *gs_domain_attrs[] = {
	&dev_attr_id.attr,
	&dev_attr_name.attr,
	&dev_attr_gpu.attr,
	&dev_attr_owner_uid.attr,
	&dev_attr_group.attr,
	&dev_attr_group_id.attr,
	&dev_attr_owner_pid.attr,
	&dev_attr_state.attr,
	&dev_attr_released_tags.attr,
	&dev_attr_unconfirmed_tags.attr,
	&dev_attr_shortfall_tags.attr,
	&dev_attr_drain_pending.attr,
	&dev_attr_agent_attached.attr,
	&dev_attr_kv_release_allowed.attr,
	&dev_attr_op_in_flight.attr,
	&dev_attr_releases.attr,
	&dev_attr_resumes.attr,
	&dev_attr_failures.attr,
	&dev_attr_cancels.attr,
	&dev_attr_timeouts.attr,
	&dev_attr_shortfalls.attr,
	&dev_attr_last_error.attr,
	&dev_attr_last_release_us.attr,
	&dev_attr_last_resume_us.attr,
	&dev_attr_tags.attr,
	&dev_attr_tag_kinds.attr,
	&dev_attr_tag_bytes_released.attr,
	&dev_attr_tag_freed_bytes.attr,
	&dev_attr_tag_generations.attr,
	&dev_attr_resident_bytes.attr,
	&dev_attr_resident_source.attr,
	&dev_attr_priority.attr,
	&dev_attr_yieldable.attr,
	&dev_attr_gpu_uuid.attr,
	&dev_attr_host_bytes.attr,
	&dev_attr_lease_id.attr,
	&dev_attr_leased_tags.attr,
	&dev_attr_tag_policy.attr,
	&dev_attr_tag_content.attr,
	&dev_attr_tag_verified.attr,
	&dev_attr_tag_size_bytes.attr,
	&dev_attr_tag_mapped_bytes.attr,
	&dev_attr_tag_host_bytes.attr,
	&dev_attr_resident_torch_bytes.attr,
	&dev_attr_resident_graph_bytes.attr,
	&dev_attr_resident_process_bytes.attr,
	&dev_attr_resident_process_source.attr,
	NULL
};
ATTRIBUTE_GROUPS(gs_domain);

static ssize_t version_show(GS_CLASS_CONST struct class *class,
			    GS_CLASS_CONST struct class_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%d\n", GPUSLEEP_API_VERSION);
}
static CLASS_ATTR_RO(version);

static ssize_t domains_show(GS_CLASS_CONST struct class *class,
			    GS_CLASS_CONST struct class_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%u\n", gs_ids_count());
}
static CLASS_ATTR_RO(domains);

/* Leases held now (taking, held or returning). */
static ssize_t leases_show(GS_CLASS_CONST struct class *class,
			   GS_CLASS_CONST struct class_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%u\n", gs_leases_held());
}
static CLASS_ATTR_RO(leases);

/* Reclaims asked for since the module was loaded (the newest id). */
static ssize_t reclaims_show(GS_CLASS_CONST struct class *class,
			     GS_CLASS_CONST struct class_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%llu\n",
			  (unsigned long long)gs_reclaims_started());
}
static CLASS_ATTR_RO(reclaims);

static struct attribute *gs_class_attrs[] = {
	&class_attr_version.attr,
	&class_attr_domains.attr,
	&class_attr_leases.attr,
	&class_attr_reclaims.attr,
	NULL
};
ATTRIBUTE_GROUPS(gs_class);

static struct class gs_class = {
	.name		= GPUSLEEP_DEVICE_NAME,
	.class_groups	= gs_class_groups,
	.dev_groups	= gs_domain_groups,
};

int gs_sysfs_init(void)
{
	return class_register(&gs_class);
}

void gs_sysfs_exit(void)
{
	class_unregister(&gs_class);
}

static void gs_dev_release(struct device *dev)
{
	kfree(dev);
}

/*
 * Called at creation, before the engine fd exists. device_create(), but
 * without power management: a domain is no hardware, and the power/
 * directory would cost every domain about a kilobyte of kernfs nodes
 * (docs/benchmarks.md, 8b) and a place on the suspend list.
 */
int gs_sysfs_add(struct gs_domain *d)
{
	struct kernfs_node *kn_state, *kn_released, *kn_leased, *kn_host;
	struct device *dev;
	int ret;

	dev = gs_kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	device_initialize(dev);
	dev->class = &gs_class;
	dev->release = gs_dev_release;
	dev_set_drvdata(dev, d);
	device_set_pm_not_required(dev);
	ret = dev_set_name(dev, "domain%u", d->id);
	if (!ret)
		ret = device_add(dev);
	if (ret) {
		put_device(dev);	/* frees the name and dev */
		return ret;
	}
	/* A missing node only costs a poll() wake-up, not the domain. */
	kn_state = sysfs_get_dirent(dev->kobj.sd, "state");
	kn_released = sysfs_get_dirent(dev->kobj.sd, "released_tags");
	kn_leased = sysfs_get_dirent(dev->kobj.sd, "leased_tags");
	kn_host = sysfs_get_dirent(dev->kobj.sd, "host_bytes");
	/* A controller may have attached already (the id is public). */
	mutex_lock(&d->lock);
	d->dev = dev;
	d->kn_state = kn_state;
	d->kn_released = kn_released;
	d->kn_leased = kn_leased;
	d->kn_host = kn_host;
	mutex_unlock(&d->lock);
	return 0;
}

/* Not under domain->lock: device_unregister() waits for show(). */
void gs_sysfs_remove(struct gs_domain *d)
{
	struct kernfs_node *kn_state, *kn_released, *kn_leased, *kn_host;
	struct device *dev;

	mutex_lock(&d->lock);
	dev = d->dev;
	kn_state = d->kn_state;
	kn_released = d->kn_released;
	kn_leased = d->kn_leased;
	kn_host = d->kn_host;
	d->dev = NULL;
	d->kn_state = NULL;
	d->kn_released = NULL;
	d->kn_leased = NULL;
	d->kn_host = NULL;
	d->sysfs_owed = 0;
	mutex_unlock(&d->lock);
	/* Nothing queues it now (d->dev is NULL); it takes the lock. */
	cancel_delayed_work_sync(&d->sysfs_work);
	if (!dev)
		return;
	sysfs_put(kn_host);
	sysfs_put(kn_leased);
	sysfs_put(kn_released);
	sysfs_put(kn_state);
	device_unregister(dev);
}

/*
 * Each real change of state, released_tags, leased_tags and host_bytes
 * is notified, as kernfs
 * means it: kernfs_notify() wakes poll() on an open file and, from its
 * work, tells fsnotify (inotify IN_MODIFY, systemd path units), whose
 * watchers hold no file open. Whether anyone has the file open says
 * nothing about whether anyone watches, so every change is notified.
 *
 * Each kernfs_notify() queues the kernel's kernfs work, a kworker
 * wake-up: five a release/resume cycle (docs/benchmarks.md, 2a). So a
 * change is notified at once when none was in the last
 * GS_SYSFS_QUIET_MS, and the changes that follow within that window are
 * notified together at its end (from sysfs_work): never lost (a node
 * owed a notification gets one, whatever its value then), at most
 * GS_SYSFS_QUIET_MS late, and a busy domain costs two wake-ups per window
 * rather than five per cycle. Readers read the value then, as they would
 * after any notification: sysfs has current values, not a history.
 */
#define GS_SYSFS_QUIET_MS	10
#define GS_SYSFS_STATE		BIT(0)
#define GS_SYSFS_RELEASED	BIT(1)
#define GS_SYSFS_LEASED		BIT(2)
#define GS_SYSFS_HOST		BIT(3)

/* Notify the nodes of owed; domain->lock held (the nodes stay). */
static void gs_sysfs_notify(struct gs_domain *d, u32 owed)
{
	lockdep_assert_held(&d->lock);
	if ((owed & GS_SYSFS_STATE) && d->kn_state)
		sysfs_notify_dirent(d->kn_state);
	if ((owed & GS_SYSFS_RELEASED) && d->kn_released)
		sysfs_notify_dirent(d->kn_released);
	if ((owed & GS_SYSFS_LEASED) && d->kn_leased)
		sysfs_notify_dirent(d->kn_leased);
	if ((owed & GS_SYSFS_HOST) && d->kn_host)
		sysfs_notify_dirent(d->kn_host);
	d->sysfs_quiet_until = jiffies + msecs_to_jiffies(GS_SYSFS_QUIET_MS);
}

static void gs_sysfs_workfn(struct work_struct *work)
{
	struct gs_domain *d = container_of(to_delayed_work(work),
					   struct gs_domain, sysfs_work);

	mutex_lock(&d->lock);
	if (d->sysfs_owed)
		gs_sysfs_notify(d, d->sysfs_owed);
	d->sysfs_owed = 0;
	mutex_unlock(&d->lock);
}

void gs_sysfs_init_domain(struct gs_domain *d)
{
	INIT_DELAYED_WORK(&d->sysfs_work, gs_sysfs_workfn);
	d->sysfs_quiet_until = jiffies;
}

void gs_sysfs_changed(struct gs_domain *d)
{
	u32 owed = 0;

	lockdep_assert_held(&d->lock);
	/* Only when the value watched really changed. */
	if (d->state != d->notified_state)
		owed |= GS_SYSFS_STATE;
	if (d->released != d->notified_released)
		owed |= GS_SYSFS_RELEASED;
	if (d->leased != d->notified_leased)
		owed |= GS_SYSFS_LEASED;
	if (d->host_charged != d->notified_host)
		owed |= GS_SYSFS_HOST;
	d->notified_state = d->state;
	d->notified_released = d->released;
	d->notified_leased = d->leased;
	d->notified_host = d->host_charged;
	if (!owed || !d->dev)
		return;
	if (!d->sysfs_owed && time_after_eq(jiffies, d->sysfs_quiet_until)) {
		gs_sysfs_notify(d, owed);
		return;
	}
	d->sysfs_owed |= owed;
	/* Not re-armed if pending: the window's changes go together. */
	queue_delayed_work(system_wq, &d->sysfs_work,
			   time_after(d->sysfs_quiet_until, jiffies) ?
			   d->sysfs_quiet_until - jiffies : 0);
}
