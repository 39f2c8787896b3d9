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
#ifndef UEPOLL_SRC_CORE_WAIT_QUEUE_H_
#define UEPOLL_SRC_CORE_WAIT_QUEUE_H_

#include <atomic>
#include <cstdint>

#include "base/list.h"
#include "base/mutex.h"
#include "base/parker.h"

namespace uepoll::impl {

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

  ListNode node;  // guarded by the queue's lock_
  WaitKind kind = WaitKind::kThread;
  uint16_t flags = 0;
  uint32_t aux = 0;  // the owner's: an epoll item keeps its fd here
};

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

  // waitqueue_active(): a lockless hint. A waiter adds its entry and only
  // then checks its condition (both under or after lock_), and a waker
  // changes the condition before calling Active(); the seq_cst fence in
  // WakeUp callers that change state without lock_ orders the two.
  bool Active() const { return count_.load(std::memory_order_seq_cst) != 0; }

  Mutex lock_;

 private:
  ListNode head_ GUARDED_BY(lock_);
  std::atomic<int> count_{0};
};

// A thread sleeping on one queue (blocking I/O): WaitEvent blocks until
// pred(), evaluated with q.lock_ held, is true. Returns 0, or -EINTR when a
// signal handler without SA_RESTART interrupted the sleep and pred() is
// still false. Called and returns with q.lock_ held.
template <class Pred>
int WaitEventLocked(WaitQueue& q, bool exclusive, Pred pred) REQUIRES(q.lock_);

// Implementation detail of WaitEventLocked.
struct ThreadWaitEntry {
  WaitEntry entry;
  Parker* parker;
  static int Wake(WaitEntry* e, uint32_t key);
};

template <class Pred>
int WaitEventLocked(WaitQueue& q, bool exclusive,
                    Pred pred) NO_THREAD_SAFETY_ANALYSIS {
  ThreadWaitEntry w;
  w.entry.kind = WaitKind::kThread;
  w.entry.flags = exclusive ? WaitEntry::kExclusive : 0;
  w.parker = &Parker::Current();
  // If a cancellation (pthread_cancel) unwinds the sleep, q.lock_ is not
  // held but the caller's scoped lock will release it: take it again, and
  // take the entry (on this stack) off the queue.
  struct Relock {
    WaitQueue& q;
    WaitEntry* e;
    bool sleeping = false;
    ~Relock() NO_THREAD_SAFETY_ANALYSIS {
      if (!sleeping) return;
      q.lock_.Lock();
      q.RemoveLocked(e);
    }
  } relock{q, &w.entry};
  while (!pred()) {
    q.AddLocked(&w.entry);
    q.lock_.Unlock();
    relock.sleeping = true;
    Parker::Result r = w.parker->ParkIo();
    relock.sleeping = false;
    q.lock_.Lock();
    q.RemoveLocked(&w.entry);  // a no-op if a wake already unlinked it
    if ((r & Parker::kInterrupted) && !pred()) return -EINTR;
  }
  return 0;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_WAIT_QUEUE_H_
