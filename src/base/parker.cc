#include "base/parker.h"

#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
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
  if (kep_ >= 0) ::close(kep_);
  if (efd_ >= 0) ::close(efd_);
}

namespace {

// Bumped in the child of every fork(). A parker whose descriptors predate
// the current generation is the forking thread's copy: its eventfd and
// kernel epoll are shared with the parent's thread, and an edge written
// for one could wake the other (epoll waiters are exclusive), so the child
// makes its own.
std::atomic<unsigned> g_fork_generation{0};
void OnForkChild() {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
}
[[maybe_unused]] const int g_atfork_registered =
    pthread_atfork(nullptr, nullptr, OnForkChild);

}  // namespace

bool Parker::EnsureFd() {
  unsigned gen = g_fork_generation.load(std::memory_order_relaxed);
  if (gen != fork_generation_) {
    // Only this thread exists in the child, so no waker holds the old
    // numbers; they are the child's copies, and closing them leaves the
    // parent's alone.
    if (kep_ >= 0) ::close(kep_);
    if (efd_ >= 0) ::close(efd_);
    kep_ = efd_ = -1;
    kep_failed_ = fd_failed_ = false;
    fork_generation_ = gen;
  }
  if (efd_ < 0) {
    if (fd_failed_) return false;
    efd_ = ::eventfd(0, EFD_CLOEXEC);
    if (efd_ < 0) {
      fd_failed_ = true;  // out of kernel descriptors: use futex
      return false;
    }
  }
  if (kep_ < 0 && !kep_failed_) {
    kep_ = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    if (kep_ >= 0 && ::epoll_ctl(kep_, EPOLL_CTL_ADD, efd_, &ev) != 0) {
      ::close(kep_);
      kep_ = -1;
    }
    if (kep_ < 0) kep_failed_ = true;  // ppoll on efd_ still works
  }
  return true;
}

Parker::Result Parker::SleepFd(const Deadline& deadline, const sigset_t* mask) {
  timespec ts;
  const timespec* tsp = deadline.RemainingTimespec(&ts);
  if (kep_ >= 0) {
    epoll_event ev;
    int n = ::epoll_pwait2(kep_, &ev, 1, tsp, mask);
    if (n > 0) return Result::kWoken;  // an edge: no count to read back
    if (n == 0) return Result::kTimedOut;
    if (errno == EINTR) return Result::kInterrupted;
    // Anything else would repeat forever: a kernel before 5.11 (ENOSYS), a
    // seccomp filter that refuses the call (EPERM), or the application
    // closed the descriptor under us (EBADF: then it is not ours to close).
    // ppoll from now on.
    if (errno != EBADF) ::close(kep_);
    kep_ = -1;
    kep_failed_ = true;
  }
  pollfd pfd{efd_, POLLIN, 0};
  int n = ::ppoll(&pfd, 1, tsp, mask);
  if (n > 0) {
    Drain();
    return Result::kWoken;
  }
  if (n == 0) return Result::kTimedOut;
  return errno == EINTR ? Result::kInterrupted : Result::kWoken;
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
  const timespec* tsp = deadline.RemainingTimespec(&ts);
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
  if (void (*hook)() = before_sleep_.load(std::memory_order_relaxed)) hook();
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
    return have_fd ? SleepFd(deadline, mask) : SleepFutex(deadline);
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
