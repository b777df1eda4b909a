// SPDX-License-Identifier: GPL-2.0
/*
 * Declared tags: a domain names its tags at creation, with a kind, in
 * release order; its masks use those bits. The default declaration is the
 * reference controller's (weights, kv_cache); a bad declaration is refused
 * and creates nothing; a tag the domain did not declare is refused as
 * invalid and named; the KV cache's cache reset and repair follow the tag
 * of that kind, wherever it is declared.
 */
#include "kselftest_harness.h"
#include "gs_test.h"

#define NB	GPUSLEEP_OPF_NONBLOCK
#define MEM	GPUSLEEP_TAG_KIND_MEMORY
#define KVK	GPUSLEEP_TAG_KIND_KV_CACHE

struct decl {
	const char *name;
	uint32_t kind;
};

static int create_decl(int dev, const char *name, uint32_t caps,
		       const struct decl *d, unsigned int n,
		       struct gpusleep_create *out)
{
	struct gpusleep_create c;
	unsigned int i;
	int fd;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "%s", name);
	c.caps = caps;
	c.nr_tags = n;
	for (i = 0; i < n; i++) {
		strncpy(c.tags[i].name, d[i].name, sizeof(c.tags[i].name));
		c.tags[i].kind = d[i].kind;
	}
	fd = gs_err(ioctl(dev, GPUSLEEP_IOC_CREATE_DOMAIN, &c));
	if (out)
		*out = c;
	return fd;
}

/* weights, cuda_graph, kv_cache: a graph pool between the two defaults */
static const struct decl three[] = {
	{ "weights", MEM }, { "cuda_graph", MEM }, { "kv_cache", KVK },
};

/* A domain with its agent attached: the engine fd, or -errno. */
static int open_domain(int dev, const char *name, uint32_t caps,
		       const struct decl *d, unsigned int n, uint32_t *id,
		       int *agent)
{
	struct gpusleep_create c;
	int e = create_decl(dev, name, caps, d, n, &c);

	if (e < 0)
		return e;
	*id = c.id;
	*agent = gs_attach(dev, c.id, GPUSLEEP_ROLE_AGENT);
	if (*agent < 0) {
		close(e);
		return *agent;
	}
	return e;
}

static int get_tags(int fd, struct gpusleep_tags *t)
{
	memset(t, 0xcc, sizeof(*t));
	return gs_err(ioctl(fd, GPUSLEEP_IOC_GET_TAGS, t));
}

static int domains_alive(void)
{
	char buf[32] = "";
	int fd = open("/sys/class/gpusleep/domains", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoi(buf) : -1;
}

static int sysfs_read(uint32_t id, const char *attr, char *buf, size_t len)
{
	char path[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/class/gpusleep/domain%u/%s", id,
		 attr);
	fd = open(path, O_RDONLY);
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

FIXTURE(tags) {
	int dev;
};

FIXTURE_SETUP(tags)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV,
			      strerror(errno));
}

FIXTURE_TEARDOWN(tags)
{
	if (self->dev >= 0)
		close(self->dev);
}

/* The handshake says the module takes declarations. */
TEST_F(tags, feature_bit)
{
	struct gpusleep_api a = {
		.api = GPUSLEEP_API_VERSION,
		.features = GPUSLEEP_FEAT_DECLARED_TAGS,
	};

	ASSERT_EQ(0, ioctl(self->dev, GPUSLEEP_IOC_API, &a));
	EXPECT_NE(0, a.features & GPUSLEEP_FEAT_DECLARED_TAGS);
}

