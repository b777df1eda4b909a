// SPDX-License-Identifier: GPL-2.0
/* gpusleepctl: reading domains from sysfs (domain.h). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "domain.h"
#include "gpusleepctl.h"

const struct field domain_fields[FLD_COUNT] = {
#define X(m, k, fl, jg, jk, txt, aux, me, ml, mt, h) \
	[FLD_##m] = { #m, K_##k, fl, jg, jk, txt, offsetof(struct domain, m), \
		      offsetof(struct domain, aux), me, ml, mt, h },
#define NONE none_
	GS_DOMAIN_FIELDS(X)
#undef NONE
#undef X
};

const char *const state_names[] = {
	"awake", "draining", "releasing", "released", "resuming", "dead",
};
const size_t n_state_names = sizeof(state_names) / sizeof(state_names[0]);

/* Read one attribute, without its newline. -errno on failure. */
static int read_attr(const char *dir, const char *name, char *buf, size_t len)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	buf[n] = '\0';
	if (n && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	return 0;
}

static int read_u64(const char *dir, const char *name, uint64_t *v)
{
	char buf[32], *end;
	int r = read_attr(dir, name, buf, sizeof(buf));

	if (r)
		return r;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EINVAL;
	return 0;
}

static int read_s64(const char *dir, const char *name, int64_t *v)
{
	char buf[32], *end;
	int r = read_attr(dir, name, buf, sizeof(buf));

	if (r)
		return r;
	errno = 0;
	*v = strtoll(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EINVAL;
	return 0;
}

static size_t str_len(enum field_kind k)
{
	switch (k) {
	case K_STATE:
		return sizeof(fv_STATE);
	case K_TAGS:
		return sizeof(fv_TAGS);
	case K_TAGU64:
		return sizeof(fv_TAGU64);
	case K_TAGSTR:
		return sizeof(fv_TAGSTR);
	default:
		return sizeof(fv_STR);
	}
}

int domain_load(uint32_t id, struct domain *d)
{
	char dir[PATH_MAX];
	size_t i;
	int r;

	memset(d, 0, sizeof(*d));
	snprintf(dir, sizeof(dir), "%s/domain%u", sysfs_root, id);
	d->id = id;
	for (i = 0; i < FLD_COUNT; i++) {
		const struct field *f = &domain_fields[i];

		switch (f->kind) {
		case K_STR:
		case K_TAGS:
		case K_TAGU64:
		case K_TAGSTR:
		case K_STATE:
			r = read_attr(dir, f->name, FIELD_PTR(d, f),
				      str_len(f->kind));
			break;
		case K_S64:
			r = read_s64(dir, f->name, (int64_t *)FIELD_PTR(d, f));
			break;
		default:
			r = read_u64(dir, f->name, (uint64_t *)FIELD_PTR(d, f));
			break;
		}
		if (r == -ENOENT && (f->flags & F_OPT) && !access(dir, F_OK))
			continue;
		if (r)
			return r;
		d->present |= 1ULL << i;
	}
	return 0;
}

void domain_name(uint32_t id, char *buf, size_t len)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/domain%u", sysfs_root, id);
	if (read_attr(dir, "name", buf, len))
		buf[0] = '\0';
}

uint64_t domain_released_bytes(const struct domain *d)
{
	char tag[GPUSLEEP_TAG_NAME_LEN], val[24];
	uint64_t sum = 0;
	size_t i;

	for (i = 0; !list_item(d->tags, i, tag, sizeof(tag)) &&
		    !list_item(d->tag_bytes_released, i, val, sizeof(val)); i++)
		if (has_tag(d->released_tags, tag))
			sum += strtoull(val, NULL, 10);
	return sum;
}

bool domain_left(const struct domain *d, struct left *l)
{
	char val[24];
	uint64_t known;

	memset(l, 0, sizeof(*l));
	if (!(d->present & (1ULL << FLD_gpu_uuid)) || !d->gpu_uuid[0])
		return false;
	for (size_t i = 0; !list_item(d->tag_mapped_bytes, i, val,
				      sizeof(val)); i++)
		l->tags += strtoull(val, NULL, 10);
	l->torch = d->resident_torch_bytes;
	l->graphs = d->resident_graph_bytes;
	l->process = d->resident_process_bytes;
	l->source = d->resident_process_source[0] ?
		    d->resident_process_source : "unknown";
	/* the rest of the process: only from its own figure (NVML) */
	known = l->tags + l->torch + l->graphs;
	if (!strcmp(l->source, "process") && l->process >= known) {
		l->other = l->process - known;
		l->other_known = true;
	}
	return true;
}

int field_never(const struct domain *d, const struct field *f)
{
	if (f->kind != K_US || f->aux_off == offsetof(struct domain, none_))
		return 0;
	return !FIELD_U64(d, f) &&
	       !*(const uint64_t *)((const char *)d + f->aux_off);
}

