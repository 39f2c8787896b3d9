// WaitQueue: the kernel's wait_queue_head. An object that can become ready
// keeps one; whoever wants to hear about it (an epoll item, a thread in
// poll() or in a blocking read) hooks a WaitEntry on it. WakeUp calls each
// entry's function with a hint mask (0 = no hint: "something changed").
//
// Exclusive entries (EPOLLEXCLUSIVE items, blocked pipe readers) sit at the
// tail; a wake with nr_exclusive = n calls every non-exclusive entry and then
// exclusive ones until n of them returned nonzero ("consumed the wakeup").
// An exclusive epoll item returns 0 when its instance had nobody to wake, so
// the wakeup moves on to the next exclusive entry (the hand-off).
//
// Locking: lock_ protects the entry list. Entry functions run under lock_,
// and removing an entry takes lock_, so once Remove() returns the entry's
// function is not running and will not run: the owner may free the entry.
// Lock order: a queue's lock_ is taken before the lock of the instance an
// entry belongs to (Eventpoll::lock_), see docs/design.md.
//
// The one exception, a lockless wakeup (WakeUpBorrowed; eventfds use it):
// while the queue's only entry is an epoll item (solo_), a waker that
// holds a borrow of the queue's file calls that item's function without
// lock_. Such a waker may still be inside the function after Remove()
// returns, so the remover of an entry that Remove() marked kDrainWakers
// waits for the borrows of the file before it frees the entry
// (WaitForOtherBorrowers, core/borrow.h; docs/design.md, "Lockless
// eventfd wakeups").
#ifndef UEPOLL_SRC_CORE_WAIT_QUEUE_H_
#define UEPOLL_SRC_CORE_WAIT_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "base/list.h"
#include "base/mutex.h"
#include "base/parker.h"

namespace uepoll::impl {

class File;

// Who an entry belongs to, which decides the function WakeUp calls. A tag
// rather than a function pointer keeps an epoll item 8 bytes smaller (one
// item per registration: see BENCHMARKS.md, bytes per registration).
enum class WaitKind : uint16_t {
  kThread,     // ThreadWaitEntry: a thread in blocking I/O
  kPoll,       // a thread in poll() (capi/poll_api.cc)
  kEpollItem,  // an epoll registration (epoll/eventpoll.cc, EpItemWake)
};

struct WaitEntry {
  static constexpr uint16_t kExclusive = 1;
  // Set by RemoveLocked on an entry of a queue that lockless wakers have
  // used: one may still be running the entry's function (see above).
  static constexpr uint16_t kDrainWakers = 2;

  ListNode node;  // guarded by the queue's lock_
  WaitKind kind = WaitKind::kThread;
  uint16_t flags = 0;
  uint32_t aux = 0;  // the owner's: an epoll item keeps its fd here
};

// A wakeup key for the threads asleep on a queue only (poll(), blocking
// I/O): they must sleep again on a new set of descriptors. Epoll items
// ignore it (EpItemWake): it is not an event.
inline constexpr uint32_t kResleepKey = uint32_t{1} << 27;

// The wake functions, by kind (defined next to their owners).
int EpItemWake(WaitEntry* wait, uint32_t key);
int PollEntryWake(WaitEntry* wait, uint32_t key);

class WaitQueue {
 public:
  WaitQueue() = default;
  WaitQueue(const WaitQueue&) = delete;
  WaitQueue& operator=(const WaitQueue&) = delete;

  void Add(WaitEntry* e) EXCLUDES(lock_) {
    MutexLock l(lock_);
    AddLocked(e);
  }
  void AddLocked(WaitEntry* e) REQUIRES(lock_);
  void Remove(WaitEntry* e) EXCLUDES(lock_) {
    MutexLock l(lock_);
    RemoveLocked(e);
  }
  void RemoveLocked(WaitEntry* e) REQUIRES(lock_);

