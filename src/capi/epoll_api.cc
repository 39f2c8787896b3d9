// uepoll_epoll_*: argument checks in the kernel's order, then the engine.
#include <errno.h>

#include <uepoll/uepoll.h>

#include "capi/errors.h"
#include "epoll/eventpoll.h"

using uepoll::impl::Deadline;
using uepoll::impl::ToErrno;

extern "C" {

int uepoll_epoll_create(int size) {
  if (size <= 0) return ToErrno(-EINVAL);
  return ToErrno(uepoll::impl::EpollCreate(0));
}

int uepoll_epoll_create1(int flags) {
  return ToErrno(uepoll::impl::EpollCreate(flags));
}

int uepoll_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
  return ToErrno(uepoll::impl::EpollCtl(epfd, op, fd, event));
}

int uepoll_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                      int timeout) {
  return ToErrno(uepoll::impl::EpollWait(epfd, events, maxevents,
                                         Deadline::FromMillis(timeout),
                                         nullptr));
}

int uepoll_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
                       int timeout, const sigset_t *sigmask) {
  return ToErrno(uepoll::impl::EpollWait(epfd, events, maxevents,
                                         Deadline::FromMillis(timeout),
                                         sigmask));
}

int uepoll_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                        const struct timespec *timeout,
                        const sigset_t *sigmask) {
  Deadline d = Deadline::Infinite();
  if (timeout) {
    // Validated before the descriptor, as the kernel does.
    if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
        timeout->tv_nsec >= 1000000000L) {
      return ToErrno(-EINVAL);
    }
    d = Deadline::FromTimespec(*timeout);
  }
  return ToErrno(uepoll::impl::EpollWait(epfd, events, maxevents, d, sigmask));
}

}  // extern "C"