/* A caller built before tags (128 bytes) gets weights and kv_cache. */
TEST_F(tags, first_version_caller_gets_the_default_declaration)
{
	unsigned long cmd = _IOC(_IOC_READ | _IOC_WRITE, GPUSLEEP_IOC_MAGIC,
				 _IOC_NR(GPUSLEEP_IOC_CREATE_DOMAIN),
				 GPUSLEEP_CREATE_SIZE_VER0);
	struct gpusleep_create c;
	struct gpusleep_tags t;
	int e;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "ver0");
	c.nr_tags = 3;	/* beyond the 128 bytes: never read */
	e = gs_err(ioctl(self->dev, cmd, &c));
	ASSERT_LE(0, e);
	ASSERT_EQ(0, get_tags(e, &t));
	EXPECT_EQ(2, t.nr_tags);
	EXPECT_STREQ("weights", t.tags[0].name);
	EXPECT_EQ(MEM, t.tags[0].kind);
	EXPECT_STREQ("kv_cache", t.tags[1].name);
	EXPECT_EQ(KVK, t.tags[1].kind);
	EXPECT_EQ(0, t.tags[0].generation);
	EXPECT_EQ(0, t.tags[2].name[0]);	/* past nr_tags: zero */
	EXPECT_EQ(0, t.reserved[0]);
	close(e);
}

/* nr_tags 0 in the full struct is the same default. */
TEST_F(tags, no_declaration_is_the_default)
{
	struct gpusleep_create c;
	struct gpusleep_tags t;
	char buf[128];
	int e = create_decl(self->dev, "dflt", 0, NULL, 0, &c);

	ASSERT_LE(0, e);
	ASSERT_EQ(0, get_tags(e, &t));
	EXPECT_EQ(2, t.nr_tags);
	EXPECT_STREQ("weights", t.tags[0].name);
	EXPECT_STREQ("kv_cache", t.tags[1].name);
	ASSERT_EQ(0, sysfs_read(c.id, "tags", buf, sizeof(buf)));
	EXPECT_STREQ("weights,kv_cache", buf);
	ASSERT_EQ(0, sysfs_read(c.id, "tag_kinds", buf, sizeof(buf)));
	EXPECT_STREQ("memory,kv_cache", buf);
	close(e);
}

/*
 * weights, cuda_graph, kv_cache: a full release goes in that order, the
 * cache reset names the KV tag (bit 2), the repair too; sysfs and the
 * state use the domain's names and bits.
 */
TEST_F(tags, declared_order_and_kv_kind_drive_the_steps)
{
	struct gpusleep_event ev;
	struct gpusleep_state st;
	struct gpusleep_tags t;
	struct gpusleep_op op;
	uint32_t id;
	char buf[128];
	int e, a;

	e = open_domain(self->dev, "three", GPUSLEEP_CAP_PREFIX_CACHING |
			GPUSLEEP_CAP_PREFIX_CACHE_RESET, three, 3, &id, &a);
	ASSERT_LE(0, e);
	ASSERT_EQ(0, get_tags(a, &t));
	ASSERT_EQ(3, t.nr_tags);
	EXPECT_STREQ("cuda_graph", t.tags[1].name);
	EXPECT_EQ(KVK, t.tags[2].kind);
	ASSERT_EQ(0, sysfs_read(id, "tags", buf, sizeof(buf)));
	EXPECT_STREQ("weights,cuda_graph,kv_cache", buf);
	ASSERT_EQ(0, sysfs_read(id, "tag_kinds", buf, sizeof(buf)));
	EXPECT_STREQ("memory,memory,kv_cache", buf);

	ASSERT_EQ(0, gs_release(e, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_DRAIN, 0x7, 0, 0));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_RESET_CACHES, 0x4, 0, 0));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x1, 0, 100));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x2, 0, 200));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x4, 0, 300));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(0x7, st.released);
	EXPECT_EQ(200, st.bytes_released[1]);
	ASSERT_EQ(0, sysfs_read(id, "released_tags", buf, sizeof(buf)));
	EXPECT_STREQ("weights,cuda_graph,kv_cache", buf);
	ASSERT_EQ(0, sysfs_read(id, "tag_bytes_released", buf, sizeof(buf)));
	EXPECT_STREQ("100,200,300", buf);

	ASSERT_EQ(0, gs_resume(e, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x1, 0, 100));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x2, 0, 200));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x4, 0, 300));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_REPAIR_KV, 0x4, 0, 0));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	close(a);
	close(e);
}

