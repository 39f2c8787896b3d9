// Scans of the ready list: harvests (epoll_wait), polls of an instance, and
// the sleep/wake protocol of waiters. The protocol is in eventpoll.h.
#include <errno.h>

#include <algorithm>
#include <cassert>

#include "core/borrow.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "kernel/bridge.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {

int Eventpoll::StartScan(ListNode* txlist) {
  MutexLock l(lock_);
  txlist->SpliceBack(&rdllist_);
  int n = nready_;
  nready_ = 0;
  ovflist_ = nullptr;  // active: callbacks chain here until DoneScan
  SyncAvail();
  return n;
}

void Eventpoll::DoneScan(ListNode* txlist, int ntx, ListNode* requeue,
                         int nrequeue) {
  MutexLock l(lock_);
  int narrived = 0;
  // ovflist_ is newest-first; pushing each at the front of `arrived`
  // restores arrival order. Items still linked (unprocessed on txlist, or
  // re-queued LT items) keep their place.
  ListNode arrived;
  for (EpItem *epi = ovflist_, *next; epi != nullptr; epi = next) {
    next = epi->ovf_next;
    epi->ovf_next = kOvfUnactive;
    if (!epi->rdllink.linked()) {
      arrived.PushFront(&epi->rdllink);
      ++narrived;
      epi->queued.store(true, std::memory_order_relaxed);
    }
  }
  ovflist_ = kOvfUnactive;
  // rdllist_ is empty: nobody links into it during a scan.
  rdllist_.SpliceBack(txlist);
  rdllist_.SpliceBack(&arrived);
  for (ListNode* n = requeue->next; n != requeue; n = n->next) {
    UEPOLL_CONTAINER_OF(n, EpItem, rdllink)
        ->queued.store(true, std::memory_order_relaxed);
  }
  rdllist_.SpliceBack(requeue);
  nready_ = ntx + narrived + nrequeue;
#ifndef NDEBUG
  int len = 0;
  for (const ListNode* p = rdllist_.next; p != &rdllist_; p = p->next) ++len;
  assert(len == nready_ && "nready_ must track rdllist_");
#endif
  SyncAvail();
  // Hand-off: more is ready, so the next waiter gets its turn.
  if (!rdllist_.empty()) WakeOneLocked();
}

// Takes a waiter off waiters_ when its sleep ends, or when a cancellation
// (pthread_cancel) unwinds the sleeping thread: the entry lives on that
// thread's stack, and a later wakeup must not find it.
class Eventpoll::WaiterGuard {
 public:
  WaiterGuard(Eventpoll* ep, EpWaiter* w) : ep_(ep), w_(w) {}
  ~WaiterGuard() {
    if (w_) Dequeue();
  }
  WaiterGuard(const WaiterGuard&) = delete;
  WaiterGuard& operator=(const WaiterGuard&) = delete;
  // Returns whether the waiter was picked (unlinked by a waker) or events
  // are available.
  bool Dequeue() NO_THREAD_SAFETY_ANALYSIS {
    MutexLock l(ep_->lock_);
    bool eavail = !w_->node.linked() || ep_->EventsAvailableLocked();
    ep_->DequeueWaiterLocked(w_);
    w_ = nullptr;
    return eavail;
  }

 private:
  Eventpoll* ep_;
  EpWaiter* w_;
};

uint32_t Eventpoll::ItemPoll(EpItem* epi, int depth) {
  return epi->file->Poll(depth) & epi->events.load(std::memory_order_relaxed);
}

int Eventpoll::SendUepollEvents(epoll_event* events,
                                int maxevents) NO_THREAD_SAFETY_ANALYSIS {
  ListNode txlist, requeue;
  MutexLock m(mtx_);
  int ntx = StartScan(&txlist);
  int nrequeue = 0;
  int res = 0;
  while (!txlist.empty() && res < maxevents) {
    EpItem* epi = UEPOLL_CONTAINER_OF(txlist.next, EpItem, rdllink);
    epi->rdllink.Unlink();
    --ntx;
    // Before the poll (seq_cst pairs with the callback's load): a wakeup
    // after this point takes the slow path and chains the item again.
    epi->queued.store(false, std::memory_order_seq_cst);
    // Always re-poll: the hint only filtered; an item that went idle since
    // its wakeup is dropped (and not re-queued, even in LT mode).
    uint32_t revents = ItemPoll(epi, 1);
    if (!revents) continue;
    if (!events) {
      // The kernel faults on the copy-out: the item goes back, and EFAULT
      // is returned only if nothing was delivered (always, for NULL).
      txlist.PushFront(&epi->rdllink);
      ++ntx;
      epi->queued.store(true, std::memory_order_relaxed);
      res = -EFAULT;
      break;
    }
    events[res].events = revents;
    events[res].data.u64 = epi->data;
    ++res;
    uint32_t ev = epi->events.load(std::memory_order_relaxed);
    if (ev & EPOLLONESHOT) {
      epi->events.store(ev & kEpPrivateBits, std::memory_order_relaxed);
    } else if (!(ev & EPOLLET)) {
      requeue.PushBack(&epi->rdllink);  // LT: round robin
      ++nrequeue;
    }
  }
  DoneScan(&txlist, ntx, &requeue, nrequeue);
  // A watchable instance's kernel face follows what the harvest left.
  if (watchable()) SyncMirror(res == 0);
  return res;
}

