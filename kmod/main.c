// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: module init and exit, parameters, the domain id table and the
 * /dev/gpusleep device (API handshake, domain creation, attach).
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/miscdevice.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/idr.h>
#include <linux/mutex.h>
#include <linux/uaccess.h>
#include <linux/ctype.h>
#include <linux/string.h>

#include "gpusleep.h"

unsigned int gs_max_domains = 1024;
module_param_named(max_domains, gs_max_domains, uint, 0644);
MODULE_PARM_DESC(max_domains, "Most domains alive at once (default 1024)");

unsigned int gs_max_eventfds = 4096;
module_param_named(max_eventfds, gs_max_eventfds, uint, 0644);
MODULE_PARM_DESC(max_eventfds, "Most eventfd registrations per domain (default 4096)");

unsigned int gs_drain_timeout_ms = 60000;
module_param_named(drain_timeout_ms, gs_drain_timeout_ms, uint, 0644);
MODULE_PARM_DESC(drain_timeout_ms, "Time an engine has to drain, in ms (default 60000)");

unsigned int gs_step_timeout_ms = 30000;
module_param_named(step_timeout_ms, gs_step_timeout_ms, uint, 0644);
MODULE_PARM_DESC(step_timeout_ms, "Time an agent or engine step has, in ms (default 30000)");

#define GS_FEATURES	(GPUSLEEP_FEAT_EVENTFD | GPUSLEEP_FEAT_TIMEOUTS | \
			 GPUSLEEP_FEAT_WAIT_BY_ID | GPUSLEEP_FEAT_SYSFS | \
			 GPUSLEEP_FEAT_NETLINK | GPUSLEEP_FEAT_DECLARED_TAGS | \
			 GPUSLEEP_FEAT_GROUPS | GPUSLEEP_FEAT_STEP_DEADLINE | \
			 GPUSLEEP_FEAT_STEP_NTF | GPUSLEEP_FEAT_TENANTS)

/* The id table. Lock order: gs_domains_lock before any domain->lock. */
static DEFINE_MUTEX(gs_domains_lock);
static DEFINE_IDR(gs_domains);
static unsigned int gs_nr_domains;
static unsigned int gs_ids_gen = 1;	/* never 0: see nl_dump_check_consistent */

int gs_ids_add(struct gs_domain *d)
{
	int id;

	mutex_lock(&gs_domains_lock);
	if (gs_nr_domains >= gs_max_domains) {
		mutex_unlock(&gs_domains_lock);
		return -ENOSPC;
	}
	id = gs_fault() ? -ENOMEM :
		idr_alloc_cyclic(&gs_domains, d, 1, INT_MAX, GFP_KERNEL);
	if (id >= 0) {
		d->id = id;
		gs_nr_domains++;
		WRITE_ONCE(gs_ids_gen, gs_ids_gen + 1 ? gs_ids_gen + 1 : 1);
	}
	mutex_unlock(&gs_domains_lock);
	return id < 0 ? id : 0;
}

void gs_ids_remove(struct gs_domain *d)
{
	mutex_lock(&gs_domains_lock);
	if (idr_find(&gs_domains, d->id) == d) {
		idr_remove(&gs_domains, d->id);
		gs_nr_domains--;
		WRITE_ONCE(gs_ids_gen, gs_ids_gen + 1 ? gs_ids_gen + 1 : 1);
	}
	mutex_unlock(&gs_domains_lock);
}

/* Look up a live domain and take a reference on it. */
struct gs_domain *gs_ids_get(u32 id)
{
	struct gs_domain *d;

	if (id > INT_MAX)
		return NULL;
	mutex_lock(&gs_domains_lock);
	d = idr_find(&gs_domains, id);
	if (d)
		kref_get(&d->kref);
	mutex_unlock(&gs_domains_lock);
	return d;
}

unsigned int gs_ids_count(void)
{
	return READ_ONCE(gs_nr_domains);
}

struct gs_domain *gs_ids_next(u32 *id)
{
	struct gs_domain *d;
	int next = *id;

	if (*id > INT_MAX)
		return NULL;
	mutex_lock(&gs_domains_lock);
	d = idr_get_next(&gs_domains, &next);
	if (d) {
		kref_get(&d->kref);
		*id = next;
	}
	mutex_unlock(&gs_domains_lock);
	return d;
}

unsigned int gs_ids_generation(void)
{
	return READ_ONCE(gs_ids_gen);
}

static bool gs_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

static long gs_dev_api(const struct gs_uarg *ua)
{
	struct gpusleep_api api;
	u64 need;
	int ret;

	ret = gs_uarg_in(ua, &api, sizeof(api));
	if (ret)
		return ret;
	/* max_domains is output only and ignored on input. */
	if (!gs_zero(api.reserved, sizeof(api.reserved)))
		return -EINVAL;
	need = api.features;
	api.features = GS_FEATURES;
	api.max_domains = gs_max_domains;
	if (gs_uarg_out(ua, &api, sizeof(api)))
		return -EFAULT;
	if (api.api != GPUSLEEP_API_VERSION || (need & ~GS_FEATURES))
		return -EINVAL;
	return 0;
}

