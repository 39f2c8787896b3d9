/* next_hold.so: a dl_iterate_phdr before libc's that can hold one
 * thread's next call, inside the walk (the loader's list lock held),
 * until the test lets it go (next_ctor_lib.c: a fork meanwhile finds the
 * interposer's set-up running in that thread, and the lock held for good
 * in the child). Built without symbol versions: the interposer's
 * reference asks for libc's version of the name, which only an
 * unversioned definition before libc's also satisfies. */
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

typedef int (*Callback)(struct dl_phdr_info *, size_t, void *);

static pthread_t g_holder;
static atomic_int g_hold, g_held, g_released;
static Callback g_callback;

/* The calling thread's next dl_iterate_phdr waits inside its walk for
 * next_hold_release. */
EXPORT void next_hold_my_next_walk(void) {
  g_holder = pthread_self();
  atomic_store(&g_hold, 1);
}
EXPORT int next_hold_held(void) { return atomic_load(&g_held); }
EXPORT void next_hold_release(void) { atomic_store(&g_released, 1); }

static int Held(struct dl_phdr_info *info, size_t size, void *data) {
  if (!atomic_exchange(&g_held, 1)) {
    while (!atomic_load(&g_released)) sched_yield();
  }
  return g_callback(info, size, data);
}

EXPORT int dl_iterate_phdr(Callback cb, void *data) {
  int (*real)(Callback, void *);
  void *p = dlsym(RTLD_NEXT, "dl_iterate_phdr");
  memcpy(&real, &p, sizeof p);
  if (atomic_load(&g_hold) && pthread_equal(pthread_self(), g_holder) &&
      atomic_exchange(&g_hold, 0)) {
    g_callback = cb;
    return real(Held, data);
  }
  return real(cb, data);
}
