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
 * A fork while another thread is loading or attaching leaves a child
 * where that never finishes: ForkChild gives up loading there and frees
 * the handlers' lock (docs/design.md, "The interposer loads the engine on
 * first use").
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
#include <sys/syscall.h>
#include <time.h>

#include "base/env.h"
#include "interpose/interpose.h"

const struct uepoll_engine_calls *_Atomic uepoll_interpose_g_engine;

/* Keeps a sigaction made before the engine apart from the attach's pass
 * over the handlers. Without it, a sigaction racing the pass could be
 * overwritten by it, or hand the engine's trampoline back as the old
 * action, which installed again would call itself. Two halves:
 *  - the attach sets g_attaching, waits for the sigactions in flight to
 *    leave, and makes its pass under a spin lock, taken with every signal
 *    blocked (so no handler of the holder's can want it);
 *  - a sigaction counts itself in flight (g_early_sigactions) and then
 *    reads g_attaching: clear, it goes to libc with no lock and no signal
 *    blocked; set, it leaves the count and makes its call under the lock,
 *    through the engine if the engine is in by then. Both sides write,
 *    then read the other's word, all sequentially consistent: at least
 *    one sees the other.
 * A sigaction used to take the lock every time: two rt_sigprocmask calls
 * around each, in every process started under the interposer (a shell:
 * 12 a CGI request; BENCHMARKS.md, "Signals before the engine"). */
static atomic_int g_handlers_lock;
static atomic_int g_attaching;        /* set once, by the attach */
static atomic_int g_early_sigactions; /* in flight, all threads */
/* This thread's share of g_early_sigactions: counted before it and
 * uncounted after it, so that a handler that interrupts a sigaction in
 * flight (which the attach would wait for) knows not to load the engine
 * (uepoll_interpose_load), and a fork child keeps only its own thread's
 * share (ForkChild). */
static __thread int t_early_sigactions
    __attribute__((tls_model("initial-exec")));

/* A waiter's turn: sched_yield gives way only to threads of the caller's
 * priority, so a real-time waiter on the holder's CPU would spin for
 * good; after 64 yields a short sleep lets any holder run (through libc's
 * table: no lazy binding). */
static void Backoff(unsigned spins) {
  if (spins < 64) {
    sched_yield();
  } else {
    struct timespec pause = {0, 50 * 1000};
    (void)Libc()->syscall(SYS_nanosleep, &pause, NULL);
  }
}

atomic_int uepoll_interpose_g_once[kOnces];

void uepoll_interpose_once_slow(int which, void (*fn)(void)) {
  atomic_int *once = &uepoll_interpose_g_once[which];
  int expected = 0;
  if (atomic_compare_exchange_strong_explicit(once, &expected, kOnceRunning,
                                              memory_order_acquire,
                                              memory_order_acquire)) {
    fn();
    atomic_store_explicit(once, kOnceDone, memory_order_release);
    return;
  }
  /* Another thread runs it. Not Backoff: its sleep goes through libc's
   * table, which may be what that thread is resolving. */
  for (unsigned spins = 0;
       atomic_load_explicit(once, memory_order_acquire) != kOnceDone; ++spins) {
    if (spins < 64) {
      sched_yield();
    } else {
      struct timespec pause = {0, 50 * 1000};
      (void)nanosleep(&pause, NULL);
    }
  }
}

/* A guard not done in the parent: the fork came before the constructor
 * (another library's constructor forked), and another thread may have
 * been running it, or inside dl_iterate_phdr, whose lock glibc does not
 * reset in a child. The child runs the set-up again, with dlsym only. */
void uepoll_interpose_fork_child(void) {
  for (int i = 0; i < kOnces; ++i) {
    int state =
        atomic_load_explicit(&uepoll_interpose_g_once[i], memory_order_relaxed);
    if (state == kOnceDone) continue;
    atomic_store_explicit(&uepoll_interpose_g_walk_unsafe, 1,
                          memory_order_relaxed);
    if (state == kOnceRunning) {
      atomic_store_explicit(&uepoll_interpose_g_once[i], 0,
                            memory_order_relaxed);
    }
  }
}

/* The two locks of this file are spin locks, held only across a few
 * calls or a copy. A fork child frees one that another thread of its
 * parent held by reading it, and writes it only if it was held
 * (ForkChild). A pthread mutex had to be initialized again in every
 * child: a call the parent never made, so the child bound it (the
 * loader's lookup) before its exec, 15 of the 29 page faults such a child
 * took (BENCHMARKS.md, "A fork child's calls, and what they write"). */
