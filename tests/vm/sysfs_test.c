// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/class/gpusleep/: the class files and every value of a domain's
 * directory through a release/resume cycle driven step by step, failures,
 * cancels, poll() wake-ups on "state", and the directory's removal.
 */
#include <sys/inotify.h>
#include <sys/stat.h>

#include "kselftest_harness.h"
#include "gs_test.h"

#define W	GPUSLEEP_TAG_WEIGHTS
#define KV	GPUSLEEP_TAG_KV_CACHE
#define ALL	GPUSLEEP_TAG_ALL
#define NB	GPUSLEEP_OPF_NONBLOCK
#define CLASS	"/sys/class/gpusleep"

/* Read CLASS/domain<id>/<name> (or CLASS/<name> with id 0), no newline. */
static int sysfs_read(uint32_t id, const char *name, char *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd;

	if (id)
		snprintf(path, sizeof(path), CLASS "/domain%u/%s", id, name);
	else
		snprintf(path, sizeof(path), CLASS "/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

static long long sysfs_num(uint32_t id, const char *name)
{
	char buf[64];

	if (sysfs_read(id, name, buf, sizeof(buf)))
		return -1;
	return strtoll(buf, NULL, 10);
}

/* Compare a file with an expected string; prints both on a mismatch. */
static int sysfs_is(uint32_t id, const char *name, const char *want)
{
	char buf[128];
	int r = sysfs_read(id, name, buf, sizeof(buf));

	if (r) {
		fprintf(stderr, "# %s: %s\n", name, strerror(-r));
		return 0;
	}
	if (strcmp(buf, want)) {
		fprintf(stderr, "# %s: \"%s\", expected \"%s\"\n", name, buf, want);
		return 0;
	}
	return 1;
}

FIXTURE(sys) {
	int dev, engine, agent, ctl;
	uint32_t id;
};

FIXTURE_SETUP(sys)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		SKIP(return, "%s: %s (module not loaded)", GS_DEV, strerror(errno));
	self->engine = gs_create(self->dev, "sysfs", GPUSLEEP_CAP_PREFIX_CACHING |
				 GPUSLEEP_CAP_PREFIX_CACHE_RESET, &self->id);
	ASSERT_LE(0, self->engine);
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	self->ctl = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_CONTROLLER);
	ASSERT_LE(0, self->ctl);
}

FIXTURE_TEARDOWN(sys)
{
	if (self->dev < 0)
		return;
	close(self->ctl);
	if (self->agent >= 0)
		close(self->agent);
	if (self->engine >= 0)
		close(self->engine);
	close(self->dev);
}

TEST_F(sys, class_files)
{
	EXPECT_TRUE(sysfs_is(0, "version", "1"));
	EXPECT_LE(1, sysfs_num(0, "domains"));
}

TEST_F(sys, initial_values)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%u", self->id);
	EXPECT_TRUE(sysfs_is(self->id, "id", buf));
	EXPECT_TRUE(sysfs_is(self->id, "name", "sysfs"));
	EXPECT_TRUE(sysfs_is(self->id, "gpu", "test-gpu-0"));
	EXPECT_EQ(geteuid(), sysfs_num(self->id, "owner_uid"));
	EXPECT_EQ(getpid(), sysfs_num(self->id, "owner_pid"));
	EXPECT_TRUE(sysfs_is(self->id, "state", "awake"));
	EXPECT_TRUE(sysfs_is(self->id, "released_tags", ""));
	EXPECT_TRUE(sysfs_is(self->id, "drain_pending", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "agent_attached", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "kv_release_allowed", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "op_in_flight", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "releases", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "resumes", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "failures", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "cancels", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "timeouts", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "last_error", "none"));
	EXPECT_TRUE(sysfs_is(self->id, "last_release_us", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "last_resume_us", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "tags", "weights,kv_cache"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_kinds", "memory,kv_cache"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_bytes_released", "0,0"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_freed_bytes", "0,0"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_generations", "0,0"));
}

