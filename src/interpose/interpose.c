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
 * The files: this one (libc's table, the kinds, the descriptor calls),
 * interpose_numbers.c (the calls that return new kernel numbers, which
 * release stale uepoll objects there), interpose_syscall.c (syscall()),
 * crossing.c (fork, vfork, exec, posix_spawn), interpose_signal.c
 * (sigaction and signal), engine.c (the engine, loaded at the first uepoll
 * object: before it, every call here goes to libc).
 *
 * What cannot be covered is in README.md ("Adopting uepoll without editing
 * code"). To add a call: its libc name to UEPOLL_LIBC_CALLS (for the pass
 * through), its uepoll_<name> to UEPOLL_ENGINE_CALLS (capi/interpose_hooks.h)
 * and a definition below that calls ENGINE_OR_LIBC(<name>); if glibc has a
 * fortified (_chk) entry point for it, that too; if it has a system call,
 * a case in interpose_syscall.c.
 */
/* Before any system header: the GNU declarations (interpose.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "interpose/interpose.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <termios.h>
#include <unistd.h>

#include "base/env.h"

/* ---- libc's definitions --------------------------------------------- */

static struct uepoll_libc_calls g_libc;

/* A name libc lacks (an older glibc without epoll_pwait2) fails ENOSYS
 * instead of jumping to null. Every entry is called with its own
 * signature; this one stands in for all of them, which the ABI allows for
 * an int return (the arguments are ignored). */
long uepoll_interpose_missing(void) {
  errno = ENOSYS;
  return -1;
}

/* libc's tcgetattr, for the interposer's own (not in the engine's table):
 * resolved with it. */
static int (*g_tcgetattr)(int, struct termios *);

static void ResolveLibc(void) {
  /* The call that triggers this may succeed, and must then leave errno as
   * it was: dlsym does not promise to. The next definition after this
   * object (dlsym(RTLD_NEXT)'s answer, next_symbols.c) is libc's whether
   * this library was preloaded or linked first. A sanitizer's
   * interceptors come before us, so uepoll's own calls to libc bypass them
   * (see README.md). */
  int saved_errno = errno;
  static const char *const kNames[] = {
#define UEPOLL_NAME(name) #name,
      UEPOLL_LIBC_CALLS(UEPOLL_NAME)
#undef UEPOLL_NAME
          "tcgetattr"};
  void *found[sizeof kNames / sizeof kNames[0]];
  uepoll_interpose_next_symbols(kNames, found, sizeof kNames / sizeof *kNames);
  size_t i = 0;
#define UEPOLL_RESOLVE(name)                                                 \
  {                                                                          \
    void *p = found[i++];                                                    \
    if (p) {                                                                 \
      memcpy(&g_libc.name, &p, sizeof p); /* POSIX's dlsym contract */       \
    } else {                                                                 \
      g_libc.name =                                                          \
          (__typeof__(g_libc.name))(void (*)(void))uepoll_interpose_missing; \
    }                                                                        \
  }
  UEPOLL_LIBC_CALLS(UEPOLL_RESOLVE)
#undef UEPOLL_RESOLVE
  memcpy(&g_tcgetattr, &found[i], sizeof found[i]);
  errno = saved_errno;
}

/* Called by uepoll on each of its libc calls, and by the pass-throughs
 * below; the first call may come before this library's constructor (a
 * constructor of another library calling close()): the once-guard makes it
 * safe from any thread at any time. Resolving (next_symbols.c, dlsym)
 * calls none of the names we define, so it cannot recurse. */
EXPORT const struct uepoll_libc_calls *uepoll_interpose_libc(void) {
  Once(kOnceLibc, ResolveLibc);
  return &g_libc;
}

const struct uepoll_libc_calls *uepoll_interpose_libc_calls(void) {
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
enum { kKindsKnown = 1 << 30 };
static atomic_uint g_kinds; /* 0 until known, then kKindsKnown | kinds */

static int WordIs(const char *w, size_t n, const char *name) {
  return strlen(name) == n && memcmp(w, name, n) == 0;
}

/* The kinds the setting names. Read once it can be (base/env.h: also
 * before libc's start-up, from the initial environment); where it cannot
 * be read yet, the default for this call, and read again at the next. */
static unsigned ParseKinds(void) {
  static const struct {
    const char *name;
    unsigned bit;
  } kNames[] = {{"all", kAll},        {"none", 0},
                {"epoll", kEpoll},    {"eventfd", kEventfd},
                {"pipe", kPipe},      {"socketpair", kSocketpair},
                {"timerfd", kTimerfd}};
  char value[1024];
  int found = uepoll_env_get("UEPOLL_INTERPOSE", value, sizeof value);
  if (found == -1) return kAll; /* not known yet */
  unsigned kinds = kAll;        /* also for a value too long to be a list */
  if (found > 0 && value[0] != '\0') {
    kinds = 0;
    for (const char *s = value; *s;) {
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
  }
  /* The first answer stored is the one every caller gets. */
  unsigned stored = 0;
  if (!atomic_compare_exchange_strong_explicit(
          &g_kinds, &stored, kKindsKnown | kinds, memory_order_relaxed,
          memory_order_relaxed)) {
    kinds = stored & ~kKindsKnown;
  }
  return kinds;
}

int uepoll_interpose_uses(unsigned kind) {
  unsigned kinds = atomic_load_explicit(&g_kinds, memory_order_relaxed);
  kinds = kinds != 0 ? kinds & ~kKindsKnown : ParseKinds();
  return (kinds & kind) != 0;
}

/* ---- epoll ------------------------------------------------------------ */

/* In the modes where a constructor makes the kernel's object, the number
 * it returns is a new kernel number: Fresh (interpose.h). */
EXPORT int epoll_create(int size) {
  const struct uepoll_engine_calls *e = For(kEpoll);
  return e ? e->uepoll_epoll_create(size) : Fresh(Libc()->epoll_create(size));
}
EXPORT int epoll_create1(int flags) {
  const struct uepoll_engine_calls *e = For(kEpoll);
  return e ? e->uepoll_epoll_create1(flags)
           : Fresh(Libc()->epoll_create1(flags));
}
EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
  return ENGINE_OR_LIBC(epoll_ctl)(epfd, op, fd, event);
}
EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                      int timeout) {
  return ENGINE_OR_LIBC(epoll_wait)(epfd, events, maxevents, timeout);
}
EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
                       int timeout, const sigset_t *sigmask) {
  return ENGINE_OR_LIBC(epoll_pwait)(epfd, events, maxevents, timeout, sigmask);
}
EXPORT int epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                        const struct timespec *timeout,
                        const sigset_t *sigmask) {
  return ENGINE_OR_LIBC(epoll_pwait2)(epfd, events, maxevents, timeout,
                                      sigmask);
}

