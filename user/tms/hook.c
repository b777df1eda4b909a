// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * torch_memory_saver's hook libraries, over libgpusleep.
 *
 * torch_memory_saver 0.0.10 ships, beside its package,
 * torch_memory_saver_hook_mode_preload{,_cu12,_cu13}.abi3.so and
 * torch_memory_saver_hook_mode_torch{,_cu12,_cu13}.abi3.so. Its callers
 * reach them without its Python: slime's trainer LD_PRELOADs the preload
 * library (slime/ray/actor_group.py: found beside the package, with
 * TMS_INIT_ENABLE=1 and TMS_INIT_ENABLE_CPU_BACKUP=1) and flips
 * tms_get/set_interesting_region through torch_memory_saver._impl
 * (slime/backends/megatron_utils/__init__.py). These libraries have the
 * same names, the same exported functions and read the same environment,
 * and put the memory they capture in the process's gpusleep memory
 * manager (user/torch_alloc.c: the same one as the PyTorch pluggable
 * allocator and the agent), tag by tag, so that a release through the
 * gpusleep module (or a local one) unmaps it.
 *
 * Built from this one file (user/user.mk):
 *   -DTMS_HOOK_PRELOAD  cudaMalloc / cudaFree, interposed by LD_PRELOAD:
 *                       inside an "interesting region" of the calling
 *                       thread, cudaMalloc allocates in the thread's tag;
 *                       cudaFree frees what is gpusleep's; everything
 *                       else goes to the CUDA runtime's own
 *   -DTMS_HOOK_TORCH    tms_torch_malloc / tms_torch_free, a PyTorch
 *                       pluggable allocator in the thread's tag
 *   -DTMS_CUDART="libcudart.so.12"  the runtime of the _cuNN variant,
 *                       looked for first among the loaded objects by its
 *                       soname (PyTorch loads it RTLD_LOCAL), then 13,
 *                       12, 11.0
 *
 * Per thread, as torch_memory_saver (its csrc/entrypoint.cpp): the
 * current tag ("default"), the interesting region (TMS_INIT_ENABLE until
 * set), CPU backup (TMS_INIT_ENABLE_CPU_BACKUP), its backend
 * (TMS_INIT_CPU_BACKUP_BACKEND, "pinned"), disk backup
 * (TMS_INIT_ENABLE_DISK_BACKUP); per process: TMS_RETAIN_CPU_BACKUP and
 * memory_margin_bytes. A boolean variable is 1/true/TRUE/yes/YES or
 * 0/false/FALSE/no/NO; another value ends the process, as there.
 *
 * What gpusleep cannot do is refused where it is asked for, by name,
 * never ignored: disk backup (an allocation with it on fails with
 * cudaErrorNotSupported), the "mmap" backup backend (gpusleep's staging
 * is pinned host memory), tms_pause/tms_resume while the process's memory
 * is a gpusleep domain's (the release goes through the domain; the
 * agent would otherwise be lied to). Tag names follow gpusleep's rule
 * ([a-z][a-z0-9_]*, 15 characters), at most 8 per process (declared on
 * first use; gpusleep_tag_bit()).
 *
 * libgpusleep.so.0 is not linked (no DT_NEEDED): the library loads it
 * with dlopen() when it is loaded itself (its constructor, before the
 * program's threads run), the copy already in the process first, so that
 * the process has one memory manager, the one gpusleep's Python package
 * uses (gpusleep._lib takes the copy already loaded), and so that the
 * wheel's build (user/python/python.mk) needs nothing manylinux_2_17 does
 * not allow (gs_load() below says where it looks).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "libgpusleep.h"

#define GS_SONAME	"libgpusleep.so.0"

/* The CUDA runtime's ABI (driver_types.h, cuda_runtime_api.h): an enum
 * passed as int; tests/host/test_tms_hook.py checks both. */
typedef int cudaError_t;
typedef void *cudaStream_t;
#define cudaSuccess			0
#define cudaErrorInvalidValue		1
#define cudaErrorMemoryAllocation	2
#define cudaErrorNotPermitted		800
#define cudaErrorNotSupported		801
#define cudaErrorUnknown		999

#define EXPORT __attribute__((visibility("default")))
#define TMS_TAG_MAX	64

#ifndef TMS_CUDART
#define TMS_CUDART	NULL	/* unsuffixed: whichever is loaded */
#endif

enum { UNSET = -1 };

struct tms_config {
	char tag[TMS_TAG_MAX];
	bool tag_too_long;
	int interesting;	/* UNSET: TMS_INIT_ENABLE */
	int cpu_backup;		/* UNSET: TMS_INIT_ENABLE_CPU_BACKUP */
	int disk_backup;	/* UNSET: TMS_INIT_ENABLE_DISK_BACKUP */
	char backend[8];	/* "": TMS_INIT_CPU_BACKUP_BACKEND */
};

static _Thread_local struct tms_config cfg = {
	.tag = "default",
	.interesting = UNSET,
	.cpu_backup = UNSET,
	.disk_backup = UNSET,
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	fputs("[torch_memory_saver (gpusleep)] ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* --------------------------------------------------- libgpusleep */

/* the functions of libgpusleep these libraries call, by their names */
#define GS_FUNCS(X)							\
	X(gpusleep_tag_bit) X(gpusleep_tag_names) X(gpusleep_set_backup)	\
	X(gpusleep_malloc_bit) X(gpusleep_free) X(gpusleep_mm)		\
	X(gpusleep_set_margin) X(gpusleep_set_staging_all)		\
	X(gpusleep_agent_domain) X(gs_mm_tag_of) X(gs_mm_pause)		\
	X(gs_mm_resume) X(gs_mm_backup_ptr)

struct gs_fns {
#define GS_PTR(name) __typeof__(name) *name;
	GS_FUNCS(GS_PTR)
#undef GS_PTR
};

static struct gs_fns gs_fns;
/* &gs_fns once every function is bound (published with release order) */
static const struct gs_fns *gs_bound;
static pthread_mutex_t gs_lock = PTHREAD_MUTEX_INITIALIZER;
/* what the last search tried, and why each failed (for the message) */
static char gs_tried[2048];
static bool retain_cpu_backup;

static void gs_note(const char *what, const char *why)
{
	size_t n = strlen(gs_tried);

	snprintf(gs_tried + n, sizeof(gs_tried) - n, "%s%s: %s",
		 n ? "; " : "", what, why ? why : "not found");
}

static void *gs_try(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		gs_note(path, dlerror());
	return h;
}

/*
 * Where libgpusleep.so.0 is looked for, first found wins (gpusleep._lib's
 * order, for each way these libraries are installed), DIR being this
 * library's directory:
 *   DIR/gpusleep/       the gpusleep wheel's copy (the drop-in's wheel puts
 *                       these libraries in site-packages, beside it)
 *   $GPUSLEEP_LIB       a path to the library
 *   DIR/                build/lib in the tree
 *   DIR/../             make install (PREFIX/lib/gpusleep/ holds these,
 *                       PREFIX/lib the library)
 *   the loader's own search path (ld.so.cache, LD_LIBRARY_PATH)
 */
static void *gs_search(void)
{
	static const char *const rel[] = { "gpusleep/" GS_SONAME, NULL,
					   GS_SONAME, "../" GS_SONAME };
	char dir[1024] = ".", path[1152];
	const char *env = getenv("GPUSLEEP_LIB");
	Dl_info info;
	void *h = NULL;

	if (dladdr((void *)gs_search, &info) && info.dli_fname &&
	    strrchr(info.dli_fname, '/')) {
		snprintf(dir, sizeof(dir), "%s", info.dli_fname);
		*strrchr(dir, '/') = '\0';
	}
	gs_tried[0] = '\0';
	for (size_t i = 0; !h && i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (!rel[i]) {
			if (env && *env)
				h = gs_try(env);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", dir, rel[i]);
		h = gs_try(path);
	}
	return h ? h : gs_try(GS_SONAME);
}

static bool gs_bind(void *h)
{
	struct gs_fns f;

#define GS_SYM(name)							\
	f.name = (__typeof__(name) *)dlsym(h, #name);			\
	if (!f.name) {							\
		gs_note(#name, "not in the libgpusleep loaded");	\
		return false;						\
	}
	GS_FUNCS(GS_SYM)
#undef GS_SYM
	gs_fns = f;
	__atomic_store_n(&gs_bound, &gs_fns, __ATOMIC_RELEASE);
	return true;
}

static void apply_retain(const struct gs_fns *g);

/*
 * libgpusleep's functions: the copy already loaded in the process (by
 * its soname), else, with search, the first found by gs_search(). NULL
 * when there is none (gs_tried says why).
 */
static const struct gs_fns *gs_load(bool search)
{
	const struct gs_fns *g = __atomic_load_n(&gs_bound, __ATOMIC_ACQUIRE);
	void *h;

	if (g)
		return g;
	pthread_mutex_lock(&gs_lock);
	if (!gs_bound) {
		h = dlopen(GS_SONAME, RTLD_NOW | RTLD_NOLOAD);
		if (!h && search)
			h = gs_search();
		if (h && !gs_bind(h))
			dlclose(h);
		if (gs_bound)
			apply_retain(gs_bound);
	}
	pthread_mutex_unlock(&gs_lock);
	return __atomic_load_n(&gs_bound, __ATOMIC_ACQUIRE);
}

/* libgpusleep for a call that cannot do without it; NULL after saying */
static const struct gs_fns *gs_need(const char *what)
{
	const struct gs_fns *g = gs_load(true);

	if (!g)
		say("%s: %s could not be loaded (install the gpusleep wheel beside this library, or set GPUSLEEP_LIB); tried %s",
		    what, GS_SONAME, gs_tried);
	return g;
}

/* torch_memory_saver's reading of a boolean variable, exit included */
static bool env_bool(const char *name)
{
	const char *v = getenv(name);

	if (!v)
		return false;
	if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "TRUE") ||
	    !strcmp(v, "yes") || !strcmp(v, "YES"))
		return true;
	if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "FALSE") ||
	    !strcmp(v, "no") || !strcmp(v, "NO"))
		return false;
	say("%s=\"%s\": want 1, true, yes or 0, false, no", name, v);
	exit(1);
}

static bool interesting(void)
{
	if (cfg.interesting == UNSET)
		cfg.interesting = env_bool("TMS_INIT_ENABLE");
	return cfg.interesting;
}

static bool cpu_backup(void)
{
	if (cfg.cpu_backup == UNSET)
		cfg.cpu_backup = env_bool("TMS_INIT_ENABLE_CPU_BACKUP");
	return cfg.cpu_backup;
}

static bool disk_backup(void)
{
	if (cfg.disk_backup == UNSET)
		cfg.disk_backup = env_bool("TMS_INIT_ENABLE_DISK_BACKUP");
	return cfg.disk_backup;
}

static void set_backend(const char *v, const char *what)
{
	if (!v || !*v)
		v = "pinned";
	if (strcmp(v, "pinned") && strcmp(v, "mmap")) {
		say("%s \"%s\": want mmap or pinned", what, v);
		exit(1);
	}
	strcpy(cfg.backend, v);
}

static const char *backend(void)
{
	if (!cfg.backend[0])
		set_backend(getenv("TMS_INIT_CPU_BACKUP_BACKEND"),
			    "TMS_INIT_CPU_BACKUP_BACKEND");
	return cfg.backend;
}

/* ------------------------------------------------ the CUDA runtime */
#ifdef TMS_HOOK_PRELOAD

/*
 * A function of the CUDA runtime itself, not ours: the next definition
 * after this library (the runtime a program links), else the runtime
 * PyTorch loaded on its own (RTLD_LOCAL), found by its soname.
 */
static void *cudart_sym(const char *name)
{
	/* the variant's own runtime first, then any: slime picks the _cu13
	 * library first whatever runtime PyTorch has */
	static const char *const sonames[] = {
		TMS_CUDART, "libcudart.so.13", "libcudart.so.12",
		"libcudart.so.11.0",
	};
	void *f = dlsym(RTLD_NEXT, name);

	if (f)
		return f;
	for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]); i++) {
		void *h = sonames[i] ? dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD) :
				       NULL;

		if (h) {
			f = dlsym(h, name);
			dlclose(h);	/* still loaded by its owner */
			if (f)
				return f;
		}
	}
	return NULL;
}

