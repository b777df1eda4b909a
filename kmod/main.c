// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: module init and exit, parameters, the domain id table and the
 * /dev/gpusleep device (API handshake, domain creation, attach).
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/miscdevice.h>
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
			 GPUSLEEP_FEAT_NETLINK)

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

static long gs_dev_api(void __user *argp)
{
	struct gpusleep_api api;
	u64 need;

	if (gs_copy_from_user(&api, argp, sizeof(api)))
		return -EFAULT;
	/* max_domains is output only and ignored on input. */
	if (!gs_zero(api.reserved, sizeof(api.reserved)))
		return -EINVAL;
	need = api.features;
	api.features = GS_FEATURES;
	api.max_domains = gs_max_domains;
	if (gs_copy_to_user(argp, &api, sizeof(api)))
		return -EFAULT;
	if (api.api != GPUSLEEP_API_VERSION || (need & ~GS_FEATURES))
		return -EINVAL;
	return 0;
}

/*
 * A label: NUL-terminated inside its array, then only zeros. The name must
 * be 1.. chars of [A-Za-z0-9._:@-]; the GPU identity printable ASCII.
 */
static int gs_check_label(const char *s, size_t size, bool name)
{
	size_t len = strnlen(s, size);
	size_t i;

	if (len == size)
		return -ENAMETOOLONG;
	if (name && !len)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (name ? !(isalnum(c) || strchr("._:@-", c)) :
			   (c < 0x20 || c > 0x7e))
			return -EINVAL;
	}
	if (!gs_zero(s + len, size - len))
		return -EINVAL;
	return 0;
}

static long gs_dev_create(void __user *argp)
{
	struct gpusleep_create req;
	struct gs_domain *d;
	int ret;

	if (gs_copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	/* id is output only and ignored on input. */
	if (req.flags || req.pad || (req.caps & ~GPUSLEEP_CAP_ALL) ||
	    !gs_zero(req.reserved, sizeof(req.reserved)))
		return -EINVAL;
	ret = gs_check_label(req.name, sizeof(req.name), true);
	if (ret)
		return ret;
	ret = gs_check_label(req.gpu, sizeof(req.gpu), false);
	if (ret)
		return ret;

	d = gs_domain_create(&req);
	if (!d)
		return -ENOMEM;
	ret = gs_ids_add(d);
	if (ret)
		goto err_put;
	req.id = d->id;
	if (gs_copy_to_user(argp, &req, sizeof(req))) {
		ret = -EFAULT;
		goto err_remove;
	}
	ret = gs_sysfs_add(d);
	if (ret)
		goto err_remove;
	/* The engine fd takes over our reference. */
	ret = gs_domain_open_fd(d, GPUSLEEP_ROLE_ENGINE);
	if (ret < 0)
		goto err_sysfs;
	return ret;

err_sysfs:
	gs_sysfs_remove(d);
err_remove:
	gs_ids_remove(d);
	/* Someone may have attached in the meantime: they see a dead domain. */
	mutex_lock(&d->lock);
	gs_op_engine_gone(d);
	mutex_unlock(&d->lock);
err_put:
	gs_domain_put(d);
	return ret;
}

static long gs_dev_attach(void __user *argp)
{
	struct gpusleep_attach req;
	struct gs_domain *d;
	int ret;

	if (gs_copy_from_user(&req, argp, sizeof(req)))
		return -EFAULT;
	if (req.flags || req.pad || !gs_zero(req.reserved, sizeof(req.reserved)))
		return -EINVAL;
	if (req.role != GPUSLEEP_ROLE_AGENT &&
	    req.role != GPUSLEEP_ROLE_CONTROLLER)
		return -EINVAL;
	d = gs_ids_get(req.id);
	if (!d)
		return -ENOENT;
	ret = gs_domain_open_fd(d, req.role);
	if (ret < 0)
		gs_domain_put(d);
	return ret;
}

static long gpusleep_dev_ioctl(struct file *file, unsigned int cmd,
			       unsigned long arg)
{
	void __user *argp = (void __user *)arg;

	switch (cmd) {
	case GPUSLEEP_IOC_API:
		return gs_dev_api(argp);
	case GPUSLEEP_IOC_CREATE_DOMAIN:
		return gs_dev_create(argp);
	case GPUSLEEP_IOC_ATTACH:
		return gs_dev_attach(argp);
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
	BUILD_BUG_ON(GPUSLEEP_NR_TAGS > GPUSLEEP_MAX_TAGS);

	ret = gs_sysfs_init();
	if (ret)
		return ret;
	ret = misc_register(&gpusleep_misc);
	if (ret)
		goto err_sysfs;
	/* Register the netlink family last, unregister it first. */
	ret = gs_genl_init();
	if (ret)
		goto err_misc;
	return 0;

err_misc:
	misc_deregister(&gpusleep_misc);
err_sysfs:
	gs_sysfs_exit();
	return ret;
}

static void __exit gpusleep_exit(void)
{
	gs_genl_exit();
	misc_deregister(&gpusleep_misc);
	gs_sysfs_exit();
	idr_destroy(&gs_domains);
}

module_init(gpusleep_init);
module_exit(gpusleep_exit);
MODULE_DESCRIPTION("gpusleep: release and resume GPU memory of inference engines");
MODULE_LICENSE("GPL");
MODULE_VERSION(GPUSLEEP_VERSION);
