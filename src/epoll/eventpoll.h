// Eventpoll: an epoll instance (the kernel's struct eventpoll and its file).
//
// An instance has four parts, each in its own file:
//   the uepoll half    items, ready list, waiters: eventpoll.cc (ctl and the
//                      wakeup callback), wait.cc (scans, harvests, waits)
//   the kernel half    a kernel epoll at the instance's numbers holding its
//                      kernel descriptors, its children's kernel halves and
//                      the wake token: kernel/kernel_half.h (the kernel
//                      object), kernel_side.cc (what the instance does with
//                      it: ctl, harvests that filter cookies, the token,
//                      nesting, fork)
//   the mirror         a watchable instance's face to kernel loops:
//                      kernel/mirror.h, watchable.cc
//   the nesting state  the ADD-time checks: nesting.h, nesting.cc
//
// LOCKING (the one authoritative block; docs/design.md points here)
// =================================================================
// Locks, from outermost to innermost. "A > B": A may be held while B is
// taken, never the reverse.
//
//   export g_session (kernel/export.cc)  process-wide, the outermost: one
//                                conversion of objects into their kernel
//                                equivalents at a time. Under it: sources'
//                                locks (two at once only here), instances'
//                                mtx_ and lock_ (Ctl, CtlKernel), files'
//                                watch_lock_, and g_forward, a leaf (the
//                                list of forward descriptors, also taken
//                                under a source's lock and across fork()).
//   g_nested (nesting.cc)        process-wide; taken ONLY by an ADD whose
//                                target is an instance, or into an instance
//                                that is itself watched (or was just visited
//                                by a check), for the cycle/depth/path
//                                checks. The kernel's epnested_mutex. No
//                                poll, wait, wakeup, DEL, MOD or close path
//                                takes it.
//    > Eventpoll::mtx_           per instance, sleeps. Serializes ctl and
//                                harvests (wait and poll of the instance) and
//                                guards the item table (with its lookup hint,
//                                the item a harvest reported last) and the
//                                child table.
//                                Held on two instances only parent first (an
//                                instance polls its children holding its
//                                mtx_; the ADD checks walk downward); the
//                                graph is acyclic (ELOOP), so this cannot
//                                deadlock. System calls on the kernel half
//                                are made under it (ctl of a nested item).
//       > File::watch_lock_      per file; the file's watchers list (items
//                                watching it) and EpItem::dying. Held alone,
//                                or nested upward (a file's, then that of an
//                                instance watching it) by the nesting checks
//                                and BecomeMixed.
//       > PipeInode::mu_,        per pipe / per socket pair (sources/): the
//         UnixPair::mu_          buffers, counts and shutdown state. Poll()
//                                of a pipe end or a socket takes it, so it
//                                nests under an instance's mtx_ whenever a
//                                harvest, an ADD or MOD, or a poll of the
//                                instance polls that source; otherwise held
//                                alone. Never held while taking another lock
//                                but UnixGc's book lock (sources/unix_gc.h),
//                                innermost. (An eventfd's count is one
//                                atomic word that no lock guards, and its
//                                Poll() takes no lock.)
//       > WaitQueue::lock_       per wait queue; the entry list. Wakeup
//                                callbacks run under it, except an eventfd's
//                                lone item, which its writers and readers
//                                call without it (WaitQueue::WakeUpBorrowed;
//                                their borrows keep the item alive, and
//                                RemoveLocked's mark under lock_ keeps them
//                                from linking it once removed). Nested by
//                                depth in the wakeup chain: a source's
//                                queue, then the queue of the instance
//                                watching it (poll_wait_), then its
//                                parent's, ...
//          > Mirror::mu_         per watchable instance (kernel/mirror.h):
//                                arms and disarms, two system calls at most,
//                                made under it and so under the queue lock of
//                                the source whose wakeup armed it.
//             > Eventpoll::lock_ per instance: the ready list, the overflow
//                                list, the waiters and the token. Taken by
//                                wakeup callbacks (with the source's queue
//                                lock held). Under it only: the token's
//                                EPOLL_CTL_MOD (one system call, only while a
//                                thread sleeps in the kernel half) and the
//                                leaves below. Released before waking the
//                                instance's own watchers (poll_wait_).
//                > KernelHalf::kmu_  leaf: changes of the number the kernel
//                                half is reached through (knum_)
//                > KernelHalf::imu_  leaf, in a fork child only: the copy of
//                                the inherited epoll's registrations at the
//                                first operation (KernelHalf::Op), which may
//                                run under any of the instance's locks. Its
//                                system calls (/proc read, kcmp, epoll_ctl)
//                                run under it once per instance per child.
//                > WakeFd's mutex    leaf: making the wake eventfd
//
//   FdTable slots (core/)        no lock. A lookup is a borrow through the
//                                calling thread's hazard record (or two
//                                wait-free RMWs on the slot word); a closer
//                                waits only for the lookups in flight on that
//                                slot (core/fd_table.h).
//    > slot busy bit             per number, held by a close or dup2 of it
//                                while it finishes the kernel's side. Under
//                                it: KernelHalf::kmu_ and Mirror::mu_ (the
//                                last number's close drops the mirror).
//                                Nothing that holds an instance lock or a
//                                queue lock takes it, and none of the locks
//                                above is held across a lookup or a close.
//   Leaves taken with no uepoll lock held, or under the locks of the
//   object they belong to only: FasyncSlot::mu_ and FileOwner::mu
//   (core/sigio.h: signal-driven I/O; a slot is signalled after the
//   source's lock is released), SockOpts::mu_ (sources/unix_sockopt.h),
//   the stat kinds' references (capi/stat_api.cc), the clock detector's
//   (timer/clock_set.cc).
//   ParkerRegistry::mu (base/parker.cc)  process-wide, taken alone: a
//                                thread's first sleep and exit, fork(), and
//                                a resigning timer keeper's scan.
//   TimerQueue::fire_mu_ > (a timerfd's queue lock, as a source's) >
//     TimerQueue::mu_ (timer/timer_queue.h)  innermost; taken under any lock
//                                by an arm or disarm.
//   SignalApi's g_mu (capi/signal_api.cc): taken alone, by
//                                uepoll_sigaction and by a SA_RESETHAND
//                                handler's trampoline (only where its
//                                thread holds no uepoll lock).
//   Every Mutex hold is counted per thread (base/signal_defer.h): a handler
//   installed with uepoll_sigaction waits until its thread holds none, so
//   a handler never takes a lock its own thread holds.
//   UnixGc's book lock (sources/unix_gc.h): innermost, under a pair's mu_
//                                when a message carrying descriptors is queued
//                                or peeked; a collection holds it only to
//                                mark, never while it purges (release
//                                callbacks run there).
//
// What clang checks (src/base/thread_annotations.h). GUARDED_BY, REQUIRES
// and EXCLUDES: in CI's -Werror=thread-safety build. The order itself is
// declared with ACQUIRED_BEFORE/ACQUIRED_AFTER on the edges whose two
// locks can be named from one declaration (the analysis keys an edge on
// the declarations, so it holds between any two objects, and it follows
// edges transitively):
//   g_nested > Eventpoll::mtx_         (eventpoll.h, Eventpoll::mtx_)
//   Eventpoll::mtx_ > Eventpoll::lock_, File::watch_lock_, WaitQueue::lock_
//   WaitQueue::lock_ > Eventpoll::lock_ (Eventpoll::lock_)
//   Mirror::mu_ > Eventpoll::lock_ > KernelHalf::kmu_ (Eventpoll::lock_,
//     through Mirror::lock() and KernelHalf::number_lock())
//   g_session > g_forward               (kernel/export.cc)
//   TimerQueue::fire_mu_ > TimerQueue::mu_ (timer/timer_queue.h)
// clang 14 checks these only under -Wthread-safety-beta: a deliberate
// violation (an inner lock, then its outer one) draws "mutex 'outer' must
// be acquired before 'inner'" with -Wthread-safety -Wthread-safety-beta
// and nothing with -Wthread-safety alone. The build adds the beta flag for
// clang (CMakeLists.txt), so CI's -Werror=thread-safety build fails on a
// broken edge (the warning is in -Wthread-safety-analysis). Like the rest
// of the analysis it sees one function at a time: an edge is checked where
// a lock is taken while another is held in that function or REQUIRES'd by
// it, not through calls that take locks inside. Not declared, because no
// one declaration can name both locks: mtx_ of a parent before a child's
// (one declaration; clang does not order a lock against itself), the
// sources' locks (PipeInode::mu_, UnixPair::mu_), WakeFd's, g_session's
// edges into the engine, UnixGc's book lock, and the FdTable slot busy bit
// (not a Mutex).
//
// Why these kinds: mtx_ is held while polling sources and copying events,
// which can take a while and may sleep on contention; lock_ is held for a
// few list operations on every wakeup, so it must be short and is never
// held across a callout. All are futex-based Mutexes: on 2 cores with
// dozens of threads a spinning lock would burn the holder's core.
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
//
// How a waiter sleeps depends on the instance (docs/design.md, "How a
// waiter sleeps"): on its parker's futex while the kernel half holds
// nothing (the common case of a pure uepoll instance); in epoll_wait on the
// kernel half itself, woken by the token, once it may report kernel events
// (mixed_) unless the instance is watched by another instance or made
// watchable; with its parker's descriptor sleep (ppoll on the kernel half)
// in those two cases, where a token in the kernel half would be seen by the
// watchers too.
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
#include "epoll/child_table.h"
#include "epoll/item.h"
#include "epoll/item_table.h"
#include "kernel/kernel_half.h"
#include "kernel/mirror.h"
#include "kernel/wake_fd.h"

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
  // Asleep in epoll_wait on the kernel half: woken by the token, not by
  // its parker, and it takes itself off the list (the kernel picks which
  // of the kernel half's sleepers a token wakes).
  bool in_kernel = false;
};