typedef cudaError_t (*malloc_fn)(void **, size_t);
typedef cudaError_t (*free_fn)(void *);
typedef cudaError_t (*getdev_fn)(int *);

static cudaError_t no_runtime(const char *name)
{
	say("%s: the CUDA runtime's own %s was not found (no libcudart.so.* loaded)",
	    name, name);
	return cudaErrorUnknown;
}

static cudaError_t current_device(int *dev)
{
	static getdev_fn real;

	if (!real)
		real = (getdev_fn)cudart_sym("cudaGetDevice");
	if (!real)
		return no_runtime("cudaGetDevice");
	return real(dev);
}
#endif

/* ------------------------------------------------------ allocation */

/* Allocate size bytes in the thread's tag on device; cudaError_t. */
static cudaError_t tms_alloc(void **ptr, size_t size, int device,
			     cudaStream_t stream)
{
	bool backup = cpu_backup();
	const struct gs_fns *g;
	int bit;

	*ptr = NULL;
	if (disk_backup()) {
		say("disk backup (enable_disk_backup, TMS_INIT_ENABLE_DISK_BACKUP) is not supported by gpusleep: allocation of %zu bytes in tag \"%s\" refused",
		    size, cfg.tag);
		return cudaErrorNotSupported;
	}
	if (backup && !strcmp(backend(), "mmap")) {
		say("cpu_backup_backend \"mmap\" (TMS_INIT_CPU_BACKUP_BACKEND) is not supported by gpusleep, whose backups are pinned host memory: allocation of %zu bytes in tag \"%s\" refused",
		    size, cfg.tag);
		return cudaErrorNotSupported;
	}
	if (cfg.tag_too_long) {
		say("tag longer than %d characters: allocation refused",
		    GPUSLEEP_TAG_NAME_LEN - 1);
		return cudaErrorInvalidValue;
	}
	g = gs_need("allocation");
	if (!g)
		return cudaErrorUnknown;
	bit = g->gpusleep_tag_bit(cfg.tag, 1);
	if (bit < 0) {
		if (bit == -ENOSPC)
			say("tag \"%s\": %d tags are declared already, gpusleep's limit",
			    cfg.tag, GPUSLEEP_MAX_TAGS);
		else if (bit == -EBUSY)
			say("tag \"%s\": not in the gpusleep domain's declaration, made before its first use (name it in configure(tags=...) or GPUSLEEP_TMS_TAGS)",
			    cfg.tag);
		else
			say("tag \"%s\": gpusleep tags are [a-z][a-z0-9_]*, at most %d characters",
			    cfg.tag, GPUSLEEP_TAG_NAME_LEN - 1);
		return cudaErrorInvalidValue;
	}
	g->gpusleep_set_backup((unsigned int)bit, backup);
	*ptr = g->gpusleep_malloc_bit((unsigned int)bit, (ssize_t)size, device,
				      stream);
	return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

#ifdef TMS_HOOK_PRELOAD
/* gpusleep's memory: only once libgpusleep is in the process */
static const struct gs_fns *is_ours(const void *ptr)
{
	const struct gs_fns *g = ptr ? gs_load(false) : NULL;
	struct gs_mm *mm = g ? g->gpusleep_mm() : NULL;

	return mm && g->gs_mm_tag_of(mm, ptr) ? g : NULL;
}

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	static malloc_fn real;
	int dev;
	cudaError_t ret;

	if (devPtr && size && interesting()) {
		ret = current_device(&dev);
		return ret ? ret : tms_alloc(devPtr, size, dev, NULL);
	}
	if (!real)
		real = (malloc_fn)cudart_sym("cudaMalloc");
	return real ? real(devPtr, size) : no_runtime("cudaMalloc");
}

