// Eventpoll: an epoll instance (the kernel's struct eventpoll and its file).
//
// LOCKING
// =======
// Locks, from outermost to innermost:
//
//   g_nested (nesting.cc)        process-wide; taken ONLY by an ADD whose
//                                target is an instance, or into an instance
//                                that is itself watched (or was just visited
//                                by a check), for the cycle/depth/path
//                                checks. The kernel's epnested_mutex. No
//                                poll, wait, wakeup, DEL, MOD or close path
//                                takes it.
//     Eventpoll::mtx_            per instance, sleeps. Serializes ctl and
//                                harvests (wait and poll of the instance).
//                                When held on two instances, the outer
//                                (parent) one is taken first: an instance
//                                polls its children while holding its mtx_,
//                                and the ADD checks walk downward. The graph
//                                is acyclic (ELOOP), so this cannot deadlock.
//       File::watch_lock_        per file; guards the file's watchers list
//                                (items watching it) and EpItem::dying. Held
//                                alone, or nested upward (a file's, then the
//                                lock of an instance watching it) by the
//                                nesting checks.
//       PipeInode::mu_,          per pipe / per socket pair (sources/); the
//       UnixPair::mu_            buffers, counts and shutdown state. Poll()
//                                of a pipe end or a socket takes it, so it
//                                nests under an instance's mtx_ whenever a
//                                harvest, an ADD or MOD, or a poll of the
//                                instance polls that source; otherwise it
//                                is held alone. Never held while taking
//                                another lock: a source changes its state
//                                under mu_, releases it, then wakes its
//                                queue. (An eventfd keeps its count under
//                                its queue's lock_ instead, and its Poll()
//                                takes no lock.)
//       WaitQueue::lock_         per wait queue; guards the entry list.
//                                Wakeup callbacks run under it. Nested by
//                                depth in the wakeup chain: a source's queue,
//                                then the queue of the instance watching it
//                                (poll_wait_), then its parent's, ...
//         Eventpoll::lock_       per instance, innermost: guards the ready
//                                list, the overflow list and the waiters.
//                                Taken by wakeup callbacks (with the source's
//                                queue lock held), never held while taking
//                                another lock. Released before waking the
//                                instance's own watchers (poll_wait_).
//
//   FdTable slots (core/)        no lock. A lookup is two wait-free RMWs on
//                                the slot word, or a borrow through the
//                                calling thread's hazard record; a closer
//                                waits only for the lookups in flight on
//                                that slot (core/fd_table.h). None of the
//                                locks above is held across a lookup or a
//                                close of a descriptor.
//
// Why these kinds: mtx_ is held while polling sources and copying events,
// which can take a while and may sleep on contention; lock_ is held for a
// few list operations on every wakeup, so it must be short and is never held
// across a callout. All are futex-based Mutexes: on 2 cores with dozens of
// threads a spinning lock would burn the holder's core.
//
// Reference counts: ep_refs_ = 1 (for the File, dropped by Release() at the
// last close) + 1 per item. The structure is freed when it reaches zero, so
// closing a watched source or the instance never needs a global lock:
// whoever drops the last reference frees it, and no close has to stop the
// others to find out who that is. References are dropped only after mtx_ is
// released.
//
// The ready-list protocol (the kernel's, see docs/design.md):
//  - A wakeup callback links its item at the tail of rdllist_, unless a scan
//    is in progress (ovflist_ != kOvfUnactive), in which case it chains the
//    item on ovflist_. Either way it wakes one waiter.
//  - A scan (harvest or poll of the instance), holding mtx_, splices
//    rdllist_ into a private list and activates ovflist_; it then re-polls
//    each item without lock_. Delivered LT items are queued again after the
//    items that were not processed and those that fired during the scan
//    (round robin). At the end, under lock_, the unprocessed items, then
//    the ovflist_ items in arrival order, then the re-queued LT items
//    become rdllist_; if it is not empty, the next waiter is woken.
#ifndef UEPOLL_SRC_EPOLL_EVENTPOLL_H_
#define UEPOLL_SRC_EPOLL_EVENTPOLL_H_

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>

#include <atomic>
#include <cstdint>

#include "base/deadline.h"
#include "base/list.h"
#include "base/mutex.h"
#include "base/parker.h"
#include "core/file.h"
#include "epoll/item.h"
#include "epoll/item_table.h"

