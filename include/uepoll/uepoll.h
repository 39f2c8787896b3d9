/* uepoll: Linux epoll semantics for objects that live inside a process.
 *
 * This header mirrors <sys/epoll.h>, <sys/eventfd.h>, <unistd.h>, <fcntl.h>,
 * <sys/socket.h> and <poll.h>: every function takes the libc types and
 * constants (struct epoll_event, EPOLL*, EFD_*, SOCK_*, O_*, struct pollfd),
 * so epoll code ports by renaming calls.
 *
 * Errors: a failing call returns -1 and sets errno to the value the kernel
 * would give; errno is left untouched on success. No C++ exception crosses
 * this boundary. A NULL pointer where the kernel would fault gives EFAULT.
 *
 * Descriptors: uepoll descriptors are numbered from UEPOLL_FD_BASE up, a range
 * above any RLIMIT_NOFILE, so they never collide with the kernel's.
 *
 * Compiles as C99 and as C++.
 */
#ifndef UEPOLL_UEPOLL_H_
#define UEPOLL_UEPOLL_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <time.h>

#if defined(__GNUC__)
#define UEPOLL_API __attribute__((visibility("default")))
#else
#define UEPOLL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The first uepoll descriptor number. Linux caps RLIMIT_NOFILE at
 * fs.nr_open, itself at most 2^30 - 64 on 64-bit kernels (INT_MAX rounded
 * down to BITS_PER_LONG), so no kernel descriptor reaches this value. */
#define UEPOLL_FD_BASE 0x40000000

/* Nonzero if fd lies in uepoll's descriptor range (open or not). */
UEPOLL_API int uepoll_is_uepoll_fd(int fd);

/* epoll */
UEPOLL_API int uepoll_epoll_create(int size);
UEPOLL_API int uepoll_epoll_create1(int flags);
UEPOLL_API int uepoll_epoll_ctl(int epfd, int op, int fd,
                                struct epoll_event *event);
UEPOLL_API int uepoll_epoll_wait(int epfd, struct epoll_event *events,
                                 int maxevents, int timeout);
UEPOLL_API int uepoll_epoll_pwait(int epfd, struct epoll_event *events,
                                  int maxevents, int timeout,
                                  const sigset_t *sigmask);
UEPOLL_API int uepoll_epoll_pwait2(int epfd, struct epoll_event *events,
                                   int maxevents,
                                   const struct timespec *timeout,
                                   const sigset_t *sigmask);

/* min_wait batching and per-instance parameters (uepoll extensions).
 *
 * uepoll_epoll_pwait3 is epoll_pwait2 with its arguments in a struct, so
 * that there is room for a minimum wait: wait up to min_wait_ns for
 * maxevents events; when min_wait_ns has passed, return if at least one
 * event is ready; otherwise keep waiting to the timeout and return at the
 * first event. A zero timeout ignores min_wait_ns; a signal ends the wait
 * at once (events already ready are returned, else EINTR). */
struct uepoll_wait_args {
  const struct timespec *timeout; /* NULL: forever; {0, 0}: do not wait */
  uint64_t min_wait_ns;           /* 0: no minimum wait */
  const sigset_t *sigmask;        /* NULL: keep the thread's mask */
  uint64_t flags;                 /* must be 0 */
};
UEPOLL_API int uepoll_epoll_pwait3(int epfd, struct epoll_event *events,
                                   int maxevents,
                                   const struct uepoll_wait_args *args);

/* Mirrors struct epoll_params of the kernel's EPIOCSPARAMS/EPIOCGPARAMS,
 * plus the instance's default min_wait, used by uepoll_epoll_wait, _pwait
 * and _pwait2 (uepoll_epoll_pwait3 uses its own args->min_wait_ns).
 * Busy polling: a wait that would sleep first spins up to busy_poll_usecs
 * checking for events (never for a zero timeout). Validation as the
 * kernel's: pad != 0, busy_poll_usecs > INT32_MAX or prefer_busy_poll > 1
 * -> EINVAL; busy_poll_budget > 64 without CAP_NET_ADMIN -> EPERM; a
 * descriptor that is not an instance -> ENOTTY. */
struct uepoll_params {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad; /* must be 0 */
  uint64_t min_wait_ns;
};
UEPOLL_API int uepoll_epoll_set_params(int epfd,
                                       const struct uepoll_params *params);
UEPOLL_API int uepoll_epoll_get_params(int epfd, struct uepoll_params *params);

/* sources */
UEPOLL_API int uepoll_eventfd(unsigned int initval, int flags);
UEPOLL_API int uepoll_pipe(int pipefd[2]);
UEPOLL_API int uepoll_pipe2(int pipefd[2], int flags);
UEPOLL_API int uepoll_socketpair(int domain, int type, int protocol, int sv[2]);
UEPOLL_API int uepoll_shutdown(int sockfd, int how);

/* descriptors and I/O */
UEPOLL_API ssize_t uepoll_read(int fd, void *buf, size_t count);
UEPOLL_API ssize_t uepoll_write(int fd, const void *buf, size_t count);
UEPOLL_API int uepoll_close(int fd);
UEPOLL_API int uepoll_dup(int oldfd);
UEPOLL_API int uepoll_dup2(int oldfd, int newfd);
UEPOLL_API int uepoll_dup3(int oldfd, int newfd, int flags);
UEPOLL_API int uepoll_fcntl(int fd, int cmd, ...);
UEPOLL_API int uepoll_poll(struct pollfd *fds, nfds_t nfds, int timeout);

/* timerfd (<sys/timerfd.h>)
 *
 * The kernel's timerfd, call for call: clocks CLOCK_REALTIME,
 * CLOCK_MONOTONIC, CLOCK_BOOTTIME, and CLOCK_REALTIME_ALARM /
 * CLOCK_BOOTTIME_ALARM for threads with CAP_WAKE_ALARM (EPERM otherwise;
 * they do not wake a suspended machine); flags TFD_NONBLOCK, TFD_CLOEXEC;
 * settime flags TFD_TIMER_ABSTIME, TFD_TIMER_CANCEL_ON_SET. A read needs 8
 * bytes (EINVAL below) and returns the number of expirations since the last
 * read, counting the periods an interval timer skipped; EAGAIN when none
 * with TFD_NONBLOCK, otherwise it blocks. Readable is EPOLLIN alone. Errors
 * in the kernel's order: settime: EFAULT (new_value NULL), EINVAL (flags,
 * tv_nsec outside [0, 1e9), negative tv_sec), EBADF, EINVAL (not a timerfd),
 * EPERM (alarm clock), ECANCELED (cancel-on-set after a clock step).
 *
 * Expiries are run by one uepoll thread ("uepoll-timer"), started by the
 * first settime that arms a timer and sleeping without a timeout while
 * nothing is armed; it blocks all signals and does not keep the process
 * alive. Deviations (docs/semantics.md): a read into a NULL buffer fails
 * EFAULT without consuming the expirations; a step of the realtime clock is
 * seen by timers at the timer thread's next wakeup (or, for
 * TFD_TIMER_CANCEL_ON_SET, when the timerfd is read, polled or set), not at
 * the step itself. */
UEPOLL_API int uepoll_timerfd_create(int clockid, int flags);
UEPOLL_API int uepoll_timerfd_settime(int fd, int flags,
                                      const struct itimerspec *new_value,
                                      struct itimerspec *old_value);
UEPOLL_API int uepoll_timerfd_gettime(int fd, struct itimerspec *curr_value);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UEPOLL_UEPOLL_H_ */
