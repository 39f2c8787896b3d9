// The kernel side of an epoll instance: what the instance does with its
// kernel half (kernel/kernel_half.h). docs/design.md, "The kernel half",
// has the why of each part.
//
//  - The application's kernel descriptors: CtlKernel is the kernel's own
//    epoll_ctl on the kernel half. The first one makes the instance mixed
//    (BecomeMixed): its waiters sleep on the kernel half from then on, and
//    so do those of every instance above it.
//  - Children: a nested ADD registers the child's kernel half in ours,
//    edge-triggered, with a cookie (AddChildLocked). A kernel event below
//    makes ours readable through the kernel's own nesting, so it reaches
//    every kind of waiter above without a uepoll thread's help: our
//    sleepers, a kernel loop watching a watchable instance, poll(). Our
//    harvest turns the cookie into the child item's wakeup (FilterCookies),
//    and the uepoll half then reports the item as any other. The kernel's
//    loop and depth checks see mixed chains (ELOOP, EINVAL).
//  - Harvests (SendKernelEvents): cookies never take the application's
//    slots: when they did, the harvest asks the kernel again for the room
//    they took (the mirror, level-triggered, is re-queued behind the
//    items that were ready with it).
//  - The token: a waiter that sleeps in epoll_wait on the kernel half
//    (SleepsInKernel) is woken for a uepoll event by an EPOLL_CTL_MOD of the
//    process's wake eventfd's registration in the kernel half (wake_fd.h):
//    the kernel then wakes one of its exclusive epoll waiters, which is also
//    what makes EPOLLEXCLUSIVE on a kernel descriptor watched by several
//    instances wake one instance. Not used while the instance is watched by
//    another instance or made watchable: a token would make the kernel half
//    readable to those watchers too.
//  - fork(): the child gives every instance a kernel half of its own
//    (ForkChild), since the inherited one is shared with the parent while
//    the uepoll half is a copy: a child's harvest would take the parent's
//    events and disarm its mirror.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>

#include <algorithm>
#include <span>
#include <vector>

#include "base/fork_path.h"
#include "base/sys.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "epoll/nesting.h"
#include "kernel/probe.h"