namespace uepoll::impl {

// How a wait should behave beyond the timeout (epoll_pwait3).
struct WaitArgs {
  Deadline deadline = Deadline::Infinite();
  const sigset_t* sigmask = nullptr;
  int64_t min_wait_ns = -1;  // -1: the instance's default (set_params)
};

// Per-instance parameters (EPIOCSPARAMS, plus uepoll's default min_wait).
struct EpollParams {
  uint32_t busy_poll_usecs = 0;
  uint16_t busy_poll_budget = 0;
  uint8_t prefer_busy_poll = 0;
  uint64_t min_wait_ns = 0;
};

// A thread blocked in Wait(), on the instance's waiters_ list (the kernel's
// exclusive entries on ep->wq). Lives on the waiting thread's stack.
struct EpWaiter {
  ListNode node;  // guarded by Eventpoll::lock_
  Parker* parker;
  // A waiter in its min_wait phase wants this many ready items before it
  // is worth waking (its timer ends the phase otherwise); 0 for others.
  int min_ready = 0;
};

class Eventpoll final : public File {
 public:
  // Over-aligned (the cache-line layout below): allocated on a line.
  UEPOLL_LINE_ALLOCATED_CLASS
  explicit Eventpoll(int flags);
  ~Eventpoll() override;

  // ep_eventpoll_poll: IN|RDNORM iff some item is reportable now. Prunes
  // items that are no longer ready; consumes nothing.
  uint32_t Poll(int depth) override;
  WaitQueue& PollQueue() override { return poll_wait_; }

  // The part of epoll_ctl after descriptor and flag validation.
  int Ctl(int op, File* tfile, int fd, epoll_event ev);

  // ep_poll: 1..maxevents events, 0 on timeout, -EINTR on a signal. With
  // a min_wait (min_wait batching: one wakeup per batch of events instead
  // of one per event): wait up to min_wait for maxevents, return at
  // min_wait if anything is ready, else wait on to the deadline and return
  // at the first event. Busy polling spins before sleeping.
  int Wait(epoll_event* events, int maxevents, const WaitArgs& args);

  EpollParams params() const;
  void set_params(const EpollParams& p);

  // --- the kernel half (kernel_half.cc) ---
  // epoll_ctl of a kernel descriptor, through the instance number epfd.
  int CtlKernel(int epfd, int op, int fd, epoll_event* ev);
  void NumberAdded(int newfd, int oldfd) override;
  void NumberRemoved(int fd) override;
  int KernelSleepFds(int out[2]) override;

  // --- watchable instances (watchable.cc) ---
  // Makes the instance's own numbers readable by the kernel (epoll, poll,
  // select) exactly while it has events to report. 0 or -errno.
  int MakeWatchable(int epfd);
  bool watchable() const { return watchable_.load(std::memory_order_acquire); }
  // After a nested ADD of `child` into this instance (NestingLock() held):
  // if the child or something below it has a kernel half, register it
  // with the bridge and mark this instance and those above.
  void NestedAdded(Eventpoll* child);

  void Put();  // drop an ep_refs_ reference; frees at zero
  bool watched() const {
    return nwatchers_.load(std::memory_order_acquire) != 0;
  }

 protected:
  void Release() override;  // last close: ep_clear_and_put

 private:
  friend void EpollReleaseFile(File* file);
  friend int EpItemWake(WaitEntry* wait, uint32_t key);
  friend class NestingCheck;
  class WaiterGuard;

  int Insert(EpItem* epi, const epoll_event& ev, File* tfile, int fd)
      REQUIRES(mtx_);
  int Modify(EpItem* epi, const epoll_event& ev) REQUIRES(mtx_);
  // __ep_remove: false if the item is dying and force is not set (the
  // file's release removes it). On true, the caller frees epi and Put()s
  // after releasing mtx_.
  bool RemoveLocked(EpItem* epi, bool force) REQUIRES(mtx_);