EXPORT cudaError_t cudaFree(void *devPtr)
{
	static free_fn real;
	const struct gs_fns *g = is_ours(devPtr);

	if (g) {
		g->gpusleep_free(devPtr, 0, 0, NULL);
		return cudaSuccess;
	}
	if (!real)
		real = (free_fn)cudart_sym("cudaFree");
	return real ? real(devPtr) : no_runtime("cudaFree");
}
#endif

#ifdef TMS_HOOK_TORCH
EXPORT void *tms_torch_malloc(ssize_t size, int device, cudaStream_t stream)
{
	void *p;

	if (!interesting()) {
		say("tms_torch_malloc outside a region (interesting region off): refused");
		return NULL;
	}
	if (size < 0 || tms_alloc(&p, (size_t)size, device, stream))
		return NULL;
	return p;
}

EXPORT void tms_torch_free(void *ptr, ssize_t size, int device,
			   cudaStream_t stream)
{
	/* what tms_torch_malloc gave out: libgpusleep is loaded */
	const struct gs_fns *g = ptr ? gs_load(false) : NULL;

	if (g)
		g->gpusleep_free(ptr, size, device, stream);
	else if (ptr)
		say("tms_torch_free(%p): not gpusleep's memory (no libgpusleep loaded)",
		    ptr);
}
#endif

