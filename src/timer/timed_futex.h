// TimedFutex: a futex word one thread sleeps on until it changes or an
// absolute CLOCK_MONOTONIC deadline passes. The timer thread's only way to
// sleep (timer_queue.cc).
//
// Why not Parker: Parker is how threads sleep in uepoll *calls* (signal
// masks, EINTR rules, borrows pinned before the sleep); the timer thread
// has none of that, blocks every signal, and only needs "sleep until this
// instant unless kicked". A futex does that in one syscall per sleep and
// one per kick, with no descriptor.
//
// Protocol (the usual futex one): the sleeper reads the word (Load) while
// holding the lock that guards its decision to sleep, releases the lock and
// calls Wait with that value; a kicker changes the word (Bump) under the same
// lock and calls Wake after releasing it. A Bump between the Load and the
// sleep makes the kernel return at once (EAGAIN), so no kick is lost.
//
// Precision: the kernel applies the thread's timer slack to futex timeouts
// (50 us by default). The timer thread sets its slack to 1 ns
// (PR_SET_TIMERSLACK), as a kernel timerfd's hrtimer has none.
#ifndef UEPOLL_SRC_TIMER_TIMED_FUTEX_H_
#define UEPOLL_SRC_TIMER_TIMED_FUTEX_H_

#include <atomic>
#include <cstdint>

namespace uepoll::impl {

class TimedFutex {
 public:
  // acquire: pairs with the release in Bump (the kicker's writes under its
  // lock are visible anyway through that lock; this keeps the word itself
  // ordered for TSan).
  uint32_t Load() const { return word_.load(std::memory_order_acquire); }
  void Bump() { word_.fetch_add(1, std::memory_order_release); }

  // Sleeps while the word equals `expected`, at most until deadline_ns
  // (CLOCK_MONOTONIC, absolute; INT64_MAX: no deadline). Returns on a wake,
  // the deadline, a changed word, or a spurious wakeup: the caller
  // re-evaluates its state every time.
  void Wait(uint32_t expected, int64_t deadline_ns);
  // Wakes the sleeper, if any.
  void Wake();

  // For the child of fork(): nobody sleeps on it any more.
  void Reset() { word_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint32_t> word_{0};
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_TIMER_TIMED_FUTEX_H_
