/* syscall(): the descriptor system calls uepoll owns, made through libc's
 * generic entry point (libuv closes every descriptor with
 * syscall(SYS_close); others call statx, ppoll or pipe2 so), reach the same
 * definitions as the libc names; everything else goes to libc's syscall()
 * unchanged, its return value and errno included.
 *
 * syscall's ABI is variadic: every argument is read as a long, six of
 * them, whatever the call takes, as glibc's own syscall() reads them. The
 * calls whose system call differs from the libc function (a kernel sigset
 * of sigsetsize bytes instead of glibc's sigset_t; ppoll and pselect6
 * writing the time left back; preadv's split offset) are translated here,
 * with the kernel's checks in the kernel's order.
 */
/* Before any system header: the GNU declarations (interpose.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "interpose/interpose.h"

/* The kernel's sigset_t: 64 signals, 8 bytes. */
enum { kKernelSigsetSize = 8 };

static long Fail(int err) {
  errno = err;
  return -1;
}

/* set_user_sigmask: a kernel sigset of sigsetsize bytes into a glibc
 * sigset_t; 0, or the errno (EINVAL, EFAULT). *out is NULL without one. */
static int UserSigmask(long umask, long sigsetsize, sigset_t *buf,
                       const sigset_t **out) {
  *out = NULL;
  if (!umask) return 0;
  if (sigsetsize != kKernelSigsetSize) return EINVAL;
  if ((uintptr_t)umask < 4096) return EFAULT;
  sigemptyset(buf);
  memcpy(buf, (const void *)umask, kKernelSigsetSize);
  *out = buf;
  return 0;
}

/* poll_select_set_timeout's checks of a user timespec: 0 or the errno. */
static int UserTimespec(long p, struct timespec *ts) {
  if ((uintptr_t)p < 4096) return EFAULT;
  memcpy(ts, (const void *)p, sizeof *ts);
  if (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L) {
    return EINVAL;
  }
  return 0;
}

static struct timespec Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

/* poll_select_finish: the time left is written back, unless the timeout
 * was zero (there is none then). */
static void WriteTimeLeft(long p, const struct timespec *timeout,
                          const struct timespec *start) {
  if (timeout->tv_sec == 0 && timeout->tv_nsec == 0) return;
  struct timespec now = Now();
  int64_t end = (int64_t)start->tv_sec * 1000000000 + start->tv_nsec +
                (int64_t)timeout->tv_sec * 1000000000 + timeout->tv_nsec;
  int64_t left = end - ((int64_t)now.tv_sec * 1000000000 + now.tv_nsec);
  if (left < 0) left = 0;
  struct timespec out = {left / 1000000000, left % 1000000000};
  memcpy((void *)p, &out, sizeof out);
}

static long Ppoll(long fds, long nfds, long tsp, long umask, long size) {
  struct timespec ts;
  if (tsp) {
    int err = UserTimespec(tsp, &ts);
    if (err) return Fail(err);
  }
  sigset_t buf;
  const sigset_t *mask;
  int err = UserSigmask(umask, size, &buf, &mask);
  if (err) return Fail(err);
  struct timespec start = Now();
  long r = Engine()->uepoll_ppoll(
      (struct pollfd *)fds, (nfds_t)(unsigned int)nfds, tsp ? &ts : NULL, mask);
  int saved = errno;
  if (tsp) WriteTimeLeft(tsp, &ts, &start);
  errno = saved;
  return r;
}

static long Pselect6(long n, long r, long w, long e, long tsp, long sig) {
  /* get_sigset_argpack: { const sigset_t *ss; size_t ss_len; } */
  long pack[2] = {0, 0};
  if (sig) {
    if ((uintptr_t)sig < 4096) return Fail(EFAULT);
    memcpy(pack, (const void *)sig, sizeof pack);
  }
  struct timespec ts;
  if (tsp) {
    int err = UserTimespec(tsp, &ts);
    if (err) return Fail(err);
  }
  sigset_t buf;
  const sigset_t *mask;
  int err = UserSigmask(pack[0], pack[1], &buf, &mask);
  if (err) return Fail(err);
  struct timespec start = Now();
  long ret = Engine()->uepoll_pselect((int)n, (fd_set *)r, (fd_set *)w,
                                      (fd_set *)e, tsp ? &ts : NULL, mask);
  int saved = errno;
  if (tsp) WriteTimeLeft(tsp, &ts, &start);
  errno = saved;
  return ret;
}

static long EpollPwait(long epfd, long evs, long max, long timeout, long umask,
                       long size) {
  sigset_t buf;
  const sigset_t *mask;
  int err = UserSigmask(umask, size, &buf, &mask);
  if (err) return Fail(err);
  return Engine()->uepoll_epoll_pwait((int)epfd, (struct epoll_event *)evs,
                                      (int)max, (int)timeout, mask);
}