TEST_F(sys, files_are_read_only_for_all)
{
	static const char * const names[] = {
		"id", "name", "gpu", "owner_uid", "owner_pid", "state",
		"released_tags", "unconfirmed_tags", "shortfall_tags",
		"drain_pending", "agent_attached", "shortfalls",
		"tags", "tag_kinds", "tag_bytes_released", "tag_freed_bytes",
		"tag_generations",
		"kv_release_allowed", "op_in_flight", "releases", "resumes",
		"failures", "cancels", "timeouts", "last_error",
		"last_release_us", "last_resume_us",
		"priority", "yieldable", "gpu_uuid", "host_bytes", "lease_id",
		"leased_tags", "tag_policy", "tag_content", "tag_verified",
		"tag_size_bytes", "tag_mapped_bytes", "tag_host_bytes",
		"resident_torch_bytes", "resident_graph_bytes",
		"resident_process_bytes", "resident_process_source",
	};
	char path[256];
	struct stat st;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), CLASS "/domain%u/%s", self->id,
			 names[i]);
		ASSERT_EQ(0, stat(path, &st)) TH_LOG("%s", path);
		EXPECT_EQ(0444, st.st_mode & 0777) TH_LOG("%s", path);
	}
}

/*
 * A domain is no hardware: its device takes no part in power management,
 * so it has no power/ directory (about a kilobyte of kernfs nodes per
 * domain) and is not on the suspend list. Its uevent file is there.
 */
TEST_F(sys, no_power_directory)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), CLASS "/domain%u/power", self->id);
	EXPECT_EQ(-1, stat(path, &st)) TH_LOG("%s exists", path);
	EXPECT_EQ(ENOENT, errno);
	snprintf(path, sizeof(path), CLASS "/domain%u/uevent", self->id);
	EXPECT_EQ(0, stat(path, &st)) TH_LOG("%s: %s", path, strerror(errno));
}

TEST_F(sys, values_follow_a_cycle)
{
	struct gpusleep_op op;
	struct gpusleep_event ev;

	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	EXPECT_TRUE(sysfs_is(self->id, "state", "draining"));
	EXPECT_TRUE(sysfs_is(self->id, "drain_pending", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "op_in_flight", "1"));

	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, ALL, 0, 0));
	EXPECT_TRUE(sysfs_is(self->id, "state", "releasing"));
	EXPECT_TRUE(sysfs_is(self->id, "drain_pending", "0"));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_RESET_CACHES, 0,
				    0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    4096));
	EXPECT_TRUE(sysfs_is(self->id, "state", "releasing"));
	/* kv_cache's pause is out: maybe released is released. */
	EXPECT_TRUE(sysfs_is(self->id, "released_tags", "weights,kv_cache"));
	EXPECT_TRUE(sysfs_is(self->id, "unconfirmed_tags", "kv_cache"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_bytes_released", "4096,0"));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV, 0,
				    8192));
	EXPECT_TRUE(sysfs_is(self->id, "state", "released"));
	EXPECT_TRUE(sysfs_is(self->id, "released_tags", "weights,kv_cache"));
	EXPECT_TRUE(sysfs_is(self->id, "unconfirmed_tags", ""));
	EXPECT_TRUE(sysfs_is(self->id, "tag_bytes_released", "4096,8192"));
	EXPECT_TRUE(sysfs_is(self->id, "op_in_flight", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "releases", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "failures", "0"));
	EXPECT_LE(0, sysfs_num(self->id, "last_release_us"));

	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	EXPECT_EQ(2, op.op_id);
	EXPECT_TRUE(sysfs_is(self->id, "state", "resuming"));
	EXPECT_TRUE(sysfs_is(self->id, "op_in_flight", "2"));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	EXPECT_TRUE(sysfs_is(self->id, "released_tags", "kv_cache"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_bytes_released", "0,8192"));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, KV, 0,
				    8192));
	EXPECT_TRUE(sysfs_is(self->id, "state", "resuming"));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_REPAIR_KV, 0, 0,
				    0));
	ASSERT_EQ(0, gs_expect(self->engine, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	EXPECT_TRUE(sysfs_is(self->id, "state", "awake"));
	EXPECT_TRUE(sysfs_is(self->id, "released_tags", ""));
	EXPECT_TRUE(sysfs_is(self->id, "tag_bytes_released", "0,0"));
	EXPECT_TRUE(sysfs_is(self->id, "op_in_flight", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "resumes", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "releases", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "last_error", "none"));
}

TEST_F(sys, failure_sets_last_error)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, -EIO,
				    0));
	EXPECT_TRUE(sysfs_is(self->id, "state", "awake"));
	EXPECT_TRUE(sysfs_is(self->id, "failures", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "releases", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "last_error", "engine_failed"));
	EXPECT_TRUE(sysfs_is(self->id, "op_in_flight", "0"));
}

