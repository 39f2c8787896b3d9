/* The engine, loaded on first use.
 *
 * libuepoll-interpose.so does not link libuepoll: loading it, and the C++
 * runtime it needs, is about 0.7 ms for each process started under the
 * interposer (BENCHMARKS.md), most of which never make a uepoll object (a
 * shell's commands, a server's CGI children). So the engine comes into the
 * process in one of two ways:
 *  - the first constructor that makes a uepoll object (epoll_create,
 *    eventfd, pipe... in the kinds UEPOLL_INTERPOSE names) loads it with
 *    dlopen, from this library's own directory (uepoll_interpose_load);
 *  - a program or library that links libuepoll brings it in itself.
 * Either way the engine's constructor hands this library its table of
 * entry points (uepoll_interpose_attach; capi/interpose_attach.cc), so
 * there is one engine in the process.
 *
 * Until then no uepoll object exists, and every interposed call goes to
 * libc as the engine would have passed it (interpose.h, ENGINE_OR_LIBC).
 * What the engine must know of the time before it is caught up as it comes
 * in (Attach): the signal handlers installed so far are wrapped, as if
 * they had been installed through uepoll_sigaction, and the fork mode is
 * set.
 *
 * Not covered (untested): a fork while another thread is loading the
 * engine; a child that then makes a uepoll object may block (dlopen's own
 * lock, held by a thread the child does not have, is the same hazard for
 * any library loaded on demand).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/interpose.h"

const struct uepoll_engine_calls *_Atomic uepoll_interpose_g_engine;

/* Set for good once Attach begins its pass over the signal handlers. */
static atomic_int g_attaching;

int uepoll_interpose_attaching(void) {
  return atomic_load_explicit(&g_attaching, memory_order_seq_cst);
}

const struct uepoll_engine_calls *uepoll_interpose_attached(void) {
  const struct uepoll_engine_calls *e;
  /* Attach publishes the engine right after its pass, which takes no
   * lock a caller here can hold. */
  while ((e = Engine()) == NULL) sched_yield();
  return e;
}

/* One line on stderr, through libc's write (not the interposed one). */
static void Complain(const char *what, const char *detail) {
  char line[512];
  int n = snprintf(line, sizeof line, "libuepoll-interpose: %s%s%s\n", what,
                   detail ? ": " : "", detail ? detail : "");
  if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
  if (n > 0) (void)!Libc()->write(2, line, (size_t)n);
}

/* Every handler installed before the engine was in the process went to
 * libc: installed again through the engine, so that it runs as one
 * installed through uepoll_sigaction (base/signal_defer.h). The engine's
 * own view of the action (its old value) is what is installed again, so a
 * handler the engine already wraps is left as it is. */
static void WrapHandlersInstalledBefore(const struct uepoll_engine_calls *e) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction cur;
    if (e->uepoll_sigaction(sig, NULL, &cur) != 0) continue; /* reserved */
    if (cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN) continue;
    (void)e->uepoll_sigaction(sig, &cur, NULL);
  }
}

/* Called by the engine's constructor, under the dynamic loader's lock
 * (which keeps two engines' constructors apart). The first engine with
 * this build's table is the one; a second (a static copy linked into the
 * program beside the shared one) is left alone. */
EXPORT void uepoll_interpose_attach(const struct uepoll_engine_calls *e) {
  if (e == NULL || Engine() != NULL) return;
  if (e->size != sizeof *e) {
    Complain("libuepoll is from another build than this interposer; ignored",
             NULL);
    return;
  }
  int saved_errno = errno;
  /* This thread's own handlers cannot run (and install) mid-pass. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  atomic_store_explicit(&g_attaching, 1, memory_order_seq_cst);
  WrapHandlersInstalledBefore(e);
  const char *mode = getenv("UEPOLL_FORK_MODE");
  if (mode == NULL || strcmp(mode, "copy") != 0) {
    (void)e->uepoll_set_fork_mode(UEPOLL_FORK_SHARE);
  }
  atomic_store_explicit(&uepoll_interpose_g_engine, e, memory_order_release);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = saved_errno;
}

/* libuepoll from this library's directory (where the build and the install
 * put both), else by its soname through the usual search.
 *
 * Global, as a library the interposer linked would be, so that a program
 * that looks uepoll_* up with dlsym(RTLD_DEFAULT) finds them; but local
 * before this library's constructor has run: a global dlopen from an
 * executable's .preinit_array makes the dynamic loader's start-up run
 * past its list of initializers (a crash in glibc 2.36's _dl_init, seen
 * with tests/interpose/early_main.c). The constructor makes such an early
 * engine global (PromoteEarlyEngine). */
static pthread_mutex_t g_load_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_constructed;       /* guarded by g_load_mu */
static char g_local_path[4096]; /* guarded by g_load_mu: "" unless local */

static void *OpenEngine(void) {
  int mode = RTLD_NOW | (g_constructed ? RTLD_GLOBAL : RTLD_LOCAL);
  char path[sizeof g_local_path] = UEPOLL_ENGINE_SONAME;
  void *handle = NULL;
  Dl_info self;
  if (dladdr(&g_load_mu, &self) && self.dli_fname != NULL) {
    const char *slash = strrchr(self.dli_fname, '/');
    if (slash != NULL) {
      int n =
          snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self.dli_fname),
                   self.dli_fname, UEPOLL_ENGINE_SONAME);
      if (n > 0 && n < (int)sizeof path) handle = dlopen(path, mode);
    }
  }
  if (handle == NULL) {
    snprintf(path, sizeof path, "%s", UEPOLL_ENGINE_SONAME);
    handle = dlopen(path, mode);
  }
  if (handle != NULL && !g_constructed) {
    memcpy(g_local_path, path, sizeof path);
  }
  return handle;
}

__attribute__((constructor)) static void PromoteEarlyEngine(void) {
  int saved_errno = errno;
  pthread_mutex_lock(&g_load_mu);
  g_constructed = 1;
  if (g_local_path[0] != '\0') {
    (void)dlopen(g_local_path, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
    g_local_path[0] = '\0';
  }
  pthread_mutex_unlock(&g_load_mu);
  errno = saved_errno;
}

static int g_load_failed; /* guarded by g_load_mu */
/* This thread is loading the engine: a constructor it reaches meanwhile (from
 * the engine's start-up, or a signal handler) makes the kernel's object
 * instead of waiting for itself. */
static __thread int t_loading;

const struct uepoll_engine_calls *uepoll_interpose_load(void) {
  const struct uepoll_engine_calls *e = Engine();
  if (e != NULL || t_loading) return e;
  int saved_errno = errno;
  /* Set before the lock: a signal handler on this thread that makes an
   * object while the lock is held gets the kernel's. */
  t_loading = 1;
  pthread_mutex_lock(&g_load_mu);
  e = Engine();
  if (e == NULL && !g_load_failed) {
    void *handle = OpenEngine();
    e = Engine();
    if (e == NULL) {
      /* Said once: from now on every object is the kernel's. */
      g_load_failed = 1;
      Complain(handle == NULL
                   ? "cannot load libuepoll; objects stay the kernel's"
                   : "libuepoll did not attach; objects stay the kernel's",
               handle == NULL ? dlerror() : UEPOLL_ENGINE_SONAME);
    }
  }
  pthread_mutex_unlock(&g_load_mu);
  t_loading = 0;
  errno = saved_errno;
  return e;
}
