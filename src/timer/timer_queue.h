// TimerQueue: the process's armed timers, and who expires them.
//
// The kernel keeps armed hrtimers in a per-CPU tree per clock base and runs
// their callbacks from the timer interrupt. uepoll keeps them in one 4-ary
// min-heap per base (monotonic, realtime, boottime), publishes the earliest
// expiry to parking threads (Parker::PublishTimerDue), and runs the
// callbacks on whichever thread is awake for it (docs/design.md, "Timers"):
//
//  - the keeper: one parked thread (base/parker.h) whose sleep is bounded
//    by the earliest expiry (Cover) runs what is due itself (RunDue), so an
//    expiry a thread waits for costs that thread's wakeup only;
//  - the timer thread, the fallback: it exists from the first arm on
//    (EnsureThread; a process that never arms a timer has no extra thread),
//    sleeps on a futex until the earliest expiry nobody keeps for (while a
//    keeper covers it, "dormant": only until a backstop, kKeeperGraceNs
//    after the keeper's bound, to check the keeper is not held up by a
//    signal handler, while another thread is parked; with nothing armed,
//    lapsed, or the keeper the only parked thread: no wakeups at all),
//    pops what is due and calls each node's fire
//    function, which wakes the owner's wait queue through the normal
//    WaitQueue::WakeUp path. It is kicked (one futex wake) when an expiry
//    needs it: an arm earlier than what anyone wakes for, a thread that
//    parks and does not keep, a keeper that leaves with another thread
//    parked (Resign), a kernel loop that may watch (RequireExact);
//  - whoever looks next, while a keeper is away with nobody else parked
//    (lapsed): every call that looks at timer-driven readiness without
//    sleeping runs what is due first (RunDueTimers), and every thread that
//    parks asks Cover.
//  Arm and Disarm are O(log n). The thread blocks every signal, never holds
//  a borrow, is detached (it does not keep the process alive), and is
//  started again in the child of a fork() that inherited armed timers (the
//  child has no threads). Heap capacity is reserved when an owner is
//  created (Reserve), so arming never allocates and never fails.
//
// Locking: mu_ guards the heaps, every node's heap fields, the keeper and
// the thread's sleeping state. It is innermost: an owner arms and disarms
// under its own lock (TimerFd: its wait queue's lock), which is taken before
// mu_. The thread never calls a fire function under mu_: it marks the node
// firing under mu_, releases mu_, fires, and clears the mark; an owner that
// goes away waits for the mark to clear, and takes the node off again if
// the fire re-armed it (Cancel), as the kernel's hrtimer_cancel loops over
// a running callback. fire_mu_ is held by
// the thread (or a keeper, which holds no other lock) around each batch of
// fires, and by fork()'s prepare handler, so that the thread holds no lock of
// any owner at the fork.
//
// Lock order: fire_mu_ -> owner locks (TimerFd wait queue, the locks its
// wakeups take) -> mu_.
#ifndef UEPOLL_SRC_TIMER_TIMER_QUEUE_H_
#define UEPOLL_SRC_TIMER_TIMER_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "base/mutex.h"
#include "base/parker.h"
#include "base/thread_annotations.h"
#include "timer/clock.h"
#include "timer/timed_futex.h"

namespace uepoll::impl {

struct TimerNode;

struct TimerOps {
  // Called on the timer thread or a keeper, without the queue's lock, once the
  // node's expiry passed. The owner re-checks under its own lock (it may have
  // re-armed or disarmed the timer meanwhile) and arms the node again if
  // it must. The owner cannot be freed while this runs: Cancel waits.
  // `now`: the clock of `base`, the base n was queued on, as read when the
  // queue found n due (at or past its expiry there). The owner may use it
  // rather than read the clock again, where it checks an expiry on that
  // same base: an older reading can only say "not yet" too early, never
  // "due" too early.
  void (*fire)(TimerNode* n, TimerBase base, int64_t now);
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
  // Guarded by TimerQueue::mu_: how long after the expiry it is queued for
  // the owner means to queue it again (an interval timer, re-armed by its
  // next read), or 0. A hint for the keeper's lookahead only
  // (NextAfterLocked): it never decides when anything fires.
  int64_t period = 0;
  // Popped and not yet fired (the kernel's HRTIMER_STATE_CALLBACK): set
  // under mu_ by the thread that pops it, cleared by it once fire returned
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
  // The owner must hold a reservation for `base`. `period`: TimerNode's.
  void Arm(TimerNode* n, TimerBase base, int64_t expires, int64_t period = 0)
      EXCLUDES(mu_);
  // Takes n off its heap, if it is on one.
  void Disarm(TimerNode* n) EXCLUDES(mu_);
  // Disarm, then wait until a fire of n that already started has returned,
  // and disarm again if that fire armed it (hrtimer_cancel): afterwards n
  // is off the queue for good, and the owner may be freed, as long as
  // nothing else arms it. Must not be called from n's own fire, nor with a
  // lock that fire takes.
  void Cancel(TimerNode* n) EXCLUDES(mu_);

