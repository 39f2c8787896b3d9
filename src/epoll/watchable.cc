// Watchable instances: a uepoll instance that the kernel's epoll, poll(),
// select(), and so any event loop (libuv, Asio, libevent, libev, a loop of
// the application's own) can watch through the instance's own number.
//
// The instance gets a kernel half (kernel_half.cc), so each of its numbers
// is a kernel epoll instance, which the kernel reports readable exactly
// while it has a ready item. Its kernel descriptors are such items already;
// the uepoll half is mirrored by one more: an eventfd that is always
// readable (its count starts at 1 and only grows), registered with the
// private tag mirror_tag_ and with events EPOLLIN ("armed") while the
// uepoll half has events to report, 0 ("disarmed") otherwise. So the
// number is readable exactly while the instance has events, which is the
// kernel's rule for an epoll descriptor:
//  - a level-triggered watcher sees it readable while events wait, and not
//    after a harvest emptied the instance (the harvest disarms);
//  - an edge-triggered watcher gets an edge at every transition to ready:
//    arming writes the eventfd, whose wakeup reaches the kernel half's
//    callback and through it the watchers of the number. The
//    EPOLL_CTL_MOD alone is not enough: the kernel wakes watchers at a MOD
//    only if the item is not on its ready list, and a disarmed mirror stays
//    there until something polls the kernel half, which an edge-triggered
//    watcher never does (Watchable.edge_triggered_watcher_gets_an_edge_
//    after_every_emptying_harvest);
//  - nested instances and kernel descriptors below reach it as they reach
//    any waiter of the instance.
// Arming happens when the ready list goes from empty to non-empty (a
// wakeup callback, an ADD or MOD that finds the source ready), disarming at
// the end of a harvest or poll that leaves it empty: one syscall to disarm,
// two (the MOD, the write) to arm, none per event. A harvest that returns
// nothing while events arrived behind its scan arms again even if the
// mirror is armed: the watcher was just told "nothing" and an edge-
// triggered one waits for the next edge
// (Watchable.an_event_behind_an_empty_harvest_gets_an_edge). An item
// that went idle without a harvest leaves the mirror armed until the next
// harvest: one spurious wakeup of a watcher, which then harvests nothing
// and disarms it.
//
// The mirror's number is the library's own: every use starts with an
// EPOLL_CTL_MOD of its registration (the identity check of base/parker.h),
// so the write goes to our eventfd, and it is closed when the instance's
// last number is, while the kernel epoll that validates it still exists.
// Harvests drop the mirror's events (its tag).
//
// Instances that are not watchable pay one load of watchable_ on the slow
// path of a wakeup and at the end of a harvest.
#include <errno.h>
#include <sys/random.h>

#include <cstring>

#include "base/sys.h"
#include "core/borrow.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {
namespace {

uint64_t NewTag(const void* self) {
  uint64_t t = 0;
  if (getrandom(&t, sizeof t, GRND_NONBLOCK) != sizeof t) {
    // No entropy yet (early boot): any value the application is unlikely to
    // use as epoll_data will do.
    t = reinterpret_cast<uintptr_t>(self) * 0x9E3779B97F4A7C15ULL;
  }
  return t | 1;  // never 0, a common epoll_data
}

}  // namespace

int Eventpoll::MakeWatchable(int epfd) {
  if (FdTable::Get().mode() == FdMode::kDisjoint) return -EPERM;  // D5
  // A kernel loop never enters uepoll to run what is due: from now on the
  // timer thread wakes for every expiry (docs/design.md, "Timers").
  TimerQueue::Get().RequireExact();
  if (int r = EnsureMixed(epfd); r < 0) return r;
  {
    MutexLock m(mirror_mu_);
    if (mirror_fd_ >= 0) return 0;
    int mfd = sys::Eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
    if (mfd < 0) return -errno;
    uint64_t tag = NewTag(this);
    int r = KernelOp([&](int k) {
      if (k < 0) return -EBADF;
      epoll_event ev{};
      ev.data.u64 = tag;
      return sys::EpollCtl(k, EPOLL_CTL_ADD, mfd, &ev) == 0 ? 0 : -errno;
    });
    if (r < 0) {
      sys::Close(mfd);
      return r;
    }
    mirror_fd_ = mfd;
    mirror_armed_ = false;
    mirror_tag_ = tag;
    // Release: a harvest that sees watchable_ sees the tag.
    watchable_.store(true, std::memory_order_release);
  }
  SyncMirror();  // events may be waiting already
  return 0;
}

void Eventpoll::SyncMirror(bool edge_if_ready) {
  MutexLock m(mirror_mu_);
  if (mirror_fd_ < 0) return;
  bool want;
  {
    // The truth now, not what the caller saw: of two threads that change
    // the ready list and then sync, the later sync applies the later state.
    MutexLock l(lock_);
    want = EventsAvailableLocked();
  }
  if (want == mirror_armed_ && !(want && edge_if_ready)) return;
  // A copy for the lambda, which the thread-safety analysis cannot see
  // runs under mirror_mu_.
  const int mfd = mirror_fd_;
  int r = KernelOp([&](int k) {
    if (k < 0) return -EBADF;
    epoll_event ev{};
    ev.events = want ? uint32_t{EPOLLIN} : 0u;
    ev.data.u64 = mirror_tag_;
    return sys::EpollCtl(k, EPOLL_CTL_MOD, mfd, &ev) == 0 ? 0 : -errno;
  });
  // A failure means the mirror or the kernel epoll was closed under us
  // (semantics.md D19): nothing to arm any more.
  if (r != 0) return;
  if (want) {
    // The MOD just proved the number is still our eventfd. The write wakes
    // the kernel half's watchers whether or not the mirror was still on
    // its ready list (the header comment says why the MOD cannot). Never
    // EAGAIN: the count would need 2^64 arms to overflow.
    uint64_t one = 1;
    (void)sys::Write(mfd, &one, sizeof one);
  }
  mirror_armed_ = want;
}

void Eventpoll::DropMirror(int kfd) {
  MutexLock m(mirror_mu_);
  if (mirror_fd_ < 0) return;
  // Ours only if its registration in this kernel epoll still exists.
  epoll_event ev{};
  ev.data.u64 = mirror_tag_;
  if (sys::EpollCtl(kfd, EPOLL_CTL_MOD, mirror_fd_, &ev) == 0) {
    sys::Close(mirror_fd_);
  }
  mirror_fd_ = -1;
  mirror_armed_ = false;
}

}  // namespace uepoll::impl