namespace uepoll::impl {
namespace {

// How many times a harvest asks the kernel again for the slots cookies
// took. Each round returns at least one application event or a cookie not
// seen before (the mirror at most twice: it is re-queued at the tail), so
// this only bounds a pathological case.
constexpr int kMaxRefills = 8;

}  // namespace

int Eventpoll::OpenKernelFile(int minfd) { return KernelHalf::Create(minfd); }

void Eventpoll::NumberAdded(int newfd, int oldfd) {
  (void)oldfd;
  // The new number's kernel file is a copy of oldfd's, the kernel half.
  khalf_.Adopt(newfd);
}

void Eventpoll::NumberRemoved(int fd) {
  // Its locks may be held by a thread that is not in this fork child.
  if (left_at_fork()) return;
  if (khalf_.IsLastNumber(fd)) {
    // Sleepers in the kernel half keep it while they sleep, but with no
    // number left no token can reach them: they wake now, through the
    // number that still works, and sleep again on their parkers (D18).
    MutexLock l(lock_);
    if (nkernel_sleepers_ > 0) ArmTokenLocked(/*all=*/true);
  }
  // The last number: the kernel half closes with it, and with it the only
  // way to check that the mirror's number is still ours.
  if (khalf_.NumberRemoved(fd)) mirror_.Drop(fd);
}

void Eventpoll::NumberRestored(int fd) {
  khalf_.Adopt(fd);
  if (watchable() && !mirror_.made() && mirror_.Make(khalf_) == 0) {
    SyncMirror();
  }
}

int Eventpoll::DupKernelFileForFlight() { return khalf_.DupForFlight(); }

int Eventpoll::KernelSleepFds(int out[2]) {
  if (!mixed_.load(std::memory_order_acquire)) return 0;
  // A sleep in poll() on the epoll is no operation of the kernel half's:
  // a fork child's copy of the parent's registrations is made first. A
  // guard: the poll of the instance before any sleep asks the kernel half
  // (KernelReady), an operation, which has made it already (without this
  // call,
  // BridgeCorners.ForkedChildPollSeesTheInheritedKernelDescriptors
  // passes).
  khalf_.CopyInheritedFirst();
  int k = khalf_.number();
  if (k < 0) return 0;
  out[0] = k;
  return 1;
}

nfds_t Eventpoll::SleepSet(pollfd kfds[2]) const {
  int fds[2];
  int k = const_cast<Eventpoll*>(this)->KernelSleepFds(fds);
  if (k == 0) return 1;
  kfds[1].fd = fds[0];
  kfds[1].events = POLLIN;
  kfds[1].revents = 0;
  return 2;
}

void Eventpoll::AfterKernelSleep(const pollfd* kfds, nfds_t nk) {
  // Our kernel half's number reported closed: the application closed it
  // with libc close(). Sleeping on it again would end at once, every time.
  if (nk > 1 && (kfds[1].revents & POLLNVAL)) KernelNumberLost(kfds[1].fd);
}

bool Eventpoll::SleepsInKernel(bool masked) const {
  // A wait with a signal mask sleeps in epoll_pwait on the kernel half too,
  // which installs the mask atomically as the kernel's epoll_pwait does (a
  // plain wait sleeps on its futex, where the timer keeper can sleep: a
  // kernel epoll's timeout has a slack of 0.1% of its length). Only with a
  // wake eventfd to arm tokens with (D7 otherwise).
  return (mixed_.load(std::memory_order_acquire) || masked) && !watchable() &&
         !watched() && khalf_.number() >= 0 && WakeFd::Get().fd >= 0;
}

int Eventpoll::CtlKernel(int op, int fd, epoll_event* ev) {
  if (FdTable::Get().mode() == FdMode::kDisjoint) {
    // No number of this instance can hold a kernel epoll (semantics.md D5).
    return ClosedOr(fd, -EPERM);
  }
  int r = khalf_.Ctl(op, fd, ev);
  if (r == 0 && op == EPOLL_CTL_ADD &&
      !kernel_fds_.load(std::memory_order_acquire)) {
    BecomeMixed(/*kernel_fds=*/true);
  }
  return r;
}

void Eventpoll::BecomeMixed(bool kernel_fds) {
  bool was_mixed = mixed_.exchange(true, std::memory_order_seq_cst);
  // Waiters asleep on their futex: from now on they sleep on the kernel
  // half.
  if (!was_mixed) WakeAllToResleep();
  if (!kernel_fds || kernel_fds_.load(std::memory_order_acquire)) return;
  // Set before the walk: a nested ADD of this instance into a new parent
  // links its item under our watch_lock_ and then reads kernel_fds_ (Ctl),
  // so either the walk below sees the parent or the parent sees the flag.
  kernel_fds_.store(true, std::memory_order_seq_cst);
  MutexLock l(watch_lock());
  for (ListNode* n = watchers_.next; n != &watchers_; n = n->next) {
    EpItem* epi = UEPOLL_CONTAINER_OF(n, EpItem, fllink);
    epi->ep->BecomeMixed(true);
  }
}

void Eventpoll::WakeAllToResleep() {
  {
    MutexLock l(lock_);
    for (ListNode* n = waiters_.next; n != &waiters_;) {
      EpWaiter* w = UEPOLL_CONTAINER_OF(n, EpWaiter, node);
      n = n->next;
      if (w->in_kernel) continue;  // woken below, all of them
      DequeueWaiterLocked(w);
      w->parker->Unpark();
    }
    if (nkernel_sleepers_ > 0) ArmTokenLocked(/*all=*/true);
  }
  if (poll_wait_.Active()) poll_wait_.WakeUp(kResleepKey, 1);
}

void Eventpoll::ArmTokenLocked(bool all) {
  if (token_pending_ && (token_all_ || !all)) return;  // the hand-off covers
  uint32_t events = all ? uint32_t{EPOLLIN} : uint32_t{EPOLLIN | EPOLLET};
  uint64_t cookie = khalf_.Cookie(KernelHalf::kTokenIndex);
  for (int attempt = 0; attempt < 2; ++attempt) {
    WakeFd::Handle h = WakeFd::Get();
    if (h.fd < 0)
      return;  // out of descriptors: sleepers end at their
               // deadline or a signal (semantics.md D7)
    int r;
    if (h.fd == token_fd_.fd && h.gen == token_fd_.gen) {
      // The MOD proves the number still names our eventfd in this epoll.
      r = khalf_.CtlInternal(EPOLL_CTL_MOD, h.fd, cookie, events);
      if (r < 0) {
        // Closed under us (closefrom) and maybe reused: ENOENT if the
        // number names a pollable file now, EPERM a regular file, EBADF
        // nothing (ParkerDescriptors.closed_and_reused_under_a_thread_are_
        // never_touched). Never touched; a new eventfd is made.
        WakeFd::Lost(h);
        token_fd_ = WakeFd::Handle{};
        continue;
      }
    } else {
      // Made by WakeFd::Get() for this generation; the application may
      // have closed and reused the number since, and the ADD then
      // registers its file in this kernel epoll, which only ever polls it
      // (a spurious token at worst): nothing of the file is touched.
      r = khalf_.CtlInternal(EPOLL_CTL_ADD, h.fd, cookie, events);
      if (r == 0) token_fd_ = h;
    }
    if (r == 0) {
      token_pending_ = true;
      if (all) token_all_ = true;
    }
    return;
  }
}

void Eventpoll::DefuseTokenLocked() {
  if (!token_pending_) return;
  // Edge-triggered with no events: still linked in the kernel half, but
  // the next scan of it (a poll, a sleeper's epoll_wait) drops it unseen.
  if (token_fd_.fd >= 0) {
    khalf_.CtlInternal(EPOLL_CTL_MOD, token_fd_.fd,
                       khalf_.Cookie(KernelHalf::kTokenIndex), EPOLLET);
  }
  token_pending_ = false;
  token_all_ = false;
}

void Eventpoll::DequeueWaiterLocked(EpWaiter* w) {
  if (!w->node.linked()) return;
  w->node.Unlink();
  nwaiters_.fetch_sub(1, std::memory_order_relaxed);
  if (w->in_kernel && --nkernel_sleepers_ == 0 && token_all_) {
    // The token woke them all; nobody needs it now.
    DefuseTokenLocked();
  }
}

uint32_t Eventpoll::ChildEvents(const EpItem* epi) {
  // The kernel half carries the child's readiness for the item only if
  // the item wants it: an instance reports IN, nothing else.
  uint32_t ev = epi->events.load(std::memory_order_relaxed);
  return (ev & EPOLLIN) ? uint32_t{EPOLLIN | EPOLLET} : uint32_t{EPOLLET};
}

int Eventpoll::AddChildLocked(EpItem* epi, Eventpoll* child) {
  if (FdTable::Get().mode() == FdMode::kDisjoint) return 0;
  // The child's kernel half reaches our waiters only through the kernel:
  // a fork child's copy of its inherited registrations is made first. A
  // guard: the ADD polls the child first (KernelReady, an operation),
  // which has made it already (without this call,
  // BridgeCorners.ForkedChildNestsAnInheritedInstanceFirst passes).
  child->khalf_.CopyInheritedFirst();
  uint32_t idx = children_.Add(epi);
  if (!idx) return -ENOMEM;
  uint64_t cookie = khalf_.Cookie(idx);
  uint32_t events = ChildEvents(epi);
  int ck = ChildNumber(epi);
  int r =
      ck < 0 ? -EBADF : khalf_.CtlInternal(EPOLL_CTL_ADD, ck, cookie, events);
  if (r < 0) children_.Remove(epi);
  return r;
}

int Eventpoll::ChildNumber(const EpItem* epi) {
  // The item's own number, while it still names the child: the kernel
  // keys a registration by file and number, so one instance added under
  // two numbers is two registrations, as it is two items here
  // (DiffFuzzKernelRegressions.nesting__one_instance_under_two_numbers).
  // Every number of an instance holds its kernel half. Once the number is
  // closed (or reused) the registration stays until the child's kernel
  // half or ours is closed, as the item does, and is never touched: a DEL
  // or MOD through a reused number would reach another file.
  int fd = epi->fd();
  return FdTable::Get().Holds(fd, epi->file) ? fd : -1;
}

void Eventpoll::ModChildLocked(EpItem* epi) {
  uint32_t idx = children_.IndexOf(epi);
  if (!idx) return;
  uint64_t cookie = khalf_.Cookie(idx);
  uint32_t events = ChildEvents(epi);
  int ck = ChildNumber(epi);
  if (ck >= 0) khalf_.CtlInternal(EPOLL_CTL_MOD, ck, cookie, events);
}

void Eventpoll::RemoveChildLocked(EpItem* epi) {
  if (!children_.Remove(epi)) return;
  // At the child's last close its kernel half is closed already, and the
  // kernel dropped the registration with it; an event it queued before
  // names a slot whose generation moved on.
  int ck = ChildNumber(epi);
  if (ck >= 0) khalf_.CtlInternal(EPOLL_CTL_DEL, ck, 0, 0);
}

int Eventpoll::FilterCookies(epoll_event* events, int n, KernelHarvest* h) {
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (!khalf_.IsInternal(events[i].data.u64)) {
      if (kept != i) events[kept] = events[i];  // no copy until a cookie
      ++kept;
      continue;
    }
    uint32_t idx = KernelHalf::IndexOf(events[i].data.u64);
    if (idx == KernelHalf::kTokenIndex) {
      h->token = true;
      MutexLock l(lock_);
      // Taken (edge-triggered: the kernel unlinked it). A token for all
      // stays armed until the last sleeper leaves (DequeueWaiterLocked).
      if (!token_all_) token_pending_ = false;
    } else if (idx != KernelHalf::kMirrorIndex) {
      // A child's kernel side had an event: its item here gets the wakeup
      // the child's own queue would have given it. A child whose kernel
      // half never held a kernel descriptor can only have had its mirror
      // or token armed, which its uepoll wakeups already told us.
      MutexLock m(mtx_);
      EpItem* epi = children_.Find(idx);
      if (epi && static_cast<Eventpoll*>(epi->file)->kernel_fds_.load(
                     std::memory_order_acquire)) {
        EpItemWake(&epi->wait, EPOLLIN);
        h->children = true;
      }
    }
  }
  return kept;
}

