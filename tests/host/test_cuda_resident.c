// SPDX-License-Identifier: GPL-2.0
/*
 * tests/host/test_cuda_resident.c: what the agent reports still resident
 * after a pause (gs_mm_resident(), user/nvml.c, the CUDA backend), against
 * the stand-in libcuda.so.1 and the stand-in libnvidia-ml.so.1
 * (tests/host/fake_libnvml.c): NVML there and listing this process: its
 * own figure (PROCESS); NVML missing, off, failing, not listing it or
 * without a figure: the device's used memory from cuMemGetInfo (DEVICE);
 * neither: 0 (not known). The agent answers PAUSE_TAG with it.
 *
 * Each test runs in its own child (the harness forks), so the stand-ins'
 * state starts fresh; $GPUSLEEP_NVML_LIB points the backend at the
 * stand-in NVML. Built without cuda.h every test is skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "backend.h"
#include "internal.h"
#include "libgpusleep.h"
#include "fake_libcuda.h"

#ifndef FAKECUDA_LIB
#define FAKECUDA_LIB "build/tests/host/fakecuda/libcuda.so.1"
#endif
#ifndef FAKENVML_LIB
#define FAKENVML_LIB "build/tests/host/fakenvml/libnvidia-ml.so.1"
#endif

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
#define CU_UNKNOWN		999
#define NVML_ERROR_UNKNOWN	999
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define SKIP_NO_CUDA "built with CUDA=0 (no CUDA backend)"

typedef int (*add_process_fn)(unsigned int pid, unsigned long long used);
typedef int (*nvml_fail_fn)(const char *fn, int code);
typedef int (*nvml_inits_fn)(void);

static const char *env_or(const char *name, const char *dflt)
{
	const char *p = getenv(name);

	return p && *p ? p : dflt;
}

FIXTURE(res) {
	struct gs_mm *mm;
	void *nvml;		/* the stand-in NVML, loaded here first */
	add_process_fn add;
	nvml_fail_fn nfail;
	nvml_inits_fn inits;
	fakecuda_set_fn set;
	fakecuda_fail_fn cfail;
};

FIXTURE_SETUP(res)
{
	const char *nv = env_or("FAKENVML_LIB", FAKENVML_LIB);

	self->mm = NULL;
	ASSERT_EQ(0, setenv("GPUSLEEP_NVML_LIB", nv, 1));
	self->nvml = dlopen(nv, RTLD_NOW);
	ASSERT_NE(NULL, self->nvml) TH_LOG("%s: %s", nv, dlerror());
	self->add = (add_process_fn)dlsym(self->nvml, "fakenvml_add_process");
	self->nfail = (nvml_fail_fn)dlsym(self->nvml, "fakenvml_fail");
	self->inits = (nvml_inits_fn)dlsym(self->nvml, "fakenvml_inits");
	ASSERT_NE(NULL, self->add);
	ASSERT_NE(NULL, self->nfail);
	ASSERT_NE(NULL, self->inits);
}

FIXTURE_TEARDOWN(res)
{
	gs_mm_destroy(self->mm);
	/* whatever NVML the backend opened, it shut down */
	EXPECT_EQ(0, self->inits());
}

/* The CUDA backend on the stand-in, in an mm: 0, -ENOSYS (no CUDA), -1. */
static int open_mm(struct _test_data_res *self)
{
	const char *cu = env_or("FAKECUDA_LIB", FAKECUDA_LIB);
	struct gs_backend *b;
	void *lib;
	int err = 0;

	b = gs_backend_cuda_new(0, cu, &err);
	if (!b)
		return err == -ENOSYS ? -ENOSYS : -1;
	if (gs_mm_new(b, &self->mm))
		return -1;
	lib = dlopen(cu, RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		return -1;
	self->set = (fakecuda_set_fn)dlsym(lib, "fakecuda_set");
	self->cfail = (fakecuda_fail_fn)dlsym(lib, "fakecuda_fail");
	if (!self->set || !self->cfail)
		return -1;
	/* the device as cuMemGetInfo sees it: 5 GiB used by others */
	return self->set("other_used", 5 * GiB) ? -1 : 0;
}

#define OPEN_MM() do {						\
	int r_ = open_mm(self);					\
								\
	if (r_ == -ENOSYS)					\
		SKIP(return, SKIP_NO_CUDA);			\
	ASSERT_EQ(0, r_);					\
} while (0)

/*
 * NVML lists processes by pid, in the pid namespace it sees: the tests list
 * other processes that exist here (1, the parent), so that it is not taken
 * for NVML seeing another namespace's pids.
 */
