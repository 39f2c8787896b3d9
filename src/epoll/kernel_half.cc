// The kernel half of an epoll instance: the kernel descriptors it watches.
//
// An instance that is given a kernel descriptor (epoll_ctl ADD of a number
// that is not uepoll's) creates a kernel epoll instance and makes it the
// kernel file of each of its own numbers, in place of their placeholders
// (kernel/placeholder.h). From then on:
//  - ctl of a kernel descriptor is the kernel's own epoll_ctl on that
//    number, with the kernel's semantics and errno order for it (EPERM for
//    regular files, LT/ET/ONESHOT/EXCLUSIVE/RDHUP, the item vanishing when
//    the kernel file's last reference is closed, loops through kernel epoll
//    instances). The user's epoll_data is stored as given: nothing to
//    translate, nothing to leak when the application closes a kernel
//    descriptor without DEL.
//  - the kernel epoll lives exactly as long as the instance's numbers do:
//    closing the last one closes it, and a dup of the instance copies it
//    (NumberAdded), so the kernel descriptors move with the instance.
//  - a harvest serves the two halves alternately (kernel_first_), so that
//    with small maxevents neither starves the other.
//  - a waiter sleeps on the kernel epoll as well as on its parker
//    (SleepSet); a waiter of an instance above sleeps on the bridge
//    (kernel/bridge.h), through which the kernel half's events reach the
//    instance's uepoll watchers.
// An instance that never holds a kernel descriptor pays nothing of this:
// mixed_ is false, read once per wait.
//
// Locking: MakeMixed runs under mtx_ (so one thread makes the half); the
// bridge registration and kernel_below_ under NestingLock(), like the other
// nesting bookkeeping.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>

#include "base/sys.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "epoll/nesting.h"
#include "kernel/bridge.h"

