// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: ioctl arguments that can grow.
 *
 * The size of an argument is the one its command carries (_IOC_SIZE), as
 * in DRM: a command is known by its type, number and direction, whatever
 * the size, as long as the size is at least that of the struct's first
 * version (GPUSLEEP_*_SIZE_VER0). Input follows copy_struct_from_user():
 * a larger struct from a newer caller is accepted when the part this
 * module does not know is zero (else E2BIG); a smaller one from an older
 * caller is zero-extended. Output goes back up to the caller's size, the
 * part the module does not fill cleared.
 */
#include <linux/errno.h>
#include <linux/ioctl.h>
#include <linux/minmax.h>
#include <linux/uaccess.h>

#include "gpusleep.h"

int gs_uarg_init(struct gs_uarg *ua, unsigned int cmd, unsigned long arg,
		 unsigned int want, size_t ver0)
{
	if (_IOC_TYPE(cmd) != _IOC_TYPE(want) || _IOC_NR(cmd) != _IOC_NR(want) ||
	    _IOC_DIR(cmd) != _IOC_DIR(want))
		return -ENOTTY;
	if (_IOC_SIZE(cmd) < ver0)
		return -EINVAL;	/* older than the first version */
	ua->p = (void __user *)arg;
	ua->size = _IOC_SIZE(cmd);
	return 0;
}

int gs_uarg_in(const struct gs_uarg *ua, void *k, size_t ksize)
{
	if (gs_fault())
		return -EFAULT;
	return copy_struct_from_user(k, ksize, ua->p, ua->size);
}

int gs_uarg_out(const struct gs_uarg *ua, const void *k, size_t ksize)
{
	size_t n = min_t(size_t, ksize, ua->size);

	if (gs_fault() || copy_to_user(ua->p, k, n))
		return -EFAULT;
	if (ua->size > ksize && clear_user(ua->p + ksize, ua->size - ksize))
		return -EFAULT;
	return 0;
}