static void SpinLock(atomic_int *lock) {
  for (unsigned spins = 0;
       atomic_exchange_explicit(lock, 1, memory_order_acquire); ++spins) {
    Backoff(spins);
  }
}

static void SpinUnlock(atomic_int *lock) {
  atomic_store_explicit(lock, 0, memory_order_release);
}

static void FreeInChild(atomic_int *lock) {
  if (atomic_load_explicit(lock, memory_order_relaxed)) {
    atomic_store_explicit(lock, 0, memory_order_relaxed);
  }
}

int uepoll_interpose_enter_early_sigaction(void) {
  ++t_early_sigactions;
  atomic_signal_fence(memory_order_seq_cst);
  atomic_fetch_add_explicit(&g_early_sigactions, 1, memory_order_seq_cst);
  if (!atomic_load_explicit(&g_attaching, memory_order_seq_cst)) return 1;
  uepoll_interpose_leave_early_sigaction();
  return 0;
}

void uepoll_interpose_leave_early_sigaction(void) {
  atomic_fetch_sub_explicit(&g_early_sigactions, 1, memory_order_release);
  atomic_signal_fence(memory_order_seq_cst);
  --t_early_sigactions;
}

/* One line on stderr, through libc's write (not the interposed one). */
static void Complain(const char *what, const char *detail) {
  char line[512];
  int n = snprintf(line, sizeof line, "libuepoll-interpose: %s%s%s\n", what,
                   detail ? ": " : "", detail ? detail : "");
  if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
  if (n > 0) (void)!Libc()->write(2, line, (size_t)n);
}

/* The attach, with g_attaching set and before it takes the lock: the
 * sigactions of other threads that went to libc before they saw it have
 * left. Not under the lock: a handler that interrupted one of them may
 * itself call sigaction, which then takes the lock. One of this
 * thread's own (a handler that interrupted it made the engine come in, as
 * only a program that links libuepoll and dlopens in a handler could) is
 * not waited for: it would never leave.
 *
 * Nor is one still counted after about a second: a handler that left it
 * with siglongjmp (sigaction is async-signal-safe, so POSIX allows it)
 * left the count behind for good. Such a call makes no change to the
 * kernel's actions any more; a live one that takes so long is one whose
 * handler ran, and runs still, between its count and its system call: a
 * few instructions wide (interpose.lazy.races.abandoned). */
static void WaitForEarlySigactions(void) {
  enum { kGiveUp = 64 + 10000 }; /* yields, then 50 us sleeps */
  for (unsigned spins = 0;
       atomic_load_explicit(&g_early_sigactions, memory_order_seq_cst) >
       t_early_sigactions;
       ++spins) {
    if (spins == kGiveUp) {
      Complain(
          "a sigaction has been in flight for a second (left by a "
          "signal handler's longjmp?); the engine attaches without it",
          NULL);
      return;
    }
    Backoff(spins);
  }
}

void uepoll_interpose_lock_handlers(sigset_t *saved) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, saved);
  SpinLock(&g_handlers_lock);
}