  void WakeUp(uint32_t key, int nr_exclusive = 1) EXCLUDES(lock_) {
    if (!Active()) return;
    MutexLock l(lock_);
    WakeUpLocked(key, nr_exclusive);
  }
  void WakeUpLocked(uint32_t key, int nr_exclusive) REQUIRES(lock_);
  // WakeUp(key, 1) for a source whose state the caller has just changed
  // with a seq_cst read-modify-write, without lock_ when the only entry is
  // an epoll item (solo_). The caller holds a borrow of the file that owns
  // the queue (FdTable::Borrow: a hazard in its record, which is what the
  // remover of that entry waits for); without one, it takes lock_.
  void WakeUpBorrowed(const File* owner, uint32_t key) EXCLUDES(lock_);
  // Tests only: called by a lockless waker with the entry it is about to
  // call, between its load of solo_ and the call, so that a test can hold
  // a waker in that window while another thread removes the entry
  // (tests/threads/lockless_wake_test.cc). null outside such tests: one
  // well-predicted load (acquire: what the test set up before installing
  // it is the hook's).
  static void SetLocklessWakeHookForTest(void (*hook)(WaitEntry*)) {
    lockless_wake_hook_.store(hook, std::memory_order_release);
  }
  // Tests only: called by a thread about to block (WaitEventLocked) after
  // it found its condition false and before it queues its entry, with
  // lock_ held: a test can change the condition there without lock_, as a
  // lockless waker may (tests/threads/lockless_wake_test.cc).
  static void SetBeforeQueueHookForTest(void (*hook)(WaitQueue*)) {
    before_queue_hook_.store(hook, std::memory_order_release);
  }
  static void RunBeforeQueueHook(WaitQueue* q) {
    if (auto hook = before_queue_hook_.load(std::memory_order_acquire)) {
      hook(q);
    }
  }
  // Tests only: called by a blocking reader or writer that a signal woke
  // (WaitForIo, sources/io_wait.h) right after its last test of the
  // condition, which found nothing: a test can make the object ready
  // there, as a writer on another CPU may at that moment, and check that
  // the wakeup reaches another waiter (tests/threads/handover_test.cc).
  // Off the fast path: only an interrupted sleep loads it.
  static void SetInterruptedTestHookForTest(void (*hook)(WaitQueue*)) {
    interrupted_test_hook_.store(hook, std::memory_order_release);
  }
  static void RunInterruptedTestHook(WaitQueue* q) {
    if (auto hook = interrupted_test_hook_.load(std::memory_order_acquire)) {
      hook(q);
    }
  }
  // An exclusive waiter that a wake picked is leaving without having
  // looked at what it was woken for (a cancellation unwinds it): the
  // wakeup goes to the next exclusive entry, as the kernel's does when the
  // task it picks is already running (try_to_wake_up returns 0 and
  // __wake_up_common moves on). The non-exclusive entries had theirs.
  void PassOnLocked(uint32_t key) REQUIRES(lock_);

  // waitqueue_active(): a lockless hint. A waiter adds its entry (count_'s
  // seq_cst increment, under lock_) and only then tests its condition; a
  // waker changes the condition and only then calls Active(). No fence is
  // involved: the condition is either guarded by a lock the waiter's test
  // takes too (the object's mutex for pipes and socket pairs, see
  // sources/io_wait.h; an instance's lock_ for its ready list), so the
  // increment happens before the waker's load, or it is a seq_cst atomic
  // that seq_cst orders against count_ (a vpoll object's mask_; a user
  // object's own state follows the same rule, include/uepoll/uepoll.h).
  // Either the waiter's test sees the change or the waker sees the entry.
  // (An eventfd's count is such a seq_cst atomic, changed by a
  // read-modify-write without lock_: WakeUpBorrowed. Timerfds change their
  // state under lock_ and call WakeUpLocked: no hint.)
  bool Active() const { return count_.load(std::memory_order_seq_cst) != 0; }

  // The queue's lock, for the owners that guard their own state with it
  // (an eventfd's count, a timerfd's fields) and for WaitEventLocked.
  Mutex& lock() RETURN_CAPABILITY(lock_) { return lock_; }

 private:
  // After a change of the entry list: solo_ is the only entry if that is
  // an epoll item, else null. Stored before count_ changes (AddLocked): a
  // waker that sees the new count sees the new solo_. removal_fence: the
  // removal of an entry that a lockless waker may hold (RemoveLocked).
  void SetSoloLocked(bool removal_fence) REQUIRES(lock_);