/*
 * A label: NUL-terminated inside its array, then only zeros. The name must
 * be 1.. chars of [A-Za-z0-9._:@-]; the GPU identity printable ASCII.
 */
int gs_check_label(const char *s, size_t size, bool name)
{
	size_t len = strnlen(s, size);
	size_t i;

	if (len == size)
		return -ENAMETOOLONG;
	if (name && !len)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		/*
		 * ASCII, checked by value: the kernel's isalnum() takes
		 * Latin-1 letters (0xc0-0xff) too, and sysfs and netlink
		 * carry these labels to tools that expect UTF-8.
		 */
		if (c < 0x20 || c > 0x7e)
			return -EINVAL;
		if (name && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || strchr("._:@-", c)))
			return -EINVAL;
	}
	if (!gs_zero(s + len, size - len))
		return -EINVAL;
	return 0;
}

static long gs_dev_create(const struct gs_uarg *ua)
{
	struct gpusleep_create req;
	struct gs_tagset ts;
	struct gs_domain *d;
	int ret;

	ret = gs_uarg_in(ua, &req, sizeof(req));
	if (ret)
		return ret;
	/* id is output only and ignored on input. */
	if ((req.flags & ~GPUSLEEP_CREATEF_MASK) || req.pad ||
	    (req.caps & ~GPUSLEEP_CAP_ALL) ||
	    !gs_zero(req.reserved, sizeof(req.reserved)))
		return -EINVAL;
	ret = gs_tags_declare(&ts, &req);
	if (ret)
		return ret;
	ret = gs_check_label(req.name, sizeof(req.name), true);
	if (ret)
		return ret;
	ret = gs_check_label(req.gpu, sizeof(req.gpu), false);
	if (ret)
		return ret;

	d = gs_domain_create(&req, &ts);
	if (IS_ERR(d))
		return PTR_ERR(d);
	ret = gs_ids_add(d);
	if (ret)
		goto err_put;
	req.id = d->id;
	if (gs_uarg_out(ua, &req, sizeof(req))) {
		ret = -EFAULT;
		goto err_remove;
	}
	ret = gs_sysfs_add(d);
	if (ret)
		goto err_remove;
	/* The engine fd takes over our reference. */
	ret = gs_domain_open_fd(d, GPUSLEEP_ROLE_ENGINE, false);
	if (ret < 0)
		goto err_sysfs;
	return ret;

err_sysfs:
err_remove:
	/* Someone may have attached in the meantime: they see a dead domain. */
	gs_domain_kill(d);
err_put:
	gs_domain_put(d);
	return ret;
}

static long gs_dev_attach(const struct gs_uarg *ua)
{
	struct gpusleep_attach req;
	struct gs_domain *d;
	int ret;

	ret = gs_uarg_in(ua, &req, sizeof(req));
	if (ret)
		return ret;
	if (req.flags || req.pad || !gs_zero(req.reserved, sizeof(req.reserved)))
		return -EINVAL;
	if (req.role != GPUSLEEP_ROLE_AGENT &&
	    req.role != GPUSLEEP_ROLE_CONTROLLER)
		return -EINVAL;
	d = gs_ids_get(req.id);
	if (!d)
		return -ENOENT;
	ret = gs_domain_open_fd(d, req.role, false);
	if (ret < 0)
		gs_domain_put(d);
	return ret;
}

static long gpusleep_dev_ioctl(struct file *file, unsigned int cmd,
			       unsigned long arg)
{
	struct gs_uarg ua;
	int ret;

	if (_IOC_TYPE(cmd) != GPUSLEEP_IOC_MAGIC)
		return -ENOTTY;
	switch (_IOC_NR(cmd)) {
	case _IOC_NR(GPUSLEEP_IOC_API):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_API,
				   GPUSLEEP_API_SIZE_VER0);
		return ret ? ret : gs_dev_api(&ua);
	case _IOC_NR(GPUSLEEP_IOC_CREATE_DOMAIN):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_CREATE_DOMAIN,
				   GPUSLEEP_CREATE_SIZE_VER0);
		return ret ? ret : gs_dev_create(&ua);
	case _IOC_NR(GPUSLEEP_IOC_ATTACH):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_ATTACH,
				   GPUSLEEP_ATTACH_SIZE_VER0);
		return ret ? ret : gs_dev_attach(&ua);
	case _IOC_NR(GPUSLEEP_IOC_CREATE_GROUP):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_CREATE_GROUP,
				   GPUSLEEP_GROUP_CREATE_SIZE_VER0);
		return ret ? ret : gs_group_create(&ua);
	case _IOC_NR(GPUSLEEP_IOC_OPEN_GROUP):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_OPEN_GROUP,
				   GPUSLEEP_GROUP_CREATE_SIZE_VER0);
		return ret ? ret : gs_group_open(&ua);
	case _IOC_NR(GPUSLEEP_IOC_RECLAIM):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_RECLAIM,
				   GPUSLEEP_RECLAIM_SIZE_VER0);
		return ret ? ret : gs_reclaim(&ua);
	case _IOC_NR(GPUSLEEP_IOC_RECLAIM_WAIT):
		ret = gs_uarg_init(&ua, cmd, arg, GPUSLEEP_IOC_RECLAIM_WAIT,
				   GPUSLEEP_RECLAIM_SIZE_VER0);
		return ret ? ret : gs_reclaim_wait(&ua);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations gpusleep_dev_fops = {
	.owner		= THIS_MODULE,
	.unlocked_ioctl	= gpusleep_dev_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.llseek		= noop_llseek,
};