/* ---- object constructors ------------------------------------------- */

EXPORT int eventfd(unsigned int initval, int flags) {
  const struct uepoll_engine_calls *e = For(kEventfd);
  return e ? e->uepoll_eventfd(initval, flags)
           : Fresh(Libc()->eventfd(initval, flags));
}
EXPORT int pipe(int pipefd[2]) {
  const struct uepoll_engine_calls *e = For(kPipe);
  return e ? e->uepoll_pipe(pipefd) : Fresh2(Libc()->pipe(pipefd), pipefd);
}
EXPORT int pipe2(int pipefd[2], int flags) {
  const struct uepoll_engine_calls *e = For(kPipe);
  return e ? e->uepoll_pipe2(pipefd, flags)
           : Fresh2(Libc()->pipe2(pipefd, flags), pipefd);
}
/* Stream pairs become uepoll's; datagram and seqpacket pairs stay the
 * kernel's, as under rename.h (uepoll has them too, but programs that
 * pass such pairs to child processes are common), and other families. */
EXPORT int socketpair(int domain, int type, int protocol, int sv[2]) {
  const struct uepoll_engine_calls *e =
      domain == AF_UNIX && (type & 0xf) == SOCK_STREAM ? For(kSocketpair)
                                                       : NULL;
  if (e) return e->uepoll_socketpair(domain, type, protocol, sv);
  return Fresh2(Libc()->socketpair(domain, type, protocol, sv), sv);
}
EXPORT int timerfd_create(int clockid, int flags) {
  const struct uepoll_engine_calls *e = For(kTimerfd);
  return e ? e->uepoll_timerfd_create(clockid, flags)
           : Fresh(Libc()->timerfd_create(clockid, flags));
}
EXPORT int timerfd_settime(int fd, int flags,
                           const struct itimerspec *new_value,
                           struct itimerspec *old_value) {
  return ENGINE_OR_LIBC(timerfd_settime)(fd, flags, new_value, old_value);
}
EXPORT int timerfd_gettime(int fd, struct itimerspec *curr_value) {
  return ENGINE_OR_LIBC(timerfd_gettime)(fd, curr_value);
}

