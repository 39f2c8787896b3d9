#include "difffuzz/numbering.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

namespace difffuzz {
namespace {

// The lowest number >= from above which n numbers are free.
int FreeRun(int from, int n) {
  int base = from;
  for (int fd = base; fd < base + n; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) base = fd + 1;  // open: start above it
  }
  return base;
}

}  // namespace

bool Numbering::Setup(std::string* error) {
  devnull_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_ < 0) {
    *error = "cannot open /dev/null";
    return false;
  }
  // 64 at least: poll() of the whole span must stay below the limit.
  const int from = std::max(devnull_ + 1, 64);
  int base;
  if (mode_ == NumberingMode::kKernel) {
    u0_ = FreeRun(from, 2 * (span_ + 8));
    k0_ = u0_ + span_ + 8;
    base = u0_;
  } else {
    k0_ = FreeRun(from, span_ + 8);
    base = k0_;
  }
  // The holes below the base are filled, so that allocation starts there.
  for (int fd = 0; fd < base; ++fd) {
    if (fd == devnull_ || ::fcntl(fd, F_GETFD) != -1) continue;
    if (::dup2(devnull_, fd) == fd) fillers_.push_back(fd);
  }
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  old_kernel_limit_ = static_cast<long>(rl.rlim_cur);
  if (mode_ == NumberingMode::kDisjoint) {
    old_uepoll_limit_ = uepoll_debug_set_fd_limit(span_);
    if (old_uepoll_limit_ < 0) {
      *error = "uepoll_debug_set_fd_limit failed";
      return false;
    }
  }
  limit_ = span_;
  SetRlimit(k0_ + span_);
  if (rlimit_now_ != k0_ + span_) {
    *error = "setrlimit failed";
    return false;
  }
  return true;
}

void Numbering::SetRlimit(long cur) {
  if (cur == rlimit_now_) return;
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = static_cast<rlim_t>(cur);
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0) rlimit_now_ = cur;
}

void Numbering::SetLimit(int limit) {
  limit_ = std::clamp(limit, 1, span_);
  if (mode_ == NumberingMode::kDisjoint) uepoll_debug_set_fd_limit(limit_);
  SetRlimit(k0_ + limit_);
}

void Numbering::Enter(bool kernel, bool may_allocate) {
  if (mode_ != NumberingMode::kKernel) return;
  if (!kernel) {
    SetRlimit(u0_ + limit_);
    return;
  }
  if (!may_allocate) return;
  // Every free number of [U0, K0) filled: the lowest free is the kernel
  // region's.
  for (;;) {
    int fd = ::fcntl(devnull_, F_DUPFD_CLOEXEC, u0_);
    if (fd < 0) break;
    if (fd >= k0_) {
      ::close(fd);
      break;
    }
    temp_fillers_.push_back(fd);
  }
}

void Numbering::Leave() {
  if (mode_ != NumberingMode::kKernel) return;
  for (int fd : temp_fillers_) ::close(fd);
  temp_fillers_.clear();
  SetRlimit(k0_ + limit_);
}

bool Numbering::UepollSideFull() {
  if (mode_ != NumberingMode::kKernel) return false;
  SetRlimit(u0_ + limit_);
  int fd = ::fcntl(devnull_, F_DUPFD_CLOEXEC, 0);
  SetRlimit(k0_ + limit_);
  if (fd < 0) return true;
  ::close(fd);
  return false;
}

void Numbering::Restore() {
  for (int fd : temp_fillers_) ::close(fd);
  temp_fillers_.clear();
  if (old_uepoll_limit_ > 0) uepoll_debug_set_fd_limit(old_uepoll_limit_);
  old_uepoll_limit_ = -1;
  if (old_kernel_limit_ > 0) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(old_kernel_limit_);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  old_kernel_limit_ = -1;
  rlimit_now_ = -1;
  for (int fd : fillers_) ::close(fd);
  fillers_.clear();
  if (devnull_ >= 0) ::close(devnull_);
  devnull_ = -1;
}

int Numbering::Fd(bool kernel, long off) const {
  if (kernel) return static_cast<int>(k0_ + off);
  return static_cast<int>(
      (mode_ == NumberingMode::kKernel ? u0_ : UEPOLL_FD_BASE) + off);
}

long Numbering::Offset(bool kernel, long fd) const {
  if (kernel) return fd - k0_;
  return fd - (mode_ == NumberingMode::kKernel ? u0_ : UEPOLL_FD_BASE);
}

}  // namespace difffuzz