void uepoll_interpose_unlock_handlers(const sigset_t *saved) {
  SpinUnlock(&g_handlers_lock);
  pthread_sigmask(SIG_SETMASK, saved, NULL);
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
  sigset_t saved;
  atomic_store_explicit(&g_attaching, 1, memory_order_seq_cst);
  WaitForEarlySigactions();
  uepoll_interpose_lock_handlers(&saved);
  WrapHandlersInstalledBefore(e);
  char mode[8];
  if (uepoll_env_get("UEPOLL_FORK_MODE", mode, sizeof mode) <= 0 ||
      strcmp(mode, "copy") != 0) {
    (void)e->uepoll_set_fork_mode(UEPOLL_FORK_SHARE);
  }
  atomic_store_explicit(&uepoll_interpose_g_engine, e, memory_order_release);
  uepoll_interpose_unlock_handlers(&saved);
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
 * engine global (InterposerInit). */
static atomic_int g_load_lock;
static int g_constructed;       /* guarded by g_load_lock */
static char g_local_path[4096]; /* guarded by g_load_lock: "" unless local */

/* No lock is held across dlopen: the loader holds its own lock while it
 * runs constructors, and a library's constructor on another thread may
 * make a uepoll object (a self-pipe) and so come here. Two threads that
 * both open the engine get the one copy (dlopen counts references), and
 * the first attach wins. */
static void *OpenEngine(void) {
  SpinLock(&g_load_lock);
  int early = !g_constructed;
  SpinUnlock(&g_load_lock);
  int mode = RTLD_NOW | (early ? RTLD_LOCAL : RTLD_GLOBAL);
  char path[sizeof g_local_path] = UEPOLL_ENGINE_SONAME;
  void *handle = NULL;
  Dl_info self;
  if (dladdr(&g_load_lock, &self) && self.dli_fname != NULL) {
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
  if (handle != NULL && early) {
    /* Made global by the constructor, or here if it ran meanwhile. */
    SpinLock(&g_load_lock);
    int promote_now = g_constructed;
    if (!promote_now) memcpy(g_local_path, path, sizeof path);
    SpinUnlock(&g_load_lock);
    if (promote_now) (void)dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  }
  return handle;
}

/* Threads inside OpenEngine, and whether a load failed (said once; from
 * then on every object is the kernel's). */
static atomic_int g_loading;
static atomic_int g_load_failed;

/* In a fork child, only the forking thread exists: a load or an attach
 * another thread was in never finishes there. The child gives up loading
 * (the loader's own lock may be held for good), and the handlers' lock
 * is freed (its holder does not exist; a handler the pass had already
 * wrapped stays wrapped: the engine's code is mapped). */
static void ForkChild(void) {
  if (Engine() != NULL) return;
  /* Reads first, and no call: a child on its way to exec then copies no
   * page of this library's data and binds no symbol. */
  FreeInChild(&g_handlers_lock);
  FreeInChild(&g_load_lock);
  /* An attach another thread was in never finishes here; the sigactions
   * other threads had in flight never leave. */
  FreeInChild(&g_attaching);
  if (atomic_load_explicit(&g_early_sigactions, memory_order_relaxed) != 0) {
    atomic_store_explicit(&g_early_sigactions, t_early_sigactions,
                          memory_order_relaxed);
  }
  if (atomic_load_explicit(&g_loading, memory_order_relaxed) > 0) {
    atomic_store_explicit(&g_loading, 0, memory_order_relaxed);
    atomic_store_explicit(&g_load_failed, 1, memory_order_relaxed);
  }
}

/* This thread is loading the engine: a constructor it reaches meanwhile (a
 * signal handler's) makes the kernel's object instead of loading from a
 * context where dlopen is not safe. So does one reached from a handler
 * that interrupted a sigaction in flight (t_early_sigactions): the attach
 * would wait for that sigaction, which cannot leave before the handler
 * returns. Set by the constructor too while it holds the load lock: a
 * handler there would wait for that lock. */
static __thread int t_loading __attribute__((tls_model("initial-exec")));

__attribute__((constructor)) static void InterposerInit(void) {
  int saved_errno = errno;
  /* libc's table now, while the process has one thread: resolving it
   * (dlsym) waits for the loader's lock, so a thread resolving it late
   * while another runs a library's constructor that calls here would
   * wait for each other. And before any fork: a child must not walk the
   * loaded objects (next_symbols.c), so the names of the calls that
   * return new numbers are resolved here too. */
  (void)Libc();
  uepoll_interpose_resolve_numbers();
  (void)Uses(kEpoll); /* the kinds: no set-up is left for later */
  pthread_atfork(NULL, NULL, ForkChild);
  char path[sizeof g_local_path];
  t_loading = 1;
  atomic_signal_fence(memory_order_seq_cst);
  SpinLock(&g_load_lock);
  g_constructed = 1;
  memcpy(path, g_local_path, sizeof path);
  g_local_path[0] = '\0';
  SpinUnlock(&g_load_lock);
  atomic_signal_fence(memory_order_seq_cst);
  t_loading = 0;
  if (path[0] != '\0') (void)dlopen(path, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
  errno = saved_errno;
}

const struct uepoll_engine_calls *uepoll_interpose_load(void) {
  const struct uepoll_engine_calls *e = Engine();
  if (e != NULL || t_loading || t_early_sigactions ||
      atomic_load_explicit(&g_load_failed, memory_order_relaxed)) {
    return e;
  }
  int saved_errno = errno;
  /* libc's table first, outside the loader's lock: the engine's
   * constructor asks for it, and a thread resolving it (dlsym) would wait
   * for that lock. */
  (void)Libc();
  t_loading = 1;
  atomic_fetch_add_explicit(&g_loading, 1, memory_order_relaxed);
  void *handle = OpenEngine();
  atomic_fetch_sub_explicit(&g_loading, 1, memory_order_relaxed);
  t_loading = 0;
  e = Engine();
  if (e == NULL && !atomic_exchange(&g_load_failed, 1)) {
    Complain(handle == NULL
                 ? "cannot load libuepoll; objects stay the kernel's"
                 : "libuepoll did not attach; objects stay the kernel's",
             handle == NULL ? dlerror() : UEPOLL_ENGINE_SONAME);
  }
  errno = saved_errno;
  return e;
}