  // Sleeps folded into expiries (docs/design.md, "Timers"; the hooks of
  // base/parker.h). Cover: a thread parked with its own deadline keeps (if
  // it may and nobody else does) and gets the earliest expiry as its bound,
  // or, if no keeper covers that expiry, makes sure the timer thread wakes
  // for it. Resign: the keeper left its sleep; if a thread that may depend
  // on a timer still sleeps (or a kernel loop may watch, RequireExact), the
  // timer thread takes over. RunDue: pops and fires what is due, on the
  // calling thread, which must hold no lock.
  int64_t Cover(int64_t deadline_ns, bool can_keep, bool* keeper,
                int64_t* after) EXCLUDES(mu_);
  void Resign() EXCLUDES(mu_);
  void RunDue() EXCLUDES(mu_, fire_mu_);
  // A kernel loop may now watch uepoll readiness (a watchable instance):
  // nobody keeps any more, the timer thread wakes for every expiry, as
  // such a loop never enters uepoll to run what is due.
  void RequireExact() EXCLUDES(mu_);

  // For tests and the benchmark.
  long armed() EXCLUDES(mu_);
  bool thread_started() EXCLUDES(mu_);
  bool has_keeper() EXCLUDES(mu_);
  // The timer thread sleeps past the earliest expiry (until the keeper's
  // backstop, or lapsed with no timeout), because a keeper covers it.
  bool thread_dormant() EXCLUDES(mu_);
  // The timer thread sleeps with no timeout (for nothing armed, a lapse, or
  // a keeper alone).
  bool thread_sleeps_unbounded() EXCLUDES(mu_);
  // The keeper's bound (kNsMax: no keeper).
  int64_t keeper_bound() EXCLUDES(mu_);
  // The timer thread found the keeper held past its bound (or a park on
  // its own thread said so) and relies on it for nothing.
  bool keeper_stalled() EXCLUDES(mu_);
  // Called on the thread that fires, just before each fire, outside every
  // lock but fire_mu_ (nullptr: none). For tests that hold a fire in
  // progress (tests/timerfd/race_test.cc); one load per fire (release and
  // acquire: what the test set up before installing it is the hook's).
  static void SetFireHookForTest(void (*hook)(TimerNode*)) {
    fire_hook_.store(hook, std::memory_order_release);
  }

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
  // A node CollectDueLocked popped, with its clock as read when it was due.
  struct Due {
    TimerNode* node;
    TimerBase base;
    int64_t now;
  };
  // How long past its bound a keeper may be before the timer thread stops
  // relying on it (keeper_stalled_): the most an expiry a keeper covers
  // waits for that thread's signal handler is twice this. The price: the
  // dormant timer thread wakes once per grace at most to check, and not
  // before the keeper's bound plus the grace.
  static constexpr int64_t kKeeperGraceNs = 20 * 1000 * 1000;

  TimerQueue();
  static void* ThreadMain(void* arg);
  void Run();
  // Pops up to kBatch due nodes into batch, marked firing, and publishes
  // the earliest expiry left (PublishLocked).
  int CollectDueLocked(Due* batch) REQUIRES(mu_);
  // Fires what CollectDueLocked popped and clears each firing mark.
  void FireBatch(const Due* batch, int n) REQUIRES(fire_mu_) EXCLUDES(mu_);
  // Recomputes earliest_ (as a CLOCK_MONOTONIC instant) and publishes it to
  // parking threads (Parker::PublishTimerDue).
  void PublishLocked() REQUIRES(mu_);
  // The earliest expiry of the monotonic heap later than `at` (kNsMax:
  // none found among the root and its children), or the root's next period
  // if it is at `at` and comes sooner (TimerNode::period): where a keeper
  // arms its kernel lookahead (base/parker.h, "Timers").
  int64_t NextAfterLocked(int64_t at) REQUIRES(mu_);
  // Whether a keeper is parked (or running what is due), wakes by `at`,
  // and was not found held up past its bound.
  bool CoveredLocked(int64_t at) REQUIRES(mu_) {
    return keeper_ && !exact_ && !keeper_stalled_ && keeper_bound_ <= at;
  }
  // The timer thread went dormant for a keeper that has since resigned
  // finding no other thread parked (Resign): no thread is parked that has
  // not asked Cover since (the published expiry is never "nothing armed"
  // while lapsed: PublishLocked), so an expiry needs nobody to wake for it
  // until someone enters uepoll, who runs it first (RunDueTimers, Cover).
  // Any Cover of a thread that does not keep ends it.
  bool LapsedLocked() REQUIRES(mu_) { return dormant_ && !keeper_ && !exact_; }
  // Makes the sleeping timer thread wake by `at`; true: call futex_.Wake()
  // after releasing mu_.
  bool KickLocked(int64_t at) REQUIRES(mu_);
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

