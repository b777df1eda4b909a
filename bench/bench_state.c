// SPDX-License-Identifier: GPL-2.0
/*
 * Benchmark 1: asking "is it sleeping?".
 *
 * Subjects, on a controller fd of a live domain: GPUSLEEP_IOC_GET_STATE
 * (the whole state record) and GPUSLEEP_IOC_IS_SLEEPING (one int).
 * Baselines: getppid() (a bare syscall: the floor), uname() (the kernel's
 * own record of the same kind: 390 bytes filled on the stack under a
 * lock and copied out, as GET_STATE's 448), and the sysfs state file
 * /sys/class/gpusleep/domain<ID>/state read with open+read+close and
 * with pread() on a kept fd (when the module has sysfs; else skipped).
 *
 * A sample is a batch of BATCH calls timed together, divided by BATCH;
 * every round takes one sample of each, in turn. Medians over the rounds.
 */
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench.h"
#include "libgpusleep.h"

#define BATCH	200

enum { M_GETPPID, M_STATE, M_ISSLEEP, M_UNAME, M_SYSFS_OPEN, M_SYSFS_PREAD, M_NR };

static double batch(int m, int ctl, const char *path, int kfd)
{
	struct gpusleep_state st;
	struct utsname uts;
	char buf[64];
	uint64_t t0 = bn_now();
	int i;

	for (i = 0; i < BATCH; i++) {
		switch (m) {
		case M_GETPPID:
			syscall(SYS_getppid);	/* no libc caching */
			break;
		case M_STATE:
			if (ioctl(ctl, GPUSLEEP_IOC_GET_STATE, &st))
				bn_die("GET_STATE: %m");
			break;
		case M_ISSLEEP:
			if (ioctl(ctl, GPUSLEEP_IOC_IS_SLEEPING, 0UL) < 0)
				bn_die("IS_SLEEPING: %m");
			break;
		case M_UNAME:
			if (syscall(SYS_uname, &uts))
				bn_die("uname: %m");
			break;
		case M_SYSFS_OPEN: {
			int fd = open(path, O_RDONLY);

			if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
				bn_die("%s: %m", path);
			close(fd);
			break;
		}
		case M_SYSFS_PREAD:
			if (pread(kfd, buf, sizeof(buf), 0) <= 0)
				bn_die("pread %s: %m", path);
			break;
		}
	}
	return (double)(bn_now() - t0) / BATCH;
}

int main(void)
{
	unsigned int rounds = bn_reps(300, 15), r;
	double *s[M_NR], med[M_NR];
	char path[128];
	struct bn_json j;
	int dev, eng, ctl, kfd = -1, m, nm;
	uint32_t id;

	dev = bn_ck(gs_open(NULL, 0, NULL), "open /dev/gpusleep");
	eng = bn_ck(gs_create_domain(dev, "bench_state", "host", 0, 0, &id),
		    "create domain");
	ctl = bn_ck(gs_attach(dev, id, GPUSLEEP_ROLE_CONTROLLER), "attach");
	snprintf(path, sizeof(path), "/sys/class/gpusleep/domain%u/state", id);
	if (access(path, R_OK) == 0)
		kfd = open(path, O_RDONLY);
	nm = kfd >= 0 ? M_NR : M_SYSFS_OPEN;

	for (m = 0; m < M_NR; m++)
		s[m] = bn_xcalloc(rounds, sizeof(double));
	for (m = 0; m < nm; m++)	/* warm up */
		batch(m, ctl, path, kfd);
	for (r = 0; r < rounds; r++)
		for (m = 0; m < nm; m++)
			s[m][r] = batch(m, ctl, path, kfd);
	for (m = 0; m < nm; m++)
		med[m] = bn_median(s[m], rounds);

	/*
	 * Information, no target (issue 34): no user feels it, and its
	 * floor is a record's copy (1e), not a bare syscall.
	 */
	bn_json_begin(&j, "1a", "get_state ioctl vs getppid() (information)",
		      med[M_STATE] / med[M_GETPPID], 0, "none");
	bn_json_median(&j, "get_state", med[M_STATE]);
	bn_json_median(&j, "getppid", med[M_GETPPID]);
	bn_json_size(&j, "rounds", rounds);
	bn_json_size(&j, "calls_per_sample", BATCH);
	bn_json_end(&j, "");

	bn_json_begin(&j, "1b", "is_sleeping ioctl vs getppid()",
		      med[M_ISSLEEP] / med[M_GETPPID], 2.0, "max");
	bn_json_median(&j, "is_sleeping", med[M_ISSLEEP]);
	bn_json_median(&j, "getppid", med[M_GETPPID]);
	bn_json_size(&j, "rounds", rounds);
	bn_json_size(&j, "calls_per_sample", BATCH);
	bn_json_end(&j, "");

	bn_json_begin(&j, "1e", "get_state ioctl vs uname() (a record copied out)",
		      med[M_STATE] / med[M_UNAME], 0, "none");
	bn_json_median(&j, "get_state", med[M_STATE]);
	bn_json_median(&j, "uname", med[M_UNAME]);
	bn_json_median(&j, "getppid", med[M_GETPPID]);
	bn_json_size(&j, "rounds", rounds);
	bn_json_size(&j, "calls_per_sample", BATCH);
	bn_json_end(&j, "information: the floor of a syscall returning a record");

	if (kfd < 0) {
		bn_json_begin(&j, "1c", "get_state ioctl vs sysfs state (open+read+close)",
			      0, 0, "none");
		bn_json_end(&j, "skipped: no sysfs");
		bn_json_begin(&j, "1d", "get_state ioctl vs sysfs state (pread, kept fd)",
			      0, 0, "none");
		bn_json_end(&j, "skipped: no sysfs");
	} else {
		bn_json_begin(&j, "1c", "get_state ioctl vs sysfs state (open+read+close)",
			      med[M_STATE] / med[M_SYSFS_OPEN], 0, "none");
		bn_json_median(&j, "get_state", med[M_STATE]);
		bn_json_median(&j, "sysfs_open_read_close", med[M_SYSFS_OPEN]);
		bn_json_size(&j, "rounds", rounds);
		bn_json_size(&j, "calls_per_sample", BATCH);
		bn_json_end(&j, "information: <1 means the ioctl is cheaper");
		bn_json_begin(&j, "1d", "get_state ioctl vs sysfs state (pread, kept fd)",
			      med[M_STATE] / med[M_SYSFS_PREAD], 0, "none");
		bn_json_median(&j, "get_state", med[M_STATE]);
		bn_json_median(&j, "sysfs_pread", med[M_SYSFS_PREAD]);
		bn_json_size(&j, "rounds", rounds);
		bn_json_size(&j, "calls_per_sample", BATCH);
		bn_json_end(&j, "information: <1 means the ioctl is cheaper");
		close(kfd);
	}
	close(ctl);
	close(eng);
	close(dev);
	return 0;
}
