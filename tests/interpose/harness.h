/* harness: the event sources, the writer thread and the checks shared by
 * the libev and libevent drivers (libev_driver.c, libevent_driver.c).
 *
 * The drivers are ordinary programs: they create their objects with the
 * libc names (pipe, eventfd, socketpair, fcntl, read, write, close) and
 * link no uepoll library. Run as they are, everything is the kernel's; run
 * with libuepoll-interpose.so (LD_PRELOAD, or linked first) the same calls,
 * and the event library's own epoll_create1/epoll_ctl/epoll_wait, land on
 * uepoll. The expectations are the same in both runs; only the check of
 * whose objects they are differs (argv[1]: "kernel", "uepoll", or "mixed":
 * run with UEPOLL_INTERPOSE=epoll,eventfd, uepoll's epoll instances watch
 * uepoll eventfds and kernel pipes and socket pairs).
 *
 * The scenario, on every source (pipes, eventfds, a stream socketpair: the
 * kinds the interposer moves to uepoll; a datagram socketpair: always the
 * kernel's) and on the library's cross-thread wakeup (ev_async,
 * event_active):
 *   lock step  the writer thread writes one unit and waits until the loop
 *              has read it, kRounds times per source: exactly kRounds
 *              callbacks each, none empty;
 *   burst      kBurst units per source without waiting: every unit read,
 *              in order, none lost or duplicated.
 */
#ifndef UEPOLL_TESTS_INTERPOSE_HARNESS_H_
#define UEPOLL_TESTS_INTERPOSE_HARNESS_H_

#include <pthread.h>
#include <stdint.h>

enum { kRounds = 300, kBurst = 2000, kMaxSources = 16 };

enum SourceKind { kPipeSource, kEventfdSource, kStreamSource, kDgramSource };

struct Source {
  enum SourceKind kind;
  const char *name;
  int rfd, wfd;
  int uepoll_kind; /* the interposer makes it uepoll's */
  int use_eventfd_api;
  int edge; /* the driver watches it edge-triggered */
  /* Reader side (the loop thread), published under Harness.mu. */
  uint64_t next_seq;
  uint64_t received;
  uint64_t callbacks;
  uint64_t lockstep_callbacks;
  uint64_t empty_callbacks;
  int bad_seq;
  void *watcher; /* the driver's */
};

struct Harness {
  const char *library;
  int expect_uepoll;
  int mixed;
  struct Source src[kMaxSources];
  int nsrc;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int lockstep; /* the writer is in the lock-step phase */
  uint64_t async_calls;
  int stop;
  int failed;
  /* Set by the driver: wake the loop from the writer thread. */
  void (*async_send)(void *ctx);
  void *async_ctx;
  pthread_t writer;
};

/* Every call below reports its failures on stderr and sets h->failed. */
void HarnessInit(struct Harness *h, const char *library, int argc, char **argv);
void HarnessOpen(struct Harness *h);
/* Whose objects: uepoll's for the interposed kinds, the kernel's for the
 * datagram pair; with "kernel", no uepoll library in the process at all.
 * epoll_instances: the uepoll epoll instances the library must have made
 * (checked in the uepoll run). */
void HarnessCheckObjects(struct Harness *h, int epoll_instances);
/* Reads everything the source has; called from the loop's callback. */
void HarnessDrain(struct Harness *h, struct Source *s);
/* The loop's callback for the library's cross-thread wakeup: returns
 * non-zero when the loop should stop. */
int HarnessAsync(struct Harness *h);
void HarnessStartWriter(struct Harness *h);
void HarnessJoinWriter(struct Harness *h);
/* The exact counts; then closes every source and checks that no uepoll
 * descriptor is left once the library has torn its loop down. Returns the
 * exit status. */
int HarnessFinish(struct Harness *h);
void HarnessCloseSources(struct Harness *h);
int HarnessCheckNoUepollLeft(struct Harness *h);
void HarnessFail(struct Harness *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* UEPOLL_TESTS_INTERPOSE_HARNESS_H_ */
