#include "difffuzz/numbering.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

namespace difffuzz {

bool Numbering::Setup(std::string* error) {
  // K0: the lowest kernel number above which span + 8 numbers are free;
  // the holes below it are filled so that the kernel allocates from K0.
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    *error = "cannot open /dev/null";
    return false;
  }
  int k0 = devnull + 1;
  for (int fd = k0; fd < k0 + span_ + 8; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) k0 = fd + 1;  // open: start above it
  }
  for (int fd = 0; fd < k0; ++fd) {
    if (fd == devnull || ::fcntl(fd, F_GETFD) != -1) continue;
    if (::dup2(devnull, fd) == fd) fillers_.push_back(fd);
  }
  fillers_.push_back(devnull);
  k0_ = k0;
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  old_kernel_limit_ = static_cast<long>(rl.rlim_cur);
  rl.rlim_cur = static_cast<rlim_t>(k0_ + span_);
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    *error = "setrlimit failed";
    return false;
  }
  old_uepoll_limit_ = uepoll_debug_set_fd_limit(span_);
  if (old_uepoll_limit_ < 0) {
    *error = "uepoll_debug_set_fd_limit failed";
    return false;
  }
  return true;
}

void Numbering::Restore() {
  if (old_uepoll_limit_ > 0) uepoll_debug_set_fd_limit(old_uepoll_limit_);
  old_uepoll_limit_ = -1;
  if (old_kernel_limit_ > 0) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(old_kernel_limit_);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  old_kernel_limit_ = -1;
  for (int fd : fillers_) ::close(fd);
  fillers_.clear();
}

int Numbering::Fd(bool kernel, long off) const {
  return static_cast<int>((kernel ? k0_ : UEPOLL_FD_BASE) + off);
}

long Numbering::Offset(bool kernel, long fd) const {
  return fd - (kernel ? k0_ : UEPOLL_FD_BASE);
}

}  // namespace difffuzz
