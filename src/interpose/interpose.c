/* libuepoll-interpose.so: the libc names themselves, forwarded to uepoll.
 *
 * Preloaded (LD_PRELOAD) or linked before libc, this library's read, write,
 * close, epoll_ctl, ... are the ones an unmodified program and its
 * libraries call: every object they create with epoll_create*, eventfd,
 * pipe*, socketpair(AF_UNIX, SOCK_STREAM) or timerfd_create is uepoll's,
 * and every descriptor call goes to uepoll_*, which passes the kernel's
 * descriptors to libc (the bridge). uepoll's own calls to libc go through
 * base/sys.h, which asks uepoll_interpose_libc() for libc's definitions
 * (base/libc_calls.h), so they never come back here.
 *
 * What cannot be covered is in README.md ("Adopting uepoll without editing
 * code"). To add a call: its libc name to UEPOLL_LIBC_CALLS (for the pass
 * through) and a definition below that calls uepoll_<name>.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define UEPOLL_INTERPOSE_BUILD 1

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <uepoll/uepoll.h>

#include "base/libc_calls.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- libc's definitions --------------------------------------------- */

static struct uepoll_libc_calls g_libc;
static pthread_once_t g_libc_once = PTHREAD_ONCE_INIT;

/* A name libc lacks (an older glibc without epoll_pwait2) fails ENOSYS
 * instead of jumping to null. Every entry is called with its own
 * signature; this one stands in for all of them, which the ABI allows for
 * an int return (the arguments are ignored). */
static long Missing(void) {
  errno = ENOSYS;
  return -1;
}

static void ResolveLibc(void) {
  /* The call that triggers this may succeed, and must then leave errno as
   * it was: dlsym does not promise to. dlsym(RTLD_NEXT) from this object
   * finds the first definition after it in the search order, libc's
   * whether this library was preloaded or linked first. A sanitizer's
   * interceptors come before us, so uepoll's own calls to libc bypass them
   * (see README.md). */
  int saved_errno = errno;
#define UEPOLL_RESOLVE(name)                                           \
  {                                                                    \
    void *p = dlsym(RTLD_NEXT, #name);                                 \
    if (p) {                                                           \
      memcpy(&g_libc.name, &p, sizeof p); /* POSIX's dlsym contract */ \
    } else {                                                           \
      g_libc.name = (__typeof__(g_libc.name))(void (*)(void))Missing;  \
    }                                                                  \
  }
  UEPOLL_LIBC_CALLS(UEPOLL_RESOLVE)
#undef UEPOLL_RESOLVE
  errno = saved_errno;
}

/* Called by uepoll on each of its libc calls, and by the pass-throughs
 * below; the first call may come before this library's constructor (a
 * constructor of another library calling close()): pthread_once makes it
 * safe from any thread at any time. dlsym does not call the names we
 * define, so resolving cannot recurse. */
EXPORT const struct uepoll_libc_calls *uepoll_interpose_libc(void) {
  pthread_once(&g_libc_once, ResolveLibc);
  return &g_libc;
}

static const struct uepoll_libc_calls *Libc(void) {
  return uepoll_interpose_libc();
}

/* ---- which objects become uepoll's -------------------------------------
 *
 * UEPOLL_INTERPOSE, a comma-separated subset of epoll, eventfd, pipe,
 * socketpair, timerfd (or "all", the default, or "none"): the kinds whose
 * constructors create uepoll objects; the others create the kernel's; any
 * kind implies epoll, since the kernel's epoll cannot watch uepoll's. A
 * program that hands pipes to child processes (fork and exec, a shell's
 * command substitution) needs kernel pipes: UEPOLL_INTERPOSE=epoll,eventfd.
 * Every descriptor call still goes through uepoll, which passes the
 * kernel's descriptors on. */
enum {
  kEpoll = 1,
  kEventfd = 2,
  kPipe = 4,
  kSocketpair = 8,
  kTimerfd = 16,
  kAll = 31
};
static unsigned g_kinds;
static pthread_once_t g_kinds_once = PTHREAD_ONCE_INIT;

static int WordIs(const char *w, size_t n, const char *name) {
  return strlen(name) == n && memcmp(w, name, n) == 0;
}

static void ParseKinds(void) {
  static const struct {
    const char *name;
    unsigned bit;
  } kNames[] = {{"all", kAll},        {"none", 0},
                {"epoll", kEpoll},    {"eventfd", kEventfd},
                {"pipe", kPipe},      {"socketpair", kSocketpair},
                {"timerfd", kTimerfd}};
  const char *s = getenv("UEPOLL_INTERPOSE");
  if (s == NULL || *s == '\0') {
    g_kinds = kAll;
    return;
  }
  unsigned kinds = 0;
  while (*s) {
    size_t n = strcspn(s, ",");
    for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
      if (WordIs(s, n, kNames[i].name)) kinds |= kNames[i].bit;
    }
    s += n;
    if (*s == ',') ++s;
  }
  /* The kernel's epoll cannot watch uepoll's objects (EPERM): whichever
   * kind becomes uepoll's, so do the instances that watch it. */
  if (kinds != 0) kinds |= kEpoll;
  g_kinds = kinds;
}