/* ---- descriptor calls -------------------------------------------------- */

EXPORT ssize_t read(int fd, void *buf, size_t count) {
  return ENGINE_OR_LIBC(read)(fd, buf, count);
}
EXPORT ssize_t write(int fd, const void *buf, size_t count) {
  return ENGINE_OR_LIBC(write)(fd, buf, count);
}
EXPORT int close(int fd) { return ENGINE_OR_LIBC(close)(fd); }
EXPORT int close_range(unsigned int first, unsigned int last, int flags) {
  return ENGINE_OR_LIBC(close_range)(first, last, flags);
}
EXPORT void closefrom(int lowfd) { ENGINE_OR_LIBC(closefrom)(lowfd); }
EXPORT int shutdown(int fd, int how) {
  return ENGINE_OR_LIBC(shutdown)(fd, how);
}
EXPORT int dup(int oldfd) { return ENGINE_OR_LIBC(dup)(oldfd); }
EXPORT int dup2(int oldfd, int newfd) {
  return ENGINE_OR_LIBC(dup2)(oldfd, newfd);
}
EXPORT int dup3(int oldfd, int newfd, int flags) {
  return ENGINE_OR_LIBC(dup3)(oldfd, newfd, flags);
}
EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout) {
  return ENGINE_OR_LIBC(poll)(fds, nfds, timeout);
}

/* The rest of the I/O surface (README.md's table of calls): vectored and
 * socket calls, ppoll, select, pselect, ioctl. Each passes kernel
 * descriptors to libc. */
EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt) {
  return ENGINE_OR_LIBC(readv)(fd, iov, iovcnt);
}
EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt) {
  return ENGINE_OR_LIBC(writev)(fd, iov, iovcnt);
}
EXPORT ssize_t preadv(int fd, const struct iovec *iov, int iovcnt,
                      off_t offset) {
  return ENGINE_OR_LIBC(preadv)(fd, iov, iovcnt, offset);
}
EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int iovcnt,
                       off_t offset) {
  return ENGINE_OR_LIBC(pwritev)(fd, iov, iovcnt, offset);
}
/* libc has no send or recv in the table: its sendto and recvfrom with no
 * address, as glibc's own send and recv are. */
static const __CONST_SOCKADDR_ARG kNoAddress = {.__sockaddr__ = NULL};
static const __SOCKADDR_ARG kNoSource = {.__sockaddr__ = NULL};
EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags) {
  return ENGINE_OR(uepoll_send(fd, buf, len, flags),
                   Libc()->sendto(fd, buf, len, flags, kNoAddress, 0));
}
EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags) {
  return ENGINE_OR(uepoll_recv(fd, buf, len, flags),
                   Libc()->recvfrom(fd, buf, len, flags, kNoSource, NULL));
}
/* With _GNU_SOURCE in C, glibc declares the address arguments as
 * transparent unions (__SOCKADDR_ARG): the definitions must match. */
EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
                      __CONST_SOCKADDR_ARG dest, socklen_t destlen) {
  return ENGINE_OR(
      uepoll_sendto(fd, buf, len, flags, dest.__sockaddr__, destlen),
      Libc()->sendto(fd, buf, len, flags, dest, destlen));
}
EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
                        __SOCKADDR_ARG src, socklen_t *srclen) {
  return ENGINE_OR(
      uepoll_recvfrom(fd, buf, len, flags, src.__sockaddr__, srclen),
      Libc()->recvfrom(fd, buf, len, flags, src, srclen));
}
EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  return ENGINE_OR_LIBC(sendmsg)(fd, msg, flags);
}
/* Descriptors received over a kernel socket are new kernel numbers. */
static void FreshRights(const struct msghdr *msg) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL;
       c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char *data = CMSG_DATA(c);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      memcpy(&fd, data + i * sizeof fd, sizeof fd);
      Fresh(fd);
    }
  }
}
EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  /* Over a uepoll socket the descriptors are installed by uepoll itself. */
  int kernel = !IsUepoll(fd);
  ssize_t r = ENGINE_OR_LIBC(recvmsg)(fd, msg, flags);
  if (r >= 0 && kernel && msg->msg_controllen > 0) FreshRights(msg);
  return r;
}
EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags) {
  return ENGINE_OR_LIBC(sendmmsg)(fd, vec, vlen, flags);
}
EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
                    struct timespec *timeout) {
  int kernel = !IsUepoll(fd);
  int r = ENGINE_OR_LIBC(recvmmsg)(fd, vec, vlen, flags, timeout);
  for (int i = 0; kernel && i < r; ++i) {
    if (vec[i].msg_hdr.msg_controllen > 0) FreshRights(&vec[i].msg_hdr);
  }
  return r;
}
EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
                 const sigset_t *sigmask) {
  return ENGINE_OR_LIBC(ppoll)(fds, nfds, tmo, sigmask);
}
EXPORT int select(int nfds, fd_set *readfds, fd_set *writefds,
                  fd_set *exceptfds, struct timeval *timeout) {
  return ENGINE_OR_LIBC(select)(nfds, readfds, writefds, exceptfds, timeout);
}
EXPORT int pselect(int nfds, fd_set *readfds, fd_set *writefds,
                   fd_set *exceptfds, const struct timespec *timeout,
                   const sigset_t *sigmask) {
  return ENGINE_OR_LIBC(pselect)(nfds, readfds, writefds, exceptfds, timeout,
                                 sigmask);
}
/* Every ioctl argument the engine answers is an int, a pointer or nothing:
 * read as a pointer-sized integer and passed on unchanged. */
EXPORT int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  return ENGINE_OR(uepoll_ioctl(fd, request, arg),
                   Libc()->ioctl(fd, request, arg));
}

/* Every fcntl argument is an int, a long or a pointer, one register: read
 * as a pointer-sized integer and passed on unchanged. fcntl64 is the same
 * call on 64-bit (glibc redirects fcntl to it under _FILE_OFFSET_BITS=64). */
static int Fcntl(int fd, int cmd, va_list ap) {
  unsigned long arg = va_arg(ap, unsigned long);
  return ENGINE_OR(uepoll_fcntl(fd, cmd, arg), Libc()->fcntl(fd, cmd, arg));
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
  return ENGINE_OR_LIBC(read)(fd, value, sizeof *value) == sizeof *value ? 0
                                                                         : -1;
}
EXPORT int eventfd_write(int fd, eventfd_t value) {
  return ENGINE_OR_LIBC(write)(fd, &value, sizeof value) == sizeof value ? 0
                                                                         : -1;
}

/* ---- stat, socket options and names, sendfile, splice, pread --------- */

EXPORT int fstat(int fd, struct stat *st) {
  return ENGINE_OR_LIBC(fstat)(fd, st);
}
EXPORT int fstat64(int fd, struct stat64 *st) {
  return ENGINE_OR_LIBC(fstat)(fd,
                               (struct stat *)st); /* one layout on 64-bit */
}
EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  return ENGINE_OR_LIBC(fstatat)(dirfd, path, st, flags);
}
EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st,
                     int flags) {
  return ENGINE_OR_LIBC(fstatat)(dirfd, path, (struct stat *)st, flags);
}
EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
                 struct statx *stx) {
  return ENGINE_OR_LIBC(statx)(dirfd, path, flags, mask, stx);
}
/* What binaries built against glibc before 2.33 call for fstat and
 * fstatat (vers: _STAT_VER, 1 on x86-64; 0, the kernel's layout, is the
 * same struct there). */
EXPORT int __fxstat(int vers, int fd, struct stat *st);
EXPORT int __fxstat64(int vers, int fd, struct stat64 *st);
EXPORT int __fxstatat(int vers, int dirfd, const char *path, struct stat *st,
                      int flags);
EXPORT int __fxstatat64(int vers, int dirfd, const char *path,
                        struct stat64 *st, int flags);