/* ------------------------------------------- the thread's settings */

EXPORT void tms_set_interesting_region(bool is_interesting_region)
{
	cfg.interesting = is_interesting_region;
}

EXPORT bool tms_get_interesting_region(void)
{
	return interesting();
}

EXPORT void tms_set_current_tag(const char *tag)
{
	if (!tag) {
		say("tms_set_current_tag: tag should not be null");
		exit(1);
	}
	/* kept (shortened) for tms_get_current_tag; allocations refused */
	cfg.tag_too_long = strlen(tag) >= GPUSLEEP_TAG_NAME_LEN;
	snprintf(cfg.tag, sizeof(cfg.tag), "%s", tag);
}

EXPORT const char *tms_get_current_tag(void)
{
	return cfg.tag;
}

EXPORT bool tms_get_enable_cpu_backup(void)
{
	return cpu_backup();
}

EXPORT void tms_set_enable_cpu_backup(bool enable_cpu_backup)
{
	cfg.cpu_backup = enable_cpu_backup;
}

EXPORT const char *tms_get_cpu_backup_backend(void)
{
	return backend();
}

EXPORT void tms_set_cpu_backup_backend(const char *value)
{
	set_backend(value, "tms_set_cpu_backup_backend");
}

EXPORT bool tms_get_enable_disk_backup(void)
{
	return disk_backup();
}