KernelHarvest Eventpoll::SendKernelEvents(epoll_event* events, int maxevents,
                                          int first) {
  KernelHarvest h;
  timespec zero{0, 0};
  int n = 0;
  int k = first;
  for (int round = 0;; ++round) {
    int room = maxevents - n;
    if (k < 0)
      k = khalf_.Wait(events ? events + n : nullptr, room, &zero, nullptr);
    if (k <= 0) {
      // EFAULT as the kernel gives it (an event to copy, no buffer), and
      // only when nothing was delivered.
      if (k == -EFAULT && n == 0) h.events = -EFAULT;
      break;
    }
    int kept = FilterCookies(events + n, k, &h);
    n += kept;
    // Done unless cookies took slots that more events may be waiting for.
    if (kept == k || k < room || n >= maxevents || round == kMaxRefills) {
      break;
    }
    k = -1;
  }
  if (h.events != -EFAULT) h.events = n;
  // A parent's kernel half queued ours at each of these events (the
  // kernel's nesting: there, our item's wakeup queued the parent's item at
  // once) and drops it at its own harvest if ours is not readable by then.
  // If this harvest left ours unreadable, a wakeup the parent has not
  // harvested yet would be lost: the parent's items get it from us now,
  // as the kernel's got it at the event, and re-poll us as a whole
  // (DiffFuzzKernelRegressions.nesting__child_harvest_keeps_the_parents_
  // wakeup). If ours is still readable, the parent's queued cookie stays
  // valid, and nothing is done.
  if (n > 0 && watched() && poll_wait_.Active() && !khalf_.Ready()) {
    poll_wait_.WakeUp(EPOLLIN, 1);
  }
  return h;
}