// What a harvest of the kernel half found besides the application's events.
struct KernelHarvest {
  int events = 0;         // the application's events copied out
  bool token = false;     // the token was consumed
  bool children = false;  // a child's item was woken (it is queued now)
};

// The nesting checks' process-wide lock (epoll/nesting.h; defined in
// nesting.cc), named here because it guards the nesting-check state below.
extern Mutex g_nested;

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

  // --- the kernel half (kernel_side.cc) ---
  // epoll_ctl of a kernel descriptor into the kernel half.
  int CtlKernel(int op, int fd, epoll_event* ev);
  int OpenKernelFile(int minfd) override;
  void NumberAdded(int newfd, int oldfd) override;
  void NumberRemoved(int fd) override;
  void NumberRestored(int fd) override;
  int KernelSleepFds(int out[2]) override;
  int DupKernelFileForFlight() override;
  bool KernelFileMaySleep() const override { return true; }
  // The kernel reports fd (a number of the kernel half) closed: the
  // application closed it with libc close().
  void KernelNumberLost(int fd) { khalf_.NumberLost(fd); }

  // --- watchable instances (watchable.cc) ---
  // Makes the instance's own numbers readable by the kernel (epoll, poll,
  // select) exactly while it has events to report. 0 or -errno.
  int MakeWatchable();
  bool watchable() const { return watchable_.load(std::memory_order_acquire); }

  void Put();  // drop an ep_refs_ reference; frees at zero
  bool watched() const {
    return nwatchers_.load(std::memory_order_acquire) != 0;
  }

  // fork(): gives every instance of the child its own kernel half
  // (kernel_side.cc; the atfork child handler).
  static void ForkChild();

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
  // SendEvents' uepoll half. A nonzero mark stamps the items reported
  // (EpItem::batch); a nonzero skip treats the items stamped with it as
  // reported already in this batch: not reported, and re-queued only if
  // level-triggered, as after their report.
  int SendUepollEvents(epoll_event* events, int maxevents, uint16_t mark = 0,
                       uint16_t skip = 0) EXCLUDES(mtx_);

  // --- the kernel side (kernel_side.cc) ---
  // Up to maxevents of the kernel half's events: the application's are
  // kept (and counted in the result), cookies are acted on (a child's item
  // is woken, the token consumed) and removed. `first` is what an earlier
  // epoll_wait into events returned (a sleep), or -1 to harvest now.
  KernelHarvest SendKernelEvents(epoll_event* events, int maxevents,
                                 int first = -1) EXCLUDES(mtx_, lock_);
  // The rest of a harvest that began with the kernel half (h, into
  // events): the uepoll half's events behind the kernel's, when there is
  // room and the uepoll half may have some (a child's cookie queued its
  // item, the token was consumed, or avail_), then the token handed on.
  // Returns the events delivered, or -EFAULT when none was and a copy
  // faulted, as the kernel answers.
  int FinishKernelHarvest(const KernelHarvest& h, epoll_event* events,
                          int maxevents) EXCLUDES(mtx_, lock_);
  // Removes the cookies from events[0..n) and acts on them; returns how
  // many application events remain at the front.
  int FilterCookies(epoll_event* events, int n, KernelHarvest* h)
      EXCLUDES(mtx_, lock_);
  // Whether the kernel half has an event for the application, for Poll(),
  // which calls it with mtx_ held.
  bool KernelReady() EXCLUDES(lock_);
  // From now on the kernel half may have events: waiters sleep on it. With
  // kernel_fds (it holds a kernel descriptor, or a child that does), so do
  // those of every instance above, whose kernel halves hear of it.
  void BecomeMixed(bool kernel_fds) EXCLUDES(mtx_, lock_);
  // Wakes every waiter and poller so that they sleep again the way the
  // instance now needs (a new kernel half, a new watcher).
  void WakeAllToResleep() EXCLUDES(lock_);
  // The token (kernel_side.cc): wakes one thread asleep in epoll_wait on
  // the kernel half. All: every one of them, in turn.
  void ArmTokenLocked(bool all) REQUIRES(lock_);
  // Makes a token that no sleeper took (the uepoll half has nothing left)
  // unreportable, so that a poll of the kernel half does not see it.
  void DefuseTokenLocked() REQUIRES(lock_);
  // After a nested ADD of `child` (under mtx_): registers its kernel half
  // in ours with a cookie; -errno (ELOOP, EINVAL, ENOMEM) if the kernel
  // refuses, and then the caller undoes the ADD.
  int AddChildLocked(EpItem* epi, Eventpoll* child) REQUIRES(mtx_);
  // The child item's interest changed (MOD) or it goes (DEL, close).
  void ModChildLocked(EpItem* epi) REQUIRES(mtx_);
  void RemoveChildLocked(EpItem* epi) REQUIRES(mtx_);
  // The events a child's kernel half is registered with in ours.
  static uint32_t ChildEvents(const EpItem* epi);
  // The number under which the child of epi is registered in our kernel
  // half, or -1 if the item's number no longer names the child.
  static int ChildNumber(const EpItem* epi);
  // Whether a waiter (with a signal mask or not) sleeps in the kernel half
  // now. The first call may make the wake eventfd (no lock held then).
  bool SleepsInKernel(bool masked = false) const;
  // The sets of a parker's descriptor sleep: kfds[1..) get the kernel half;
  // returns the count including kfds[0] (1 when there is none).
  nfds_t SleepSet(pollfd kfds[2]) const;
  // After a parker's descriptor sleep: the kernel half reported closed.
  void AfterKernelSleep(const pollfd* kfds, nfds_t nk);
  // Rebuilds the kernel half in a fork child (ForkChild's two passes).
  // Unchecked: the fork child is single-threaded, and it resets lock_'s
  // fields without lock_ (the inherited lock may be held by a lost thread).
  void RebuildInChild() NO_THREAD_SAFETY_ANALYSIS;
  void ReregisterInChild();
  // In a fork child: whether one of the instance's locks is held (by a
  // parent thread that is not here), and whether it watches an instance
  // left at the fork (File::left_at_fork).
  bool LockedAtFork();
  bool WatchesOneLeftAtFork();

  // --- the mirror (watchable.cc) ---
  // Brings the mirror in line with the uepoll half's readiness now (arm:
  // events to report, disarm: none). edge_if_ready: the caller just told
  // the application "nothing" (a harvest of 0), so events that are there
  // now need a new edge even if the mirror is armed. Takes Mirror::mu_,
  // then lock_.
  void SyncMirror(bool edge_if_ready = false) EXCLUDES(lock_);

  int WaitLoop(epoll_event* events, int maxevents, const Deadline& deadline,
               const sigset_t* sigmask) EXCLUDES(mtx_, lock_);
  // One sleep of WaitLoop (w queued, in_kernel) in epoll_wait on the kernel
  // half, which is also its harvest: the events (then the uepoll half's),
  // -EINTR, -EFAULT, or 0 (*expired: the deadline passed).
  int SleepInKernel(EpWaiter* w, epoll_event* events, int maxevents,
                    const Deadline& deadline, const sigset_t* sigmask,
                    bool* expired) EXCLUDES(mtx_, lock_);
  // After a harvest took the token: if the uepoll half still has events,
  // the next sleeper gets one.
  void HandOffToken() EXCLUDES(lock_);
  int MinWait(epoll_event* events, int maxevents, const WaitArgs& args,
              int64_t min_wait_ns) EXCLUDES(mtx_, lock_);
  // Moves rdllist_ to txlist and returns how many items it held.
  int StartScan(ListNode* txlist) REQUIRES(mtx_) EXCLUDES(lock_) {
    MutexLock l(lock_);
    return StartScanLocked(txlist);
  }
  int StartScanLocked(ListNode* txlist) REQUIRES(mtx_, lock_);
  // What a harvest does with one item it took off the list (unlinked):
  // clears queued, polls, reports into events[*res] and stamps it, and
  // re-queues it on requeue if level-triggered. False (nothing changed
  // but queued) when it is ready and events is NULL: the copy-out faults.
  // under_lock: called with lock_ held (HarvestHeadLocked) for an item
  // whose poll is a load; its polls are then PollNoLock().
  bool HarvestItem(EpItem* epi, epoll_event* events, int* res, uint16_t mark,
                   uint16_t skip, ListNode* requeue, int* nrequeue,
                   bool under_lock) REQUIRES(mtx_);
  // The first part of a harvest, under one hold of lock_: the items at the
  // head of rdllist_ whose poll takes no lock (File::poll_is_a_load) are
  // harvested without a scan. Returns true if that finished the harvest (the
  // re-queued items are back on rdllist_); else starts the scan of the
  // rest (StartScanLocked into txlist, *ntx) for SendUepollEvents.
  bool HarvestHeadLocked(epoll_event* events, int maxevents, int* res,
                         uint16_t mark, uint16_t skip, ListNode* requeue,
                         int* nrequeue, ListNode* txlist, int* ntx)
      REQUIRES(mtx_, lock_);
  // ntx and nrequeue: the lengths of txlist and requeue (nready_ stays O(1)).
  void DoneScan(ListNode* txlist, int ntx, ListNode* requeue, int nrequeue)
      REQUIRES(mtx_) EXCLUDES(lock_);
  // The end of every harvest: the re-queued items behind rdllist_ (with
  // nready_ counting the rest already), avail_, and the hand-off.
  void FinishHarvestLocked(ListNode* requeue, int nrequeue)
      REQUIRES(mtx_, lock_);
  uint32_t ItemPoll(EpItem* epi, int depth, bool under_lock = false)
      REQUIRES(mtx_);
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
    if (w->in_kernel) ++nkernel_sleepers_;
  }
  void DequeueWaiterLocked(EpWaiter* w) REQUIRES(lock_);

  // The fields are laid out by who writes them, one cache line per group,
  // because on a 2-core VM a line costs about 250 ns to move between cores
  // (docs/design.md, "Borrowed lookups"): the File header above is read on
  // every call and written almost never; it must not share a line with a
  // lock.
  //
  // Line 1: written by every harvest and every slow-path wakeup.
  // The lock order's edges that clang can name from here (LOCKING above):
  // g_nested > mtx_ > {watch_lock_, every queue's lock_, lock_}, every
  // queue's lock_ > lock_, the mirror's lock > lock_ > the kernel half's
  // number lock. mtx_ is on line 3, away from the wakeups.
  alignas(kCacheLine) Mutex lock_
      ACQUIRED_AFTER(poll_wait_.lock(), mirror_.lock())
          ACQUIRED_BEFORE(khalf_.number_lock());
  ListNode rdllist_ GUARDED_BY(lock_);
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
  // The token (kernel_side.cc): how many waiters_ sleep in the kernel half;
  // whether a token was armed and no sleeper or harvest took it yet; whether
  // it was armed for all of them (level-triggered, until the last leaves);
  // and which wake eventfd the kernel half has registered.
  int nkernel_sleepers_ GUARDED_BY(lock_) = 0;
  bool token_pending_ GUARDED_BY(lock_) = false;
  bool token_all_ GUARDED_BY(lock_) = false;
  WakeFd::Handle token_fd_ GUARDED_BY(lock_);

  // Line 2: read by every wakeup's fast path (EpItemWake) and every wait;
  // written only when a thread starts or stops sleeping, or by set_params.
  // The length of waiters_, readable without lock_. Changed under lock_.
  alignas(kCacheLine) std::atomic<int> nwaiters_{0};
  // The kernel half may have events for a waiter: set once (never cleared)
  // when the instance first holds a kernel descriptor, a child that may
  // have them, or is made watchable. Until then waiters sleep on a futex.
  std::atomic<bool> mixed_{false};
  // A watchable instance (watchable.cc): set once, never cleared.
  std::atomic<bool> watchable_{false};
  // The application gave the kernel half a descriptor at some point, or a
  // child that had one: a child cookie in a parent's kernel half may then
  // be a kernel event (FilterCookies), and a fork child copies the kernel
  // half's registrations. Set before the walk upward (BecomeMixed).
  std::atomic<bool> kernel_fds_{false};
  // Parameters: written by set_params, read by waits; independent words.
  std::atomic<uint32_t> busy_poll_usecs_{0};
  std::atomic<uint16_t> busy_poll_budget_{0};
  std::atomic<uint8_t> prefer_busy_poll_{0};
  std::atomic<uint64_t> min_wait_ns_{0};

  // Line 3: written by every harvest and every ctl (mtx_), and by ADD and
  // DEL (the table). Not by a wakeup: a source's thread spinning on lock_
  // would take the line from the harvest that holds mtx_ across lock_,
  // and the harvest would miss it again to release mtx_.
  alignas(kCacheLine) Mutex mtx_ ACQUIRED_AFTER(g_nested)
      ACQUIRED_BEFORE(lock_, watch_lock(), poll_wait_.lock());
  // With its lookup hint, the item the last harvest reported (Remember):
  // on this line, which the harvest holds and writes already.
  ItemTable items_ GUARDED_BY(mtx_);
  // The items whose targets are instances, by cookie (child_table.h).
  ChildTable children_ GUARDED_BY(mtx_);
  std::atomic<long> ep_refs_{1};
  // Which half a mixed instance's harvest serves first: they alternate, so
  // neither starves the other when maxevents is small.
  bool kernel_first_ GUARDED_BY(mtx_) = false;
  // The last stamp given to a two-pass harvest (EpItem::batch), 1..65535;
  // every item's stamp is cleared when it wraps.
  uint16_t batch_ GUARDED_BY(mtx_) = 0;
  // The kernel half (numbers, operations) and the mirror of a watchable
  // instance; each has its own lock (kernel/*.h).
  KernelHalf khalf_;
  Mirror mirror_;

  // Line 4: watchers of this instance: parent items, poll().
  alignas(kCacheLine) WaitQueue poll_wait_;

  // Nesting-check state (nesting.cc, NestingCheck, a friend), guarded by
  // g_nested except gen_, which ADD reads under mtx_ (hence atomic).
  std::atomic<uint64_t> gen_{0};
  uint64_t down_gen_ GUARDED_BY(g_nested) = 0;
  int down_depth_ GUARDED_BY(g_nested) = 0;
  uint64_t up_gen_ GUARDED_BY(g_nested) = 0;
  int up_depth_ GUARDED_BY(g_nested) = 0;
};

// The last close of a watched file: remove every item that watches it
// (eventpoll_release_file). Called from File::LastClose.
void EpollReleaseFile(File* file);

// uepoll_epoll_create1 and the other calls capi/epoll_api.cc makes once
// it has checked their arguments.
int EpollCreate(int flags);
int EpollMakeWatchable(int epfd);
int EpollSetParams(int epfd, const EpollParams& p);
int EpollGetParams(int epfd, EpollParams* p);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_EPOLL_EVENTPOLL_H_
