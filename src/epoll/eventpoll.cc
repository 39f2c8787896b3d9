// Eventpoll: registrations (ctl), the wakeup callback, and lifetimes.
// Scans, harvests and waits are in wait.cc; nesting checks in nesting.cc.
#include "epoll/eventpoll.h"

#include <errno.h>
#include <limits.h>
#include <sys/eventfd.h>

#include <new>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "core/fd_table.h"
#include "epoll/nesting.h"
#include "kernel/bridge.h"

namespace uepoll::impl {
namespace {

// The only bits EPOLLEXCLUSIVE may come with (EPOLLEXCLUSIVE_OK_BITS).
constexpr uint32_t kExclusiveOkBits = EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP |
                                      EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;

EpItem* AllocItem() { return New<EpItem>(); }
void FreeItem(EpItem* epi) { Delete(epi); }

}  // namespace

Eventpoll::Eventpoll(int flags) : File(FileKind::kEpoll, O_RDWR) {
  (void)flags;
  Live::Inc(Live::instances);
}

Eventpoll::~Eventpoll() { Live::Dec(Live::instances); }

void Eventpoll::Put() {
  // acq_rel: the last Put sees every write made under the references.
  if (ep_refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

// The wakeup callback of an item (ep_poll_callback). Runs under the watched
// file's queue lock. Returns whether it consumed an exclusive wakeup.
int EpItemWake(WaitEntry* wait, uint32_t key) {
  EpItem* epi = UEPOLL_CONTAINER_OF(wait, EpItem, wait);
  Eventpoll* ep = epi->ep;
  uint32_t events = epi->events.load(std::memory_order_relaxed);
  // A disabled ONESHOT item, or a hint that names nothing we want: no need
  // for lock_ (a MOD racing with this re-polls after publishing events).
  if (!(events & ~kEpPrivateBits)) return 0;
  if (key && !(key & events)) return 0;
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
  epi->wait.kind = WaitKind::kEpollItem;
  epi->wait.flags = (ev.events & EPOLLEXCLUSIVE) ? WaitEntry::kExclusive : 0;

  Eventpoll* tep = tfile->is_epoll() ? static_cast<Eventpoll*>(tfile) : nullptr;
  {
    // Holding the target's mtx_ keeps a concurrent check walking it from
    // seeing a half-attached item.
    OptionalLock target(tep ? &tep->mtx_ : nullptr);
    {
      MutexLock l(tfile->watch_lock_);
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
  epi->events.exchange(ev.events, std::memory_order_seq_cst);
  if (ItemPoll(epi, 1) && LinkReady(epi)) poll_wait_.WakeUp(EPOLLIN, 1);
  return 0;
}

bool Eventpoll::RemoveLocked(EpItem* epi, bool force) {
  File* file = epi->file;
  // The file is alive: it cannot finish its last close while this item is
  // still on its watchers list, and we hold mtx_, which its close needs.
  file->PollQueue().Remove(&epi->wait);
  {
    MutexLock l(file->watch_lock_);
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
  }
  Live::Dec(Live::items);
  return true;
}

void EpollReleaseFile(File* file) {
  for (;;) {
    EpItem* epi;
    {
      MutexLock l(file->watch_lock_);
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
    FreeItem(epi);
    ep->Put();
  }
}

void Eventpoll::Release() NO_THREAD_SAFETY_ANALYSIS {
  // No ready() hook of ours runs after this (kernel/bridge.h). The kernel
  // epoll itself was closed with the instance's last number.
  int h = bridge_handle_.load(std::memory_order_relaxed);
  if (h >= 0) Bridge::Unregister(h);
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
    FreeItem(to_free);
    to_free = next;
  }
  for (int i = 0; i < puts; ++i) Put();
  Put();  // the file's reference
}

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
  EpItem* prepped = op == EPOLL_CTL_ADD ? AllocItem() : nullptr;
  EpItem** buckets = nullptr;
  size_t nbuckets = 0;
  if (op == EPOLL_CTL_ADD) {
    nbuckets = items_.WantBuckets();  // a racy peek, checked under mtx_
    if (nbuckets) buckets = NewArray<EpItem*>(nbuckets);
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
        if (!error) {
          prepped = nullptr;
          // Still under NestingLock(): a child's kernel half reaches this
          // instance through the bridge (kernel_half.cc).
          if (tfile->is_epoll()) nested_child = static_cast<Eventpoll*>(tfile);
        }
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
  if (nested_child) NestedAdded(nested_child);

unlock_nested:
  if (full_check) {
    check->~NestingCheck();
    NestingLock().Unlock();
  }
  // Free and drop references only now, outside every lock.
  FreeItem(prepped);
  DeleteArray(buckets);
  DeleteArray(old_buckets);
  if (to_free) {
    FreeItem(to_free);
    Put();
  }
  return error;
}

int EpollCreate(int flags) {
  if (flags & ~EPOLL_CLOEXEC) return -EINVAL;
  auto* ep = new (std::nothrow) Eventpoll(flags);
  if (!ep) return -ENOMEM;
  int fd = FdTable::Get().Install(ep, flags & EPOLL_CLOEXEC);
  if (fd < 0) ep->Unref();
  return fd;
}

int EpollMakeWatchable(int epfd) {
  FileBorrow f = FdTable::Get().Borrow(epfd);
  if (!f) return -EBADF;
  if (!f->is_epoll()) return -EINVAL;
  return static_cast<Eventpoll*>(f.get())->MakeWatchable(epfd);
}

int EpollCtl(int epfd, int op, int fd, const epoll_event* event) {
  FdTable& t = FdTable::Get();
  // Borrows: ctl never sleeps but on mutexes, so closers wait briefly.
  FileBorrow f = t.Borrow(epfd);
  if (!f) {
    // A kernel epfd: the kernel's call, unless the target is uepoll's,
    // which no kernel instance can watch (its kernel file is a placeholder,
    // or the kernel half of an instance, which alone would misreport it).
    if (t.IsOpen(fd)) {
      // A watchable instance's number is a kernel epoll that reports
      // exactly its readiness (watchable.cc): the kernel's call.
      FileRef tf = t.Lookup(fd);
      if (tf && tf->is_epoll() &&
          static_cast<Eventpoll*>(tf.get())->watchable()) {
        return kNotUepoll;
      }
      if (op != EPOLL_CTL_DEL && !event) return -EFAULT;
      // The kernel's checks before that: epfd is open (EBADF) and a file
      // the kernel could use as an instance: not a placeholder (O_PATH: the
      // kernel's fdget refuses it), not a uepoll number in the middle of
      // its close; then it is an instance (EINVAL), which a DEL of a fresh
      // eventfd answers without changing anything (ENOENT from an
      // instance).
      int fl = sys::Fcntl(epfd, F_GETFL, 0);
      if (fl < 0 || (fl & O_PATH) || t.Changing(epfd)) return -EBADF;
      int probe = sys::Eventfd(0, EFD_CLOEXEC);
      if (probe < 0) return -EPERM;
      int r =
          sys::EpollCtl(epfd, EPOLL_CTL_DEL, probe, nullptr) == 0 ? 0 : -errno;
      sys::Close(probe);
      return r == -EBADF || r == -EINVAL ? r : -EPERM;
    }
    return kNotUepoll;
  }
  epoll_event ev{};
  if (op != EPOLL_CTL_DEL) {
    if (!event) return -EFAULT;
    ev = *event;
  }
  // The min_wait patch's op checks the instance only: fd is not looked up.
  if (op == UEPOLL_EPOLL_CTL_MIN_WAIT) {
    if (!f->is_epoll()) return -EINVAL;
    return static_cast<Eventpoll*>(f.get())->Ctl(op, nullptr, fd, ev);
  }
  FileBorrow tf = t.Borrow(fd);
  if (!tf) {
    // A kernel descriptor: into an instance's kernel half.
    if (f->is_epoll()) {
      return static_cast<Eventpoll*>(f.get())->CtlKernel(
          epfd, op, fd, op == EPOLL_CTL_DEL ? nullptr : &ev);
    }
    // Not an instance: the kernel checks the target first (EBADF, EPERM).
    if (sys::Fcntl(fd, F_GETFD, 0) < 0) return -EBADF;
    int r = -EINVAL;
    epoll_event probe = ev;
    int tmp = sys::EpollCreate1(EPOLL_CLOEXEC);
    if (tmp >= 0) {
      if (sys::EpollCtl(tmp, EPOLL_CTL_ADD, fd, &probe) != 0 &&
          (errno == EBADF || errno == EPERM)) {
        r = -errno;
      }
      sys::Close(tmp);
    }
    return r;
  }
  // Every uepoll object can be polled, so the kernel's EPERM never arises.
  if (f.get() == tf.get() || !f->is_epoll()) return -EINVAL;
  if (op != EPOLL_CTL_DEL && (ev.events & EPOLLEXCLUSIVE)) {
    if (op == EPOLL_CTL_MOD) return -EINVAL;
    if (op == EPOLL_CTL_ADD &&
        (tf->is_epoll() || (ev.events & ~kExclusiveOkBits))) {
      return -EINVAL;
    }
  }
  return static_cast<Eventpoll*>(f.get())->Ctl(op, tf.get(), fd, ev);
}

}  // namespace uepoll::impl
