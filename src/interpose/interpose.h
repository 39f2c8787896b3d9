/* What the interposer's files share (interpose.c, interpose_numbers.c,
 * interpose_syscall.c, crossing.c, interpose_signal.c, engine.c): libc's
 * definitions, the engine once loaded, the kinds of objects that become
 * uepoll's, and the stale-object hook. Private to
 * libuepoll-interpose.so. */
#ifndef UEPOLL_SRC_INTERPOSE_INTERPOSE_H_
#define UEPOLL_SRC_INTERPOSE_INTERPOSE_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UEPOLL_INTERPOSE_BUILD 1

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>

#include <uepoll/uepoll.h>

#include "base/libc_calls.h"
#include "capi/interpose_hooks.h"

#define EXPORT __attribute__((visibility("default")))

/* libc's definitions of the names in UEPOLL_LIBC_CALLS (interpose.c). */
const struct uepoll_libc_calls *uepoll_interpose_libc_calls(void);
#define Libc() uepoll_interpose_libc_calls()

/* The once-guards of this library's set-up (engine.c): pthread_once
 * without its futex wake, which glibc makes whenever the function
 * returns, a system call in every process started under the interposer.
 * A guard is 0 (not run), kOnceRunning or kOnceDone; a thread that finds
 * it running waits its turn. Each runs in the constructor, if not before
 * it; a fork child of a process that had one left (a fork made by another
 * library's constructor) finds a guard another thread was running at 0
 * again, and resolves with dlsym only (uepoll_interpose_fork_child). Like
 * pthread_once, a signal handler that reaches the guard its own thread is
 * running waits for good. */
enum { kOnceLibc, kOnceNext, kOnces };
enum { kOnceRunning = 1, kOnceDone = 2 };
extern atomic_int uepoll_interpose_g_once[kOnces];
void uepoll_interpose_once_slow(int which, void (*fn)(void));
static inline void Once(int which, void (*fn)(void)) {
  if (atomic_load_explicit(&uepoll_interpose_g_once[which],
                           memory_order_acquire) != kOnceDone) {
    uepoll_interpose_once_slow(which, fn);
  }
}

/* out[i]: dlsym(RTLD_NEXT, names[i])'s answer from this library, null
 * where it has none, found for all names in one walk over the loaded
 * objects where that gives dlsym's answer (next_symbols.c). errno may
 * change. Exported for tests/interpose/next_main.c; private to the
 * interposer otherwise. */
EXPORT void uepoll_interpose_next_symbols(const char *const *names, void **out,
                                          size_t n);
/* Resolves the next definitions of interpose_numbers.c's names, once. */
void uepoll_interpose_resolve_numbers(void);

/* In a fork child made through this library (fork, _Fork, vfork), first
 * thing: reads only, unless a set-up was not done in the parent. */
void uepoll_interpose_fork_child(void);

/* Set in a fork child that must resolve after all: dl_iterate_phdr's lock
 * may be held for good there (next_symbols.c). */
extern atomic_int uepoll_interpose_g_walk_unsafe;

/* Stands in for a name libc lacks: fails ENOSYS (interpose.c). */
long uepoll_interpose_missing(void);

/* The kinds UEPOLL_INTERPOSE makes uepoll's (interpose.c). */
enum {
  kEpoll = 1,
  kEventfd = 2,
  kPipe = 4,
  kSocketpair = 8,
  kTimerfd = 16,
  kAll = 31
};
int uepoll_interpose_uses(unsigned kind);
#define Uses(kind) uepoll_interpose_uses(kind)

/* The engine (libuepoll), once it is in the process: null before, and
 * then no uepoll object exists and every call is the kernel's
 * (interpose/engine.c). Never null again once set. */
extern const struct uepoll_engine_calls *_Atomic uepoll_interpose_g_engine;
static inline const struct uepoll_engine_calls *Engine(void) {
  return atomic_load_explicit(&uepoll_interpose_g_engine, memory_order_acquire);
}

/* syscall()'s SYS_fork, SYS_clone and SYS_clone3 (crossing.c). */
long uepoll_interpose_clone(long n, long a0, long a1, long a2, long a3, long a4,
                            long a5);

/* The engine for a new uepoll object, loaded now if it is not yet in the
 * process. Null if it cannot be loaded (said once on stderr): the object
 * is then the kernel's (interpose/engine.c). */
const struct uepoll_engine_calls *uepoll_interpose_load(void);

/* What keeps a sigaction made before the engine apart from the engine's
 * pass over the handlers as it attaches (engine.c). A sigaction enters:
 * 1, and it may call libc until it leaves (the attach waits for it); 0,
 * an attach has begun: it takes the lock, with every signal blocked (the
 * old mask saved), and finds the engine once it holds it. */
int uepoll_interpose_enter_early_sigaction(void);
void uepoll_interpose_leave_early_sigaction(void);
void uepoll_interpose_lock_handlers(sigset_t *saved);
void uepoll_interpose_unlock_handlers(const sigset_t *saved);

/* The engine if the kinds UEPOLL_INTERPOSE names include `kind`, loaded
 * if need be; null if they do not (or it cannot be loaded). */
static inline const struct uepoll_engine_calls *For(unsigned kind) {
  return Uses(kind) ? uepoll_interpose_load() : NULL;
}

/* The engine's uepoll_<name> once the engine is in the process, libc's
 * <name> (of the same type) before: with no uepoll object, uepoll_<name>
 * would pass every descriptor to libc anyway. Engine() is read twice:
 * once set, it stays set. */
#define ENGINE_OR_LIBC(name) \
  (Engine() != NULL ? Engine()->uepoll_##name : Libc()->name)

/* engine_->call once the engine is in the process, libc_call before: for
 * the calls whose libc counterpart differs in name or type. */
#define ENGINE_OR(call, libc_call) \
  (Engine() != NULL ? Engine()->call : (libc_call))

/* Whether fd is a uepoll object's number (none before the engine). */
static inline int IsUepoll(int fd) {
  const struct uepoll_engine_calls *e = Engine();
  return e != NULL && e->uepoll_is_uepoll_fd(fd);
}

/* A number the kernel just handed out: a uepoll object still recorded
 * there is stale (its placeholder was closed behind uepoll's back) and is
 * released, so that calls on the number reach the new kernel file
 * (docs/semantics.md D16). Returns fd. */
static inline int Fresh(int fd) {
  const struct uepoll_engine_calls *e = Engine();
  if (fd >= 0 && e != NULL) e->uepoll_forget_orphan(fd);
  return fd;
}

/* Two numbers (pipe, socketpair) the kernel handed out, on success. */
static inline int Fresh2(int r, const int fds[2]) {
  if (r == 0) {
    Fresh(fds[0]);
    Fresh(fds[1]);
  }
  return r;
}

#endif /* UEPOLL_SRC_INTERPOSE_INTERPOSE_H_ */
