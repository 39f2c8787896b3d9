// Eventpoll: registrations (ctl), the wakeup callback, and lifetimes.
// Scans, harvests and waits are in wait.cc; nesting checks in nesting.cc.
#include "epoll/eventpoll.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/eventfd.h>

#include <new>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "core/fd_table.h"
#include "epoll/nesting.h"

namespace uepoll::impl {
namespace {

EpItem* AllocItem() { return New<EpItem>(); }
// Debug builds poison a freed item (DeallocatePoisoned): a wakeup that
// still reaches it (a bug: the removal must wait for lockless wakers,
// FreeRemovedItem) follows a wild instance pointer and crashes there.
void FreeItem(EpItem* epi) {
  if (!epi) return;
  epi->~EpItem();
  DeallocatePoisoned(epi, sizeof *epi);
}

// Frees an item its instance removed. One whose queue had lockless wakers
// (kDrainWakers, core/wait_queue.h) may still be in one of them: those
// hold a borrow of the watched file, so the free waits for the borrows
// that began before the removal. Called with no lock held.
void FreeRemovedItem(EpItem* epi) {
  if (epi->wait.flags & WaitEntry::kDrainWakers) {
    WaitForOtherBorrowers(epi->file);
  }
  FreeItem(epi);
}

// One spare item per thread. An ADD allocates its item before it takes
// mtx_ (allocation outside locks), so an ADD that then fails (EEXIST: the
// re-ADD of an edge-triggered worker is the common case; ELOOP, EINVAL)
// used to free what it had just allocated: a malloc and a free, about a
// third of such a call. It now keeps the item for the thread's next ADD.
// Only items that were never inserted become spares, so no other thread
// can still reach one.
struct SpareItem {
  EpItem* item = nullptr;
  ~SpareItem() { FreeItem(item); }
};
thread_local SpareItem tl_spare;

EpItem* TakeItem() {
  // Under failure injection every ADD allocates, so that the enumeration of
  // allocation sites (uepoll_debug_fail_alloc) always reaches this one.
  if (tl_spare.item &&
      g_alloc_fail_countdown.load(std::memory_order_relaxed) == 0) {
    EpItem* epi = tl_spare.item;
    tl_spare.item = nullptr;
    return epi;
  }
  return AllocItem();
}

// The item an ADD took and did not insert. (One it inserted and removed
// again may have been seen by a wakeup: that one is freed, as before.)
void ReturnUnusedItem(EpItem* epi) {
  if (!epi) return;
  if (tl_spare.item) {
    FreeItem(epi);
    return;
  }
  epi->~EpItem();
  new (epi) EpItem();
  tl_spare.item = epi;
}

}  // namespace

Eventpoll::Eventpoll(int flags) : File(FileKind::kEpoll, O_RDWR), khalf_(this) {
  (void)flags;
  Live::Inc(Live::instances);
}

Eventpoll::~Eventpoll() { Live::Dec(Live::instances); }

void Eventpoll::Put() {
  // acq_rel: the last Put sees every write made under the references.
  if (ep_refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

// The wakeup callback of an item (ep_poll_callback). Runs under the watched
// file's queue lock, or without it for a lockless waker that holds a
// borrow of the file (WaitQueue::WakeUpBorrowed), which keeps the item's
// memory alive but not its registration: under lock_, a removed item is
// left alone. Returns whether it consumed an exclusive wakeup.
int EpItemWake(WaitEntry* wait, uint32_t key) {
  EpItem* epi = UEPOLL_CONTAINER_OF(wait, EpItem, wait);
  Eventpoll* ep = epi->ep;
  uint32_t events = epi->events.load(std::memory_order_acquire);
  // A disabled ONESHOT item, or a hint that names nothing we want: no need
  // for lock_ (a MOD racing with this re-polls after publishing events).
  if (!(events & ~kEpPrivateBits)) return 0;
  if (key && !(key & events)) return 0;
  // Sleepers on our queue must sleep again on new descriptors: not an
  // event (an item may want any bit, even this one).
  if (key == kResleepKey) return 0;
  // Fast path: a scan will poll the item anyway (and see the state change
  // that woke us, which happened before this call under the source's
  // lock), and no thread sleeps on the instance. A waiter queues only when
  // nothing is queued, so none can be missed. Watchers still get their
  // edge: an outer ET item sees one per inner event.
  if (epi->queued.load(std::memory_order_seq_cst) &&
      ep->nwaiters_.load(std::memory_order_seq_cst) == 0) {
    if (ep->poll_wait_.Active()) ep->poll_wait_.WakeUp(EPOLLIN, 1);
    return (events & EPOLLEXCLUSIVE) ? 0 : 1;
  }
  int ewake = 0;
  bool pwake = false;
  bool first_ready = false;  // the ready list went from empty to not
  {
    MutexLock l(ep->lock_);
    // Removed since a lockless waker found it (RemoveLocked): the item
    // is no longer the instance's to link, and will be freed.
    if (epi->ovf_next == kOvfRemoved) return 0;
    if (ep->ovflist_ != kOvfUnactive) {
      // A scan owns rdllink: chain on the overflow list instead.
      if (epi->ovf_next == kOvfUnactive) {
        epi->ovf_next = ep->ovflist_;
        ep->ovflist_ = epi;
      }
    } else if (!epi->rdllink.linked()) {
      first_ready = ep->rdllist_.empty();
      ep->rdllist_.PushBack(&epi->rdllink);
      ++ep->nready_;
      epi->queued.store(true, std::memory_order_relaxed);
      ep->SyncAvail();
    }
    if (!ep->waiters_.empty()) {
      if (events & EPOLLEXCLUSIVE) {
        switch (key & (EPOLLIN | EPOLLOUT)) {
          case EPOLLIN:
            ewake = (events & EPOLLIN) ? 1 : 0;
            break;
          case EPOLLOUT:
            ewake = (events & EPOLLOUT) ? 1 : 0;
            break;
          case 0:
            ewake = 1;
            break;
        }
      }
      ep->WakeOneLocked();
    }
    pwake = ep->poll_wait_.Active();
  }
  // A watchable instance's kernel face becomes readable (watchable.cc).
  if (first_ready && ep->watchable()) ep->SyncMirror();
  // Watchers of this instance (parents, poll()) are woken outside lock_.
  if (pwake) ep->poll_wait_.WakeUp(EPOLLIN, 1);
  if (!(events & EPOLLEXCLUSIVE)) ewake = 1;
  return ewake;
}

void Eventpoll::WakeOneLocked() {
  // The newest waiter that wants a wakeup now: one in its min_wait phase
  // is passed over until maxevents items are ready, so that a batching
  // waiter sleeps through its window instead of waking for every event.
  EpWaiter* w = nullptr;
  for (ListNode* n = waiters_.next; n != &waiters_; n = n->next) {
    EpWaiter* c = UEPOLL_CONTAINER_OF(n, EpWaiter, node);
    if (c->min_ready <= nready_) {
      w = c;
      break;
    }
  }
  if (!w) return;
  if (w->in_kernel) {
    // Asleep in epoll_wait on the kernel half: the kernel picks which of
    // its sleepers the token wakes, and that one takes itself off the list.
    ArmTokenLocked(/*all=*/false);
    return;
  }
  DequeueWaiterLocked(w);  // autoremove: the woken thread sees itself gone
  // Under lock_: the waiter cannot return (and its thread cannot exit)
  // before it has taken lock_ to check its entry.
  w->parker->Unpark();
}

bool Eventpoll::LinkReady(EpItem* epi) {
  bool first_ready, pwake;
  {
    MutexLock l(lock_);
    if (epi->rdllink.linked()) return false;
    first_ready = rdllist_.empty();
    rdllist_.PushBack(&epi->rdllink);
    ++nready_;
    epi->queued.store(true, std::memory_order_relaxed);
    SyncAvail();
    WakeOneLocked();
    pwake = poll_wait_.Active();
  }
  if (first_ready && watchable()) SyncMirror();
  return pwake;
}

int Eventpoll::Insert(EpItem* epi, const epoll_event& ev, File* tfile, int fd) {
  epi->file = tfile;
  epi->wait.aux = static_cast<uint32_t>(fd);
  epi->ep = this;
  epi->ovf_next = kOvfUnactive;
  epi->events.store(ev.events, std::memory_order_relaxed);
  epi->data = ev.data.u64;
  epi->dying = false;
  epi->queued.store(false, std::memory_order_relaxed);
  epi->batch = 0;
  epi->wait.kind = WaitKind::kEpollItem;
  epi->wait.flags = (ev.events & EPOLLEXCLUSIVE) ? WaitEntry::kExclusive : 0;

  Eventpoll* tep = tfile->is_epoll() ? static_cast<Eventpoll*>(tfile) : nullptr;
  {
    // Holding the target's mtx_ keeps a concurrent check walking it from
    // seeing a half-attached item.
    OptionalLock target(tep ? &tep->mtx_ : nullptr);
    {
      MutexLock l(tfile->watch_lock());
      tfile->watchers_.PushBack(&epi->fllink);
      tfile->nwatchers_.fetch_add(1, std::memory_order_release);
    }
    items_.Insert(epi);
  }
  ep_refs_.fetch_add(1, std::memory_order_relaxed);
  Live::Inc(Live::items);
  // Hook first, then poll: an event between the two is not lost.
  tfile->PollQueue().Add(&epi->wait);
  uint32_t revents = ItemPoll(epi, 1);
  if (revents && LinkReady(epi)) poll_wait_.WakeUp(EPOLLIN, 1);
  return 0;
}

int Eventpoll::Modify(EpItem* epi, const epoll_event& ev) {
  epi->data = ev.data.u64;
  // A seq_cst RMW is a full barrier (the kernel's smp_mb here): either a
  // concurrent callback sees the new events, or the poll below sees the
  // readiness that woke it. An RMW rather than a fence: TSan models it.
  // A disabled item may still be marked queued (a ONESHOT item a harvest
  // reported: HarvestItem) though no list holds it; cleared before the
  // events are published, so that a wakeup that sees them (its acquire
  // load in EpItemWake) sees the item unqueued and links it.
  if (!(epi->events.load(std::memory_order_relaxed) & ~kEpPrivateBits)) {
    epi->queued.store(false, std::memory_order_relaxed);
  }
  epi->events.exchange(ev.events, std::memory_order_seq_cst);
  if (epi->file->is_epoll()) ModChildLocked(epi);
  if (ItemPoll(epi, 1) && LinkReady(epi)) poll_wait_.WakeUp(EPOLLIN, 1);
  return 0;
}

bool Eventpoll::RemoveLocked(EpItem* epi, bool force) {
  File* file = epi->file;
  // The file is alive: it cannot finish its last close while this item is
  // still on its watchers list, and we hold mtx_, which its close needs.
  file->PollQueue().Remove(&epi->wait);
  // While the item is on the file's watchers list, the file is alive: a
  // nested child's registration in our kernel half goes first. Once
  // unlinked below, the file's last close may free it at any moment
  // (StressRegressions.close__item_removed_while_a_blocked_call_holds_the_
  // last_reference, under TSan). A dying item the file's release removes
  // later finds its registration gone already.
  if (file->is_epoll()) RemoveChildLocked(epi);
  {
    MutexLock l(file->watch_lock());
    if (epi->dying && !force) return false;
    epi->fllink.Unlink();
    file->nwatchers_.fetch_sub(1, std::memory_order_release);
  }
  items_.Erase(epi);
  {
    MutexLock l(lock_);
    if (epi->rdllink.linked()) {  // no scan runs: it is on rdllist_
      epi->rdllink.Unlink();
      --nready_;
      epi->queued.store(false, std::memory_order_relaxed);
      SyncAvail();
    }
    // No scan runs, so it is not on ovflist_ either; a lockless wakeup
    // that comes now finds it gone (EpItemWake).
    epi->ovf_next = kOvfRemoved;
  }
  Live::Dec(Live::items);
  return true;
}

void EpollReleaseFile(File* file) {
  for (;;) {
    EpItem* epi;
    {
      MutexLock l(file->watch_lock());
      if (file->watchers_.empty()) return;
      epi = UEPOLL_CONTAINER_OF(file->watchers_.next, EpItem, fllink);
      // Claim it: the instance's own close and DEL now leave it to us, so
      // the item keeps its instance reference until we are done.
      epi->dying = true;
    }
    Eventpoll* ep = epi->ep;
    {
      // watch_lock_ dropped, mtx_ taken (the lock order): what was decided
      // under watch_lock_ is only the claim, and `dying` keeps it valid -
      // the instance's close and DEL leave a dying item (and its instance
      // reference) to us. RemoveLocked re-takes watch_lock_ to unlink.
      MutexLock m(ep->mtx_);
      ep->RemoveLocked(epi, /*force=*/true);
    }
    // The last reference of the file is gone: no borrow of it remains,
    // so no lockless wakeup can be in the item.
    FreeItem(epi);
    ep->Put();
  }
}

void Eventpoll::Release() {
  // The kernel half was closed with the instance's last number.
  EpItem* to_free = nullptr;
  int puts = 0;
  {
    MutexLock m(mtx_);
    // Unhook every item first so that no callback is running or will run.
    items_.ForEach(
        [](EpItem* epi) { epi->file->PollQueue().Remove(&epi->wait); });
    items_.ForEach([&](EpItem* epi) {
      mtx_.AssertHeld();  // the analysis does not see into the lambda
      if (RemoveLocked(epi, false)) {
        epi->hash_next = to_free;  // reuse the link for the free list
        to_free = epi;
        ++puts;
      }
    });
  }
  while (to_free) {
    EpItem* next = to_free->hash_next;
    FreeRemovedItem(to_free);
    to_free = next;
  }
  for (int i = 0; i < puts; ++i) Put();
  Put();  // the file's reference
}

// Unchecked: NestingLock() is taken only on the full-check path (released at
// unlock_nested under the same condition), and the table sizes are peeked at
// without mtx_ before allocating.
int Eventpoll::Ctl(int op, File* tfile, int fd,
                   epoll_event ev) NO_THREAD_SAFETY_ANALYSIS {
  if (op == UEPOLL_EPOLL_CTL_MIN_WAIT) {
    // The patch stored data in an unsigned int of microseconds and returned
    // the old value; no lock, as there: the word is independent of the rest.
    uint64_t ns = uint64_t{static_cast<uint32_t>(ev.data.u64)} * 1000;
    uint64_t old_us =
        min_wait_ns_.exchange(ns, std::memory_order_relaxed) / 1000;
    return old_us > uint64_t{INT_MAX} ? INT_MAX : static_cast<int>(old_us);
  }
  // Allocate outside the locks, so that no thread waits for mtx_ while the
  // holder is in the allocator: the item for ADD, and a bigger bucket array
  // if the table looks like it will need one.
  EpItem* prepped = op == EPOLL_CTL_ADD ? TakeItem() : nullptr;
  EpItem** buckets = nullptr;
  size_t nbuckets = 0;
  ChildTable::Slot* child_slots = nullptr;
  uint32_t nchild_slots = 0;
  if (op == EPOLL_CTL_ADD) {
    nbuckets = items_.WantBuckets();  // a racy peek, checked under mtx_
    if (nbuckets) buckets = NewArray<EpItem*>(nbuckets);
    if (tfile->is_epoll()) {
      nchild_slots = children_.WantCapacity();  // the same kind of peek
      if (nchild_slots) {
        child_slots = NewArray<ChildTable::Slot>(nchild_slots);
      }
    }
  }

  bool full_check = false;
  NestingCheck* check = nullptr;
  alignas(NestingCheck) unsigned char check_storage[sizeof(NestingCheck)];
  int error = 0;
  EpItem* to_free = nullptr;
  EpItem** old_buckets = nullptr;
  Eventpoll* nested_child = nullptr;

  mtx_.Lock();
  if (op == EPOLL_CTL_ADD &&
      (watched() || gen_.load(std::memory_order_acquire) == LoopCheckGen() ||
       tfile->is_epoll())) {
    mtx_.Unlock();
    NestingLock().Lock();
    full_check = true;
    check = new (check_storage) NestingCheck();
    if (tfile->is_epoll() &&
        check->CreatesLoop(this, static_cast<Eventpoll*>(tfile))) {
      error = -ELOOP;
      goto unlock_nested;
    }
    if (check->out_of_memory()) {
      error = -ENOMEM;
      goto unlock_nested;
    }
    mtx_.Lock();
    // Relock: the only decision taken under the first hold was "do the
    // full check", and doing it when no longer needed is merely slower
    // (ep_ctl does the same). The item lookup, the table growth and the
    // path check all run under the re-taken mtx_.
  }

  {
    EpItem* epi = items_.Find(tfile, fd);
    switch (op) {
      case EPOLL_CTL_ADD:
        if (epi) {
          error = -EEXIST;
          break;
        }
        if (!prepped) {
          error = -ENOMEM;
          break;
        }
        if (items_.WantBuckets()) {
          if (items_.WantBuckets() != nbuckets) {
            // A concurrent ADD changed the table since the peek: the one
            // allocation under the lock, on a rare race.
            DeleteArray(buckets);
            nbuckets = items_.WantBuckets();
            buckets = NewArray<EpItem*>(nbuckets);
          }
          if (!buckets) {
            error = -ENOMEM;
            break;
          }
          old_buckets = items_.Grow(buckets, nbuckets);
          buckets = nullptr;
        }
        if (tfile->is_epoll()) {
          // Room for the child's cookie, allocated before the lock.
          child_slots = children_.Grow(child_slots, nchild_slots);
        }
        ev.events |= EPOLLERR | EPOLLHUP;
        error = Insert(prepped, ev, tfile, fd);
        if (!error && full_check) {
          if (!tfile->is_epoll()) check->AddFile(tfile);
          bool oom = check->out_of_memory();
          if (oom || check->TooManyPaths()) {
            RemoveLocked(prepped, false);
            to_free = prepped;  // freed, and its reference dropped, below
            prepped = nullptr;
            error = oom ? -ENOMEM : -EINVAL;
          }
        }
        if (!error && tfile->is_epoll()) {
          // The child's kernel half into ours: the kernel may refuse the
          // link (a chain through kernel epolls too deep, a loop through
          // them: ELOOP), and then the ADD fails having changed nothing.
          auto* child = static_cast<Eventpoll*>(tfile);
          error = AddChildLocked(prepped, child);
          if (error) {
            RemoveLocked(prepped, false);
            to_free = prepped;
            prepped = nullptr;
          } else {
            nested_child = child;
          }
        }
        if (!error) prepped = nullptr;
        break;
      case EPOLL_CTL_DEL:
        if (!epi) {
          error = -ENOENT;
        } else if (RemoveLocked(epi, false)) {
          to_free = epi;
        }
        break;
      case EPOLL_CTL_MOD:
        if (!epi) {
          error = -ENOENT;
        } else if (epi->events.load(std::memory_order_relaxed) &
                   EPOLLEXCLUSIVE) {
          error = -EINVAL;
        } else {
          ev.events |= EPOLLERR | EPOLLHUP;
          error = Modify(epi, ev);
        }
        break;
      default:
        error = -EINVAL;
    }
  }
  mtx_.Unlock();
  if (nested_child) {
    // Its kernel events reach our waiters through our kernel half, so
    // they must sleep on it; and its own waiters, now watched, must not
    // sleep there with tokens our kernel half would see.
    if (nested_child->kernel_fds_.load(std::memory_order_seq_cst)) {
      BecomeMixed(/*kernel_fds=*/true);
    }
    nested_child->WakeAllToResleep();
  }

unlock_nested:
  File** check_files = nullptr;
  size_t ncheck_files = 0;
  if (full_check) {
    check_files = check->TakeFiles(&ncheck_files);
    check->~NestingCheck();
    NestingLock().Unlock();
  }
  // Free and drop references only now, outside every lock: the last
  // reference of a file the check collected may release it here.
  for (size_t i = 0; i < ncheck_files; ++i) check_files[i]->Unref();
  DeleteArray(check_files);
  ReturnUnusedItem(prepped);
  DeleteArray(buckets);
  DeleteArray(old_buckets);
  DeleteArray(child_slots);
  if (to_free) {
    FreeRemovedItem(to_free);
    Put();
  }
  return error;
}

int EpollCreate(int flags) {
  if (flags & ~EPOLL_CLOEXEC) return -EINVAL;
  auto* ep = new (std::nothrow) Eventpoll(flags);
  if (!ep) return -ENOMEM;
  FdTable& t = FdTable::Get();
  // After the table's own atfork handler (registered when it was made), so
  // that in a fork child the table is settled when instances rebuild.
  static const int atfork [[maybe_unused]] =
      pthread_atfork(nullptr, nullptr, &Eventpoll::ForkChild);
  // In the kernel numbering the new number's kernel file is the instance's
  // kernel half (OpenKernelFile).
  int fd = t.Install(ep, flags & EPOLL_CLOEXEC);
  if (fd < 0) {
    ep->Unref();
  } else {
    ep->NumberAdded(fd, -1);
  }
  return fd;
}

int EpollMakeWatchable(int epfd) {
  FileBorrow f = FdTable::Get().Borrow(epfd);
  if (!f) return -EBADF;
  if (!f->is_epoll()) return -EINVAL;
  return static_cast<Eventpoll*>(f.get())->MakeWatchable();
}

}  // namespace uepoll::impl