static int BadStatVersion(int vers) {
  if (vers == 0 || vers == 1) return 0;
  errno = EINVAL;
  return 1;
}
int __fxstat(int vers, int fd, struct stat *st) {
  return BadStatVersion(vers) ? -1 : ENGINE_OR_LIBC(fstat)(fd, st);
}
int __fxstat64(int vers, int fd, struct stat64 *st) {
  return BadStatVersion(vers) ? -1
                              : ENGINE_OR_LIBC(fstat)(fd, (struct stat *)st);
}
int __fxstatat(int vers, int dirfd, const char *path, struct stat *st,
               int flags) {
  return BadStatVersion(vers) ? -1
                              : ENGINE_OR_LIBC(fstatat)(dirfd, path, st, flags);
}
int __fxstatat64(int vers, int dirfd, const char *path, struct stat64 *st,
                 int flags) {
  return BadStatVersion(vers)
             ? -1
             : ENGINE_OR_LIBC(fstatat)(dirfd, path, (struct stat *)st, flags);
}

EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len) {
  return ENGINE_OR_LIBC(getsockopt)(fd, level, name, val, len);
}
EXPORT int setsockopt(int fd, int level, int name, const void *val,
                      socklen_t len) {
  return ENGINE_OR_LIBC(setsockopt)(fd, level, name, val, len);
}
EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len) {
  return ENGINE_OR(uepoll_getsockname(fd, addr.__sockaddr__, len),
                   Libc()->getsockname(fd, addr, len));
}
EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len) {
  return ENGINE_OR(uepoll_getpeername(fd, addr.__sockaddr__, len),
                   Libc()->getpeername(fd, addr, len));
}

EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count) {
  return ENGINE_OR_LIBC(sendfile)(out_fd, in_fd, offset, count);
}
EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
                          size_t count) {
  return ENGINE_OR_LIBC(sendfile)(out_fd, in_fd, (off_t *)offset, count);
}
EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out,
                      size_t len, unsigned int flags) {
  return ENGINE_OR_LIBC(splice)(fd_in, (off_t *)off_in, fd_out,
                                (off_t *)off_out, len, flags);
}
EXPORT ssize_t pread(int fd, void *buf, size_t count, off_t offset) {
  return ENGINE_OR_LIBC(pread)(fd, buf, count, offset);
}
EXPORT ssize_t pread64(int fd, void *buf, size_t count, off64_t offset) {
  return ENGINE_OR_LIBC(pread)(fd, buf, count, offset);
}
EXPORT ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
  return ENGINE_OR_LIBC(pwrite)(fd, buf, count, offset);
}
EXPORT ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
  return ENGINE_OR_LIBC(pwrite)(fd, buf, count, offset);
}
EXPORT off_t lseek(int fd, off_t offset, int whence) {
  return ENGINE_OR_LIBC(lseek)(fd, offset, whence);
}
EXPORT off64_t lseek64(int fd, off64_t offset, int whence) {
  return ENGINE_OR_LIBC(lseek)(fd, offset, whence);
}
/* glibc's fstatvfs calls its internal fstatfs, which no interposer sees:
 * both are defined, and the 64 names (the same layout on x86-64). */
EXPORT int fstatfs(int fd, struct statfs *buf) {
  return ENGINE_OR_LIBC(fstatfs)(fd, buf);
}
EXPORT int fstatfs64(int fd, struct statfs64 *buf) {
  return ENGINE_OR_LIBC(fstatfs)(fd, (struct statfs *)buf);
}
EXPORT int fstatvfs(int fd, struct statvfs *buf) {
  return ENGINE_OR_LIBC(fstatvfs)(fd, buf);
}
EXPORT int fstatvfs64(int fd, struct statvfs64 *buf) {
  return ENGINE_OR_LIBC(fstatvfs)(fd, (struct statvfs *)buf);
}
/* The calls about a file's pages and filesystem (capi/hint_api.cc), and
 * their 64 names (the same on x86-64). glibc's posix_fallocate makes the
 * fallocate system call itself: it is defined too. */