  int SendEvents(epoll_event* events, int maxevents) EXCLUDES(mtx_);
  // Drops the queued items that are no longer ready (consuming nothing);
  // returns how many remain.
  int PruneIdle() EXCLUDES(mtx_, lock_);
  // SendEvents' uepoll half.
  int SendUepollEvents(epoll_event* events, int maxevents) EXCLUDES(mtx_);
  // Up to maxevents events of the kernel half (0 if it has none).
  int SendKernelEvents(epoll_event* events, int maxevents) EXCLUDES(mtx_);
  // Whether the kernel half reports anything, without consuming it.
  bool KernelReady();
  // Registers the kernel half with the bridge (once).
  void RegisterWithBridge();
  // Brings the mirror in line with the uepoll half's readiness now (arm:
  // events to report, disarm: none). edge_if_ready: the caller just told
  // the application "nothing" (a harvest of 0), so events that are there
  // now need a new edge even if the mirror is armed. Takes mirror_mu_,
  // then lock_.
  void SyncMirror(bool edge_if_ready = false) EXCLUDES(lock_);
  // Closes the mirror while kfd (the last number) still names the kernel
  // epoll that validates it.
  void DropMirror(int kfd);
  // Whether a kernel event is the mirror's (filtered from harvests).
  bool IsMirrorEvent(const epoll_event& e) const {
    return watchable() && e.data.u64 == mirror_tag_;
  }
  // Makes the kernel half (a kernel epoll at every number of the
  // instance); 0 or -errno.
  int MakeMixed(int epfd) REQUIRES(mtx_);
  // Gives the instance its kernel half if it has none yet (MakeMixed, then
  // the waiters asleep without it re-sleep); the caller holds a borrow or
  // a reference of the instance under number epfd.
  int EnsureMixed(int epfd) EXCLUDES(mtx_);
  // The kernel descriptors a sleeping waiter must watch too: kfds[1..),
  // returns the count including kfds[0] (1 when there are none).
  nfds_t SleepSet(pollfd kfds[3]) const;
  // Reaps the bridge if an instance below this one has a kernel half
  // (kernel_below_), so that its events are queued here before a harvest
  // or poll looks. No lock held.
  void ReapBelow();
  // After a sleep on SleepSet's descriptors: reaps the bridge if it was
  // ready.
  void AfterKernelSleep(const pollfd* kfds, nfds_t nk);
  // Runs fn(knum) with knum_ pinned: a close of that number waits for it
  // (NumberRemoved). fn gets -1 when the kernel half has no number left.
  template <class Fn>
  int KernelOp(Fn fn) {
    // seq_cst, against NumberRemoved's store of knum_ then load of kops_.
    kops_.fetch_add(1, std::memory_order_seq_cst);
    int r = fn(knum_.load(std::memory_order_seq_cst));
    kops_.fetch_sub(1, std::memory_order_release);
    return r;
  }
  // Makes knum_ name fd if it names nothing and fd still names this
  // instance.
  void AdoptNumber(int fd);
  // Another number of this instance that still holds a kernel file, or -1.
  int OtherKernelNumber(int fd) REQUIRES(kmu_);

 public:
  // The kernel reports knum_ == fd closed (EBADF, POLLNVAL): the
  // application closed it with libc close(). Moves knum_ to another number
  // of the instance, or -1. Not from inside KernelOp.
  void KernelNumberLost(int fd);

 private:
  // Registers the kernel half with the bridge and marks the instances
  // above; requires NestingLock().
  void BridgeUp();
  static void BridgeReady(void* self);
  // Sets kernel_below_ here and in every instance above (NestingLock()).
  void MarkKernelBelow();
  // Wakes every waiter and poller of this instance so that they sleep
  // again on a new set of kernel descriptors.
  void WakeAllToResleep();
  int WaitLoop(epoll_event* events, int maxevents, const Deadline& deadline,
               const sigset_t* sigmask) EXCLUDES(mtx_, lock_);
  int MinWait(epoll_event* events, int maxevents, const WaitArgs& args,
              int64_t min_wait_ns) EXCLUDES(mtx_, lock_);
  // Moves rdllist_ to txlist and returns how many items it held.
  int StartScan(ListNode* txlist) REQUIRES(mtx_) EXCLUDES(lock_);
  // ntx and nrequeue: the lengths of txlist and requeue (nready_ stays O(1)).
  void DoneScan(ListNode* txlist, int ntx, ListNode* requeue, int nrequeue)
      REQUIRES(mtx_) EXCLUDES(lock_);
  uint32_t ItemPoll(EpItem* epi, int depth) REQUIRES(mtx_);
  // Link a ready item (ADD/MOD found it ready) and wake. Returns whether
  // the watchers of this instance must be woken (outside lock_).
  bool LinkReady(EpItem* epi) EXCLUDES(lock_);

  bool EventsAvailableLocked() const REQUIRES(lock_) {
    return !rdllist_.empty() || ovflist_ != kOvfUnactive;
  }
  void SyncAvail() REQUIRES(lock_) {
    avail_.store(EventsAvailableLocked(), std::memory_order_release);
  }
  void WakeOneLocked() REQUIRES(lock_);
  void QueueWaiterLocked(EpWaiter* w) REQUIRES(lock_) {
    waiters_.PushFront(&w->node);
    nwaiters_.fetch_add(1, std::memory_order_seq_cst);
  }
  void DequeueWaiterLocked(EpWaiter* w) REQUIRES(lock_) {
    if (!w->node.linked()) return;
    w->node.Unlink();
    nwaiters_.fetch_sub(1, std::memory_order_relaxed);
  }