EXPORT void tms_set_enable_disk_backup(bool enable_disk_backup)
{
	cfg.disk_backup = enable_disk_backup;
}

/* ------------------------------------------------ the process's */

EXPORT void tms_set_disk_backup_dir(const char *dir)
{
	say("tms_set_disk_backup_dir(\"%s\"): disk backup is not supported by gpusleep",
	    dir ? dir : "(null)");
}

EXPORT void set_memory_margin_bytes(uint64_t value)
{
	const struct gs_fns *g = gs_need("set_memory_margin_bytes");

	if (g)
		g->gpusleep_set_margin(value);
}

/* retain_cpu_backup into libgpusleep (also when it is loaded) */
static void apply_retain(const struct gs_fns *g)
{
	int ret = g->gpusleep_set_staging_all(retain_cpu_backup ? 0 :
					      GS_MM_STAGING_FREE_AFTER_RESUME);

	if (ret)
		say("retain_cpu_backup: %s", strerror(-ret));
}

EXPORT void tms_set_retain_cpu_backup(bool retain)
{
	const struct gs_fns *g;

	retain_cpu_backup = retain;
	g = gs_need("tms_set_retain_cpu_backup");
	if (g)
		apply_retain(g);
}

EXPORT bool tms_get_retain_cpu_backup(void)
{
	return retain_cpu_backup;
}