static long EpollPwait2(long epfd, long evs, long max, long tsp, long umask,
                        long size) {
  struct timespec ts;
  if (tsp) {
    int err = UserTimespec(tsp, &ts);
    if (err) return Fail(err);
  }
  sigset_t buf;
  const sigset_t *mask;
  int err = UserSigmask(umask, size, &buf, &mask);
  if (err) return Fail(err);
  return Engine()->uepoll_epoll_pwait2((int)epfd, (struct epoll_event *)evs,
                                       (int)max, tsp ? &ts : NULL, mask);
}

/* preadv2/pwritev2 at offset -1 and without flags are readv/writev; any
 * other form on a uepoll object is what a pipe answers. */
static long Vectored2(int write, long fd, long iov, long cnt, long pos,
                      long flags) {
  if (!IsUepoll((int)fd)) {
    return Libc()->syscall(write ? SYS_pwritev2 : SYS_preadv2, fd, iov, cnt,
                           pos, 0L, flags);
  }
  if (pos == -1 && flags == 0) {
    return write ? Engine()->uepoll_writev((int)fd, (const struct iovec *)iov,
                                           (int)cnt)
                 : Engine()->uepoll_readv((int)fd, (const struct iovec *)iov,
                                          (int)cnt);
  }
  if (pos == -1) return Fail(EOPNOTSUPP);
  return write ? Engine()->uepoll_pwritev((int)fd, (const struct iovec *)iov,
                                          (int)cnt, (off_t)pos)
               : Engine()->uepoll_preadv((int)fd, (const struct iovec *)iov,
                                         (int)cnt, (off_t)pos);
}

/* The system calls that make a uepoll object in some UEPOLL_INTERPOSE
 * mode: they reach the interposer's constructors, which load the engine. */
static int Constructs(long n) {
  switch (n) {
    case SYS_epoll_create:
    case SYS_epoll_create1:
    case SYS_eventfd:
    case SYS_eventfd2:
    case SYS_pipe:
    case SYS_pipe2:
    case SYS_socketpair:
    case SYS_timerfd_create:
      return 1;
    default:
      return 0;
  }
}

/* The libc names below (epoll_create1, pipe2, socket, open, recvmsg...)
 * are the interposer's own definitions (interpose.c, interpose_numbers.c),
 * which hold the modes and the stale-object checks. */
