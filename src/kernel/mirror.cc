#include "kernel/mirror.h"

#include <errno.h>
#include <sys/eventfd.h>

#include <new>

#include "base/fork_path.h"
#include "base/private_fd.h"
#include "base/sys.h"

namespace uepoll::impl {

int Mirror::Make(KernelHalf& kh) {
  MutexLock l(mu_);
  if (fd_ >= 0) return 0;
  int saved = errno;
  int mfd = sys::Eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
  if (mfd < 0) {
    int err = -errno;
    errno = saved;
    return err;
  }
  mfd = MovePrivateFd(mfd);
  uint64_t cookie = kh.Cookie(KernelHalf::kMirrorIndex);
  int r = kh.CtlInternal(EPOLL_CTL_ADD, mfd, cookie, 0);
  if (r < 0) {
    sys::Close(mfd);
    errno = saved;
    return r;
  }
  fd_ = mfd;
  armed_ = false;
  cookie_ = cookie;
  errno = saved;
  return 0;
}

void Mirror::Set(KernelHalf& kh, bool want) {
  int r = kh.CtlInternal(EPOLL_CTL_MOD, fd_, cookie_,
                         want ? uint32_t{EPOLLIN} : 0u);
  // A failure means the mirror or the epoll was closed under us
  // (docs/semantics.md D19): nothing to arm any more.
  if (r != 0) return;
  if (want) {
    // The MOD just proved the number is still our eventfd. The write wakes
    // the epoll's watchers whether or not the mirror was still on its
    // ready list (mirror.h). Never EAGAIN: the count would need 2^64 arms.
    int saved = errno;
    uint64_t one = 1;
    (void)sys::Write(fd_, &one, sizeof one);
    errno = saved;
  }
  armed_ = want;
}

void Mirror::Drop(int kfd) {
  MutexLock l(mu_);
  if (fd_ < 0) return;
  int saved = errno;
  epoll_event ev{};
  ev.data.u64 = cookie_;
  if (sys::EpollCtl(kfd, EPOLL_CTL_MOD, fd_, &ev) == 0) sys::Close(fd_);
  errno = saved;
  fd_ = -1;
  armed_ = false;
}

UEPOLL_FORK_PATH void Mirror::RemakeInChild(KernelHalf& kh) {
  if (fd_ < 0) return;
  // The inherited eventfd is the parent's too: ours to close here, before
  // any application code ran in the child.
  sys::Close(fd_);
  bool was_armed = armed_;
  fd_ = -1;
  armed_ = false;
  new (&mu_) Mutex();
  if (Make(kh) == 0 && was_armed) {
    MutexLock l(mu_);
    Set(kh, true);
  }
}

}  // namespace uepoll::impl
