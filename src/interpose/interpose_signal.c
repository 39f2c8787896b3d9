/* The interposer's signal calls: once the engine is in the process, every
 * handler a program installs goes through uepoll_sigaction
 * (include/uepoll/uepoll.h), so that a handler
 * writing to a uepoll pipe or socket (the self-pipe trick of asyncio,
 * libuv, libevent) cannot interrupt a thread inside uepoll and wait for it
 * (base/signal_defer.h). signal and bsd_signal have glibc's BSD semantics
 * (SA_RESTART, the signal blocked in its handler), sysv_signal its System V
 * ones (reset to the default on delivery, not blocked, not restarted).
 * Not covered: sigset, siginterrupt (glibc's internal calls reach the
 * kernel directly; a handler stays wrapped, its SA_RESTART flag changes)
 * and a raw syscall(SYS_rt_sigaction). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sighandler_t, and libc_calls.h's names */
#endif
#include <errno.h>
#include <signal.h>

#include "interpose/interpose.h"

/* Before the engine is in the process, no thread can be inside uepoll:
 * libc's sigaction, kept apart from the engine's pass over the handlers
 * as it attaches (engine.c): the pass then sees this action, or this call
 * sees the engine. No signal is blocked unless an attach has begun. */
static int Sigaction(int sig, const struct sigaction *act,
                     struct sigaction *oldact) {
  const struct uepoll_engine_calls *e = Engine();
  if (e) return e->uepoll_sigaction(sig, act, oldact);
  const struct uepoll_libc_calls *libc = Libc(); /* resolved outside it */
  if (uepoll_interpose_enter_early_sigaction()) {
    /* No attach began before this call counted itself, and none
     * publishes the engine before it leaves (or, one left by a handler's
     * siglongjmp, for a second: engine.c). */
    int r = libc->sigaction(sig, act, oldact);
    uepoll_interpose_leave_early_sigaction(); /* keeps errno */
    return r;
  }
  sigset_t saved;
  uepoll_interpose_lock_handlers(&saved);
  e = Engine();
  int r = e ? e->uepoll_sigaction(sig, act, oldact)
            : libc->sigaction(sig, act, oldact);
  int err = errno;
  uepoll_interpose_unlock_handlers(&saved);
  errno = err;
  return r;
}

EXPORT int sigaction(int sig, const struct sigaction *act,
                     struct sigaction *oldact) {
  return Sigaction(sig, act, oldact);
}
EXPORT int __sigaction(int sig, const struct sigaction *act,
                       struct sigaction *oldact) {
  return Sigaction(sig, act, oldact);
}

static sighandler_t Install(int sig, sighandler_t handler, int flags,
                            int block_self) {
  if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
    errno = EINVAL;
    return SIG_ERR;
  }
  /* The mask is empty from the initializer, and sig's bit is set by hand:
   * no call through this library's lazily bound PLT, whose first use in a
   * fork child (a server resetting its handlers before an exec) would run
   * the dynamic loader's lookup there, in every child (crossing.c). The
   * bit is glibc's layout: signal n is bit n - 1 of __val. */
  struct sigaction act = {0}, old;
  act.sa_handler = handler;
  if (block_self) {
    const unsigned bits = 8 * sizeof act.sa_mask.__val[0];
    act.sa_mask.__val[(unsigned)(sig - 1) / bits] |=
        1UL << ((unsigned)(sig - 1) % bits);
  }
  act.sa_flags = flags;
  if (Sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  return Install(sig, handler, SA_RESTART, 1);
}
EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) {
  return Install(sig, handler, SA_RESTART, 1);
}
EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  return Install(sig, handler, SA_RESETHAND | SA_NODEFER, 0);
}
EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return Install(sig, handler, SA_RESETHAND | SA_NODEFER, 0);
}