static long Dispatch(long n, long a0, long a1, long a2, long a3, long a4,
                     long a5) {
  /* A new process: as the interposer's vfork, or converting what crosses
   * as its _Fork does (crossing.c). First, and without libc's table: a
   * library's constructor may fork while another thread resolves it. */
  switch (n) {
    case SYS_vfork:
      return vfork();
    case SYS_fork:
    case SYS_clone:
    case SYS_clone3:
      return uepoll_interpose_clone(n, a0, a1, a2, a3, a4, a5);
    default:
      break;
  }
  /* Before the engine is in the process, only a constructor can concern
   * uepoll; below, Engine() is never null. */
  if (Engine() == NULL && !Constructs(n)) {
    return Libc()->syscall(n, a0, a1, a2, a3, a4, a5);
  }
  switch (n) {
    case SYS_read:
      return Engine()->uepoll_read((int)a0, (void *)a1, (size_t)a2);
    case SYS_write:
      return Engine()->uepoll_write((int)a0, (const void *)a1, (size_t)a2);
    case SYS_close:
      return Engine()->uepoll_close((int)a0);
    case SYS_close_range:
      return Engine()->uepoll_close_range((unsigned)a0, (unsigned)a1, (int)a2);
    case SYS_dup:
      return Engine()->uepoll_dup((int)a0);
    case SYS_dup2:
      return Engine()->uepoll_dup2((int)a0, (int)a1);
    case SYS_dup3:
      return Engine()->uepoll_dup3((int)a0, (int)a1, (int)a2);
    case SYS_fcntl:
      return Engine()->uepoll_fcntl((int)a0, (int)a1, (unsigned long)a2);
    case SYS_ioctl:
      return Engine()->uepoll_ioctl((int)a0, (unsigned long)a1,
                                    (unsigned long)a2);
    case SYS_readv:
      return Engine()->uepoll_readv((int)a0, (const struct iovec *)a1, (int)a2);
    case SYS_writev:
      return Engine()->uepoll_writev((int)a0, (const struct iovec *)a1,
                                     (int)a2);
    case SYS_preadv:
      return Engine()->uepoll_preadv((int)a0, (const struct iovec *)a1, (int)a2,
                                     (off_t)a3);
    case SYS_pwritev:
      return Engine()->uepoll_pwritev((int)a0, (const struct iovec *)a1,
                                      (int)a2, (off_t)a3);
    case SYS_preadv2:
      return Vectored2(0, a0, a1, a2, a3, a5);
    case SYS_pwritev2:
      return Vectored2(1, a0, a1, a2, a3, a5);
    case SYS_pread64:
      return Engine()->uepoll_pread((int)a0, (void *)a1, (size_t)a2, (off_t)a3);
    case SYS_lseek:
      return Engine()->uepoll_lseek((int)a0, (off_t)a1, (int)a2);
    case SYS_fsync:
      return Engine()->uepoll_fsync((int)a0);
    case SYS_fdatasync:
      return Engine()->uepoll_fdatasync((int)a0);
    case SYS_pwrite64:
      return Engine()->uepoll_pwrite((int)a0, (const void *)a1, (size_t)a2,
                                     (off_t)a3);

    case SYS_epoll_create:
      return epoll_create((int)a0);
    case SYS_epoll_create1:
      return epoll_create1((int)a0);
    case SYS_epoll_ctl:
      return Engine()->uepoll_epoll_ctl((int)a0, (int)a1, (int)a2,
                                        (struct epoll_event *)a3);
    case SYS_epoll_wait:
      return Engine()->uepoll_epoll_wait((int)a0, (struct epoll_event *)a1,
                                         (int)a2, (int)a3);
    case SYS_epoll_pwait:
      return EpollPwait(a0, a1, a2, a3, a4, a5);
    case SYS_epoll_pwait2:
      return EpollPwait2(a0, a1, a2, a3, a4, a5);
    case SYS_eventfd:
      return eventfd((unsigned)a0, 0);
    case SYS_eventfd2:
      return eventfd((unsigned)a0, (int)a1);
    case SYS_pipe:
      return pipe((int *)a0);
    case SYS_pipe2:
      return pipe2((int *)a0, (int)a1);
    case SYS_socketpair:
      return socketpair((int)a0, (int)a1, (int)a2, (int *)a3);
    case SYS_timerfd_create:
      return timerfd_create((int)a0, (int)a1);
    case SYS_timerfd_settime:
      return Engine()->uepoll_timerfd_settime((int)a0, (int)a1,
                                              (const struct itimerspec *)a2,
                                              (struct itimerspec *)a3);
    case SYS_timerfd_gettime:
      return Engine()->uepoll_timerfd_gettime((int)a0, (struct itimerspec *)a1);
    case SYS_poll:
      return Engine()->uepoll_poll((struct pollfd *)a0,
                                   (nfds_t)(unsigned int)a1, (int)a2);
    case SYS_ppoll:
      return Ppoll(a0, a1, a2, a3, a4);
    case SYS_select:
      return Engine()->uepoll_select((int)a0, (fd_set *)a1, (fd_set *)a2,
                                     (fd_set *)a3, (struct timeval *)a4);
    case SYS_pselect6:
      return Pselect6(a0, a1, a2, a3, a4, a5);

    case SYS_shutdown:
      return Engine()->uepoll_shutdown((int)a0, (int)a1);
    case SYS_sendto:
      return Engine()->uepoll_sendto((int)a0, (const void *)a1, (size_t)a2,
                                     (int)a3, (const struct sockaddr *)a4,
                                     (socklen_t)a5);
    case SYS_recvfrom:
      return Engine()->uepoll_recvfrom((int)a0, (void *)a1, (size_t)a2, (int)a3,
                                       (struct sockaddr *)a4, (socklen_t *)a5);
    case SYS_sendmsg:
      return Engine()->uepoll_sendmsg((int)a0, (const struct msghdr *)a1,
                                      (int)a2);
    case SYS_recvmsg:
      return recvmsg((int)a0, (struct msghdr *)a1, (int)a2);
    case SYS_fadvise64: {
      /* The system call fails -1 and errno; posix_fadvise returns it. */
      int err = Engine()->uepoll_posix_fadvise((int)a0, (off_t)a1, (off_t)a2,
                                               (int)a3);
      return err ? Fail(err) : 0;
    }
    case SYS_fallocate:
      return Engine()->uepoll_fallocate((int)a0, (int)a1, (off_t)a2, (off_t)a3);
    case SYS_readahead:
      return Engine()->uepoll_readahead((int)a0, (off_t)a1, (size_t)a2);
    case SYS_sync_file_range:
      return Engine()->uepoll_sync_file_range((int)a0, (off_t)a1, (off_t)a2,
                                              (unsigned)a3);
    case SYS_syncfs:
      return Engine()->uepoll_syncfs((int)a0);
    case SYS_fstatfs:
      return Engine()->uepoll_fstatfs((int)a0, (struct statfs *)a1);
    case SYS_sendmmsg:
      return Engine()->uepoll_sendmmsg((int)a0, (struct mmsghdr *)a1,
                                       (unsigned)a2, (int)a3);
    case SYS_recvmmsg:
      return recvmmsg((int)a0, (struct mmsghdr *)a1, (unsigned)a2, (int)a3,
                      (struct timespec *)a4);
    case SYS_getsockopt:
      return Engine()->uepoll_getsockopt((int)a0, (int)a1, (int)a2, (void *)a3,
                                         (socklen_t *)a4);
    case SYS_setsockopt:
      return Engine()->uepoll_setsockopt((int)a0, (int)a1, (int)a2,
                                         (const void *)a3, (socklen_t)a4);
    case SYS_getsockname:
      return Engine()->uepoll_getsockname((int)a0, (struct sockaddr *)a1,
                                          (socklen_t *)a2);
    case SYS_getpeername:
      return Engine()->uepoll_getpeername((int)a0, (struct sockaddr *)a1,
                                          (socklen_t *)a2);
    case SYS_sendfile:
      return Engine()->uepoll_sendfile((int)a0, (int)a1, (off_t *)a2,
                                       (size_t)a3);
    case SYS_splice:
      return Engine()->uepoll_splice((int)a0, (off_t *)a1, (int)a2, (off_t *)a3,
                                     (size_t)a4, (unsigned)a5);

    case SYS_fstat:
      return Engine()->uepoll_fstat((int)a0, (struct stat *)a1);
    case SYS_newfstatat:
      return Engine()->uepoll_fstatat((int)a0, (const char *)a1,
                                      (struct stat *)a2, (int)a3);
    case SYS_statx:
      return Engine()->uepoll_statx((int)a0, (const char *)a1, (int)a2,
                                    (unsigned)a3, (struct statx *)a4);

    /* A new image: through the interposer's exec, which converts what
     * it passes on (crossing.c). */
    case SYS_execve:
      return execve((const char *)a0, (char *const *)a1, (char *const *)a2);
    case SYS_execveat:
      return execveat((int)a0, (const char *)a1, (char *const *)a2,
                      (char *const *)a3, (int)a4);

    /* New kernel numbers: a stale uepoll object there is released. */
    case SYS_open:
      return open((const char *)a0, (int)a1, (mode_t)a2);
    case SYS_openat:
      return openat((int)a0, (const char *)a1, (int)a2, (mode_t)a3);
    case SYS_creat:
      return creat((const char *)a0, (mode_t)a1);
    case SYS_socket:
      return socket((int)a0, (int)a1, (int)a2);
    case SYS_accept:
      return accept((int)a0, (struct sockaddr *)a1, (socklen_t *)a2);
    case SYS_accept4:
      return accept4((int)a0, (struct sockaddr *)a1, (socklen_t *)a2, (int)a3);
    case SYS_openat2:
    case SYS_memfd_create:
    case SYS_memfd_secret:
    case SYS_signalfd:
    case SYS_signalfd4:
    case SYS_inotify_init:
    case SYS_inotify_init1:
    case SYS_fanotify_init:
    case SYS_pidfd_open:
    case SYS_pidfd_getfd:
    case SYS_userfaultfd:
    case SYS_perf_event_open:
    case SYS_io_uring_setup:
    case SYS_open_by_handle_at:
    case SYS_open_tree:
    case SYS_fsopen:
    case SYS_fsmount:
    case SYS_fspick:
    case SYS_landlock_create_ruleset: {
      /* signalfd on an existing number changes that signalfd. */
      if ((n == SYS_signalfd || n == SYS_signalfd4) && a0 != -1) break;
      long r = Libc()->syscall(n, a0, a1, a2, a3, a4, a5);
      if (r >= 0 && r <= INT32_MAX) Fresh((int)r);
      return r;
    }
    default:
      break;
  }
  return Libc()->syscall(n, a0, a1, a2, a3, a4, a5);
}

/* Six arguments are read whatever the caller passed, as glibc's own
 * syscall() (assembly) loads six registers and a stack slot: the sixth is
 * read from the caller's frame even when it passed fewer. That read is the
 * ABI's, not a bug, and ASan (at -O1) reports it as a stack-buffer
 * underflow of the caller's frame: not instrumented here. */
__attribute__((no_sanitize_address)) EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a0 = va_arg(ap, long);
  long a1 = va_arg(ap, long);
  long a2 = va_arg(ap, long);
  long a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long);
  long a5 = va_arg(ap, long);
  va_end(ap);
  return Dispatch(number, a0, a1, a2, a3, a4, a5);
}
