/* next_hold.so: a dl_iterate_phdr before libc's that can hold one
 * thread's next call until the test lets it go (next_main.c's forkonce:
 * a fork meanwhile finds the interposer's set-up running in that thread).
 * Built without symbol versions: the interposer's reference asks for
 * libc's version of the name, which only an unversioned definition
 * before libc's also satisfies. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_t g_holder;
static atomic_int g_hold, g_held, g_released;

/* The calling thread's next dl_iterate_phdr waits for next_hold_release. */
EXPORT void next_hold_my_next_walk(void) {
  g_holder = pthread_self();
  atomic_store(&g_hold, 1);
}
EXPORT int next_hold_held(void) { return atomic_load(&g_held); }
EXPORT void next_hold_release(void) { atomic_store(&g_released, 1); }

EXPORT int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
                           void *data) {
  int (*real)(int (*)(struct dl_phdr_info *, size_t, void *), void *);
  void *p = dlsym(RTLD_NEXT, "dl_iterate_phdr");
  memcpy(&real, &p, sizeof p);
  if (atomic_load(&g_hold) && pthread_equal(pthread_self(), g_holder) &&
      atomic_exchange(&g_hold, 0)) {
    atomic_store(&g_held, 1);
    while (!atomic_load(&g_released)) sched_yield();
  }
  return real(cb, data);
}
