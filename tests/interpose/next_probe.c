/* next_probe.so: dlsym(RTLD_NEXT)'s answer from just after the interposer.
 * Preloaded right after libuepoll-interpose.so and defining none of its
 * names, its next definition of a name is the interposer's: the answer
 * the interposer's table must hold (next_main.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

/* Not a tail call: dlsym must see this library as its caller. */
__attribute__((visibility("default"))) void *next_probe(const char *name) {
  void *volatile p = dlsym(RTLD_NEXT, name);
  return p;
}