static struct miscdevice gpusleep_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= GPUSLEEP_DEVICE_NAME,
	.fops	= &gpusleep_dev_fops,
	.mode	= 0666,
};

static int __init gpusleep_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct gpusleep_api) != GPUSLEEP_API_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_create) != GPUSLEEP_CREATE_SIZE_VER1);
	BUILD_BUG_ON(sizeof(struct gpusleep_tags) != GPUSLEEP_TAGS_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_attach) != GPUSLEEP_ATTACH_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_op) != GPUSLEEP_OP_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_result) != GPUSLEEP_RESULT_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_wait) != GPUSLEEP_WAIT_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_state) != GPUSLEEP_STATE_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_eventfd) != GPUSLEEP_EVENTFD_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_event) != GPUSLEEP_EVENT_SIZE_VER1);
	BUILD_BUG_ON(sizeof(struct gpusleep_complete) != GPUSLEEP_COMPLETE_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_grant) != GPUSLEEP_GRANT_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_api) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_create) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_attach) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_op) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_result) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_wait) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_state) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_eventfd) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_event) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_complete) % 8);
	BUILD_BUG_ON(sizeof(struct gpusleep_group_create) != GPUSLEEP_GROUP_CREATE_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_group_add) != GPUSLEEP_GROUP_ADD_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_group_op) != GPUSLEEP_GROUP_OP_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_group_rank) != GPUSLEEP_GROUP_RANK_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_group_result) != GPUSLEEP_GROUP_RESULT_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_group_wait) != GPUSLEEP_GROUP_WAIT_SIZE_VER0);
	BUILD_BUG_ON(GPUSLEEP_NR_TAGS > GPUSLEEP_MAX_TAGS);
	BUILD_BUG_ON(sizeof(struct gpusleep_report_tag) != GPUSLEEP_REPORT_TAG_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_report) != GPUSLEEP_REPORT_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_tenant_set) != GPUSLEEP_TENANT_SET_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_tenant) != GPUSLEEP_TENANT_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_reclaim_victim) !=
		     GPUSLEEP_RECLAIM_VICTIM_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_reclaim) != GPUSLEEP_RECLAIM_SIZE_VER0);
	BUILD_BUG_ON(sizeof(struct gpusleep_lease) != GPUSLEEP_LEASE_SIZE_VER0);

	/*
	 * The device last: once /dev/gpusleep exists a file can be opened
	 * and domains made, so everything they use is in place before it,
	 * and a failure here unwinds in reverse with no file open. Exit
	 * takes the device away first.
	 */
	ret = gs_fault_init();
	if (ret)
		return ret;
	ret = gs_domains_cache_init();
	if (ret)
		goto err_fault;
	ret = gs_groups_init();
	if (ret)
		goto err_cache;
	ret = gs_arb_init();
	if (ret)
		goto err_groups;
	ret = gs_sysfs_init();
	if (ret)
		goto err_arb;
	ret = gs_genl_init();
	if (ret)
		goto err_sysfs;
	ret = misc_register(&gpusleep_misc);
	if (ret)
		goto err_genl;
	return 0;

err_genl:
	gs_genl_exit();
err_sysfs:
	gs_sysfs_exit();
err_arb:
	gs_arb_exit();
err_groups:
	gs_groups_exit();
err_cache:
	gs_domains_cache_exit();
err_fault:
	gs_fault_exit();
	return ret;
}

static void __exit gpusleep_exit(void)
{
	misc_deregister(&gpusleep_misc);
	gs_genl_exit();
	gs_sysfs_exit();
	gs_fault_exit();
	gs_arb_exit();
	gs_groups_exit();
	gs_domains_cache_exit();
	idr_destroy(&gs_domains);
}

module_init(gpusleep_init);
module_exit(gpusleep_exit);
MODULE_DESCRIPTION("gpusleep: release and resume GPU memory of inference engines");
MODULE_LICENSE("GPL");
MODULE_VERSION(GPUSLEEP_VERSION);
