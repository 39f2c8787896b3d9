// Parker: how a uepoll thread sleeps and is woken.
//
// Why a per-thread eventfd rather than a futex: the kernel's epoll_wait
// fails EINTR when a handled signal arrives, even under SA_RESTART, and
// epoll_pwait installs its signal mask atomically for the sleep. A futex
// wait gives neither (it is restarted under SA_RESTART and takes no mask).
// A wait sleeps in epoll_pwait2 on a per-thread kernel epoll instance that
// watches the eventfd edge-triggered: never restarted, the mask swapped
// atomically, and - because every eventfd write is a new edge - the count
// never has to be read back, so a sleep and its wake cost two syscalls (the
// waker's write and the sleeper's epoll_pwait2) instead of three with
// ppoll + read. Without that instance (kernel descriptors exhausted, or an
// old kernel), the wait sleeps in ppoll on the eventfd and reads it back.
// Blocking I/O (a blocking read of an empty pipe) sleeps in read() on the
// same eventfd instead, which the kernel restarts under SA_RESTART and fails
// EINTR otherwise - exactly what a blocking read of a kernel pipe does.
//
// Only sleeping and waking cost a syscall. A waker that finds the thread not
// yet asleep just flips the state word.
//
// States of state_ (the protocol of a thread parker):
//   kEmpty    no token, not sleeping
//   kNotified a wake arrived; the next Park consumes it and returns at once
//   kParked   the owner is (about to be) asleep in the kernel
// Park:   Empty -> Parked (or consume Notified), sleep, then -> Empty.
// Unpark: any -> Notified; if it was Parked, write the eventfd.
// A wake whose eventfd write lands after the owner already returned leaves a
// stale count; the next sleep then returns early, finds no token and sleeps
// again: spurious wakeups are absorbed here, never seen by callers.
//
// Lifetime: a Parker is thread_local. Wakers only call Unpark while holding
// the lock of the queue the owner's wait entry is on; the owner removes its
// entry under that lock before returning, so no Unpark can touch a Parker of
// a thread that has left its wait.
#ifndef UEPOLL_SRC_BASE_PARKER_H_
#define UEPOLL_SRC_BASE_PARKER_H_

#include <signal.h>

#include <atomic>

#include "base/deadline.h"

namespace uepoll::impl {

class Parker {
 public:
  enum class Result { kWoken, kTimedOut, kInterrupted };

  // The calling thread's parker.
  static Parker& Current();

  // Sleeps until Unpark, the deadline, or a handled signal (EINTR semantics
  // of epoll_wait: never restarted). With mask, it is installed atomically
  // for the sleep, as ppoll and epoll_pwait do.
  Result Park(const Deadline& deadline, const sigset_t* mask);

  // Sleeps until Unpark or a handled signal, with blocking read()'s
  // restart semantics: kInterrupted only for handlers without SA_RESTART.
  Result ParkIo();

  void Unpark();

  // Runs before every sleep in the kernel, on the sleeping thread. The
  // epoll layer installs PinBorrowed there (core/borrow.cc) the first time
  // a thread borrows a file, so that no closer waits for a thread that
  // sleeps; base/ itself knows nothing of files.
  static void SetBeforeSleep(void (*hook)()) {
    before_sleep_.store(hook, std::memory_order_relaxed);
  }

  Parker();
  ~Parker();
  Parker(const Parker&) = delete;
  Parker& operator=(const Parker&) = delete;

 private:
  static constexpr int kEmpty = 0;
  static constexpr int kNotified = 1;
  static constexpr int kParked = -1;

  bool EnsureFd();
  void Drain();
  // One sleep of Park: epoll_pwait2 on kep_, or ppoll + Drain on efd_.
  Result SleepFd(const Deadline& deadline, const sigset_t* mask);
  Result SleepFutex(const Deadline& deadline);
  template <class SleepOnce>
  Result ParkLoop(const Deadline& deadline, SleepOnce sleep_once);

  // Relaxed: a thread that has something to pin installed the hook itself,
  // before its own sleep.
  static inline std::atomic<void (*)()> before_sleep_{nullptr};
  std::atomic<int> state_{kEmpty};
  int efd_ = -1;  // created on first sleep; -1 if that failed (futex fallback)
  bool fd_failed_ = false;
  // A kernel epoll instance watching efd_ (EPOLLIN | EPOLLET); -1 when it
  // could not be made (then Park uses ppoll).
  int kep_ = -1;
  bool kep_failed_ = false;
  // The fork generation the descriptors were made in (EnsureFd).
  unsigned fork_generation_ = 0;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_PARKER_H_