bool Eventpoll::KernelReady() {
  {
    MutexLock l(lock_);
    // A token no sleeper took while nothing is left to report would make
    // the kernel half look readable: defuse it, and the poll below drops it.
    if (token_pending_ && !token_all_ && !EventsAvailableLocked()) {
      DefuseTokenLocked();
    }
  }
  return khalf_.Ready();
}

// --- fork ---

UEPOLL_FORK_PATH void Eventpoll::RebuildInChild() {
  // Even in an instance another thread left mid-operation (below): that
  // thread's sleep in the kernel half must not keep a close here waiting.
  khalf_.ForgetOtherThreadsOps();
  // Left as it is: its kernel half stays the shared one, into which no
  // copy of a pending inheritance may go.
  if (left_at_fork() || mtx_.HeldAtFork()) {  // (D12)
    khalf_.DropInheritedInChild();
    return;
  }
  {
    // The inherited token registration is in the old kernel half. Written
    // only where it changes: a write makes the child copy the page.
    if (token_fd_.fd >= 0 || token_fd_.gen != 0) token_fd_ = WakeFd::Handle{};
    if (token_pending_) token_pending_ = false;
    if (token_all_) token_all_ = false;
    if (nkernel_sleepers_ != 0) nkernel_sleepers_ = 0;
  }
  // Only a kernel half that was given kernel descriptors has registrations
  // of the application's to copy; every one gets a fresh epoll.
  khalf_.RebuildInChild(kernel_fds_.load(std::memory_order_relaxed));
}