static int Uses(unsigned kind) {
  pthread_once(&g_kinds_once, ParseKinds);
  return (g_kinds & kind) != 0;
}

/* ---- epoll ------------------------------------------------------------ */

EXPORT int epoll_create(int size) {
  return Uses(kEpoll) ? uepoll_epoll_create(size) : Libc()->epoll_create(size);
}
EXPORT int epoll_create1(int flags) {
  return Uses(kEpoll) ? uepoll_epoll_create1(flags)
                      : Libc()->epoll_create1(flags);
}
EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
  return uepoll_epoll_ctl(epfd, op, fd, event);
}
EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                      int timeout) {
  return uepoll_epoll_wait(epfd, events, maxevents, timeout);
}
EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
                       int timeout, const sigset_t *sigmask) {
  return uepoll_epoll_pwait(epfd, events, maxevents, timeout, sigmask);
}
EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                        const struct timespec *timeout,
                        const sigset_t *sigmask) {
  return uepoll_epoll_pwait2(epfd, events, maxevents, timeout, sigmask);
}

/* ---- object constructors ------------------------------------------- */

EXPORT int eventfd(unsigned int initval, int flags) {
  return Uses(kEventfd) ? uepoll_eventfd(initval, flags)
                        : Libc()->eventfd(initval, flags);
}
EXPORT int pipe(int pipefd[2]) {
  return Uses(kPipe) ? uepoll_pipe(pipefd) : Libc()->pipe(pipefd);
}
EXPORT int pipe2(int pipefd[2], int flags) {
  return Uses(kPipe) ? uepoll_pipe2(pipefd, flags)
                     : Libc()->pipe2(pipefd, flags);
}
/* Stream pairs become uepoll's; datagram and seqpacket pairs stay the
 * kernel's, as under rename.h (uepoll has them too, but programs that
 * pass such pairs to child processes are common), and other families. */
EXPORT int socketpair(int domain, int type, int protocol, int sv[2]) {
  if (domain == AF_UNIX && (type & 0xf) == SOCK_STREAM && Uses(kSocketpair)) {
    return uepoll_socketpair(domain, type, protocol, sv);
  }
  return Libc()->socketpair(domain, type, protocol, sv);
}
EXPORT int timerfd_create(int clockid, int flags) {
  return Uses(kTimerfd) ? uepoll_timerfd_create(clockid, flags)
                        : Libc()->timerfd_create(clockid, flags);
}
EXPORT int timerfd_settime(int fd, int flags,
                           const struct itimerspec *new_value,
                           struct itimerspec *old_value) {
  return uepoll_timerfd_settime(fd, flags, new_value, old_value);
}
EXPORT int timerfd_gettime(int fd, struct itimerspec *curr_value) {
  return uepoll_timerfd_gettime(fd, curr_value);
}

/* ---- descriptor calls -------------------------------------------------- */

EXPORT ssize_t read(int fd, void *buf, size_t count) {
  return uepoll_read(fd, buf, count);
}
EXPORT ssize_t write(int fd, const void *buf, size_t count) {
  return uepoll_write(fd, buf, count);
}
EXPORT int close(int fd) { return uepoll_close(fd); }
EXPORT int shutdown(int fd, int how) { return uepoll_shutdown(fd, how); }
EXPORT int dup(int oldfd) { return uepoll_dup(oldfd); }
EXPORT int dup2(int oldfd, int newfd) { return uepoll_dup2(oldfd, newfd); }
EXPORT int dup3(int oldfd, int newfd, int flags) {
  return uepoll_dup3(oldfd, newfd, flags);
}
EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout) {
  return uepoll_poll(fds, nfds, timeout);
}

