/* What the interposer's files share (interpose.c, interpose_numbers.c,
 * interpose_syscall.c): libc's definitions, the kinds of objects that
 * become uepoll's, and the stale-object hook. Private to
 * libuepoll-interpose.so. */
#ifndef UEPOLL_SRC_INTERPOSE_INTERPOSE_H_
#define UEPOLL_SRC_INTERPOSE_INTERPOSE_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UEPOLL_INTERPOSE_BUILD 1

#include <uepoll/uepoll.h>

#include "base/libc_calls.h"
#include "capi/interpose_hooks.h"

#define EXPORT __attribute__((visibility("default")))

/* libc's definitions of the names in UEPOLL_LIBC_CALLS (interpose.c). */
const struct uepoll_libc_calls *uepoll_interpose_libc_calls(void);
#define Libc() uepoll_interpose_libc_calls()

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

/* A number the kernel just handed out: a uepoll object still recorded
 * there is stale (its placeholder was closed behind uepoll's back) and is
 * released, so that calls on the number reach the new kernel file
 * (docs/semantics.md D16). Returns fd. */
static inline int Fresh(int fd) {
  if (fd >= 0) uepoll_forget_orphan(fd);
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