/*
 * Issue 26, 17: weights and cuda_graph released, a release of kv_cache
 * waits for its drain. The reference controller calls the drain off only
 * when a resume leaves nothing released: a resume of weights alone is
 * refused busy and the release carries on; once kv_cache is released, a
 * resume of weights runs, and a later release's drain is called off by a
 * resume of everything released.
 */
TEST_F(tags, partial_resume_does_not_cancel_a_pending_release)
{
	struct gpusleep_result r;
	struct gpusleep_state st;
	struct gpusleep_event ev;
	struct gpusleep_op op, rel;
	uint32_t id;
	int e, a;

	e = open_domain(self->dev, "three", GPUSLEEP_CAP_PREFIX_CACHING |
			GPUSLEEP_CAP_PREFIX_CACHE_RESET, three, 3, &id, &a);
	ASSERT_LE(0, e);
	ASSERT_EQ(0, gs_release(e, 0x3, NB, &op));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_DRAIN, 0x3, 0, 0));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x1, 0, 100));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x2, 0, 200));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));

	ASSERT_EQ(0, gs_release(e, 0x4, NB, &rel));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN, 0x4, &ev));
	/* cuda_graph would stay released: the release carries on. */
	EXPECT_EQ(-EBUSY, gs_resume(e, 0x1, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_BUSY, op.reason);
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(GPUSLEEP_S_DRAINING, st.state);
	EXPECT_EQ(rel.op_id, st.op_in_flight);
	ASSERT_EQ(0, gs_answer(e, &ev, 0, 0));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_RESET_CACHES, 0x4, 0, 0));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x4, 0, 300));
	ASSERT_EQ(0, gs_wait(e, rel.op_id, GS_WAIT_MS, &r));
	EXPECT_EQ(0, r.error);
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(0x7, st.released);

	/* The caller's retry, after the release: weights come back. */
	ASSERT_EQ(0, gs_resume(e, 0x1, NB, &op));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x1, 0, 100));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, &r));
	EXPECT_EQ(0, r.error);

	/* A resume that leaves nothing released calls the drain off. */
	ASSERT_EQ(0, gs_release(e, 0x1, NB, &rel));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN, 0x1, &ev));
	ASSERT_EQ(0, gs_resume(e, 0x6, NB, &op));
	ASSERT_EQ(0, gs_wait(e, rel.op_id, GS_WAIT_MS, &r));
	EXPECT_EQ(GPUSLEEP_R_CANCELLED, r.reason);
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x2, 0, 200));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x4, 0, 300));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_DRAIN_CANCELLED, 0, &ev));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_REPAIR_KV, 0x4, 0, 0));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, &r));
	EXPECT_EQ(0, r.error);
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(0, st.released);
	close(a);
	close(e);
}

/* A declared tag of kind memory is released alone: no cache reset. */
TEST_F(tags, a_declared_memory_tag_alone)
{
	struct gpusleep_state st;
	struct gpusleep_event ev;
	struct gpusleep_op op;
	uint32_t id;
	char buf[128];
	int e, a;

	e = open_domain(self->dev, "graph", 0, three, 3, &id, &a);
	ASSERT_LE(0, e);
	ASSERT_EQ(0, gs_release(e, 0x2, NB, &op));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_DRAIN, 0x2, 0, 0));
	ASSERT_EQ(0, gs_expect(a, GPUSLEEP_EV_PAUSE_TAG, 0x2, &ev));
	ASSERT_EQ(-ETIMEDOUT, gs_next(e, &ev, 0));	/* no cache reset */
	ASSERT_EQ(0, gs_answer(a, &ev, 0, 4096));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(0x2, st.released);
	ASSERT_EQ(0, sysfs_read(id, "released_tags", buf, sizeof(buf)));
	EXPECT_STREQ("cuda_graph", buf);
	/* resume: no repair, the KV cache never left */
	ASSERT_EQ(0, gs_resume(e, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x2, 0, 4096));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	close(a);
	close(e);
}

