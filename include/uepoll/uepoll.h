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

/* sources */
UEPOLL_API int uepoll_eventfd(unsigned int initval, int flags);
UEPOLL_API int uepoll_pipe(int pipefd[2]);
UEPOLL_API int uepoll_pipe2(int pipefd[2], int flags);
UEPOLL_API int uepoll_socketpair(int domain, int type, int protocol,
                                 int sv[2]);
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UEPOLL_UEPOLL_H_ */