/* libgpusleep now, before the program's threads run (applies retain);
 * none found is said at the first call that needs it */
__attribute__((constructor)) static void tms_hook_init(void)
{
	retain_cpu_backup = env_bool("TMS_RETAIN_CPU_BACKUP");
	gs_load(true);
}

/* pause (or resume) tag (NULL, "": every tag), here, without the module */
static int local_op(const char *tag, bool pause)
{
	const char *what = pause ? "tms_pause" : "tms_resume";
	const struct gs_fns *g = gs_load(false);
	struct gs_mm *mm = g ? g->gpusleep_mm() : NULL;
	unsigned int domain = g ? g->gpusleep_agent_domain() : 0;
	char names[GPUSLEEP_MAX_TAGS * GPUSLEEP_TAG_NAME_LEN];
	uint32_t mask = 0;
	int n;

	if (domain) {
		say("%s(\"%s\"): this process's memory is gpusleep domain %u's: release and resume it through the domain (torch_memory_saver.pause()/resume(), or a controller)",
		    what, tag ? tag : "", domain);
		return cudaErrorNotPermitted;
	}
	if (!mm)
		return cudaSuccess;	/* nothing allocated */
	if (tag && *tag) {
		int bit = g->gpusleep_tag_bit(tag, 0);

		if (bit < 0)
			return cudaSuccess;	/* nothing in it */
		mask = 1U << bit;
	} else {
		n = g->gpusleep_tag_names(names, sizeof(names));
		mask = n > 0 ? (1U << n) - 1 : 0;
	}
	for (unsigned int i = 0; i < GPUSLEEP_MAX_TAGS; i++) {
		uint64_t bytes;
		int ret;

		if (!(mask & (1U << i)))
			continue;
		ret = pause ? g->gs_mm_pause(mm, 1U << i, &bytes) :
			      g->gs_mm_resume(mm, 1U << i, &bytes);
		if (ret && ret != -EALREADY) {
			say("%s: tag bit %u: %s", what, i, strerror(-ret));
			return ret == -ENOMEM ? cudaErrorMemoryAllocation :
						cudaErrorUnknown;
		}
	}
	return cudaSuccess;
}

EXPORT int tms_pause(const char *tag)
{
	return local_op(tag, true);
}

EXPORT int tms_resume(const char *tag)
{
	return local_op(tag, false);
}

EXPORT uint8_t *tms_get_cpu_backup_pointer(const uint8_t *gpu_ptr,
					   uint64_t size)
{
	const struct gs_fns *g = gs_load(false);
	struct gs_mm *mm = g ? g->gpusleep_mm() : NULL;
	void *host = NULL;
	int ret = mm ? g->gs_mm_backup_ptr(mm, gpu_ptr, size, &host) : -ENOENT;

	if (ret)
		say("tms_get_cpu_backup_pointer(%p, %llu): %s", (const void *)gpu_ptr,
		    (unsigned long long)size,
		    ret == -ENOENT ? "not gpusleep memory" :
		    ret == -ENODATA ? "released without a CPU backup" :
		    ret == -EXDEV ? "its backup is not contiguous (gs_mm_backup_read)" :
		    strerror(-ret));
	return host;
}
