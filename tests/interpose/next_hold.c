/* next_hold.so: a getenv before libc's that can hold one thread's next
 * call until the test lets it go (next_main.c's forkonce: the interposer
 * parses UEPOLL_INTERPOSE under a once-guard with getenv, and a fork
 * meanwhile finds that guard running in a thread the child does not
 * have). Built without symbol versions: the interposer's reference asks
 * for libc's version of the name, which only an unversioned definition
 * before libc's also satisfies. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_t g_holder;
static atomic_int g_hold, g_held, g_released;

/* The calling thread's next getenv waits for next_hold_release. */
EXPORT void next_hold_my_next_getenv(void) {
  g_holder = pthread_self();
  atomic_store(&g_hold, 1);
}
EXPORT int next_hold_held(void) { return atomic_load(&g_held); }
EXPORT void next_hold_release(void) { atomic_store(&g_released, 1); }

EXPORT char *getenv(const char *name) {
  char *(*real)(const char *);
  void *p = dlsym(RTLD_NEXT, "getenv");
  memcpy(&real, &p, sizeof p);
  if (atomic_load(&g_hold) && pthread_equal(pthread_self(), g_holder) &&
      atomic_exchange(&g_hold, 0)) {
    atomic_store(&g_held, 1);
    while (!atomic_load(&g_released)) sched_yield();
  }
  return real(name);
}
