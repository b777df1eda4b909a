// SPDX-License-Identifier: GPL-2.0
/*
 * gpusleep: module init and exit, the /dev/gpusleep misc device.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>

#include <linux/gpusleep.h>

static long gpusleep_dev_ioctl(struct file *file, unsigned int cmd,
			       unsigned long arg)
{
	return -ENOTTY;
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
	return misc_register(&gpusleep_misc);
}

static void __exit gpusleep_exit(void)
{
	misc_deregister(&gpusleep_misc);
}

module_init(gpusleep_init);
module_exit(gpusleep_exit);
MODULE_DESCRIPTION("gpusleep: release and resume GPU memory of inference engines");
MODULE_LICENSE("GPL");