EXPORT int posix_fadvise(int fd, off_t offset, off_t len, int advice) {
  return ENGINE_OR_LIBC(posix_fadvise)(fd, offset, len, advice);
}
EXPORT int posix_fadvise64(int fd, off64_t offset, off64_t len, int advice) {
  return ENGINE_OR_LIBC(posix_fadvise)(fd, offset, len, advice);
}
EXPORT int posix_fallocate(int fd, off_t offset, off_t len) {
  return ENGINE_OR_LIBC(posix_fallocate)(fd, offset, len);
}
EXPORT int posix_fallocate64(int fd, off64_t offset, off64_t len) {
  return ENGINE_OR_LIBC(posix_fallocate)(fd, offset, len);
}
EXPORT int fallocate(int fd, int mode, off_t offset, off_t len) {
  return ENGINE_OR_LIBC(fallocate)(fd, mode, offset, len);
}
EXPORT int fallocate64(int fd, int mode, off64_t offset, off64_t len) {
  return ENGINE_OR_LIBC(fallocate)(fd, mode, offset, len);
}
EXPORT ssize_t readahead(int fd, off64_t offset, size_t count) {
  return ENGINE_OR_LIBC(readahead)(fd, offset, count);
}
EXPORT int sync_file_range(int fd, off64_t offset, off64_t nbytes,
                           unsigned int flags) {
  return ENGINE_OR_LIBC(sync_file_range)(fd, offset, nbytes, flags);
}
EXPORT int syncfs(int fd) { return ENGINE_OR_LIBC(syncfs)(fd); }
EXPORT int fsync(int fd) { return ENGINE_OR_LIBC(fsync)(fd); }
EXPORT int fdatasync(int fd) { return ENGINE_OR_LIBC(fdatasync)(fd); }
/* glibc's isatty is its tcgetattr, whose TCGETS ioctl is a system call of
 * its own that the interposed ioctl never sees: on a uepoll number it
 * would reach the placeholder (EBADF). uepoll's ioctl answers it as the
 * kernel does for the object's kind (none is a terminal). */
static int Tcgets(int fd) {
  struct termios t; /* larger than the kernel's, which TCGETS fills */
  return ENGINE_OR(uepoll_ioctl(fd, TCGETS, &t), Libc()->ioctl(fd, TCGETS, &t));
}
EXPORT int isatty(int fd) { return Tcgets(fd) == 0; }
EXPORT int tcgetattr(int fd, struct termios *t) {
  if (IsUepoll(fd)) return Tcgets(fd) == 0 ? 0 : -1;
  (void)Libc(); /* resolves g_tcgetattr too */
  if (!g_tcgetattr) {
    errno = ENOSYS;
    return -1;
  }
  return g_tcgetattr(fd, t);
}

/* ---- fortified entry points -------------------------------------------
 *
 * _FORTIFY_SOURCE turns calls with a buffer of known size into these
 * (glibc 2.36's list, for the calls above: __read_chk, __pread_chk,
 * __pread64_chk, __recv_chk, __recvfrom_chk, __poll_chk, __ppoll_chk);
 * glibc's versions call its internal read, recv, poll... which no
 * interposer sees. Each checks as glibc's does, then calls uepoll's. The
 * FD_SET checks (__fdelt_chk, __fdelt_warn) are arithmetic on the number
 * and work on uepoll numbers as they are; the fortified open entry points
 * are in interpose_numbers.c. */
extern void __chk_fail(void) __attribute__((noreturn));
EXPORT ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen) {
  if (count > buflen) __chk_fail();
  return ENGINE_OR_LIBC(read)(fd, buf, count);
}
EXPORT ssize_t __pread_chk(int fd, void *buf, size_t count, off_t offset,
                           size_t buflen) {
  if (count > buflen) __chk_fail();
  return ENGINE_OR_LIBC(pread)(fd, buf, count, offset);
}
EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t count, off64_t offset,
                             size_t buflen) {
  if (count > buflen) __chk_fail();
  return ENGINE_OR_LIBC(pread)(fd, buf, count, offset);
}
EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
                          int flags) {
  if (len > buflen) __chk_fail();
  return ENGINE_OR(uepoll_recv(fd, buf, len, flags),
                   Libc()->recvfrom(fd, buf, len, flags, kNoSource, NULL));
}
EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
                              int flags, __SOCKADDR_ARG addr,
                              socklen_t *addrlen) {
  if (len > buflen) __chk_fail();
  return ENGINE_OR(
      uepoll_recvfrom(fd, buf, len, flags, addr.__sockaddr__, addrlen),
      Libc()->recvfrom(fd, buf, len, flags, addr, addrlen));
}
EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
                      size_t fdslen) {
  if (fdslen / sizeof *fds < nfds) __chk_fail();
  return ENGINE_OR_LIBC(poll)(fds, nfds, timeout);
}
EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
                       const struct timespec *tmo, const sigset_t *sigmask,
                       size_t fdslen) {
  if (fdslen / sizeof *fds < nfds) __chk_fail();
  return ENGINE_OR_LIBC(ppoll)(fds, nfds, tmo, sigmask);
}