  static inline std::atomic<void (*)(TimerNode*)> fire_hook_{nullptr};
  Mutex fire_mu_ ACQUIRED_BEFORE(mu_);
  Mutex mu_;
  Heap heaps_[kNumTimerBases] GUARDED_BY(mu_);
  long armed_ GUARDED_BY(mu_) = 0;
  bool started_ GUARDED_BY(mu_) = false;
  // The thread sleeps (or is about to) until sleep_until_ (monotonic ns);
  // kNsMax while nothing is armed, lapsed, or alone with the keeper.
  // dormant_: a keeper covered the earliest expiry when it went to sleep,
  // and sleep_until_ is that keeper's backstop (its bound plus
  // kKeeperGraceNs), or kNsMax if no other thread was parked (Run).
  bool sleeping_ GUARDED_BY(mu_) = false;
  bool dormant_ GUARDED_BY(mu_) = false;
  int64_t sleep_until_ GUARDED_BY(mu_) = kNsMax;
  // The earliest armed expiry, monotonic ns (what Parker::TimerDue says).
  int64_t earliest_ GUARDED_BY(mu_) = kNsMax;
  // A parked thread keeps: it wakes by keeper_bound_ (the earliest expiry
  // when it last looked) and runs what is due, or resigns first.
  bool keeper_ GUARDED_BY(mu_) = false;
  int64_t keeper_bound_ GUARDED_BY(mu_) = kNsMax;
  // The keeper's parker (compared, never used), and a count of the Covers
  // of threads that do not keep, keeper changes and resignations: the
  // timer thread's scan for other parked threads (Run) holds for as long
  // as this count has not moved.
  const Parker* keeper_id_ GUARDED_BY(mu_) = nullptr;
  uint64_t park_gen_ GUARDED_BY(mu_) = 0;
  // The thread sleeps with no timeout because its scan found no thread
  // but the keeper parked (Run). While set, an empty heap publishes "never
  // due" rather than "nothing armed", so that every thread that parks asks
  // Cover, which kicks (as a lapse does).
  bool alone_ GUARDED_BY(mu_) = false;
  // The keeper was found kKeeperGraceNs past its bound without having run
  // what was due or slept again (Run): it covers nothing until its next
  // Cover or its Resign. Set by the thread, cleared there.
  bool keeper_stalled_ GUARDED_BY(mu_) = false;
  bool exact_ GUARDED_BY(mu_) = false;  // RequireExact was called
  // The expiry a keeper last kicked the thread for, to go dormant (Cover):
  // one kick per expiry at most.
  int64_t dormant_kick_for_ GUARDED_BY(mu_) = kNsMax;
  TimedFutex futex_;
};

// Runs what is due, if anything is, on the calling thread (which holds no
// lock): every call that looks at readiness a timer may have changed
// without sleeping first (a harvest, poll(), a timerfd's read) calls this,
// since while a keeper is away no thread may have run an expiry that is
// due (docs/design.md, "Timers"). One load when nothing is armed.
// Returns the CLOCK_MONOTONIC instant it read to decide (before anything it
// ran), or 0 if it read none, for a caller that may decide by that instant
// too rather than read the clock again.
inline int64_t RunDueTimers() {
  int64_t due = Parker::TimerDue();
  if (due == kNsMax) return 0;
  int64_t now = ClockNowNs(TimerBase::kMonotonic);
  if (due <= now) TimerQueue::Get().RunDue();
  return now;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_TIMER_TIMER_QUEUE_H_
