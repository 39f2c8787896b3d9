// Mutex: a small futex-based lock (Drepper's three-state mutex) with a short
// spin before sleeping.
//
// Why not std::mutex: the uncontended path here is one inlined CAS and one
// exchange, and the type carries clang's capability annotations. Contended
// waiters sleep in FUTEX_WAIT, so a preempted holder costs a sleep, not a
// spinning core (the machine may run 64 threads on 2 cores).
//
// States: 0 unlocked, 1 locked without waiters, 2 locked with (maybe) waiters.
// Memory order: Lock's successful CAS/exchange is an acquire that pairs with
// the release in Unlock, so everything written under the lock is visible to
// the next holder.
// Signals: a thread holding a Mutex counts it (base/signal_defer.h), from
// before the lock is taken to after it is released, so that a handler
// installed with uepoll_sigaction is put off until the thread holds none.
#ifndef UEPOLL_SRC_BASE_MUTEX_H_
#define UEPOLL_SRC_BASE_MUTEX_H_

#include <sched.h>

#include <atomic>

#include "base/signal_defer.h"
#include "base/thread_annotations.h"

namespace uepoll::impl {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() {
    EnterSignalCritical();
    int expected = 0;
    if (!state_.compare_exchange_strong(expected, 1, std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
      LockSlow();
    }
    DebugSetOwner();
  }
  bool TryLock() TRY_ACQUIRE(true) {
    EnterSignalCritical();
    int expected = 0;
    bool ok = state_.compare_exchange_strong(
        expected, 1, std::memory_order_acquire, std::memory_order_relaxed);
    if (ok) {
      DebugSetOwner();
    } else {
      LeaveSignalCritical();
    }
    return ok;
  }
  void Unlock() RELEASE() {
    DebugClearOwner();
    if (state_.exchange(0, std::memory_order_release) == 2) Wake();
    LeaveSignalCritical();
  }
  // For assertions only: true if somebody holds the lock.
  bool IsLockedForDebug() const {
    return state_.load(std::memory_order_relaxed) != 0;
  }
  void AssertHeld() const UEPOLL_TSA(assert_capability(this)) {}
  // In a fork child's atfork handler, where the forking thread is the only
  // one: whether a thread of the parent held the lock at the fork. A load,
  // where TryLock and Unlock would write the lock's page, a copy-on-write
  // fault in the child.
  bool HeldAtFork() const {
    return state_.load(std::memory_order_relaxed) != 0;
  }

  // Debug builds abort with a message, instead of hanging, when a thread
  // takes a Mutex it already holds: the deadlock a user object's poll
  // callback causes by calling back into uepoll (sources/user_object.h).
  // The hook adds the likely cause to the message; base/ knows nothing of
  // user objects, so their code installs it.
  static void SetDeadlockContext(const char* (*context)()) {
    deadlock_context_.store(context, std::memory_order_relaxed);
  }

 private:
  void LockSlow();
  void Wake();
#ifndef NDEBUG
  static const void* Self() {
    static thread_local char tag;
    return &tag;
  }
  // Only the holder writes its own tag, so reading our own tag back means
  // we hold the lock; relaxed is enough for that.
  void DebugSetOwner() { owner_.store(Self(), std::memory_order_relaxed); }
  void DebugClearOwner() { owner_.store(nullptr, std::memory_order_relaxed); }
  [[noreturn]] static void ReportSelfDeadlock();
  std::atomic<const void*> owner_{nullptr};
#else
  void DebugSetOwner() {}
  void DebugClearOwner() {}
#endif
  static inline std::atomic<const char* (*)()> deadlock_context_{nullptr};
  std::atomic<int> state_{0};
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// Locks a mutex if there is one: a conditional lock, which the analysis
// cannot follow, in one audited place.
class OptionalLock {
 public:
  explicit OptionalLock(Mutex* mu) : mu_(mu) {
    if (mu_) mu_->Lock();
  }
  ~OptionalLock() {
    if (mu_) mu_->Unlock();
  }
  OptionalLock(const OptionalLock&) = delete;
  OptionalLock& operator=(const OptionalLock&) = delete;

 private:
  Mutex* mu_;
};

inline void CpuRelax() { __builtin_ia32_pause(); }

// One step of a wait for another thread to finish a short critical step
// (a busy slot, a borrow, an operation on a number): spin a little, then
// give the core away, since the other thread may have been preempted
// inside it (2 cores, maybe dozens of threads). `spins` counts the steps
// taken so far.
inline void Backoff(int spins) {
  if (spins < 64) {
    CpuRelax();
  } else {
    sched_yield();
  }
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_MUTEX_H_
