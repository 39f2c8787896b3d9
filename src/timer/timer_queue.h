// TimerQueue: the process's armed timers, and the thread that expires them.
//
// The kernel keeps armed hrtimers in a per-CPU tree per clock base and runs
// their callbacks from the timer interrupt. uepoll keeps them in one binary
// min-heap per base (monotonic, realtime, boottime) and runs the callbacks
// on one timer thread:
//
//  - The thread exists from the first arm on (EnsureThread; none before, so
//    a process that never arms a timer has no extra thread), sleeps on a
//    futex until the earliest expiry of all bases, pops what is due and
//    calls each node's fire function, which wakes the owner's wait queue
//    through the normal WaitQueue::WakeUp path. With nothing armed it
//    sleeps without a timeout: no wakeups at all.
//  - Arming a timer that becomes the earliest while the thread sleeps for
//    longer bumps the futex word and wakes it (one syscall); arming a later
//    one costs no syscall. Arm and Disarm are O(log n).
//  - The thread blocks every signal, never holds a borrow, is detached (it
//    does not keep the process alive), and is started again in the child of
//    a fork() that inherited armed timers (the child has no threads).
//  - Heap capacity is reserved when an owner is created (Reserve), so arming
//    never allocates and never fails.
//
// Why a thread rather than deadlines folded into waits: a timerfd may be
// watched by a thread blocked in its read, by poll(), by instances nested
// in instances, and (with the kernel bridge) by loops that do not sleep in
// uepoll at all. Only a thread that owns the deadlines reaches all of them
// through one path, the wait queue, as the kernel's interrupt does. See
// docs/design.md, "Timers".
//
// Locking: mu_ guards the heaps, every node's heap fields, and the
// thread's sleeping state. It is innermost: an owner arms and disarms
// under its own lock (TimerFd: its wait queue's lock), which is taken before
// mu_. The thread never calls a fire function under mu_: it marks the node
// firing under mu_, releases mu_, fires, and clears the mark; an owner that
// goes away waits for the mark to clear (Cancel), as the kernel's
// hrtimer_cancel waits for a running callback. fire_mu_ is held by
// the thread around each batch of fires, and by fork()'s prepare handler,
// so that the thread holds no lock of any owner at the fork.
//
// Lock order: fire_mu_ -> owner locks (TimerFd wait queue, the locks its
// wakeups take) -> mu_.
#ifndef UEPOLL_SRC_TIMER_TIMER_QUEUE_H_
#define UEPOLL_SRC_TIMER_TIMER_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "timer/clock.h"
#include "timer/timed_futex.h"

namespace uepoll::impl {

struct TimerNode;

struct TimerOps {
  // Called on the timer thread, without the queue's lock, once the node's
  // expiry passed. The owner re-checks under its own lock (it may have
  // re-armed or disarmed the timer meanwhile) and arms the node again if
  // it must. The owner cannot be freed while this runs: Cancel waits.
  void (*fire)(TimerNode* n);
};

struct TimerNode {
  static constexpr uint32_t kNotQueued = UINT32_MAX;

  TimerNode(const TimerOps* o, void* own) : ops(o), owner(own) {}
  const TimerOps* const ops;
  void* const owner;  // the object the node belongs to, for ops
  // Guarded by TimerQueue::mu_: the position in `base`'s heap (the expiry
  // is kept in the heap's entry, next to the pointer).
  uint32_t index = kNotQueued;
  TimerBase base = TimerBase::kMonotonic;
  // Popped and not yet fired (the kernel's HRTIMER_STATE_CALLBACK): set
  // under mu_ by the timer thread, cleared by it once fire returned
  // (release; Cancel's acquire load pairs with it).
  std::atomic<bool> firing{false};
};

class TimerQueue {
 public:
  static TimerQueue& Get();

  static constexpr unsigned BaseBit(TimerBase b) {
    return 1u << static_cast<unsigned>(b);
  }

  // Capacity for one more node in each base of `bases` (BaseBit mask), for
  // an owner that may arm there. 0 or -ENOMEM (nothing reserved).
  int Reserve(unsigned bases) EXCLUDES(mu_);
  void Unreserve(unsigned bases) EXCLUDES(mu_);

  // Starts the timer thread if it does not run. 0, or -ENOMEM if it could
  // not be created (nothing changed).
  int EnsureThread() EXCLUDES(mu_);

  // Queues n to expire at `expires` on `base`'s clock, or moves it there.
  // The owner must hold a reservation for `base`.
  void Arm(TimerNode* n, TimerBase base, int64_t expires) EXCLUDES(mu_);
  // Takes n off its heap, if it is on one.
  void Disarm(TimerNode* n) EXCLUDES(mu_);
  // Disarm, then wait until a fire of n that already started has returned
  // (hrtimer_cancel): afterwards the owner may be freed. Must not be called
  // from n's own fire, nor with a lock that fire takes.
  void Cancel(TimerNode* n) EXCLUDES(mu_);

  // For tests and the benchmark.
  long armed() EXCLUDES(mu_);
  bool thread_started() EXCLUDES(mu_);

 private:
  // A 4-ary min-heap of {expiry, node}: the expiry sits in the entry, so
  // comparisons read the array and never the nodes (each of which is in
  // another object, a cache miss at 100,000 timers), and the four children
  // of an entry fill one 64-byte line (the array is line-aligned and
  // starts kPad entries in, so that each group of siblings starts a line).
  // Depth log4(n): 9 levels at 100,000 timers.
  struct Entry {
    int64_t expires;
    TimerNode* node;
  };
  static constexpr uint32_t kArity = 4;
  static constexpr uint32_t kPad = 3;  // entry i lives at v[i + kPad]
  struct Heap {
    Entry* v = nullptr;  // cap + kPad entries, AllocateLine'd
    uint32_t size = 0;
    uint32_t cap = 0;
    uint32_t reserved = 0;
    Entry& at(uint32_t i) { return v[i + kPad]; }
  };
  static constexpr int kBatch = 64;

  TimerQueue();
  static void* ThreadMain(void* arg);
  void Run();
  // Pops up to kBatch due nodes into batch, marked firing; with none,
  // sets *sleep_until to the earliest expiry as a CLOCK_MONOTONIC instant.
  int CollectDueLocked(TimerNode** batch, int64_t* sleep_until) REQUIRES(mu_);
  int StartThread();

  void InsertLocked(Heap& h, TimerNode* n, int64_t expires) REQUIRES(mu_);
  void RemoveLocked(TimerNode* n) REQUIRES(mu_);
  // Move entry e up or down from hole i to its place.
  void SiftUp(Heap& h, uint32_t i, Entry e) REQUIRES(mu_);
  void SiftDown(Heap& h, uint32_t i, Entry e) REQUIRES(mu_);
  void Place(Heap& h, uint32_t i, Entry e) REQUIRES(mu_) {
    h.at(i) = e;
    e.node->index = i;
  }

  static void ForkPrepare();
  static void ForkParent();
  static void ForkChild();

  Mutex fire_mu_ ACQUIRED_BEFORE(mu_);
  Mutex mu_;
  Heap heaps_[kNumTimerBases] GUARDED_BY(mu_);
  long armed_ GUARDED_BY(mu_) = 0;
  bool started_ GUARDED_BY(mu_) = false;
  // The thread sleeps (or is about to) until sleep_until_ (monotonic ns).
  bool sleeping_ GUARDED_BY(mu_) = false;
  int64_t sleep_until_ GUARDED_BY(mu_) = kNsMax;
  TimedFutex futex_;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_TIMER_TIMER_QUEUE_H_