uint32_t Eventpoll::Poll(int depth) NO_THREAD_SAFETY_ANALYSIS {
  // poll() of this instance (depth 0, no lock held): a kernel half below
  // reports through the bridge only when someone reaps it (ReapBelow).
  if (depth == 0) ReapBelow();
  ListNode txlist, requeue;
  MutexLock m(mtx_);
  // Fast path: the first queued item is ready (the common case: an LT item
  // that stays queued). Under mtx_ nothing unlinks it (harvests, DEL and
  // closes all hold mtx_; callbacks only append) and no scan is running,
  // so it can be polled without lock_ and without a scan. Nested instances
  // are polled on every harvest of their parents, once per level.
  EpItem* first = nullptr;
  {
    MutexLock l(lock_);
    if (!rdllist_.empty()) {
      first = UEPOLL_CONTAINER_OF(rdllist_.next, EpItem, rdllink);
    }
  }
  if (first && ItemPoll(first, depth + 1)) return EPOLLIN | EPOLLRDNORM;
  int ntx = StartScan(&txlist);
  uint32_t res = 0;
  while (!txlist.empty()) {
    EpItem* epi = UEPOLL_CONTAINER_OF(txlist.next, EpItem, rdllink);
    // Cleared before the poll, as in SendEvents, so that a wakeup racing
    // with a prune is chained on the overflow list, not skipped.
    epi->queued.store(false, std::memory_order_seq_cst);
    if (ItemPoll(epi, depth + 1)) {
      epi->queued.store(true, std::memory_order_relaxed);  // stays queued
      res = EPOLLIN | EPOLLRDNORM;
      break;
    }
    epi->rdllink.Unlink();  // stale: prune
    --ntx;
  }
  DoneScan(&txlist, ntx, &requeue, 0);
  // The kernel half is asked only when the uepoll half has nothing; the
  // mirror of a watchable instance is disarmed first (it would answer for
  // the uepoll half, stale).
  if (!res && watchable()) SyncMirror();
  if (!res && mixed_.load(std::memory_order_acquire) && KernelReady()) {
    res = EPOLLIN | EPOLLRDNORM;
  }
  return res;
}

int Eventpoll::PruneIdle() NO_THREAD_SAFETY_ANALYSIS {
  ListNode txlist, requeue;
  MutexLock m(mtx_);
  int ntx = StartScan(&txlist);
  for (ListNode* n = txlist.next; n != &txlist;) {
    EpItem* epi = UEPOLL_CONTAINER_OF(n, EpItem, rdllink);
    n = n->next;
    // Cleared before the poll, as in SendUepollEvents.
    epi->queued.store(false, std::memory_order_seq_cst);
    if (ItemPoll(epi, 1)) {
      epi->queued.store(true, std::memory_order_relaxed);  // stays queued
    } else {
      epi->rdllink.Unlink();
      --ntx;
    }
  }
  DoneScan(&txlist, ntx, &requeue, 0);
  MutexLock l(lock_);
  return nready_;
}

EpollParams Eventpoll::params() const {
  EpollParams p;
  p.busy_poll_usecs = busy_poll_usecs_.load(std::memory_order_relaxed);
  p.busy_poll_budget = busy_poll_budget_.load(std::memory_order_relaxed);
  p.prefer_busy_poll = prefer_busy_poll_.load(std::memory_order_relaxed);
  p.min_wait_ns = min_wait_ns_.load(std::memory_order_relaxed);
  return p;
}

void Eventpoll::set_params(const EpollParams& p) {
  busy_poll_usecs_.store(p.busy_poll_usecs, std::memory_order_relaxed);
  busy_poll_budget_.store(p.busy_poll_budget, std::memory_order_relaxed);
  prefer_busy_poll_.store(p.prefer_busy_poll, std::memory_order_relaxed);
  min_wait_ns_.store(p.min_wait_ns, std::memory_order_relaxed);
}

