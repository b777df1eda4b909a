// SPDX-License-Identifier: GPL-2.0
/*
 * Smoke test of the VM plumbing: the module is loaded, /dev/gpusleep exists,
 * and an ioctl number the module does not know fails with ENOTTY.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/gpusleep.h>

#include "kselftest_harness.h"

TEST(unknown_ioctl_is_enotty)
{
	int fd = open("/dev/" GPUSLEEP_DEVICE_NAME, O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd) {
		TH_LOG("open /dev/%s: %s (module not loaded?)",
		       GPUSLEEP_DEVICE_NAME, strerror(errno));
	}
	errno = 0;
	EXPECT_EQ(-1, ioctl(fd, _IO(GPUSLEEP_IOC_MAGIC, 0x7f)));
	EXPECT_EQ(ENOTTY, errno);
	close(fd);
}

TEST_HARNESS_MAIN