  Mutex lock_;
  ListNode head_ GUARDED_BY(lock_);
  std::atomic<int> count_{0};
  // Written under lock_, read by lockless wakers (WakeUpBorrowed).
  std::atomic<WaitEntry*> solo_{nullptr};
  // Wakers may call solo_ without lock_ (set once, under lock_, by the
  // first waker with a borrow; never cleared): from then on RemoveLocked
  // marks the entries it removes kDrainWakers.
  std::atomic<bool> lockless_{false};
  static inline std::atomic<void (*)(WaitEntry*)> lockless_wake_hook_{nullptr};
  static inline std::atomic<void (*)(WaitQueue*)> before_queue_hook_{nullptr};
  static inline std::atomic<void (*)(WaitQueue*)> interrupted_test_hook_{
      nullptr};
};

// A thread sleeping on one queue (blocking I/O): WaitEvent blocks until
// pred(), evaluated with q.lock_ held, is true. Returns 0, or -EINTR when a
// signal handler without SA_RESTART interrupted the sleep and pred() is
// still false. Called and returns with q.lock_ held.
template <class Pred>
int WaitEventLocked(WaitQueue& q, bool exclusive, Pred pred) REQUIRES(q.lock());

// A thread in blocking I/O (WaitEventLocked, sources/io_wait.h WaitForIo).
//
// The hand-over rule, for exclusive waiters: a wake unlinks the entry it
// picks (autoremove) and counts it as the one exclusive wakeup. The thread
// then owes that wakeup its condition test. It leaves the queue in one of
// three ways:
//  - it tests the condition and consumes (returns 0);
//  - a signal ended the sleep: it takes its entry off the queue first and
//    tests after (the kernel's prepare_to_wait_event order), so a wake
//    either found it gone and picked another waiter, or came first and
//    its state change is seen by the test (then it consumes);
//  - a cancellation unwinds it, with no test to come: Leave(pass_on) hands
//    a pick it got to the next exclusive waiter (PassOnLocked).
struct ThreadWaitEntry {
  WaitEntry entry;
  Parker* parker;
  // The entry is on the queue, or was until a wake picked it (then
  // entry.node is unlinked). Written and read by the owner thread only
  // (writes under the queue's lock_; a wake never touches it), so the
  // owner may test it without the lock.
  bool queued = false;
  // The hint of the wake that picked the entry (for the hand-over).
  // Written by that wake under the queue's lock_.
  uint32_t key = 0;

  void AddLocked(WaitQueue& q) REQUIRES(q.lock()) {
    q.AddLocked(&entry);
    queued = true;
  }
  // Off the queue; with pass_on, a pick it got goes to the next waiter.
  void LeaveLocked(WaitQueue& q, bool pass_on) REQUIRES(q.lock());
  void Leave(WaitQueue& q, bool pass_on) EXCLUDES(q.lock()) {
    if (!queued) return;  // gone already: no lock needed
    MutexLock l(q.lock());
    LeaveLocked(q, pass_on);
  }
  static int Wake(WaitEntry* e, uint32_t key);
};

template <class Pred>
int WaitEventLocked(WaitQueue& q, bool exclusive, Pred pred) {
  ThreadWaitEntry w;
  w.entry.kind = WaitKind::kThread;
  w.entry.flags = exclusive ? WaitEntry::kExclusive : 0;
  w.parker = &Parker::Current();
  // If a cancellation (pthread_cancel) unwinds the sleep, q.lock_ is not
  // held but the caller's scoped lock will release it: take it again, and
  // take the entry (on this stack) off the queue, handing on a wakeup that
  // picked it (ThreadWaitEntry).
  struct Relock {
    WaitQueue& q;
    ThreadWaitEntry& w;
    bool sleeping = false;
    ~Relock() {
      if (!sleeping) return;
      q.lock().Lock();
      w.LeaveLocked(q, /*pass_on=*/true);
    }
  } relock{q, w};
  while (!pred()) {
    WaitQueue::RunBeforeQueueHook(&q);
    w.AddLocked(q);
    // Tested again with the entry on the queue: a waker that changes the
    // condition without lock_ (an eventfd's, WakeUpBorrowed) and then
    // finds no entry changed it before this test.
    if (pred()) {
      w.LeaveLocked(q, /*pass_on=*/false);
      break;
    }
    q.lock().Unlock();
    relock.sleeping = true;
    Parker::Result r = w.parker->ParkIo();
    relock.sleeping = false;
    q.lock().Lock();
    // Off the queue before the test: a wake that picked us is answered
    // by it (the loop consumes), one after this picks someone else.
    w.LeaveLocked(q, /*pass_on=*/false);
    if ((r & Parker::kInterrupted) && !pred()) return -EINTR;
  }
  return 0;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_WAIT_QUEUE_H_
