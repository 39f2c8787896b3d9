// uepoll_timerfd_*: the pointer checks the kernel makes before anything
// else (copying the new value in), then the engine (sources/timerfd.cc),
// then the copy out. A descriptor that is not uepoll's goes to libc, which
// gives the kernel's answer: success for a kernel timerfd, EINVAL for any
// other kernel file, EBADF for a closed number (what a program renamed
// onto uepoll, or interposed with UEPOLL_INTERPOSE=epoll,eventfd, holds
// when its timerfd_create was the kernel's).
#include <errno.h>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "sources/timerfd.h"

using uepoll::impl::ToErrno;
namespace sys = uepoll::impl::sys;

extern "C" {

int uepoll_timerfd_create(int clockid, int flags) {
  return ToErrno(uepoll::impl::CreateTimerFd(clockid, flags));
}

int uepoll_timerfd_settime(int fd, int flags,
                           const struct itimerspec *new_value,
                           struct itimerspec *old_value) {
  // get_itimerspec64 comes first: a NULL value is EFAULT before the flags,
  // the values and the descriptor are looked at.
  if (!new_value) return ToErrno(-EFAULT);
  struct itimerspec old = {};
  int r = uepoll::impl::TimerFdSetTime(fd, flags, *new_value, &old);
  // EBADF: no uepoll object at fd (the flags and values, which the kernel
  // checks before the descriptor, were valid).
  if (r == -EBADF) return sys::TimerfdSettime(fd, flags, new_value, old_value);
  if (r < 0) return ToErrno(r);
  // Copied out only on success (not after ECANCELED), as the kernel does.
  if (old_value) *old_value = old;
  return 0;
}

int uepoll_timerfd_gettime(int fd, struct itimerspec *curr_value) {
  struct itimerspec cur;
  int r = uepoll::impl::TimerFdGetTime(fd, &cur);
  if (r == -EBADF) return sys::TimerfdGettime(fd, curr_value);
  if (r < 0) return ToErrno(r);
  // The copy-out comes after the timer was looked at (and an expired
  // interval timer forwarded), as in the kernel.
  if (!curr_value) return ToErrno(-EFAULT);
  *curr_value = cur;
  return 0;
}

}  // extern "C"