TEST_F(sys, agent_failure_keeps_confirmed_tags)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->ctl, ALL, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, ALL, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_RESET_CACHES, 0,
				    0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    100));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, KV,
				    -ENOMEM, 0));
	EXPECT_TRUE(sysfs_is(self->id, "state", "released"));
	EXPECT_TRUE(sysfs_is(self->id, "released_tags", "weights"));
	EXPECT_TRUE(sysfs_is(self->id, "last_error", "agent_failed"));
	EXPECT_TRUE(sysfs_is(self->id, "failures", "1"));
}

TEST_F(sys, cancel_counts)
{
	struct gpusleep_op op;

	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	EXPECT_TRUE(sysfs_is(self->id, "cancels", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "failures", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "last_error", "cancelled"));
	EXPECT_TRUE(sysfs_is(self->id, "state", "awake"));
}

TEST_F(sys, agent_attached_follows_the_agent)
{
	close(self->agent);
	self->agent = -1;
	EXPECT_TRUE(sysfs_is(self->id, "agent_attached", "0"));
	self->agent = gs_attach(self->dev, self->id, GPUSLEEP_ROLE_AGENT);
	ASSERT_LE(0, self->agent);
	EXPECT_TRUE(sysfs_is(self->id, "agent_attached", "1"));
}

TEST_F(sys, kv_release_not_allowed)
{
	uint32_t id;
	int e = gs_create(self->dev, "sysfs-kv", GPUSLEEP_CAP_PREFIX_CACHING,
			  &id);

	ASSERT_LE(0, e);
	EXPECT_TRUE(sysfs_is(id, "kv_release_allowed", "0"));
	close(e);
}

/* sysfs_notify on "state": poll() reports POLLPRI after a transition. */
TEST_F(sys, poll_state_wakes)
{
	struct gpusleep_op op;
	struct pollfd p;
	char path[256], buf[32];

	snprintf(path, sizeof(path), CLASS "/domain%u/state", self->id);
	p.fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, p.fd);
	ASSERT_LT(0, read(p.fd, buf, sizeof(buf)));
	p.events = POLLPRI | POLLERR;
	p.revents = 0;
	ASSERT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, gs_release(self->ctl, 0, NB, &op));
	ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	EXPECT_TRUE(p.revents & (POLLPRI | POLLERR));
	ASSERT_EQ(0, lseek(p.fd, 0, SEEK_SET));
	ASSERT_LT(0, read(p.fd, buf, sizeof(buf)));
	EXPECT_EQ(0, strncmp(buf, "draining", 8));
	close(p.fd);
}

/*
 * Issue 35: kernfs's notify semantics kept: a change of "state" and of
 * "released_tags" reaches inotify (IN_MODIFY), which is what systemd path
 * units and file watchers use, with no one holding the file open.
 */
