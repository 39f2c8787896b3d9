#include "kernel/placeholder.h"

#include <errno.h>
#include <fcntl.h>

#include "base/sys.h"

namespace uepoll::impl {
namespace {

int OpenPlaceholder() {
  int fd = sys::Open("/dev/null", O_PATH | O_CLOEXEC);
  if (fd >= 0) return fd;
  // A chroot or sandbox without /dev: the root always exists.
  if (errno == ENOENT || errno == EACCES || errno == ENOTDIR) {
    fd = sys::Open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) return fd;
  }
  return -errno;
}

}  // namespace

int MakePlaceholder(int minfd) {
  int saved = errno;
  int fd = OpenPlaceholder();
  // Unsigned, as F_DUPFD compares: a negative minfd is beyond any limit.
  if (fd >= 0 && static_cast<unsigned>(fd) < static_cast<unsigned>(minfd)) {
    // F_DUPFD's rule for the lowest number >= minfd.
    int moved = sys::Fcntl(fd, F_DUPFD_CLOEXEC, static_cast<unsigned>(minfd));
    int err = errno;
    sys::Close(fd);
    fd = moved >= 0 ? moved : -err;
  }
  errno = saved;
  return fd;
}

int CopyPlaceholder(int oldfd, int minfd) {
  int saved = errno;
  int fd = sys::Fcntl(oldfd, F_DUPFD_CLOEXEC, static_cast<unsigned>(minfd));
  if (fd < 0 && errno == EBADF) {
    // oldfd's kernel file is gone: a fresh placeholder. Not at oldfd
    // itself, which the kernel has free but which still names the object
    // (the copy is for another number): one made there is held while
    // the next is made, then closed, leaving oldfd as it was.
    fd = MakePlaceholder(minfd);
    if (fd == oldfd) {
      int other = MakePlaceholder(minfd);
      sys::Close(fd);
      fd = other;
    }
  } else if (fd < 0) {
    fd = -errno;
  }
  errno = saved;
  return fd;
}

int NewPlaceholderAt(int fd) {
  int saved = errno;
  int tmp = MakePlaceholder(0);
  int r = tmp < 0 ? tmp : 0;
  // Made at fd itself when fd was the lowest free number (libc closed it,
  // or a close is racing the caller): it is then already in place. A dup3
  // onto itself would fail EINVAL, and closing it would free fd while its
  // caller still holds the number.
  if (tmp >= 0 && tmp != fd) {
    r = sys::Dup3(tmp, fd, O_CLOEXEC) < 0 ? -errno : 0;
    sys::Close(tmp);
  }
  errno = saved;
  return r;
}

int CopyPlaceholderTo(int oldfd, int newfd) {
  int saved = errno;
  int r = 0;
  if (sys::Dup3(oldfd, newfd, O_CLOEXEC) < 0) {
    r = -errno;
    if (r == -EBADF && sys::Fcntl(oldfd, F_GETFD, 0) < 0) {
      // oldfd's kernel file is gone (not newfd's range): a fresh one.
      r = NewPlaceholderAt(newfd);
    }
  }
  errno = saved;
  return r;
}

}  // namespace uepoll::impl