/* The I/O surface of issue 12: vectored and socket calls, ppoll, select,
 * pselect, ioctl. Each passes kernel descriptors to libc. */
EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt) {
  return uepoll_readv(fd, iov, iovcnt);
}
EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
  return uepoll_writev(fd, iov, iovcnt);
}
EXPORT ssize_t preadv(int fd, const struct iovec *iov, int iovcnt,
                      off_t offset) {
  return uepoll_preadv(fd, iov, iovcnt, offset);
}
EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt,
                       off_t offset) {
  return uepoll_pwritev(fd, iov, iovcnt, offset);
}
EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags) {
  return uepoll_send(fd, buf, len, flags);
}
EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags) {
  return uepoll_recv(fd, buf, len, flags);
}
/* With _GNU_SOURCE in C, glibc declares the address arguments as
 * transparent unions (__SOCKADDR_ARG): the definitions must match. */
EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                      __CONST_SOCKADDR_ARG dest, socklen_t destlen) {
  return uepoll_sendto(fd, buf, len, flags, dest.__sockaddr__, destlen);
}
EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
                        __SOCKADDR_ARG src, socklen_t *srclen) {
  return uepoll_recvfrom(fd, buf, len, flags, src.__sockaddr__, srclen);
}
EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  return uepoll_sendmsg(fd, msg, flags);
}
EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  return uepoll_recvmsg(fd, msg, flags);
}
EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
                 const sigset_t *sigmask) {
  return uepoll_ppoll(fds, nfds, tmo, sigmask);
}
EXPORT int select(int nfds, fd_set *readfds, fd_set *writefds,
                  fd_set *exceptfds, struct timeval *timeout) {
  return uepoll_select(nfds, readfds, writefds, exceptfds, timeout);
}
EXPORT int pselect(int nfds, fd_set *readfds, fd_set *writefds,
                   fd_set *exceptfds, const struct timespec *timeout,
                   const sigset_t *sigmask) {
  return uepoll_pselect(nfds, readfds, writefds, exceptfds, timeout, sigmask);
}
/* Every ioctl argument the engine answers is an int, a pointer or nothing:
 * read as a pointer-sized integer and passed on unchanged. */
EXPORT int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return uepoll_ioctl(fd, request, arg);
}

/* Every fcntl argument is an int, a long or a pointer, one register: read
 * as a pointer-sized integer and passed on unchanged. fcntl64 is the same
 * call on 64-bit (glibc redirects fcntl to it under _FILE_OFFSET_BITS=64). */
static int Fcntl(int fd, int cmd, va_list ap) {
  unsigned long arg = va_arg(ap, unsigned long);
  return uepoll_fcntl(fd, cmd, arg);
}
EXPORT int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  int r = Fcntl(fd, cmd, ap);
  va_end(ap);
  return r;
}
EXPORT int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  int r = Fcntl(fd, cmd, ap);
  va_end(ap);
  return r;
}

/* glibc's eventfd_read/eventfd_write call its internal read/write, which
 * no interposer sees: they are defined here on uepoll's. */
EXPORT int eventfd_read(int fd, eventfd_t *value) {
  return uepoll_read(fd, value, sizeof *value) == sizeof *value ? 0 : -1;
}
EXPORT int eventfd_write(int fd, eventfd_t value) {
  return uepoll_write(fd, &value, sizeof value) == sizeof value ? 0 : -1;
}

/* _FORTIFY_SOURCE turns read() and poll() with a buffer of known size into
 * these; glibc's versions call its internal read/poll. */
extern void __chk_fail(void) __attribute__((noreturn));
EXPORT ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen) {
  if (count > buflen) __chk_fail();
  return uepoll_read(fd, buf, count);
}
EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
                      size_t fdslen) {
  if (fdslen / sizeof *fds < nfds) __chk_fail();
  return uepoll_poll(fds, nfds, timeout);
}
