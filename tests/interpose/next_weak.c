/* next_weak.so: definitions after the interposer that glibc's lookup
 * passes over in some settings, each passing the call on to libc
 * (next_main.c, mode weak):
 *  - dup a plain definition: the one name of this library the walk's
 *    check asks dlsym for (the first of its names in the table), so that
 *    the check agrees and only the walk's own rules decide the two below;
 *  - fsync a weak definition: the one, unless LD_DYNAMIC_WEAK is set, where
 *    dlsym looks on for a global one (libc's fsync is global; its dup2,
 *    like many of its calls, is weak, and the first weak one stays);
 *  - fdatasync made hidden after the link (elf_hide.c, run by the
 *    build on this library: a linker drops hidden symbols from the
 *    dynamic table, so only a patched one has it there): dlsym skips it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "next_pass.h"

#define EXPORT __attribute__((visibility("default")))

NEXT_PASS_INT_INT(Dup, "dup")
EXPORT int dup(int) __attribute__((alias("Dup")));

NEXT_PASS_INT_INT(Fsync, "fsync")
EXPORT int fsync(int) __attribute__((weak, alias("Fsync")));

NEXT_PASS_INT_INT(Fdatasync, "fdatasync")
EXPORT int fdatasync(int) __attribute__((alias("Fdatasync")));

/* What the test compares the interposer's table with. */
EXPORT void *next_weak_dup(void) { return (void *)Dup; }
EXPORT void *next_weak_fsync(void) { return (void *)Fsync; }
EXPORT void *next_weak_fdatasync(void) { return (void *)Fdatasync; }
