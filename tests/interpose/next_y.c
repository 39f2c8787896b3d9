/* next_y.so: an lseek that a program opens (RTLD_LOCAL) before a plugin
 * that needs the interposer, then this library, then next_shim.so (which
 * defines lseek too, and dup): from the interposer, dlsym(RTLD_NEXT)
 * searches the plugin's dependencies in their order, so lseek is this
 * library's, though next_shim.so comes after the interposer in load order
 * and this one before it (next_main.c's plugin). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <string.h>
#include <sys/types.h>

#define EXPORT __attribute__((visibility("default")))

static off_t Lseek(int fd, off_t offset, int whence) {
  off_t (*f)(int, off_t, int);
  void *volatile p = dlsym(RTLD_NEXT, "lseek");
  memcpy(&f, (void **)&p, sizeof f);
  return f(fd, offset, whence);
}
EXPORT off_t lseek(int, off_t, int) __attribute__((alias("Lseek")));
EXPORT void *next_y_lseek(void) { return (void *)Lseek; }