TEST_F(sys, inotify_sees_changes_without_an_open_file)
{
	char path[256], buf[4096] __attribute__((aligned(8)));
	struct inotify_event *ev;
	struct gpusleep_op op;
	struct pollfd p;
	int wd[2], seen[2] = { 0, 0 }, i;
	ssize_t n;

	p.fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	ASSERT_LE(0, p.fd);
	snprintf(path, sizeof(path), CLASS "/domain%u/state", self->id);
	wd[0] = inotify_add_watch(p.fd, path, IN_MODIFY);
	snprintf(path, sizeof(path), CLASS "/domain%u/released_tags",
		 self->id);
	wd[1] = inotify_add_watch(p.fd, path, IN_MODIFY);
	ASSERT_LE(0, wd[0]);
	ASSERT_LE(0, wd[1]);
	ASSERT_EQ(0, gs_release(self->ctl, W, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, 0,
				    GS_TAG_BYTES(W)));
	ASSERT_EQ(0, gs_wait(self->ctl, op.op_id, GS_WAIT_MS, NULL));
	p.events = POLLIN;
	while (!(seen[0] && seen[1])) {
		ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS))
			TH_LOG("state %d, released_tags %d", seen[0], seen[1]);
		n = read(p.fd, buf, sizeof(buf));
		ASSERT_LT(0, n);
		for (i = 0; i < n; i += sizeof(*ev) + ev->len) {
			ev = (struct inotify_event *)(buf + i);
			if (ev->wd == wd[0] && (ev->mask & IN_MODIFY))
				seen[0] = 1;
			if (ev->wd == wd[1] && (ev->mask & IN_MODIFY))
				seen[1] = 1;
		}
	}
	close(p.fd);
}