  // The fields are laid out by who writes them, one cache line per group,
  // because on a 2-core VM a line costs about 250 ns to move between cores
  // (docs/design.md, "Borrowed lookups"): the File header above is read on
  // every call and written almost never; it must not share a line with a
  // lock.
  //
  // Line 1: written by every harvest and every slow-path wakeup.
  alignas(kCacheLine) Mutex mtx_ ACQUIRED_BEFORE(lock_);
  Mutex lock_;
  ListNode rdllist_ GUARDED_BY(lock_);
  // Kernel-half operations in flight (KernelOp); mixed instances only.
  std::atomic<int> kops_{0};
  // The length of rdllist_, so that a wakeup can tell in O(1) whether a
  // waiter in its min_wait phase has its maxevents ready (WakeOneLocked).
  int nready_ GUARDED_BY(lock_) = 0;
  EpItem* ovflist_ GUARDED_BY(lock_) = kOvfUnactive;
  // Threads in Wait(), exclusive, newest first (the kernel adds epoll
  // waiters at the head of ep->wq: the most recent, cache-hot one wins).
  ListNode waiters_ GUARDED_BY(lock_);
  // A lockless "events may be available" (ep_events_available), kept equal
  // to EventsAvailableLocked() at every unlock of lock_.
  std::atomic<bool> avail_{false};

  // Line 2: read by every wakeup's fast path (EpItemWake) and every wait;
  // written only when a thread starts or stops sleeping, or by set_params.
  // The length of waiters_, readable without lock_. Changed under lock_.
  alignas(kCacheLine) std::atomic<int> nwaiters_{0};
  // The kernel half: set once (never cleared) when the instance first
  // holds a kernel descriptor; then each of its numbers names a kernel
  // epoll instance that holds them (kernel_half.cc).
  std::atomic<bool> mixed_{false};
  // A watchable instance (watchable.cc): set once, never cleared.
  std::atomic<bool> watchable_{false};
  // Some instance below this one (or this one) has a kernel half that a
  // waiter here must hear about through the bridge (kernel/bridge.h).
  // Set under NestingLock(), never cleared.
  std::atomic<bool> kernel_below_{false};
  // A number of this instance whose kernel file is its kernel epoll, or
  // -1. Every operation on the kernel half goes through it, pinned by
  // kops_ (KernelOp); changes are serialized by kmu_, and a number that is
  // closed or replaced is first swapped for another (NumberRemoved), so an
  // operation never reaches a number the kernel has given to someone else.
  std::atomic<int> knum_{-1};
  // Parameters: written by set_params, read by waits; independent words.
  std::atomic<uint32_t> busy_poll_usecs_{0};
  std::atomic<uint16_t> busy_poll_budget_{0};
  std::atomic<uint8_t> prefer_busy_poll_{0};
  std::atomic<uint64_t> min_wait_ns_{0};

  // Line 3: written by ctl ADD and DEL.
  alignas(kCacheLine) ItemTable items_ GUARDED_BY(mtx_);
  std::atomic<long> ep_refs_{1};
  // Which half a mixed instance's harvest serves first: they alternate, so
  // neither starves the other when maxevents is small.
  bool kernel_first_ GUARDED_BY(mtx_) = false;
  // The bridge registration of the kernel half; written under NestingLock().
  std::atomic<int> bridge_handle_{-1};
  Mutex kmu_;  // serializes changes of knum_
  // The mirror of a watchable instance: an always-readable eventfd (each
  // arm adds 1 to its count, to wake the kernel half), registered in the kernel
  // half with data mirror_tag_ and events EPOLLIN while the uepoll half has
  // events (armed), 0 otherwise.
  Mutex mirror_mu_ ACQUIRED_BEFORE(lock_);
  int mirror_fd_ GUARDED_BY(mirror_mu_) = -1;
  bool mirror_armed_ GUARDED_BY(mirror_mu_) = false;
  uint64_t mirror_tag_ = 0;  // written once, before watchable_ is set

  // Line 4: watchers of this instance: parent items, poll().
  alignas(kCacheLine) WaitQueue poll_wait_;

 public:
  // Nesting-check state (nesting.cc), guarded by g_nested except gen_,
  // which ADD reads under mtx_ (hence atomic).
  std::atomic<uint64_t> gen_{0};
  uint64_t down_gen_ = 0;
  int down_depth_ = 0;
  uint64_t up_gen_ = 0;
  int up_depth_ = 0;
};

// The last close of a watched file: remove every item that watches it
// (eventpoll_release_file). Called from File::LastClose.
void EpollReleaseFile(File* file);

// uepoll_epoll_create1 and the checks of uepoll_epoll_ctl / _wait.
int EpollCreate(int flags);
int EpollMakeWatchable(int epfd);
int EpollCtl(int epfd, int op, int fd, const epoll_event* event);
int EpollWait(int epfd, epoll_event* events, int maxevents,
              const WaitArgs& args);
int EpollSetParams(int epfd, const EpollParams& p);
int EpollGetParams(int epfd, EpollParams* p);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_EPOLL_EVENTPOLL_H_
