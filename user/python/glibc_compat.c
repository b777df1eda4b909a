// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Linked into the wheels' libraries only (user/python/python.mk: the
 * gpusleep wheel's libgpusleep.so.0, the drop-in wheel's hook libraries):
 * the glibc functions they call whose default symbol version is newer
 * than what the wheels' platform tag, manylinux_2_17, promises.
 *
 * glibc 2.34 moved libdl and libpthread into libc.so.6, and a program
 * linked against it asks for dlopen@GLIBC_2.34, pthread_create@GLIBC_2.34
 * and so on, which no older glibc has: the library would not load there.
 * glibc keeps the old versions of these symbols (dlopen@GLIBC_2.2.5...)
 * for the programs linked before; each function here is the library's own
 * dlopen, hidden, calling that old version. On a glibc older than 2.34
 * the old versions are in libdl.so.2 and libpthread.so.0, which the wheel's
 * library therefore names (DT_NEEDED; on 2.34 and later they are empty
 * stubs). tests/host/test_wheel.py checks the result: no symbol version
 * past GLIBC_2.17, auditwheel's verdict, and a load under glibc 2.31.
 */
#define _GNU_SOURCE	/* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#define OLD(fn, ver) __asm__(".symver gs_old_" #fn ", " #fn "@" ver)
#define HIDDEN __attribute__((visibility("hidden")))

OLD(dlopen, "GLIBC_2.2.5");
OLD(dlsym, "GLIBC_2.2.5");
OLD(dlerror, "GLIBC_2.2.5");
OLD(dlclose, "GLIBC_2.2.5");
OLD(dladdr, "GLIBC_2.2.5");
OLD(pthread_create, "GLIBC_2.2.5");
OLD(pthread_join, "GLIBC_2.2.5");
OLD(pthread_condattr_setclock, "GLIBC_2.3.3");

void *gs_old_dlopen(const char *file, int mode);
void *gs_old_dlsym(void *handle, const char *name);
char *gs_old_dlerror(void);
int gs_old_dlclose(void *handle);
int gs_old_dladdr(const void *addr, Dl_info *info);
int gs_old_pthread_create(pthread_t *t, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg);
int gs_old_pthread_join(pthread_t t, void **ret);
int gs_old_pthread_condattr_setclock(pthread_condattr_t *attr,
				     clockid_t clock);

HIDDEN void *dlopen(const char *file, int mode)
{
	return gs_old_dlopen(file, mode);
}

HIDDEN void *dlsym(void *handle, const char *name)
{
	return gs_old_dlsym(handle, name);
}

HIDDEN char *dlerror(void)
{
	return gs_old_dlerror();
}

HIDDEN int dlclose(void *handle)
{
	return gs_old_dlclose(handle);
}

HIDDEN int dladdr(const void *addr, Dl_info *info)
{
	return gs_old_dladdr(addr, info);
}

HIDDEN int pthread_create(pthread_t *t, const pthread_attr_t *attr,
			  void *(*fn)(void *), void *arg)
{
	return gs_old_pthread_create(t, attr, fn, arg);
}

HIDDEN int pthread_join(pthread_t t, void **ret)
{
	return gs_old_pthread_join(t, ret);
}

HIDDEN int pthread_condattr_setclock(pthread_condattr_t *attr,
				     clockid_t clock)
{
	return gs_old_pthread_condattr_setclock(attr, clock);
}