/* A reader holding the file open sees ENODEV-like errors, not a crash. */
TEST_F(sys, directory_goes_with_the_engine)
{
	char path[256], buf[32];
	long long before = sysfs_num(0, "domains");
	int fd;

	snprintf(path, sizeof(path), CLASS "/domain%u/state", self->id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	close(self->engine);
	self->engine = -1;
	snprintf(path, sizeof(path), CLASS "/domain%u", self->id);
	EXPECT_EQ(-1, access(path, F_OK));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(before - 1, sysfs_num(0, "domains"));
	EXPECT_EQ(-1, read(fd, buf, sizeof(buf)));
	EXPECT_EQ(ENODEV, errno);
	close(fd);
}

/* Release weights, the pause answered with a resident figure. */
static int release_reporting(struct _test_data_sys *self, uint64_t resident,
			     uint32_t source)
{
	struct gpusleep_complete c;
	struct gpusleep_event ev;
	struct gpusleep_op op;
	int r = gs_release(self->ctl, W, NB, &op);

	if (!r)
		r = gs_answer_next(self->engine, GPUSLEEP_EV_DRAIN, W, 0, 0);
	if (!r)
		r = gs_expect(self->agent, GPUSLEEP_EV_PAUSE_TAG, W, &ev);
	if (r)
		return r;
	gs_complete_of(&c, &ev, 0, 4096);
	c.resident_bytes = resident;
	c.resident_source = source;
	return gs_err(ioctl(self->agent, GPUSLEEP_IOC_COMPLETE, &c));
}

/*
 * What the agent's pause answers said stays resident, with whose view it
 * is, while something is released; "unknown" and 0 before and after.
 */
TEST_F(sys, resident_follows_a_release)
{
	struct gpusleep_op op;
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), CLASS "/domain%u/resident_source", self->id);
	ASSERT_EQ(0, stat(path, &st));
	EXPECT_EQ(0444, st.st_mode & 0777);
	EXPECT_TRUE(sysfs_is(self->id, "resident_bytes", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_source", "unknown"));

	ASSERT_EQ(0, release_reporting(self, 123456789,
				       GPUSLEEP_RESIDENT_PROCESS));
	EXPECT_TRUE(sysfs_is(self->id, "resident_bytes", "123456789"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_source", "process"));

	ASSERT_EQ(0, gs_resume(self->ctl, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(self->agent, GPUSLEEP_EV_RESUME_TAG, W, 0,
				    4096));
	EXPECT_TRUE(sysfs_is(self->id, "resident_bytes", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_source", "unknown"));
}

/* The device-wide view is named as such. */
TEST_F(sys, resident_source_device)
{
	ASSERT_EQ(0, release_reporting(self, 1 << 30, GPUSLEEP_RESIDENT_DEVICE));
	EXPECT_TRUE(sysfs_is(self->id, "resident_bytes", "1073741824"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_source", "device"));
}

/* ------------------------------------------------------- the tenant */

static int report_tenant(int agent, uint64_t host)
{
	struct gpusleep_report r;
	unsigned int i;

	memset(&r, 0, sizeof(r));
	for (i = 0; i < 16; i++)
		r.gpu_uuid[i] = (uint8_t)(0xa0 + i);
	r.nr_tags = 2;
	r.tags[0].size_bytes = 64 << 20;
	r.tags[0].mapped_bytes = 48 << 20;
	r.tags[0].host_bytes = host;
	r.tags[0].policy = GPUSLEEP_POLICY_BACKUP;
	r.tags[0].content = GPUSLEEP_CONTENT_KEPT;
	r.tags[0].flags = GPUSLEEP_RTF_VERIFIED;
	r.tags[1].size_bytes = 32 << 20;
	r.tags[1].mapped_bytes = 32 << 20;
	r.tags[1].content = GPUSLEEP_CONTENT_ZEROED;
	r.torch_reserved_bytes = 3 << 20;
	r.graph_pool_bytes = 2 << 20;
	r.process_bytes = 100 << 20;
	r.process_source = GPUSLEEP_RESIDENT_DEVICE;
	return gs_err(ioctl(agent, GPUSLEEP_IOC_REPORT, &r));
}

/* Before a report: the tenant's defaults, and nothing reported. */
TEST_F(sys, tenant_initial_values)
{
	EXPECT_TRUE(sysfs_is(self->id, "priority", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "yieldable", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "gpu_uuid", ""));
	EXPECT_TRUE(sysfs_is(self->id, "host_bytes", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "lease_id", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "leased_tags", ""));
	EXPECT_TRUE(sysfs_is(self->id, "tag_policy", ""));
	EXPECT_TRUE(sysfs_is(self->id, "tag_size_bytes", ""));
	EXPECT_TRUE(sysfs_is(self->id, "resident_torch_bytes", "0"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_process_source", "unknown"));
	EXPECT_LE(0, sysfs_num(0, "leases"));
	EXPECT_LE(0, sysfs_num(0, "reclaims"));
}

/* One value per file, as the statement and the report say. */
TEST_F(sys, tenant_values_follow_the_report)
{
	struct gpusleep_tenant_set t = {
		.priority = -7, .flags = GPUSLEEP_TENF_YIELDABLE,
	};

	ASSERT_EQ(0, gs_err(ioctl(self->engine, GPUSLEEP_IOC_SET_TENANT, &t)));
	ASSERT_EQ(0, report_tenant(self->agent, 16 << 20));
	EXPECT_TRUE(sysfs_is(self->id, "priority", "-7"));
	EXPECT_TRUE(sysfs_is(self->id, "yieldable", "1"));
	EXPECT_TRUE(sysfs_is(self->id, "gpu_uuid",
			     "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"));
	EXPECT_TRUE(sysfs_is(self->id, "host_bytes", "16777216"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_policy", "backup,discard"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_content", "kept,zeroed"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_verified", "1,0"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_size_bytes", "67108864,33554432"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_mapped_bytes",
			     "50331648,33554432"));
	EXPECT_TRUE(sysfs_is(self->id, "tag_host_bytes", "16777216,0"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_torch_bytes", "3145728"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_graph_bytes", "2097152"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_process_bytes", "104857600"));
	EXPECT_TRUE(sysfs_is(self->id, "resident_process_source", "device"));
}

/* A change of what the budget counts wakes poll() on host_bytes. */
TEST_F(sys, poll_host_bytes_wakes)
{
	struct pollfd p;
	char path[256], buf[32];

	snprintf(path, sizeof(path), CLASS "/domain%u/host_bytes", self->id);
	p.fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, p.fd);
	ASSERT_LT(0, read(p.fd, buf, sizeof(buf)));
	p.events = POLLPRI | POLLERR;
	p.revents = 0;
	ASSERT_EQ(0, poll(&p, 1, 0));
	ASSERT_EQ(0, report_tenant(self->agent, 8 << 20));
	ASSERT_EQ(1, poll(&p, 1, GS_WAIT_MS));
	EXPECT_TRUE(p.revents & (POLLPRI | POLLERR));
	ASSERT_EQ(0, lseek(p.fd, 0, SEEK_SET));
	ASSERT_LT(0, read(p.fd, buf, sizeof(buf)));
	EXPECT_EQ(0, strncmp(buf, "8388608", 7));
	close(p.fd);
}

TEST_HARNESS_MAIN