/* A bit the domain did not declare: invalid, named, nothing started. */
TEST_F(tags, undeclared_tag_is_invalid_and_named)
{
	struct gpusleep_state st;
	struct gpusleep_event ev;
	struct gpusleep_op op;
	uint32_t id;
	int e, a;

	e = open_domain(self->dev, "undecl", 0, three, 3, &id, &a);
	ASSERT_LE(0, e);
	EXPECT_EQ(-EINVAL, gs_release(e, 0x1 | 0x8, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	EXPECT_EQ(0x8, op.bad_tags);
	EXPECT_EQ(0, op.op_id);
	EXPECT_EQ(-EINVAL, gs_resume(e, 0x10, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_INVALID, op.reason);
	EXPECT_EQ(0x10, op.bad_tags);
	ASSERT_EQ(0, gs_state(e, &st));
	EXPECT_EQ(GPUSLEEP_S_AWAKE, st.state);
	EXPECT_EQ(0, st.last_op_id);
	EXPECT_EQ(-ETIMEDOUT, gs_next(e, &ev, 0));
	EXPECT_EQ(-ETIMEDOUT, gs_next(a, &ev, 0));
	close(a);
	close(e);
}

/* The default domain's kv_cache bit on a domain without a KV tag. */
TEST_F(tags, no_kv_tag_no_reset_no_repair_no_kv_refusal)
{
	static const struct decl d[] = {
		{ "weights", MEM }, { "workspace", MEM },
	};
	struct gpusleep_event ev;
	struct gpusleep_op op;
	uint32_t id;
	int e, a;

	/* prefix caching without reset refuses only a KV tag's release */
	e = open_domain(self->dev, "nokv", GPUSLEEP_CAP_PREFIX_CACHING, d, 2,
			&id, &a);
	ASSERT_LE(0, e);
	ASSERT_EQ(0, gs_release(e, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_DRAIN, 0x3, 0, 0));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x1, 0, 1));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 0x2, 0, 2));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	ASSERT_EQ(0, gs_resume(e, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x1, 0, 1));
	ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_RESUME_TAG, 0x2, 0, 2));
	ASSERT_EQ(0, gs_expect(e, GPUSLEEP_EV_RESUME_SCHED, 0, &ev));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	close(a);
	close(e);
}

/* The KV refusal names the KV tag where it was declared. */
TEST_F(tags, kv_not_allowed_names_the_declared_kv_tag)
{
	static const struct decl d[] = {
		{ "weights", MEM }, { "cuda_graph", MEM }, { "kv", KVK },
	};
	struct gpusleep_op op;
	uint32_t id;
	int e, a;

	e = open_domain(self->dev, "kvno", GPUSLEEP_CAP_PREFIX_CACHING, d, 3,
			&id, &a);
	ASSERT_LE(0, e);
	EXPECT_EQ(-EOPNOTSUPP, gs_release(e, 0, NB, &op));
	EXPECT_EQ(GPUSLEEP_R_KV_NOT_ALLOWED, op.reason);
	EXPECT_EQ(0x4, op.bad_tags);
	/* the others may go */
	EXPECT_EQ(0, gs_release(e, 0x3, NB, &op));
	EXPECT_NE(0, op.op_id);
	close(a);
	close(e);
}

/* GPUSLEEP_MAX_TAGS tags: all accepted, released lowest bit first. */
TEST_F(tags, the_most_tags)
{
	struct decl d[GPUSLEEP_MAX_TAGS];
	char names[GPUSLEEP_MAX_TAGS][8];
	struct gpusleep_op op;
	uint32_t id;
	unsigned int i;
	int e, a;

	for (i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		snprintf(names[i], sizeof(names[i]), "t%u", i);
		d[i].name = names[i];
		d[i].kind = i == 5 ? KVK : MEM;
	}
	e = open_domain(self->dev, "eight", 0, d, GPUSLEEP_MAX_TAGS,
			&id, &a);
	ASSERT_LE(0, e);
	ASSERT_EQ(0, gs_release(e, 0, NB, &op));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_DRAIN, 0xff, 0, 0));
	ASSERT_EQ(0, gs_answer_next(e, GPUSLEEP_EV_RESET_CACHES, 1U << 5, 0,
				    0));
	for (i = 0; i < GPUSLEEP_MAX_TAGS; i++)
		ASSERT_EQ(0, gs_answer_next(a, GPUSLEEP_EV_PAUSE_TAG, 1U << i,
					    0, i + 1));
	ASSERT_EQ(0, gs_wait(e, op.op_id, GS_WAIT_MS, NULL));
	close(a);
	close(e);
}

