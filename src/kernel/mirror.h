// Mirror: how the kernel sees the uepoll half of a watchable instance.
//
// An instance made watchable (epoll/watchable.cc) keeps one more internal
// registration in its kernel half: an eventfd of its own that is always
// readable (count 1, growing by one per arm), registered level-triggered
// with events EPOLLIN while the uepoll half has events ("armed") and 0
// otherwise. The instance's numbers, kernel epolls, are then readable to
// the kernel's epoll, poll() and select() exactly while the instance has
// events, the kernel's rule for an epoll descriptor:
//  - a level-triggered watcher sees the number readable while events wait,
//    and not after a harvest emptied the instance (the harvest disarms);
//  - an edge-triggered watcher gets an edge at every transition to ready:
//    arming writes the eventfd, whose wakeup reaches the kernel half's
//    callback and through it the number's watchers. The EPOLL_CTL_MOD alone
//    is not enough: the kernel wakes watchers at a MOD only if the item is
//    not on its ready list, and a disarmed mirror stays there until
//    something polls the kernel half, which an edge-triggered watcher never
//    does (Watchable.edge_triggered_watcher_gets_an_edge_after_every_
//    emptying_harvest).
// The eventfd is per instance because the write reaches every epoll that
// registers it; a shared one would wake every watchable instance's
// watchers at every arm.
//
// Identity: every use starts with the MOD of the registration, which
// succeeds only while the number names our eventfd inside this epoll
// (parker.h); the write comes after it. The eventfd is closed when the
// instance's last number is, while the epoll that validates it still
// exists (Drop).
//
// Thread safety: mu_ serializes arms and disarms and guards the fields; it
// is taken with no uepoll lock held but the caller's choice of when (the
// instance takes its own lock_ inside, to read the truth: eventpoll.h).
#ifndef UEPOLL_SRC_KERNEL_MIRROR_H_
#define UEPOLL_SRC_KERNEL_MIRROR_H_

#include "base/mutex.h"
#include "kernel/kernel_half.h"

namespace uepoll::impl {

class Mirror {
 public:
  // Makes the eventfd and registers it disarmed; 0 or -errno. Idempotent.
  int Make(KernelHalf& kh) EXCLUDES(mu_);
  bool made() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return fd_ >= 0;
  }
  // Brings the registration in line with want() (called under mu_): arm
  // when true, disarm when false. edge_if_ready: the caller just told the
  // application "nothing", so an armed mirror needs a new edge if want()
  // is still true.
  template <class Want>
  void Sync(KernelHalf& kh, bool edge_if_ready, Want want) EXCLUDES(mu_) {
    MutexLock l(mu_);
    if (fd_ < 0) return;
    bool w = want();
    if (w == armed_ && !(w && edge_if_ready)) return;
    Set(kh, w);
  }
  // The last number kfd of the instance is about to close: close the
  // eventfd if kfd's epoll still proves it ours.
  void Drop(int kfd) EXCLUDES(mu_);
  // After a fork, in the child (single-threaded): a new eventfd in kh's new
  // epoll, armed as before.
  // Unchecked: it uses mu_'s fields without mu_ (single-threaded child;
  // the inherited mu_ may be held by a thread that is not there).
  void RemakeInChild(KernelHalf& kh) NO_THREAD_SAFETY_ANALYSIS;
  // For the lock order's declarations only (Eventpoll::lock_ is taken
  // under it, never the reverse: LOCKING, epoll/eventpoll.h).
  Mutex& lock() RETURN_CAPABILITY(mu_) { return mu_; }

 private:
  void Set(KernelHalf& kh, bool want) REQUIRES(mu_);

  Mutex mu_;
  int fd_ GUARDED_BY(mu_) = -1;
  bool armed_ GUARDED_BY(mu_) = false;
  uint64_t cookie_ GUARDED_BY(mu_) = 0;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_MIRROR_H_
