#include "base/parker.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "base/mutex.h"

namespace uepoll::impl {

Parker& Parker::Current() {
  thread_local Parker parker;
  return parker;
}

Parker::Parker() = default;

Parker::~Parker() {
  if (efd_ >= 0) ::close(efd_);
}

bool Parker::EnsureFd() {
  if (efd_ >= 0) return true;
  if (fd_failed_) return false;
  efd_ = ::eventfd(0, EFD_CLOEXEC);
  if (efd_ < 0) fd_failed_ = true;  // out of kernel descriptors: use futex
  return efd_ >= 0;
}

void Parker::Drain() {
  uint64_t v;
  // The fd is readable (ppoll said so) or we were woken through it.
  while (::read(efd_, &v, sizeof v) < 0 && errno == EINTR) {
  }
}

// Degraded mode when no eventfd can be created: a futex sleep. Signals then
// follow futex rules (restarted under SA_RESTART); documented in semantics.md.
Parker::Result Parker::SleepFutex(const Deadline& deadline) {
  timespec ts;
  timespec* tsp = nullptr;
  if (!deadline.is_infinite()) {
    int64_t left = deadline.RemainingNs();
    ts.tv_sec = left / 1000000000;
    ts.tv_nsec = left % 1000000000;
    tsp = &ts;
  }
  long r = syscall(SYS_futex, reinterpret_cast<int*>(&state_),
                   FUTEX_WAIT | FUTEX_PRIVATE_FLAG, kParked, tsp, nullptr, 0);
  if (r < 0 && errno == ETIMEDOUT) return Result::kTimedOut;
  if (r < 0 && errno == EINTR) return Result::kInterrupted;
  return Result::kWoken;
}

// The protocol both sleeps share: publish kParked (or take a token that
// is already there), sleep with sleep_once() until a real token, the
// deadline or a signal, then leave kParked.
template <class SleepOnce>
Parker::Result Parker::ParkLoop(const Deadline& deadline,
                                SleepOnce sleep_once) {
  int saved_errno = errno;
  // acq_rel: the acquire half pairs with Unpark's release (what the waker
  // wrote before waking us is visible once we see its token); the release
  // half publishes efd_ to a waker that sees kParked.
  if (state_.exchange(kParked, std::memory_order_acq_rel) == kNotified) {
    state_.store(kEmpty, std::memory_order_relaxed);
    errno = saved_errno;
    return Result::kWoken;
  }
  Result result;
  for (;;) {
    result = sleep_once();
    if (result != Result::kWoken) break;
    // Woken through the fd: a real token, or a stale count of an earlier wake.
    if (state_.load(std::memory_order_acquire) == kNotified) break;
    if (deadline.Expired()) {
      result = Result::kTimedOut;
      break;
    }
  }
  // Leave Parked; a token that raced with a timeout or signal counts as a wake.
  if (state_.exchange(kEmpty, std::memory_order_acquire) == kNotified) {
    result = Result::kWoken;
  }
  errno = saved_errno;
  return result;
}

Parker::Result Parker::Park(const Deadline& deadline, const sigset_t* mask) {
  bool have_fd = EnsureFd();
  return ParkLoop(deadline, [&] {
    if (!have_fd) return SleepFutex(deadline);
    timespec ts;
    timespec* tsp = nullptr;
    if (!deadline.is_infinite()) {
      int64_t left = deadline.RemainingNs();
      ts.tv_sec = left / 1000000000;
      ts.tv_nsec = left % 1000000000;
      tsp = &ts;
    }
    pollfd pfd{efd_, POLLIN, 0};
    int n = ::ppoll(&pfd, 1, tsp, mask);
    if (n > 0) {
      Drain();
      return Result::kWoken;
    }
    if (n == 0) return Result::kTimedOut;
    return errno == EINTR ? Result::kInterrupted : Result::kWoken;
  });
}

Parker::Result Parker::ParkIo() {
  bool have_fd = EnsureFd();
  return ParkLoop(Deadline::Infinite(), [&] {
    if (!have_fd) return SleepFutex(Deadline::Infinite());
    uint64_t v;
    // Restarted by the kernel under SA_RESTART, EINTR otherwise: the same
    // rule as a blocking read of a kernel pipe.
    ssize_t n = ::read(efd_, &v, sizeof v);
    return (n < 0 && errno == EINTR) ? Result::kInterrupted : Result::kWoken;
  });
}

void Parker::Unpark() {
  // Release pairs with the acquire in Park/ParkIo; acquire pairs with their
  // release so that efd_ is visible here when we see kParked.
  if (state_.exchange(kNotified, std::memory_order_acq_rel) != kParked) return;
  int saved_errno = errno;
  if (efd_ >= 0) {
    uint64_t one = 1;
    while (::write(efd_, &one, sizeof one) < 0 && errno == EINTR) {
    }
  } else {
    syscall(SYS_futex, reinterpret_cast<int*>(&state_),
            FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, nullptr, nullptr, 0);
  }
  errno = saved_errno;
}

}  // namespace uepoll::impl