/* Each bad declaration: EINVAL, and no domain made. */
typedef void (*spoil_fn)(struct gpusleep_create *c);

static void spoil_too_many(struct gpusleep_create *c)
{
	c->nr_tags = GPUSLEEP_MAX_TAGS + 1;
}

static void spoil_empty_name(struct gpusleep_create *c)
{
	memset(c->tags[1].name, 0, sizeof(c->tags[1].name));
}

static void spoil_upper_case(struct gpusleep_create *c)
{
	c->tags[1].name[0] = 'G';
}

static void spoil_leading_digit(struct gpusleep_create *c)
{
	c->tags[1].name[0] = '9';
}

static void spoil_dash(struct gpusleep_create *c)
{
	c->tags[1].name[4] = '-';
}

static void spoil_unterminated(struct gpusleep_create *c)
{
	memset(c->tags[1].name, 'a', sizeof(c->tags[1].name));
}

static void spoil_after_nul(struct gpusleep_create *c)
{
	c->tags[1].name[sizeof(c->tags[1].name) - 1] = 'x';
}

static void spoil_duplicate(struct gpusleep_create *c)
{
	memcpy(c->tags[1].name, c->tags[0].name, sizeof(c->tags[0].name));
}

static void spoil_kind(struct gpusleep_create *c)
{
	c->tags[1].kind = 2;
}

static void spoil_two_kv(struct gpusleep_create *c)
{
	c->tags[1].kind = KVK;
}

static void spoil_flags(struct gpusleep_create *c)
{
	c->tags[0].flags = 1;
}

static void spoil_generation(struct gpusleep_create *c)
{
	c->tags[0].generation = 1;
}

static void spoil_reserved(struct gpusleep_create *c)
{
	c->tags[2].reserved = 1;
}

static void spoil_past_nr_tags(struct gpusleep_create *c)
{
	c->tags[3].kind = 1;
}

static void spoil_pad2(struct gpusleep_create *c)
{
	c->pad2 = 1;
}

FIXTURE(bad) {
	int dev;
};

FIXTURE_VARIANT(bad) {
	spoil_fn spoil;
};

#define BAD(n) FIXTURE_VARIANT_ADD(bad, n) { .spoil = spoil_##n }
BAD(too_many);
BAD(empty_name);
BAD(upper_case);
BAD(leading_digit);
BAD(dash);
BAD(unterminated);
BAD(after_nul);
BAD(duplicate);
BAD(kind);
BAD(two_kv);
BAD(flags);
BAD(generation);
BAD(reserved);
BAD(past_nr_tags);
BAD(pad2);

FIXTURE_SETUP(bad)
{
	self->dev = open(GS_DEV, O_RDWR | O_CLOEXEC);
	if (self->dev < 0)
		GS_SETUP_SKIP("%s: %s (module not loaded)", GS_DEV,
			      strerror(errno));
}

FIXTURE_TEARDOWN(bad)
{
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(bad, declaration_refused_nothing_made)
{
	static const char *const names[] = { "weights", "graph", "kv_cache" };
	struct gpusleep_create c;
	unsigned int i;
	int before, e;

	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "bad");
	c.nr_tags = 3;
	for (i = 0; i < 3; i++)
		snprintf(c.tags[i].name, sizeof(c.tags[i].name), "%s",
			 names[i]);
	c.tags[2].kind = KVK;
	/* the declaration as it stands is good */
	e = gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_DOMAIN, &c));
	ASSERT_LE(0, e);
	close(e);

	before = domains_alive();
	variant->spoil(&c);
	c.id = 0;
	EXPECT_EQ(-EINVAL, gs_err(ioctl(self->dev, GPUSLEEP_IOC_CREATE_DOMAIN,
					&c)));
	EXPECT_EQ(0, c.id);
	EXPECT_EQ(before, domains_alive());
}

TEST_HARNESS_MAIN
