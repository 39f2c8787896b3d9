/* uepoll debugging and testing hooks: live-object accounting for leak
 * checks and the descriptor limit (uepoll's RLIMIT_NOFILE).
 *
 * These are not part of the epoll mirror; tests and tools use them.
 */
#ifndef UEPOLL_DEBUG_H_
#define UEPOLL_DEBUG_H_

#include <uepoll/uepoll.h>

#ifdef __cplusplus
extern "C" {
#endif

struct uepoll_live_counts {
  long files;       /* open objects (sources, instances), any state */
  long items;       /* epoll registrations */
  long descriptors; /* installed descriptors */
  long instances;   /* epoll instances not yet freed */
};

/* Fills *out with the current counts. Returns 0, or -1/EFAULT for NULL. */
UEPOLL_API int uepoll_debug_live_counts(struct uepoll_live_counts *out);

/* uepoll's own descriptor limit (the analogue of RLIMIT_NOFILE for uepoll
 * descriptors): allocation past it fails EMFILE. Returns the previous limit,
 * or -1/EINVAL when limit is < 1 or above the table's capacity. */
UEPOLL_API long uepoll_debug_set_fd_limit(long limit);

/* The capacity of the descriptor table (the largest accepted limit). */
UEPOLL_API long uepoll_debug_fd_capacity(void);

/* Allocation-failure injection: the nth allocation uepoll makes from now
 * fails (n = 1: the next one); n = 0 switches injection off. Returns 0, or
 * -1/EINVAL for n < 0. */
UEPOLL_API int uepoll_debug_fail_alloc(long n);

/* How many allocations uepoll has made while injection was armed (a
 * counter tests use to enumerate allocation sites). */
UEPOLL_API long uepoll_debug_alloc_count(void);

/* How many blocks of the signal-handler arena are in use: memory that
 * calls made inside a handler installed with uepoll_sigaction allocated
 * instead of malloc, which the handler may have interrupted (a message a
 * handler wrote to a socket, not yet read). */
UEPOLL_API long uepoll_debug_handler_blocks(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UEPOLL_DEBUG_H_ */