static unsigned int other_pid(unsigned int i)
{
	return i & 1 ? 1 : (unsigned int)getppid();
}

/* A pid no process here has. */
static unsigned int absent_pid(void)
{
	unsigned int p;

	for (p = 4000000; p > 2; p--)
		if (kill((pid_t)p, 0) && errno == ESRCH)
			return p;
	return 0;
}

TEST_F(res, nvml_lists_the_process)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(other_pid(1), 9 * GiB));
	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(3 * GiB, b);
}

/* One process, several entries (MIG instances): they add up. */
TEST_F(res, nvml_entries_of_the_process_add_up)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 1 * GiB));
	ASSERT_EQ(0, self->add(getpid(), 2 * GiB));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(3 * GiB, b);
}

/* More processes than the first array holds: asked again, larger. */
TEST_F(res, nvml_with_many_processes)
{
	uint64_t b = 0;
	unsigned int i;

	for (i = 1; i <= 200; i++)
		ASSERT_EQ(0, self->add(other_pid(i), i * MiB));
	ASSERT_EQ(0, self->add(getpid(), 42 * MiB));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(42 * MiB, b);
}

/*
 * Issue 21: records of 32 bytes (driver branches whose _v3 record has
 * usedGpuCcProtectedMemory), more than 48 processes (what a 64-record
 * array of 24 bytes holds of them): no overflow, the right figure.
 */
TEST_F(res, nvml_records_of_32_bytes)
{
	int (*size)(unsigned int) = (int (*)(unsigned int))
		dlsym(self->nvml, "fakenvml_record_size");
	uint64_t b = 0;
	unsigned int i;

	ASSERT_NE(NULL, size);
	ASSERT_EQ(0, size(32));
	for (i = 1; i <= 60; i++)
		ASSERT_EQ(0, self->add(other_pid(i), i * MiB));
	ASSERT_EQ(0, self->add(getpid(), 42 * MiB));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(42 * MiB, b);
	ASSERT_EQ(0, size(24));
}

/*
 * Issue 21: NVML lists pids of another namespace (a container whose NVML
 * sees host pids): one of them may equal this process's pid here, so no
 * figure is trusted: unknown, not another process's memory.
 */
TEST_F(res, nvml_seeing_other_namespace_pids_is_unknown)
{
	unsigned int absent = absent_pid();
	uint64_t b = 1;

	ASSERT_NE(0, absent);
	ASSERT_EQ(0, self->add(absent, 9 * GiB));
	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));	/* a host process */
	OPEN_MM();
	EXPECT_EQ(0, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(0, b);
}

/* Issue 21: NVML is made ready with the backend, not in the first pause. */
TEST_F(res, nvml_initialised_before_the_first_pause)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	OPEN_MM();
	EXPECT_EQ(1, self->inits());
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(1, self->inits());
}

/*
 * Issue 21: a MIG instance is an NVML device of its own, found by the UUID
 * cuDeviceGetUuid gives ("MIG-" then NVML's format); its parent, found by
 * the PCI bus id, has other figures.
 */
TEST_F(res, nvml_finds_a_mig_instance_by_uuid)
{
	static const char uuid[] = "MIG-10111213-1415-1617-1819-1a1b1c1d1e1f";
	int (*mig)(const char *) = (int (*)(const char *))
		dlsym(self->nvml, "fakenvml_add_mig");
	int (*on)(const char *, unsigned int, unsigned long long) =
		(int (*)(const char *, unsigned int, unsigned long long))
		dlsym(self->nvml, "fakenvml_add_process_on");
	uint64_t b = 0;

	ASSERT_NE(NULL, mig);
	ASSERT_NE(NULL, on);
	ASSERT_EQ(0, mig(uuid));
	ASSERT_EQ(0, on(uuid, getpid(), 3 * GiB));
	ASSERT_EQ(0, self->add(getpid(), 9 * GiB));	/* the parent's view */
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(3 * GiB, b);
}

/* NVML does not list this process (another pid namespace): the device. */
TEST_F(res, process_not_listed_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(other_pid(1), 9 * GiB));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
}

/* Listed without a figure (no permission, some platforms). */
TEST_F(res, figure_not_available_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), NVML_VALUE_NOT_AVAILABLE));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
}

TEST_F(res, nvml_missing_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	ASSERT_EQ(0, setenv("GPUSLEEP_NVML_LIB", "/nonexistent/libnvidia-ml.so.1",
			    1));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
}

TEST_F(res, nvml_off_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	ASSERT_EQ(0, setenv("GPUSLEEP_NVML_LIB", "off", 1));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
}