int has_tag(const char *list, const char *tag)
{
	size_t n = strlen(tag);
	const char *p = list;

	while ((p = strstr(p, tag))) {
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return 1;
		p += n;
	}
	return 0;
}

int list_item(const char *list, size_t i, char *buf, size_t len)
{
	const char *p = list;
	size_t n;

	if (!*p)
		return -ENOENT;
	for (; i; i--) {
		p = strchr(p, ',');
		if (!p)
			return -ENOENT;
		p++;
	}
	n = strcspn(p, ",");
	snprintf(buf, len, "%.*s", (int)n, p);
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int domain_ids(uint32_t **ids, size_t *n)
{
	size_t cap = 0, cnt = 0;
	uint32_t *v = NULL, *nv;
	struct dirent *de;
	unsigned long id;
	char *end;
	DIR *dir;

	dir = opendir(sysfs_root);
	if (!dir)
		return -errno;
	while ((de = readdir(dir))) {
		if (strncmp(de->d_name, "domain", 6) ||
		    !isdigit((unsigned char)de->d_name[6]))
			continue;
		id = strtoul(de->d_name + 6, &end, 10);
		if (*end || id > UINT32_MAX)
			continue;
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				closedir(dir);
				return -ENOMEM;
			}
			v = nv;
		}
		v[cnt++] = (uint32_t)id;
	}
	closedir(dir);
	if (cnt)
		qsort(v, cnt, sizeof(*v), cmp_u32);
	*ids = v;
	*n = cnt;
	return 0;
}

int no_module(void)
{
	jerr.err = -ENOENT;
	errmsg("%s: missing: the gpusleep module is not loaded (load it: sudo modprobe gpusleep)",
	       sysfs_root);
	return EX_NOTFOUND;
}

int all_domain_ids(uint32_t **ids, size_t *n)
{
	int r = domain_ids(ids, n);

	if (r == -ENOENT)
		return no_module();
	if (r) {
		errmsg("%s: %s", sysfs_root, strerror(-r));
		return EX_FAILED;
	}
	return 0;
}

int domain_load_all(struct domain **ds, size_t *n)
{
	struct domain *v;
	uint32_t *ids;
	size_t cnt, i, nd = 0;
	int r = domain_ids(&ids, &cnt);

	if (r)
		return r;
	v = calloc(cnt ? cnt : 1, sizeof(*v));
	if (!v) {
		free(ids);
		return -ENOMEM;
	}
	for (i = 0; i < cnt; i++)
		if (!domain_load(ids[i], &v[nd]))
			nd++;	/* else it went away meanwhile */
	free(ids);
	*ds = v;
	*n = nd;
	return 0;
}

int all_domains(struct domain **ds, size_t *n)
{
	int r = domain_load_all(ds, n);

	if (r == -ENOENT)
		return no_module();
	if (r) {
		errmsg("%s: %s", sysfs_root, strerror(-r));
		return EX_FAILED;
	}
	return 0;
}

/*
 * DOMAIN: an id, or a name. Where several domains have the name, the one
 * whose creator this process sees (owner_pid is not 0 in its pid
 * namespace): inside a container, another container's domain of the same
 * name is not a candidate.
 */
int resolve(const char *arg, uint32_t *id)
{
	struct domain d;
	uint32_t *ids, found = 0, mine = 0;
	size_t n, i, matches = 0, seen = 0;
	unsigned long v;
	char *end;
	int r;

	if (access(sysfs_root, F_OK))
		return no_module();
	if (isdigit((unsigned char)arg[0])) {
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (!errno && !*end && v && v <= UINT32_MAX) {
			if (domain_load((uint32_t)v, &d)) {
				errmsg("domain %s: no such domain (gpusleepctl list shows them)",
				       arg);
				return EX_NOTFOUND;
			}
			*id = (uint32_t)v;
			return 0;
		}
	}
	r = domain_ids(&ids, &n);
	if (r) {
		errmsg("%s: %s", sysfs_root, strerror(-r));
		return EX_NOTFOUND;
	}
	for (i = 0; i < n; i++) {
		if (domain_load(ids[i], &d) || strcmp(d.name, arg))
			continue;
		if (!matches++)
			found = ids[i];
		if ((d.present & (1ULL << FLD_owner_pid)) && d.owner_pid &&
		    !seen++)
			mine = ids[i];
	}
	free(ids);
	if (matches > 1 && seen == 1) {
		matches = 1;
		found = mine;
	}
	if (!matches) {
		errmsg("domain %s: no such domain (gpusleepctl list shows them)",
		       arg);
		return EX_NOTFOUND;
	}
	if (matches > 1) {
		jerr.err = -EINVAL;
		errmsg("domain %s: %zu domains have that name; give the id (gpusleepctl list shows them)",
		       arg, matches);
		return EX_USAGE;
	}
	*id = found;
	return 0;
}