void Eventpoll::ReapBelow() {
  // A kernel half's events reach the items watching its instance only when
  // the bridge is reaped, which a sleeping waiter does when the bridge wakes
  // it. A wait or poll that finds nothing queued would otherwise miss an
  // event that arrived while nobody slept: turn them into wakeups first.
  if (kernel_below_.load(std::memory_order_acquire)) Bridge::Reap();
}

int Eventpoll::Wait(epoll_event* events, int maxevents, const WaitArgs& args) {
  // An expiry no thread ran yet (docs/design.md, "Timers") must be seen by
  // this harvest as the kernel's interrupt would have made it seen.
  RunDueTimers();
  ReapBelow();
  // Neither busy polling nor min_wait applies to a zero timeout.
  if (!args.deadline.is_zero()) {
    uint32_t busy_us = busy_poll_usecs_.load(std::memory_order_relaxed);
    if (busy_us && !avail_.load(std::memory_order_acquire)) {
      PinBorrowed();  // closers must not wait out the spin
      // Spin for events before sleeping; bounded by the deadline too
      // (at_ns() of an infinite deadline is INT64_MAX). Saturating, though
      // busy_poll_usecs <= UINT32_MAX cannot overflow today.
      int64_t until = std::min(
          SaturatingAdd(Deadline::NowNs(), SaturatingMul(busy_us, 1000)),
          args.deadline.at_ns());
      while (!avail_.load(std::memory_order_acquire) &&
             Deadline::NowNs() < until) {
        for (int i = 0; i < 16; ++i) CpuRelax();
      }
    }
    // The instance's default is a uint64_t: beyond INT64_MAX it saturates
    // (as pwait3's argument does) instead of turning negative ("none").
    int64_t min_wait =
        args.min_wait_ns >= 0
            ? args.min_wait_ns
            : static_cast<int64_t>(std::min<uint64_t>(
                  min_wait_ns_.load(std::memory_order_relaxed), INT64_MAX));
    if (min_wait > 0 && maxevents > 1) {
      int n = MinWait(events, maxevents, args, min_wait);
      if (n != 0) return n;
    }
  }
  return WaitLoop(events, maxevents, args.deadline, args.sigmask);
}

// The min_wait phase: sleep (woken by each event) until maxevents items are
// ready or min_wait has passed, then harvest once. Harvesting only once
// keeps an LT item from being reported twice in one batch. Returns the
// events, -EINTR, or 0 when nothing was ready (the caller then waits on to
// the deadline and returns at the first event).
//
// A kernel half counts too: the first time it becomes ready during the
// phase its events are harvested into the front of the batch, and it is
// not watched again until the phase ends (its LT events would be harvested
// twice otherwise); the final harvest then serves the uepoll half only.
int Eventpoll::MinWait(epoll_event* events, int maxevents, const WaitArgs& args,
                       int64_t min_wait_ns) NO_THREAD_SAFETY_ANALYSIS {
  // Saturating: a min_wait too long to add to now is forever, and then the
  // timeout alone ends the phase.
  Deadline until =
      Deadline::Earlier(Deadline::AfterNs(min_wait_ns), args.deadline);
  int collected = 0;  // kernel-half events already in events[0..collected)
  bool watch_kernel = true;
  auto finish = [&] {
    epoll_event* rest = events ? events + collected : nullptr;
    int n = collected ? SendUepollEvents(rest, maxevents - collected)
                      : SendEvents(events, maxevents);
    if (n < 0) return collected ? collected : n;
    return collected + n;
  };
  for (;;) {
    EpWaiter w;
    w.parker = &Parker::Current();
    w.min_ready = maxevents - collected;
    bool enough;
    {
      MutexLock l(lock_);
      enough = nready_ + collected >= maxevents;
      if (!enough) QueueWaiterLocked(&w);
    }
    if (enough) {
      // Count only items that are ready now: an LT item an earlier harvest
      // left queued may have gone idle since, and would end the phase
      // early with fewer than maxevents events.
      if (PruneIdle() + collected >= maxevents) break;
      continue;
    }
    pollfd kfds[3];
    nfds_t nk = watch_kernel ? SleepSet(kfds) : 1;
    WaiterGuard guard(this, &w);
    Parker::Result r =
        w.parker->Park(until, args.sigmask, nk > 1 ? kfds : nullptr, nk);
    guard.Dequeue();
    if (r & Parker::kKernelReady) {
      AfterKernelSleep(kfds, nk);
      if (mixed_.load(std::memory_order_acquire) && kfds[1].revents) {
        int n = SendKernelEvents(events ? events + collected : nullptr,
                                 maxevents - collected);
        if (n > 0) collected += n;
        watch_kernel = false;
      }
    }
    // Interrupted (woken as well or not): harvest once, events found win.
    if (r & Parker::kInterrupted) {
      int n = finish();
      return n ? n : -EINTR;
    }
    if ((r & Parker::kTimedOut) || until.Expired()) break;
  }
  // Also hands the wakeup on to other waiters (DoneScan) if more is ready.
  return finish();
}