TEST_F(res, nvml_init_failing_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	ASSERT_EQ(0, self->nfail("nvmlInit_v2", NVML_ERROR_UNKNOWN));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
}

/* NVML without the device: it was initialised, and is shut down again. */
TEST_F(res, nvml_without_the_device_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	ASSERT_EQ(0, self->nfail("nvmlDeviceGetHandleByPciBusId_v2", 6));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
	EXPECT_EQ(0, self->inits());
}

TEST_F(res, nvml_query_failing_falls_back_to_the_device)
{
	uint64_t b = 0;

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	ASSERT_EQ(0, self->nfail("nvmlDeviceGetComputeRunningProcesses_v3",
				 NVML_ERROR_UNKNOWN));
	OPEN_MM();
	EXPECT_EQ(GPUSLEEP_RESIDENT_DEVICE, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(5 * GiB, b);
}

/* Neither view: not known, and no figure. */
TEST_F(res, neither_view_is_unknown)
{
	uint64_t b = 1;

	ASSERT_EQ(0, setenv("GPUSLEEP_NVML_LIB", "off", 1));
	OPEN_MM();
	ASSERT_EQ(0, self->cfail("cuMemGetInfo", 1, 0, CU_UNKNOWN));
	EXPECT_EQ(0, gs_mm_resident(self->mm, &b));
	EXPECT_EQ(0, b);
}

/* The host backend has no device: not known. */
TEST(host_backend_is_unknown)
{
	struct gs_mm *mm;
	uint64_t b = 1;

	ASSERT_EQ(0, gs_mm_new(gs_backend_host_new(), &mm));
	EXPECT_EQ(0, gs_mm_resident(mm, &b));
	EXPECT_EQ(0, b);
	gs_mm_destroy(mm);
}

/* ------------------------------------------------------------ the agent */

static struct gpusleep_complete answers[4];
static int nanswers;

static int record(int fd, const struct gpusleep_complete *c)
{
	(void)fd;
	if (nanswers < 4)
		answers[nanswers++] = *c;
	return 0;
}

static int send_ev(int fd, uint32_t type, uint32_t tag, uint64_t generation)
{
	struct gpusleep_event ev = {
		.size = sizeof(ev), .type = type, .op_id = 1, .tags = tag,
		.step = 1, .generation = generation,
	};

	return write(fd, &ev, sizeof(ev)) == sizeof(ev) ? 0 : -errno;
}

/*
 * A pause is answered with what stays resident, a resume without; the
 * result the engine sees has both, and the resume's generation.
 */
TEST_F(res, agent_answers_pause_with_resident)
{
	struct gs_agent_result r;
	struct gs_agent *a;
	int sv[2];

	ASSERT_EQ(0, self->add(getpid(), 3 * GiB));
	OPEN_MM();
	ASSERT_NE(NULL, gs_mm_alloc(self->mm, GPUSLEEP_TAG_WEIGHTS, 4 * MiB));
	gs_complete_hook = record;
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, gs_agent_from_fd(sv[0], self->mm, &a));
	ASSERT_EQ(0, send_ev(sv[1], GPUSLEEP_EV_PAUSE_TAG, GPUSLEEP_TAG_WEIGHTS,
			     0));
	ASSERT_EQ(1, gs_agent_dispatch(a));
	ASSERT_EQ(1, nanswers);
	EXPECT_EQ(0, answers[0].status);
	EXPECT_EQ(3 * GiB, answers[0].resident_bytes);
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, answers[0].resident_source);
	ASSERT_EQ(0, gs_agent_last_result(a, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(3 * GiB, r.resident_bytes);
	EXPECT_EQ(GPUSLEEP_RESIDENT_PROCESS, r.resident_source);

	ASSERT_EQ(0, send_ev(sv[1], GPUSLEEP_EV_RESUME_TAG,
			     GPUSLEEP_TAG_WEIGHTS, 7));
	ASSERT_EQ(1, gs_agent_dispatch(a));
	ASSERT_EQ(2, nanswers);
	EXPECT_EQ(0, answers[1].status);
	EXPECT_EQ(0, answers[1].resident_bytes);
	EXPECT_EQ(0, answers[1].resident_source);
	ASSERT_EQ(0, gs_agent_last_result(a, GPUSLEEP_TAG_WEIGHTS, &r));
	EXPECT_EQ(7, r.generation);
	EXPECT_EQ(0, r.resident_source);
	gs_agent_destroy(a);
	close(sv[1]);
}

TEST_HARNESS_MAIN