UEPOLL_FORK_PATH void Eventpoll::ReregisterInChild() {
  if (left_at_fork() || mtx_.HeldAtFork()) return;
  mtx_.AssertHeld();  // free, and only this thread exists
  children_.ForEach([&](EpItem* epi, uint32_t idx) {
    // The child's registrations reach ours only through the kernel: its
    // copy is made now, not at its first operation (AddChildLocked).
    auto* child = static_cast<Eventpoll*>(epi->file);
    if (!child->left_at_fork()) child->khalf_.CopyInheritedFirst();
    uint64_t cookie = khalf_.Cookie(idx);
    uint32_t events = ChildEvents(epi);
    int ck = ChildNumber(epi);
    if (ck >= 0) khalf_.CtlInternal(EPOLL_CTL_ADD, ck, cookie, events);
  });
  mirror_.RemakeInChild(khalf_);
}

UEPOLL_FORK_PATH bool Eventpoll::LockedAtFork() {
  // Loads, not TryLock: a write makes the child copy the instance's page.
  return mtx_.HeldAtFork() || lock_.HeldAtFork() ||
         khalf_.number_lock().HeldAtFork() || watch_lock().HeldAtFork();
}

UEPOLL_FORK_PATH bool Eventpoll::WatchesOneLeftAtFork() {
  // mtx_ is free: LockedAtFork said so, and only this thread exists.
  if (mtx_.HeldAtFork()) return false;
  mtx_.AssertHeld();
  bool any = false;
  children_.ForEach([&](EpItem* epi, uint32_t) {
    if (epi->file->left_at_fork()) any = true;
  });
  return any;
}

UEPOLL_FORK_PATH void Eventpoll::ForkChild() {
  // Only the forking thread exists here, and no application code has run
  // since fork(): every number is still what the parent had at the fork.
  WakeFd::ForkChild();
  FdTable& t = FdTable::Get();
  // The instances, each once. On the stack while they are few: a malloc
  // here writes the arena's pages, each a copy-on-write fault in the child
  // (BENCHMARKS.md, "What a fork costs a process that holds the engine").
  constexpr size_t kOnStack = 16;  // 128 bytes: a deeper stack page is a fault
  Eventpoll* few[kOnStack];
  size_t nfew = 0;
  std::vector<Eventpoll*> many;
  t.ForEachOpen([&](int, File* f, bool) {
    if (!f->is_epoll()) return;
    auto* ep = static_cast<Eventpoll*>(f);
    if (many.empty() && nfew < kOnStack) {
      few[nfew++] = ep;
      return;
    }
    if (many.empty()) many.assign(few, few + nfew);
    many.push_back(ep);
  });
  Eventpoll** first = many.empty() ? few : many.data();
  Eventpoll** last = many.empty() ? few + nfew : many.data() + many.size();
  // Sorted by insertion, not std::sort: its code is one more page for the
  // child to fault in, and the list is short (an instance per number).
  for (Eventpoll** i = first; i != last; ++i) {
    for (Eventpoll** j = i; j != first && *(j - 1) > *j; --j) {
      std::swap(*(j - 1), *j);
    }
  }
  last = std::unique(first, last);
  std::span<Eventpoll* const> eps(first, last);
  // An instance another thread was changing at the fork is left as it is
  // (File::left_at_fork;
  // BridgeForkChild.ClosesInstancesAnotherThreadWasChanging), and so is
  // one that watches such an instance: its teardown would take the other's
  // poll queue lock to unhook its item there (untested: no test can stop
  // a thread inside that lock at a fork). Repeated until no more is found,
  // for chains of nesting.
  for (Eventpoll* ep : eps) {
    if (ep->LockedAtFork()) ep->set_left_at_fork();
  }
  for (bool more = true; more;) {
    more = false;
    for (Eventpoll* ep : eps) {
      if (!ep->left_at_fork() && ep->WatchesOneLeftAtFork()) {
        ep->set_left_at_fork();
        more = true;
      }
    }
  }
  if (t.mode() != FdMode::kKernel) return;
  // First every kernel half, then the registrations between them (a
  // child's new kernel half must exist before its parent registers it).
  for (Eventpoll* ep : eps) ep->RebuildInChild();
  for (Eventpoll* ep : eps) ep->ReregisterInChild();
}

}  // namespace uepoll::impl
