#include "kernel/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>

#include "base/sys.h"
#include "base/unlisted_epoll.h"

namespace uepoll::impl {

int KernelEpfdAnswer(int epfd, bool changing) {
  int saved = errno;
  // Open (EBADF) and a file the kernel could use as an instance: not a
  // placeholder (O_PATH: the kernel's fdget refuses it), not a uepoll
  // number in the middle of its close; then an instance (EINVAL), which a
  // DEL of a fresh eventfd answers without changing anything (ENOENT from
  // an instance).
  int fl = sys::Fcntl(epfd, F_GETFL, 0);
  int r;
  if (fl < 0 || (fl & O_PATH) || changing) {
    r = -EBADF;
  } else {
    int probe = sys::Eventfd(0, EFD_CLOEXEC);
    if (probe < 0) {
      r = -EPERM;
    } else if (probe == epfd) {
      // epfd was closed after the check above, and the probe got its
      // number: as a look-up after that close, EBADF.
      r = -EBADF;
      sys::Close(probe);
    } else {
      r = sys::EpollCtl(epfd, EPOLL_CTL_DEL, probe, nullptr) == 0 ? 0 : -errno;
      sys::Close(probe);
      if (r != -EBADF && r != -EINVAL) r = -EPERM;
    }
  }
  errno = saved;
  return r;
}

int KernelTargetAnswer(int fd, const epoll_event& ev) {
  int saved = errno;
  int r = -EINVAL;
  if (sys::Fcntl(fd, F_GETFD, 0) < 0) {
    r = -EBADF;
  } else {
    epoll_event probe = ev;
    UnlistedEpolls::Scope unlisted;
    int tmp = sys::EpollCreate1(EPOLL_CLOEXEC);
    if (tmp >= 0) {
      if (sys::EpollCtl(tmp, EPOLL_CTL_ADD, fd, &probe) != 0 &&
          (errno == EBADF || errno == EPERM)) {
        r = -errno;
      }
      sys::Close(tmp);
    }
  }
  errno = saved;
  return r;
}

int ClosedOr(int fd, int otherwise) {
  int saved = errno;
  int r = sys::Fcntl(fd, F_GETFD, 0) < 0 ? -EBADF : otherwise;
  errno = saved;
  return r;
}

}  // namespace uepoll::impl
