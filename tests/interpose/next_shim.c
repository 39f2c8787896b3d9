/* next_shim.so: definitions after the interposer that a walk over symbol
 * tables could get wrong, each passing the call on to libc (next_main.c):
 *  - lseek in two versions, the old one hidden: the default is the one;
 *  - fsync an indirect function: the answer is what its resolver returns;
 *  - dup a plain definition: it comes before libc's;
 *  - openat, which counts its calls: a program that opens the interposer
 *    and then this library with dlopen (RTLD_LOCAL) has it after the
 *    interposer in load order, where dlsym(RTLD_NEXT) does not look.
 * Built with a version script (next_shim.map). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "next_pass.h"

#define EXPORT __attribute__((visibility("default")))

static void *Next(const char *name) { return dlsym(RTLD_NEXT, name); }

static off_t LseekOld(int fd, off_t offset, int whence) {
  off_t (*f)(int, off_t, int);
  void *p = Next("lseek");
  memcpy(&f, &p, sizeof p);
  return f(fd, offset, whence);
}
static off_t LseekNew(int fd, off_t offset, int whence) {
  return LseekOld(fd, offset, whence);
}
__asm__(".symver next_shim_lseek_old, lseek@NEXT_SHIM_1");
__asm__(".symver next_shim_lseek_new, lseek@@NEXT_SHIM_2");
EXPORT off_t next_shim_lseek_old(int, off_t, int)
    __attribute__((alias("LseekOld")));
EXPORT off_t next_shim_lseek_new(int, off_t, int)
    __attribute__((alias("LseekNew")));

NEXT_PASS_INT_INT(Fsync, "fsync")
static void *ResolveFsync(void) { return (void *)Fsync; }
EXPORT int fsync(int) __attribute__((ifunc("ResolveFsync")));

NEXT_PASS_INT_INT(Dup, "dup")
EXPORT int dup(int) __attribute__((alias("Dup")));

static atomic_int g_openat_calls;

static int Openat(int dirfd, const char *path, int flags, mode_t mode) {
  atomic_fetch_add(&g_openat_calls, 1);
  int (*f)(int, const char *, int, ...);
  void *p = Next("openat");
  memcpy(&f, &p, sizeof p);
  return f(dirfd, path, flags, mode);
}
EXPORT int openat(int, const char *, int, mode_t)
    __attribute__((alias("Openat")));
EXPORT int next_shim_openat_calls(void) { return atomic_load(&g_openat_calls); }

/* What the test expects the interposer's table to hold. */
EXPORT void *next_shim_lseek(void) { return (void *)LseekNew; }
EXPORT void *next_shim_fsync(void) { return (void *)Fsync; }
EXPORT void *next_shim_dup(void) { return (void *)Dup; }