namespace uepoll::impl {
namespace {

// The errno an empty kernel epoll instance gives op on fd: what a non-ADD
// op on a kernel descriptor answers while the instance has no kernel half
// (EBADF, EPERM, EINVAL or ENOENT, in the kernel's order).
int EmptyKernelAnswer(int op, int fd, epoll_event* ev) {
  // Closed: EBADF, before the probe below could take fd's number.
  if (sys::Fcntl(fd, F_GETFD, 0) < 0) return -EBADF;
  int tmp = sys::EpollCreate1(EPOLL_CLOEXEC);
  if (tmp < 0) return -errno;
  int r = sys::EpollCtl(tmp, op, fd, ev) == 0 ? 0 : -errno;
  sys::Close(tmp);
  return r;
}

}  // namespace

int Eventpoll::MakeMixed(int epfd) {
  int kep = sys::EpollCreate1(EPOLL_CLOEXEC);
  if (kep < 0) return -errno;
  FdTable& t = FdTable::Get();
  int r = t.SetKernelFile(epfd, this, kep);
  if (r < 0) {
    sys::Close(kep);
    return r;
  }
  // seq_cst: against a concurrent dup of this instance (File::
  // set_many_numbers, then NumberAdded's load of mixed_): either the scan
  // below finds the new number or NumberAdded sees mixed_. Set before
  // knum_, so that a close of epfd from here on swaps knum_ out.
  mixed_.store(true, std::memory_order_seq_cst);
  AdoptNumber(epfd);
  if (maybe_many_numbers()) {
    t.ForEachNumberOf(this, [&](int n) {
      if (n != epfd && t.SetKernelFile(n, this, kep) == 0) AdoptNumber(n);
    });
  }
  sys::Close(kep);
  return 0;
}

void Eventpoll::AdoptNumber(int fd) {
  MutexLock l(kmu_);
  // Holds() under kmu_: a close of fd that cleared the slot before this
  // check is seen here; one after it finds knum_ == fd in NumberRemoved.
  if (knum_.load(std::memory_order_relaxed) < 0 &&
      FdTable::Get().Holds(fd, this)) {
    knum_.store(fd, std::memory_order_seq_cst);
  }
}

void Eventpoll::NumberAdded(int newfd, int oldfd) {
  (void)oldfd;
  if (!mixed_.load(std::memory_order_seq_cst)) return;
  // The new number copied oldfd's kernel file, which may still have been a
  // placeholder if the kernel half was made meanwhile: give it the kernel
  // epoll. Through a private copy, made while knum_ is pinned and used
  // after: SetKernelFile holds newfd busy, and a close of newfd waits for
  // pinned operations while holding it.
  int copy = KernelOp(
      [](int k) { return k < 0 ? -1 : sys::Fcntl(k, F_DUPFD_CLOEXEC, 0); });
  if (copy < 0) return;
  if (FdTable::Get().SetKernelFile(newfd, this, copy) == 0) {
    AdoptNumber(newfd);
  }
  sys::Close(copy);
}

int Eventpoll::OtherKernelNumber(int fd) {
  int other = -1;
  if (maybe_many_numbers()) {
    FdTable::Get().ForEachNumberOf(this, [&](int n) {
      // A number the application closed with libc close() maps to this
      // instance still (an orphan) but holds no kernel file: skip it.
      if (n != fd && other < 0 && sys::Fcntl(n, F_GETFD, 0) >= 0) other = n;
    });
  }
  return other;
}

void Eventpoll::NumberRemoved(int fd) {
  if (!mixed_.load(std::memory_order_seq_cst)) return;
  bool last = false;
  {
    MutexLock l(kmu_);
    if (knum_.load(std::memory_order_relaxed) != fd) return;
    // seq_cst, against KernelOp's increment of kops_ then load of knum_.
    int other = OtherKernelNumber(fd);
    knum_.store(other, std::memory_order_seq_cst);
    last = other < 0;
  }
  // The last number: the kernel epoll closes with it, and with it the only
  // way to check that the mirror's number is still ours.
  if (last) DropMirror(fd);
  // Operations that read the old number finish before it is closed.
  for (int spins = 0; kops_.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (spins < 64) {
      CpuRelax();
    } else {
      sched_yield();
    }
  }
}

void Eventpoll::KernelNumberLost(int fd) {
  int saved = errno;  // OtherKernelNumber's probes may fail
  // knum_ was closed behind uepoll's back (libc close() of an instance
  // number): the kernel half lives on only through another number, if
  // any. Without this, every operation would fail on the dead number and
  // every sleep would end at once on its POLLNVAL (a spinning wait).
  MutexLock l(kmu_);
  if (knum_.load(std::memory_order_relaxed) != fd) return;
  // seq_cst, against KernelOp's increment of kops_ then load of knum_. No
  // wait for operations in flight: the number holds nothing of ours.
  knum_.store(OtherKernelNumber(fd), std::memory_order_seq_cst);
  errno = saved;
}

int Eventpoll::CtlKernel(int epfd, int op, int fd, epoll_event* ev) {
  if (FdTable::Get().mode() == FdMode::kDisjoint) {
    // No number of this instance can hold a kernel epoll (semantics.md).
    return sys::Fcntl(fd, F_GETFD, 0) < 0 ? -EBADF : -EPERM;
  }
  if (!mixed_.load(std::memory_order_acquire)) {
    if (op != EPOLL_CTL_ADD) return EmptyKernelAnswer(op, fd, ev);
    // MakeMixed holds the instance's numbers busy while it changes their
    // kernel files, and a close of such a number waits for the borrows of
    // the instance: ours must be references by then, or the two would wait
    // for each other.
    PinBorrowed();
    bool made = false;
    {
      MutexLock m(mtx_);
      if (!mixed_.load(std::memory_order_relaxed)) {
        int r = MakeMixed(epfd);
        if (r < 0) return r;
        made = true;
      }
    }
    // Waiters asleep without the kernel half in their sleep set.
    if (made) WakeAllToResleep();
  }
  int r;
  int saved = errno;  // the C API writes errno only on failure
  for (int attempt = 0;; ++attempt) {
    int lost = -1;
    r = KernelOp([&](int k) {
      if (k < 0) return -EBADF;  // every number of the instance is closing
      if (sys::EpollCtl(k, op, fd, ev) == 0) return 0;
      int err = errno;
      if (err == EBADF && sys::Fcntl(k, F_GETFD, 0) < 0) lost = k;
      return -err;
    });
    if (lost < 0 || attempt > 0) break;
    KernelNumberLost(lost);
  }
  errno = saved;
  if (r == 0 && op == EPOLL_CTL_ADD && watched() &&
      bridge_handle_.load(std::memory_order_relaxed) < 0) {
    MutexLock n(NestingLock());
    BridgeUp();
  }
  return r;
}

void Eventpoll::BridgeUp() {
  RegisterWithBridge();
  // Every instance watching this one: its waiters must hear of this kernel
  // half through the bridge.
  MutexLock l(watch_lock_);
  for (ListNode* n = watchers_.next; n != &watchers_; n = n->next) {
    UEPOLL_CONTAINER_OF(n, EpItem, fllink)->ep->MarkKernelBelow();
  }
}

void Eventpoll::MarkKernelBelow() {
  if (kernel_below_.load(std::memory_order_relaxed)) return;
  kernel_below_.store(true, std::memory_order_release);
  WakeAllToResleep();
  MutexLock l(watch_lock_);
  for (ListNode* n = watchers_.next; n != &watchers_; n = n->next) {
    UEPOLL_CONTAINER_OF(n, EpItem, fllink)->ep->MarkKernelBelow();
  }
}

void Eventpoll::NestedAdded(Eventpoll* child) {
  bool child_mixed = child->mixed_.load(std::memory_order_acquire);
  if (!child_mixed && !child->kernel_below_.load(std::memory_order_acquire)) {
    return;
  }
  // The child's half is registered once; this instance and those above
  // hear of it (and of anything below the child) through the bridge.
  if (child_mixed) child->RegisterWithBridge();
  MarkKernelBelow();
}

void Eventpoll::RegisterWithBridge() {
  if (bridge_handle_.load(std::memory_order_relaxed) >= 0) return;
  int h = KernelOp([&](int k) {
    return k < 0 ? -EBADF : Bridge::Register(k, BridgeReady, this);
  });
  if (h >= 0) bridge_handle_.store(h, std::memory_order_relaxed);
}

void Eventpoll::BridgeReady(void* self) {
  // A new event in the kernel half: the same edge a uepoll source gives
  // its watchers (parents' items, poll()).
  static_cast<Eventpoll*>(self)->poll_wait_.WakeUp(EPOLLIN, 1);
}

void Eventpoll::WakeAllToResleep() {
  {
    MutexLock l(lock_);
    while (!waiters_.empty()) {
      EpWaiter* w = UEPOLL_CONTAINER_OF(waiters_.next, EpWaiter, node);
      DequeueWaiterLocked(w);
      w->parker->Unpark();
    }
  }
  if (poll_wait_.Active()) poll_wait_.WakeUp(0, 1);
}

int Eventpoll::KernelSleepFds(int out[2]) {
  int n = 0;
  if (mixed_.load(std::memory_order_acquire)) {
    out[n++] = knum_.load(std::memory_order_relaxed);
  }
  if (kernel_below_.load(std::memory_order_acquire)) {
    int g = Bridge::Fd();
    if (g >= 0) out[n++] = g;
  }
  return n;
}

nfds_t Eventpoll::SleepSet(pollfd kfds[3]) const {
  nfds_t n = 1;
  int fds[2];
  int k = const_cast<Eventpoll*>(this)->KernelSleepFds(fds);
  for (int i = 0; i < k; ++i) {
    kfds[n].fd = fds[i];
    kfds[n].events = POLLIN;
    kfds[n].revents = 0;
    ++n;
  }
  return n;
}

bool Eventpoll::KernelReady() {
  int saved = errno;
  for (int attempt = 0;; ++attempt) {
    int lost = -1;
    int r = KernelOp([&](int k) {
      if (k < 0) return 0;
      pollfd p{k, POLLIN, 0};
      timespec zero{0, 0};
      if (sys::Ppoll(&p, 1, &zero, nullptr) <= 0) return 0;
      if (p.revents & POLLNVAL) lost = k;
      return (p.revents & POLLIN) ? 1 : 0;
    });
    if (lost < 0 || attempt > 0) {
      errno = saved;
      return r;
    }
    KernelNumberLost(lost);
  }
}

int Eventpoll::SendKernelEvents(epoll_event* events, int maxevents) {
  int saved = errno;
  for (int attempt = 0;; ++attempt) {
    int lost = -1;
    int r = KernelOp([&](int k) {
      if (k < 0) return 0;
      timespec zero{0, 0};
      int n = sys::EpollPwait2(k, events, maxevents, &zero, nullptr);
      if (n > 0 && watchable()) {
        // The mirror is not an event of the application's (watchable.cc).
        int kept = 0;
        for (int i = 0; i < n; ++i) {
          if (!IsMirrorEvent(events[i])) events[kept++] = events[i];
        }
        n = kept;
      }
      if (n >= 0) return n;
      // EFAULT as the kernel gives it (an event to copy, no buffer);
      // anything else means the number no longer holds the kernel half
      // (the application closed it with libc close()).
      if (errno == EFAULT) return -EFAULT;
      lost = k;
      return 0;
    });
    if (lost < 0 || attempt > 0) {
      errno = saved;
      return r;
    }
    KernelNumberLost(lost);
  }
}

int Eventpoll::SendEvents(epoll_event* events, int maxevents) {
  if (!mixed_.load(std::memory_order_acquire)) {
    return SendUepollEvents(events, maxevents);
  }
  bool kernel_first;
  {
    MutexLock m(mtx_);
    kernel_first = kernel_first_;
    kernel_first_ = !kernel_first_;
  }
  int first = kernel_first ? SendKernelEvents(events, maxevents)
                           : SendUepollEvents(events, maxevents);
  int n = first > 0 ? first : 0;
  if (n == maxevents) return n;
  epoll_event* rest = events ? events + n : nullptr;
  int second = kernel_first ? SendUepollEvents(rest, maxevents - n)
                            : SendKernelEvents(rest, maxevents - n);
  if (second > 0) return n + second;
  // EFAULT only when nothing was delivered, as the kernel answers.
  if (n == 0 && (first == -EFAULT || second == -EFAULT)) return -EFAULT;
  return n;
}

}  // namespace uepoll::impl
