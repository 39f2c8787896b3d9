// Scans of the ready list: harvests (epoll_wait), polls of an instance, and
// the sleep/wake protocol of waiters. The protocol is in eventpoll.h.
#include <errno.h>

#include <algorithm>
#include <cassert>

#include "core/borrow.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {

int Eventpoll::StartScanLocked(ListNode* txlist) {
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
  nready_ = ntx + narrived;
  FinishHarvestLocked(requeue, nrequeue);
}

void Eventpoll::FinishHarvestLocked(ListNode* requeue, int nrequeue) {
  for (ListNode* n = requeue->next; n != requeue; n = n->next) {
    // Most are marked still (a ready LT eventfd is polled marked): a store
    // would take the line from the writer that reads it on every write.
    EpItem* epi = UEPOLL_CONTAINER_OF(n, EpItem, rdllink);
    if (!epi->queued.load(std::memory_order_relaxed)) {
      epi->queued.store(true, std::memory_order_relaxed);
    }
  }
  rdllist_.SpliceBack(requeue);
  nready_ += nrequeue;
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
  // Reached with w_ set only when a cancellation unwinds the sleep. A
  // waiter that a waker picked (unlinked), or one asleep in the kernel
  // half that may have taken the token, hands the wakeup on if events are
  // still there: the kernel's cancelled waiter wakes the next exclusive
  // one in the same way (HandoverEpoll.cancelled_picked_waiter_hands_the_
  // wakeup_on).
  ~WaiterGuard() {
    if (!w_) return;
    MutexLock l(ep_->lock_);
    bool picked = !w_->node.linked() || w_->in_kernel;
    ep_->DequeueWaiterLocked(w_);
    if (picked && ep_->EventsAvailableLocked()) ep_->WakeOneLocked();
  }
  WaiterGuard(const WaiterGuard&) = delete;
  WaiterGuard& operator=(const WaiterGuard&) = delete;
  // Returns whether the waiter was picked (unlinked by a waker) or events
  // are available.
  bool Dequeue() {
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

namespace {
// An eventfd's poll, and a timerfd's without cancel-on-set, is one atomic
// load (File::poll_is_a_load): it takes no lock and costs next to nothing,
// so it may run under lock_ (by PollNoLock), or twice.
bool PollIsALoad(const File* f) { return f->poll_is_a_load(); }
}  // namespace

uint32_t Eventpoll::ItemPoll(EpItem* epi, int depth, bool under_lock) {
  File* f = epi->file;
  uint32_t mask = under_lock ? f->PollNoLock() : f->Poll(depth);
  return mask & epi->events.load(std::memory_order_relaxed);
}

bool Eventpoll::HarvestItem(EpItem* epi, epoll_event* events, int* res,
                            uint16_t mark, uint16_t skip, ListNode* requeue,
                            int* nrequeue, bool under_lock) {
  uint32_t ev = epi->events.load(std::memory_order_relaxed);
  const bool lt = !(ev & (EPOLLET | EPOLLONESHOT));
  uint32_t revents = 0;
  if (skip && epi->batch == skip) {
    // Reported by this batch's first pass: what followed its report then
    // (LT: re-queued, else not) stands.
    epi->queued.store(false, std::memory_order_seq_cst);
    if (lt) {
      requeue->PushBack(&epi->rdllink);
      ++*nrequeue;
    }
    return true;
  }
  // A ready LT item is polled still marked queued: it is re-queued by
  // this harvest, so a wakeup that sees it queued meanwhile and leaves it
  // alone loses nothing (the next harvest polls it again), and the seq_cst
  // store below is saved. Only an item that may leave the list needs it.
  // A ready ONESHOT item is polled so too: this harvest disables it, and
  // a wakeup never looks past a disabled item's events, so the mark left
  // behind is never read before the MOD that re-arms it clears it
  // (Modify). An idle one is polled twice so; only where a poll is one
  // load.
  if ((lt || (ev & EPOLLONESHOT)) && (under_lock || PollIsALoad(epi->file))) {
    revents = ItemPoll(epi, 1, under_lock);
  }
  if (!revents) {
    // Before the poll (seq_cst pairs with the callback's load): a wakeup
    // after this point takes the slow path and links or chains the item
    // again. Always re-poll: the hint only filtered; an item that went
    // idle since its wakeup is dropped (and not re-queued, even in LT
    // mode).
    epi->queued.store(false, std::memory_order_seq_cst);
    revents = ItemPoll(epi, 1, under_lock);
    if (!revents) return true;
  }
  if (!events) return false;
  events[*res].events = revents;
  events[*res].data.u64 = epi->data;
  ++*res;
  items_.Remember(epi);
  if (mark) epi->batch = mark;
  if (ev & EPOLLONESHOT) {
    epi->events.store(ev & kEpPrivateBits, std::memory_order_relaxed);
    // A child's kernel half registered in ours stops carrying EPOLLIN
    // with it: else a kernel event below would queue its cookie, and our
    // kernel half would answer poll() (and our parents) as readable for
    // an item the kernel never queues while disabled
    // (DiffFuzzKernelRegressions.nesting__oneshot_child_disabled_by_a_
    // harvest_wakes_nothing). A MOD re-arms both (Modify).
    if (epi->file->is_epoll()) ModChildLocked(epi);
  } else if (lt) {
    requeue->PushBack(&epi->rdllink);  // LT: round robin
    ++*nrequeue;
  }
  return true;
}

bool Eventpoll::HarvestHeadLocked(epoll_event* events, int maxevents, int* res,
                                  uint16_t mark, uint16_t skip,
                                  ListNode* requeue, int* nrequeue,
                                  ListNode* txlist, int* ntx) {
  // An eventfd's poll, and a plain timerfd's, takes no lock, so it may run
  // under lock_ (the lock order is a source's queue lock, then lock_; a
  // poll that takes its source's lock must not run here: PollNoLock). While we
  // hold lock_, a callback either sees its item queued (and leaves it to this
  // poll, as during a scan) or waits for lock_ and links the item behind what
  // this harvest leaves: the order of a wakeup that came just after it.
  // No scan is started, so no callback chains on ovflist_, and the
  // harvest takes lock_ once instead of twice. At most kHeadItems items
  // are taken so: a callback waits for lock_ only that long, and an event
  // that fires while a long list is harvested still finds the scan of
  // the rest running, and its place ahead of the items the scan
  // re-queues, as in the kernel
  // (Ordering.ArrivalsDuringAHarvestComeBeforeRequeuedLtItems). A NULL
  // events array goes to the scan, which knows how to fault.
  constexpr int kHeadItems = 8;
  for (int taken = 0;
       events && *res < maxevents && !rdllist_.empty() && taken < kHeadItems;
       ++taken) {
    EpItem* epi = UEPOLL_CONTAINER_OF(rdllist_.next, EpItem, rdllink);
    if (!PollIsALoad(epi->file)) break;
    epi->rdllink.Unlink();
    --nready_;
    bool copied =
        HarvestItem(epi, events, res, mark, skip, requeue, nrequeue, true);
    assert(copied);
    (void)copied;
  }
  if (events && (*res == maxevents || rdllist_.empty())) {
    // Done, with no scan behind it: no arrivals, and what was not taken
    // is still on rdllist_ and counted in nready_.
    FinishHarvestLocked(requeue, *nrequeue);
    return true;
  }
  // The rest is scanned with lock_ dropped; the items re-queued so far
  // stay on requeue, behind what the scan finds, as if scanned by it.
  *ntx = StartScanLocked(txlist);
  return false;
}

int Eventpoll::SendUepollEvents(epoll_event* events, int maxevents,
                                uint16_t mark, uint16_t skip) {
  ListNode txlist, requeue;
  MutexLock m(mtx_);
  int ntx = 0;
  int nrequeue = 0;
  int res = 0;
  bool done;
  {
    MutexLock l(lock_);
    done = HarvestHeadLocked(events, maxevents, &res, mark, skip, &requeue,
                             &nrequeue, &txlist, &ntx);
  }
  if (!done) {
    while (!txlist.empty() && res < maxevents) {
      EpItem* epi = UEPOLL_CONTAINER_OF(txlist.next, EpItem, rdllink);
      epi->rdllink.Unlink();
      --ntx;
      if (!HarvestItem(epi, events, &res, mark, skip, &requeue, &nrequeue,
                       false)) {
        // The kernel faults on the copy-out: the item goes back, and
        // EFAULT is returned only if nothing was delivered (always, for
        // NULL).
        txlist.PushFront(&epi->rdllink);
        ++ntx;
        epi->queued.store(true, std::memory_order_relaxed);
        res = -EFAULT;
        break;
      }
    }
    DoneScan(&txlist, ntx, &requeue, nrequeue);
  }
  // A watchable instance's kernel face follows what the harvest left.
  if (watchable()) SyncMirror(res == 0);
  return res;
}

uint32_t Eventpoll::Poll(int depth) {
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
  // the uepoll half, stale), and so is a token nobody took (KernelReady).
  // A child's kernel half registered in ours answers for the child's kernel
  // events (the kernel polls it), which is the item's readiness here.
  if (!res && watchable()) SyncMirror();
  if (!res && mixed_.load(std::memory_order_acquire) && KernelReady()) {
    res = EPOLLIN | EPOLLRDNORM;
  }
  return res;
}

int Eventpoll::PruneIdle() {
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

int Eventpoll::Wait(epoll_event* events, int maxevents, const WaitArgs& args) {
  // An expiry no thread ran yet (docs/design.md, "Timers") must be seen by
  // this harvest as the kernel's interrupt would have made it seen.
  RunDueTimers();
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
// A kernel half's events cannot be counted without harvesting them, and a
// harvest during the phase would report an LT kernel event twice in the
// batch or leave out the kernel events that came after it. So the phase
// watches the kernel half only until it becomes readable, and then counts
// it as one ready item; the one harvest at the end takes both halves, so
// every kernel event ready by then is in the batch, once (the
// BridgeMixedMinWait tests). The phase may thus last longer than the
// kernel half's events alone would need: never longer than min_wait.
int Eventpoll::MinWait(epoll_event* events, int maxevents, const WaitArgs& args,
                       int64_t min_wait_ns) {
  // Saturating: a min_wait too long to add to now is forever, and then the
  // timeout alone ends the phase.
  Deadline until =
      Deadline::Earlier(Deadline::AfterNs(min_wait_ns), args.deadline);
  // Only a kernel half that holds the application's descriptors (its own
  // or a child's) has events to count; a mirror or a token is not one.
  bool watch_kernel = kernel_fds_.load(std::memory_order_acquire);
  int kernel_ready = 0;
  for (;;) {
    EpWaiter w;
    w.parker = &Parker::Current();
    w.min_ready = maxevents - kernel_ready;
    bool enough;
    {
      MutexLock l(lock_);
      enough = nready_ + kernel_ready >= maxevents;
      if (!enough) QueueWaiterLocked(&w);
    }
    if (enough) {
      // Count only items that are ready now: an LT item an earlier harvest
      // left queued may have gone idle since, and would end the phase
      // early with fewer than maxevents events.
      if (PruneIdle() + kernel_ready >= maxevents) break;
      continue;
    }
    pollfd kfds[2];
    nfds_t nk = watch_kernel && !kernel_ready ? SleepSet(kfds) : 1;
    WaiterGuard guard(this, &w);
    Parker::Result r =
        w.parker->Park(until, args.sigmask, nk > 1 ? kfds : nullptr, nk,
                       Parker::OnStop::kMayInterrupt);
    guard.Dequeue();
    if (r & Parker::kKernelReady) {
      AfterKernelSleep(kfds, nk);
      if (kfds[1].revents & POLLIN) kernel_ready = 1;
    }
    // Interrupted (woken as well or not): harvest once, events found win.
    if (r & Parker::kInterrupted) {
      int n = SendEvents(events, maxevents);
      return n ? n : -EINTR;
    }
    if ((r & Parker::kTimedOut) || until.Expired()) break;
  }
  // Also hands the wakeup on to other waiters (DoneScan) if more is ready.
  return SendEvents(events, maxevents);
}

int Eventpoll::SendEvents(epoll_event* events, int maxevents) {
  if (!mixed_.load(std::memory_order_acquire)) {
    return SendUepollEvents(events, maxevents);
  }
  if (!avail_.load(std::memory_order_acquire)) {
    // The uepoll half has nothing ready (an instance of kernel descriptors
    // only, as an interposed server's are): the kernel half's events, then
    // what its cookies queued in the uepoll half, or what arrived there
    // meanwhile. Both orders below would give the same: their uepoll pass
    // finds nothing before the kernel's.
    return FinishKernelHarvest(SendKernelEvents(events, maxevents), events,
                               maxevents);
  }
  bool kernel_first;
  uint16_t mark = 0;
  {
    MutexLock m(mtx_);
    kernel_first = kernel_first_;
    kernel_first_ = !kernel_first_;
    if (!kernel_first) {
      if (++batch_ == 0) {
        // Wrapped: no item may keep a stamp a later batch is given.
        items_.ForEach([](EpItem* epi) { epi->batch = 0; });
        batch_ = 1;
      }
      mark = batch_;
    }
  }
  int n = 0;
  bool fault = false;
  KernelHarvest h;
  auto rest = [&] { return events ? events + n : nullptr; };
  auto kernel = [&] {
    h = SendKernelEvents(rest(), maxevents - n);
    if (h.events < 0) {
      fault = true;
    } else {
      n += h.events;
    }
  };
  auto uepoll = [&](uint16_t stamp, uint16_t skip) {
    int u = SendUepollEvents(rest(), maxevents - n, stamp, skip);
    if (u < 0) {
      fault = true;
    } else {
      n += u;
    }
  };
  if (kernel_first) {
    kernel();
    if (n < maxevents) uepoll(0, 0);
  } else {
    uepoll(mark, 0);
    if (n < maxevents) {
      kernel();
      // A child's cookie queued its item in the uepoll half just now: the
      // child's event came before this harvest, so the kernel, whose item
      // the child's wakeup queued at once, reports it in this batch too
      // (DiffFuzzKernelRegressions.nesting__child_woken_by_its_cookie_is_in_
      // the_same_batch). Items the first pass reported are not reported a
      // second time.
      if (h.children && n < maxevents) uepoll(0, mark);
    }
  }
  if (h.token) HandOffToken();
  // EFAULT only when nothing was delivered, as the kernel answers.
  if (n == 0 && fault) return -EFAULT;
  return n;
}

int Eventpoll::FinishKernelHarvest(const KernelHarvest& h, epoll_event* events,
                                   int maxevents) {
  int n = h.events < 0 ? 0 : h.events;
  bool fault = h.events < 0;
  if (n < maxevents &&
      (h.children || h.token || avail_.load(std::memory_order_acquire))) {
    int u = SendUepollEvents(events ? events + n : nullptr, maxevents - n);
    if (u < 0) {
      fault = true;
    } else {
      n += u;
    }
  }
  if (h.token) HandOffToken();
  return n == 0 && fault ? -EFAULT : n;
}

void Eventpoll::HandOffToken() {
  // A token was meant for a sleeper of the kernel half; if what it stood
  // for is still there, the next sleeper gets one.
  MutexLock l(lock_);
  if (!rdllist_.empty()) WakeOneLocked();
}

int Eventpoll::SleepInKernel(EpWaiter* w, epoll_event* events, int maxevents,
                             const Deadline& deadline, const sigset_t* sigmask,
                             bool* expired) {
  struct Ctx {
    Eventpoll* ep;
    epoll_event* events;
    int maxevents;
    const sigset_t* mask;
    int got;
  } ctx{this, events, maxevents, sigmask, 0};
  Parker::Result r;
  {
    WaiterGuard guard(this, w);
    r = w->parker->ParkExternal(
        deadline,
        [](void* c, const Deadline& until) -> unsigned {
          auto* x = static_cast<Ctx*>(c);
          timespec ts;
          int n = x->ep->khalf_.Wait(x->events, x->maxevents,
                                     until.RemainingTimespec(&ts), x->mask);
          if (n > 0 || n == -EFAULT) {
            x->got = n;
            return Parker::kKernelReady;
          }
          if (n == -EINTR) return Parker::kInterrupted;
          if (until.Expired()) return Parker::kTimedOut;
          // No number left (the last one closed under us): the caller
          // decides again how to sleep.
          return Parker::kKernelReady;
        },
        &ctx);
    guard.Dequeue();
  }
  if (ctx.got == -EFAULT) return -EFAULT;
  if (ctx.got > 0) {
    // The sleep was the kernel half's harvest; then the uepoll half's.
    int n = FinishKernelHarvest(SendKernelEvents(events, maxevents, ctx.got),
                                events, maxevents);
    if (n) return n;
  }
  if (r & Parker::kInterrupted) {
    // Events found win over the signal, as in the kernel.
    int m = SendEvents(events, maxevents);
    return m ? m : -EINTR;
  }
  *expired = (r & Parker::kTimedOut) || deadline.Expired();
  return 0;
}

int Eventpoll::WaitLoop(epoll_event* events, int maxevents,
                        const Deadline& deadline, const sigset_t* sigmask) {
  bool timed_out = deadline.is_zero();
  // A kernel half is asked on every harvest (whether it has events is
  // known only to the kernel), except by a waiter that will sleep in it:
  // that sleep is the kernel half's harvest, so a wait that finds the
  // uepoll half empty costs one system call, as the kernel's epoll_wait.
  bool mixed = mixed_.load(std::memory_order_acquire);
  bool masked = sigmask != nullptr;
  bool eavail = avail_.load(std::memory_order_acquire) ||
                (mixed && (timed_out || !SleepsInKernel(masked)));
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
      // Decided under lock_: a nested ADD of this instance (which makes it
      // watched) or MakeWatchable changes the answer before it takes
      // lock_ to wake the sleepers in the kernel half, so either it sees
      // this waiter queued there or this waiter sees the change.
      w.in_kernel = SleepsInKernel(masked);
      if (!eavail) QueueWaiterLocked(&w);
    }
    if (eavail) continue;
    if (w.in_kernel) {
      bool expired = false;
      int n = SleepInKernel(&w, events, maxevents, deadline, sigmask, &expired);
      if (n) return n;
      timed_out = expired;
      eavail =
          avail_.load(std::memory_order_acquire) ||
          (!SleepsInKernel(masked) && mixed_.load(std::memory_order_acquire));
      continue;
    }
    // The kernel half, if any: the sleep ends when it has something too.
    pollfd kfds[2];
    nfds_t nk = SleepSet(kfds);
    WaiterGuard guard(this, &w);
    Parker::Result r =
        w.parker->Park(deadline, sigmask, nk > 1 ? kfds : nullptr, nk,
                       Parker::OnStop::kMayInterrupt);
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
