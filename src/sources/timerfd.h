// TimerFd: the kernel's timerfd (fs/timerfd.c) on uepoll's timer queue.
//
// The state machine is the kernel's: the timer's expiry (run by the timer
// thread, timer/timer_queue.h, where the kernel runs an hrtimer callback)
// sets `expired_`, adds one tick and wakes the wait queue with EPOLLIN; it
// does not re-arm an interval timer. The next read (or gettime) forwards an
// interval timer past now, counts the periods it skipped as extra ticks
// (overruns), and re-arms it. A read returns the ticks and clears them.
// Readiness (Poll) is "ticks_ != 0" and nothing else, so a timer is
// readable exactly from the moment its expiry was processed, as in the
// kernel; it never becomes readable by being looked at.
//
// Locking: every field below is guarded by wq_.lock_, as the kernel guards
// its context with ctx->wqh.lock, so wakeups are issued with the state they
// announce already in place. TimerQueue's lock nests inside it. ticks_ is
// also read without the lock by Poll (timerfd_poll takes the lock; a
// harvest here never waits for the timer thread): its stores and that load
// are seq_cst, pairing with the epoll callback's load of EpItem::queued and
// the scanner's store to it (docs/design.md, the wakeup fast path), as
// eventfd's count does.
//
// Lifetime: the timer thread holds no reference while it fires a timer;
// Release() (the last close) cancels the node, which waits for a fire in
// progress and undoes the re-arm such a fire may make (FireNode arms a
// timer that settime moved later), as the kernel's timerfd_release calls
// hrtimer_cancel. So the
// object is freed by its last close, never later by the timer thread.
#ifndef UEPOLL_SRC_SOURCES_TIMERFD_H_
#define UEPOLL_SRC_SOURCES_TIMERFD_H_

#include <sys/timerfd.h>

#include <atomic>
#include <cstdint>

#include "core/file.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {

class TimerFd final : public File {
 public:
  UEPOLL_ALLOCATED_CLASS
  // clockid and flags already validated; `bases` already reserved.
  TimerFd(int clockid, int flags, unsigned bases);

  uint32_t Poll(int depth) override;
  // The poll of a timer without TFD_TIMER_CANCEL_ON_SET: ticks_ alone.
  uint32_t PollNoLock() override;
  WaitQueue& PollQueue() override { return wq_; }
  ssize_t Read(void* buf, size_t count) override;
  // timerfd_read is a read_iter (as on Linux 6.18): the 8 bytes may span
  // segments.
  ssize_t ReadIter(IoIter& it) override {
    return ReadIterOneValue(it, sizeof(uint64_t));
  }

  // timerfd_settime after the argument checks: arms (or disarms) the timer
  // and fills *old. 0, -ECANCELED (armed all the same, *old unset) or
  // -ENOMEM (the timer thread could not start; nothing changed).
  int SetTime(int flags, const itimerspec& value, itimerspec* old);
  void GetTime(itimerspec* cur);

  int clockid() const { return clockid_; }

 protected:
  void Release() override;

 private:
  static void FireNode(TimerNode* n, TimerBase base, int64_t now);
  static const TimerOps kOps;

  // hrtimer_forward_now: moves expires_ past now by whole intervals and
  // returns how many it moved (0 if expires_ is still ahead).
  uint64_t ForwardLocked(int64_t now) REQUIRES(wq_.lock());
  void StartLocked() REQUIRES(wq_.lock());
  // TFD_TIMER_CANCEL_ON_SET: the kernel's timerfd_setup_cancel,
  // clock_was_set (here: polled, SyncClockSetLocked) and timerfd_canceled.
  void SetupCancelLocked(int flags) REQUIRES(wq_.lock());
  void SyncClockSetLocked() REQUIRES(wq_.lock());
  bool CanceledLocked() REQUIRES(wq_.lock());

  const int clockid_;
  const unsigned bases_;  // reserved in TimerQueue
  WaitQueue wq_;
  TimerNode node_;
  // The base the timer runs on (per arming: a relative CLOCK_REALTIME timer
  // runs on the monotonic base), its expiry on that base, its interval.
  TimerBase base_ GUARDED_BY(wq_.lock());
  int64_t expires_ GUARDED_BY(wq_.lock()) = 0;
  int64_t interval_ GUARDED_BY(wq_.lock()) = 0;
  // On the queue (or being fired): the kernel's hrtimer_active.
  bool active_ GUARDED_BY(wq_.lock()) = false;
  // Expired and not yet forwarded (the kernel's ctx->expired).
  bool expired_ GUARDED_BY(wq_.lock()) = false;
  std::atomic<uint64_t> ticks_{0};  // written under wq_.lock_
  // Cancel-on-set: registered (might_cancel), the clock-step generation
  // last seen, and a step seen but not yet reported (moffs == KTIME_MAX).
  std::atomic<bool> might_cancel_{false};  // written under wq_.lock_
  uint64_t clock_gen_ GUARDED_BY(wq_.lock()) = 0;
  bool clock_was_set_ GUARDED_BY(wq_.lock()) = false;
};

// uepoll_timerfd_create, _settime and _gettime after the C API's pointer
// checks: -errno in the kernel's order, or the result.
int CreateTimerFd(int clockid, int flags);
int TimerFdSetTime(int fd, int flags, const itimerspec& value, itimerspec* old);
int TimerFdGetTime(int fd, itimerspec* cur);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_TIMERFD_H_