void Eventpoll::AfterKernelSleep(const pollfd* kfds, nfds_t nk) {
  // Our kernel half's number reported closed: the application closed it
  // with libc close(). Sleeping on it again would end at once, every time.
  // (kfds[1] is the bridge when SleepSet found no kernel half: then it is
  // not knum_, and this is a no-op.)
  if (nk > 1 && (kfds[1].revents & POLLNVAL)) KernelNumberLost(kfds[1].fd);
  // The bridge was ready: turn its events into the uepoll wakeups they
  // stand for (kernel/bridge.h); ours may be among them.
  if (kernel_below_.load(std::memory_order_relaxed) && kfds[nk - 1].revents) {
    Bridge::Reap();
  }
}

int Eventpoll::WaitLoop(epoll_event* events, int maxevents,
                        const Deadline& deadline,
                        const sigset_t* sigmask) NO_THREAD_SAFETY_ANALYSIS {
  bool timed_out = deadline.is_zero();
  // A kernel half is asked on every harvest: whether it has events is
  // known only to the kernel.
  bool eavail = avail_.load(std::memory_order_acquire) ||
                mixed_.load(std::memory_order_acquire);
  for (;;) {
    if (eavail) {
      int n = SendEvents(events, maxevents);
      if (n) return n;
    }
    if (timed_out) return 0;

    EpWaiter w;
    w.parker = &Parker::Current();
    {
      MutexLock l(lock_);
      eavail = EventsAvailableLocked();
      if (!eavail) QueueWaiterLocked(&w);
    }
    if (eavail) continue;
    // The kernel half and the bridge, if any: the sleep ends when either
    // has something (kernel/bridge.h).
    pollfd kfds[3];
    nfds_t nk = SleepSet(kfds);
    WaiterGuard guard(this, &w);
    Parker::Result r =
        w.parker->Park(deadline, sigmask, nk > 1 ? kfds : nullptr, nk);
    // Still queued: nobody picked us (timeout, signal, or a stale token).
    // Picked: an event was meant for us, so harvest even if we timed out.
    eavail = guard.Dequeue();
    if (r & Parker::kKernelReady) {
      AfterKernelSleep(kfds, nk);
      eavail = true;
    }
    // A kernel descriptor that stays ready (a number closed under the
    // sleep reports POLLNVAL) ends sleeps at once: the deadline still ends
    // the wait.
    if ((r & Parker::kTimedOut) || deadline.Expired()) timed_out = true;
    // A signal ends the wait even if a wakeup raced with it (the parker
    // reports both): harvest once, and fail EINTR if that finds nothing,
    // rather than sleeping on as if only woken.
    if (r & Parker::kInterrupted) {
      // Events found win over the signal, as in the kernel.
      if (eavail || mixed_.load(std::memory_order_acquire)) {
        int n = SendEvents(events, maxevents);
        if (n) return n;
      }
      return -EINTR;
    }
  }
}

int EpollWait(int epfd, epoll_event* events, int maxevents,
              const WaitArgs& args) {
  // A borrow, not a reference: many threads wait on one instance, and a
  // reference would make them all write to its refs_ line on every call.
  // Wait pins the borrow before it sleeps or spins.
  FileBorrow f = FdTable::Get().Borrow(epfd);
  if (!f) return kNotUepoll;
  constexpr int kMaxEvents = INT32_MAX / static_cast<int>(sizeof(epoll_event));
  if (maxevents <= 0 || maxevents > kMaxEvents) return -EINVAL;
  if (!f->is_epoll()) return -EINVAL;
  // A NULL array faults only when an event is copied out (SendEvents).
  return static_cast<Eventpoll*>(f.get())->Wait(events, maxevents, args);
}

int EpollSetParams(int epfd, const EpollParams& p) {
  FileRef f = FdTable::Get().Lookup(epfd);
  if (!f) return kNotUepoll;
  if (!f->is_epoll()) return -ENOTTY;  // the ioctl's errno
  static_cast<Eventpoll*>(f.get())->set_params(p);
  return 0;
}

int EpollGetParams(int epfd, EpollParams* p) {
  FileRef f = FdTable::Get().Lookup(epfd);
  if (!f) return kNotUepoll;
  if (!f->is_epoll()) return -ENOTTY;
  *p = static_cast<Eventpoll*>(f.get())->params();
  return 0;
}

}  // namespace uepoll::impl
