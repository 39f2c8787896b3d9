#include "sources/timerfd.h"

#include <errno.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "base/caps.h"
#include "core/fd_table.h"
#include "timer/clock_set.h"

namespace uepoll::impl {
namespace {

constexpr int kCreateFlags = TFD_CLOEXEC | TFD_NONBLOCK;
constexpr int kSettimeFlags = TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET;

bool IsAlarm(int clockid) {
  return clockid == CLOCK_REALTIME_ALARM || clockid == CLOCK_BOOTTIME_ALARM;
}

bool ValidClock(int clockid) {
  return clockid == CLOCK_MONOTONIC || clockid == CLOCK_REALTIME ||
         clockid == CLOCK_REALTIME_ALARM || clockid == CLOCK_BOOTTIME ||
         clockid == CLOCK_BOOTTIME_ALARM;
}

// capable(CAP_WAKE_ALARM), asked of the calling thread (capabilities are
// per thread, as the kernel checks them).
bool HasWakeAlarm() { return HasCapability(CAP_WAKE_ALARM); }

// The bases a timer on `clockid` can run on, whatever settime asks later.
unsigned BasesFor(int clockid) {
  switch (clockid) {
    case CLOCK_REALTIME:  // absolute: realtime; relative: monotonic
      return TimerQueue::BaseBit(TimerBase::kRealtime) |
             TimerQueue::BaseBit(TimerBase::kMonotonic);
    case CLOCK_REALTIME_ALARM:  // alarm timers stay on their clock
      return TimerQueue::BaseBit(TimerBase::kRealtime);
    case CLOCK_BOOTTIME:
    case CLOCK_BOOTTIME_ALARM:
      return TimerQueue::BaseBit(TimerBase::kBoottime);
    default:
      return TimerQueue::BaseBit(TimerBase::kMonotonic);
  }
}

// The base one arming runs on: the kernel's hrtimer_init turns a relative
// CLOCK_REALTIME timer into a CLOCK_MONOTONIC one.
TimerBase BaseFor(int clockid, int flags) {
  switch (clockid) {
    case CLOCK_REALTIME:
      return (flags & TFD_TIMER_ABSTIME) ? TimerBase::kRealtime
                                         : TimerBase::kMonotonic;
    case CLOCK_REALTIME_ALARM:
      return TimerBase::kRealtime;
    case CLOCK_BOOTTIME:
    case CLOCK_BOOTTIME_ALARM:
      return TimerBase::kBoottime;
    default:
      return TimerBase::kMonotonic;
  }
}

// itimerspec64_valid: both timespecs with tv_sec >= 0 and tv_nsec in range.
bool ValidSpec(const itimerspec& t) {
  auto ok = [](const timespec& ts) {
    return ts.tv_sec >= 0 && ts.tv_nsec >= 0 && ts.tv_nsec < kNsPerSec;
  };
  return ok(t.it_value) && ok(t.it_interval);
}

int64_t Remaining(int64_t expires, int64_t now) {
  return expires > now ? expires - now : 0;
}

}  // namespace

const TimerOps TimerFd::kOps = {&TimerFd::FireNode};

TimerFd::TimerFd(int clockid, int flags, unsigned bases)
    : File(FileKind::kTimerfd, O_RDWR | (flags & TFD_NONBLOCK)),
      clockid_(clockid),
      bases_(bases),
      node_(&kOps, this),
      base_(BaseFor(clockid, 0)) {
  set_poll_is_a_load(true);  // until armed with cancel-on-set
}

void TimerFd::Release() {
  // hrtimer_cancel: off the queue, and no fire of it running any more.
  TimerQueue& q = TimerQueue::Get();
  q.Cancel(&node_);
  q.Unreserve(bases_);
  delete this;
}

// timerfd_triggered, on the timer thread or a keeper (timer_queue.h).
void TimerFd::FireNode(TimerNode* n, TimerBase base, int64_t now) {
  auto* t = static_cast<TimerFd*>(n->owner);
  {
    MutexLock l(t->wq_.lock());
    // Re-decided under the lock: settime or a read may have re-armed or
    // disarmed the timer since the queue popped it. The queue's reading
    // of the clock decides where it says due (taken at or past the expiry
    // popped); a re-arm since, to a later instant or another base, is
    // checked against the clock itself (the kernel's hrtimer callback
    // decides on the instant its interrupt read, too).
    if (t->active_) {
      if (base != t->base_ || now < t->expires_) now = ClockNowNs(t->base_);
      if (now >= t->expires_) {
        TimerQueue::Get().Disarm(&t->node_);  // re-armed to a past time
        t->active_ = false;
        t->expired_ = true;
        t->ticks_.store(t->ticks_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_seq_cst);
        t->wq_.WakeUpLocked(EPOLLIN, 1);
      } else {
        // Not due on its own clock (re-armed later, or the realtime clock
        // stepped back): back on the queue.
        TimerQueue::Get().Arm(&t->node_, t->base_, t->expires_, t->interval_);
      }
    }
  }
}

uint64_t TimerFd::ForwardLocked(int64_t now) {
  int64_t delta = now - expires_;
  if (delta < 0) return 0;
  uint64_t orun = 1;
  if (delta >= interval_) {
    orun = static_cast<uint64_t>(delta / interval_);
    // interval_ * orun <= delta: no overflow, and expires_ stays <= now.
    expires_ += interval_ * static_cast<int64_t>(orun);
    if (expires_ > now) return orun;
    ++orun;  // an exact multiple
  }
  expires_ = AddNsSat(expires_, interval_);
  return orun;
}

void TimerFd::StartLocked() {
  active_ = true;
  TimerQueue::Get().Arm(&node_, base_, expires_, interval_);
}

void TimerFd::SetupCancelLocked(int flags) {
  bool want =
      (clockid_ == CLOCK_REALTIME || clockid_ == CLOCK_REALTIME_ALARM) &&
      (flags & TFD_TIMER_ABSTIME) && (flags & TFD_TIMER_CANCEL_ON_SET);
  if (want && !might_cancel_.load(std::memory_order_relaxed)) {
    // Steps before the timer asked to hear about them do not count.
    clock_gen_ = ClockSetGeneration();
    clock_was_set_ = false;
  }
  might_cancel_.store(want, std::memory_order_relaxed);
  // A cancel-on-set poll takes wq_.lock_ and reads the clock's steps (a
  // system call): never under an instance's lock_. Written only when it
  // changes: it shares the line the harvests read.
  if (poll_is_a_load() == want) set_poll_is_a_load(!want);
}

void TimerFd::SyncClockSetLocked() {
  if (!might_cancel_.load(std::memory_order_relaxed)) return;
  uint64_t gen = ClockSetGeneration();
  if (gen == clock_gen_) return;
  clock_gen_ = gen;
  if (!clock_was_set_) {
    // timerfd_clock_was_set: a tick, so that readers and pollers wake up
    // and find the cancellation.
    clock_was_set_ = true;
    ticks_.store(ticks_.load(std::memory_order_relaxed) + 1,
                 std::memory_order_seq_cst);
    wq_.WakeUpLocked(EPOLLIN, 1);
  }
}

bool TimerFd::CanceledLocked() {
  if (!might_cancel_.load(std::memory_order_relaxed) || !clock_was_set_) {
    return false;
  }
  clock_was_set_ = false;
  return true;
}

uint32_t TimerFd::Poll(int) {
  if (might_cancel_.load(std::memory_order_relaxed)) {
    MutexLock l(wq_.lock());
    SyncClockSetLocked();
  }
  return PollNoLock();
}

uint32_t TimerFd::PollNoLock() {
  // timerfd reports EPOLLIN alone (no RDNORM). Called while the timer asks
  // for cancel-on-set only by a harvest that found it not asking a moment
  // before: a step of the clock is then not looked for, as by a poll of a
  // timer without cancel-on-set; the next read, poll or settime sees it
  // (steps are seen on demand: docs/semantics.md D21).
  return ticks_.load(std::memory_order_seq_cst) ? uint32_t{EPOLLIN} : 0u;
}

ssize_t TimerFd::Read(void* buf, size_t count) {
  if (count < sizeof(uint64_t)) return -EINVAL;
  // An expiry no thread ran yet counts (docs/design.md, "Timers").
  // The instant that read decided by, while no sleep has come since (0:
  // none, or this read may have slept: it reads the clock again).
  int64_t seen = RunDueTimers();
  uint64_t ticks = 0;
  int res = 0;
  {
    MutexLock l(wq_.lock());
    SyncClockSetLocked();
    if (nonblock()) {
      res = -EAGAIN;
    } else {
      seen = 0;
      // Unchecked lambda: WaitEventLocked calls it with wq_.lock_ held, which
      // clang cannot see from the lambda's body.
      res = WaitEventLocked(wq_, false, [this]() NO_THREAD_SAFETY_ANALYSIS {
        SyncClockSetLocked();
        return ticks_.load(std::memory_order_relaxed) != 0;
      });
    }
    if (CanceledLocked()) {
      // The clock was set: the ticks mean nothing, the timer is not
      // re-armed, and the caller must re-evaluate.
      ticks_.store(0, std::memory_order_seq_cst);
      expired_ = false;
      res = -ECANCELED;
    }
    uint64_t pending = ticks_.load(std::memory_order_relaxed);
    if (pending) {
      // Deviation (docs/semantics.md): a NULL buffer fails before the
      // ticks are consumed; the kernel consumes them, then faults.
      if (!buf) return -EFAULT;
      ticks = pending;
      if (expired_ && interval_) {
        // Forwarded to the instant RunDueTimers read, if that was past the
        // expiry: the read takes effect then, within this call (a period
        // that ends between then and now counts at the next read, as had
        // this call come a moment earlier). Not after a sleep, nor on
        // another clock. Wraps like the kernel's u64 when the clock stepped
        // back past the expiry (a forward of 0).
        int64_t now = base_ == TimerBase::kMonotonic && seen >= expires_
                          ? seen
                          : ClockNowNs(base_);
        ticks += ForwardLocked(now) - 1;
        StartLocked();
      }
      expired_ = false;
      ticks_.store(0, std::memory_order_seq_cst);
    }
  }
  if (ticks) {
    std::memcpy(buf, &ticks, sizeof ticks);
    return sizeof ticks;
  }
  return res;
}

int TimerFd::SetTime(int flags, const itimerspec& value, itimerspec* old) {
  int64_t value_ns = TimespecToNsSat(value.it_value);
  // The thread that will fire it must exist before anything changes.
  if (value_ns != 0) {
    if (int r = TimerQueue::Get().EnsureThread()) return r;
  }
  RunDueTimers();  // the old value tells of an expiry that is due
  MutexLock l(wq_.lock());
  SetupCancelLocked(flags);
  // A step seen now counts as one that happened before this call (the
  // kernel's clock_was_set runs asynchronously): its tick is dropped with
  // the others below, its cancellation reported after the arming.
  SyncClockSetLocked();
  // Stop the running timer first (hrtimer_try_to_cancel). A fire the timer
  // thread has already popped finds active_ false and does nothing.
  TimerQueue::Get().Disarm(&node_);
  active_ = false;
  int64_t now = ClockNowNs(base_);
  // An expired interval timer is forwarded so that *old tells when its next
  // period would have come; its ticks are dropped below anyway.
  if (expired_ && interval_) ForwardLocked(now);
  old->it_value = NsToTimespec(Remaining(expires_, now));
  old->it_interval = NsToTimespec(interval_);

  // timerfd_setup.
  expired_ = false;
  ticks_.store(0, std::memory_order_seq_cst);
  interval_ = TimespecToNsSat(value.it_interval);
  base_ = BaseFor(clockid_, flags);
  expires_ = value_ns;  // 0 disarms (and gettime then reports 0)
  if (value_ns == 0) return 0;
  if (!(flags & TFD_TIMER_ABSTIME)) {
    expires_ = AddNsSat(ClockNowNs(base_), value_ns);
  }
  StartLocked();
  if (CanceledLocked()) return -ECANCELED;
  return 0;
}

void TimerFd::GetTime(itimerspec* cur) {
  RunDueTimers();  // an expired interval timer is reported forwarded
  MutexLock l(wq_.lock());
  int64_t now = ClockNowNs(base_);
  if (expired_ && interval_) {
    // Forwarded and re-armed here too, its skipped periods kept as ticks.
    expired_ = false;
    ticks_.store(
        ticks_.load(std::memory_order_relaxed) + ForwardLocked(now) - 1,
        std::memory_order_seq_cst);
    StartLocked();
  }
  cur->it_value = NsToTimespec(Remaining(expires_, now));
  cur->it_interval = NsToTimespec(interval_);
}

int CreateTimerFd(int clockid, int flags) {
  if ((flags & ~kCreateFlags) || !ValidClock(clockid)) return -EINVAL;
  if (IsAlarm(clockid) && !HasWakeAlarm()) return -EPERM;
  unsigned bases = BasesFor(clockid);
  if (int r = TimerQueue::Get().Reserve(bases)) return r;
  auto* t = new (std::nothrow) TimerFd(clockid, flags, bases);
  if (!t) {
    TimerQueue::Get().Unreserve(bases);
    return -ENOMEM;
  }
  int fd = FdTable::Get().Install(t, flags & TFD_CLOEXEC);
  if (fd < 0) t->Unref();  // Release gives the reservation back
  return fd;
}

int TimerFdSetTime(int fd, int flags, const itimerspec& value,
                   itimerspec* old) {
  if ((flags & ~kSettimeFlags) || !ValidSpec(value)) return -EINVAL;
  FileRef f = FdTable::Get().Lookup(fd);
  if (!f) return -EBADF;
  if (f->kind() != FileKind::kTimerfd) return -EINVAL;
  auto* t = static_cast<TimerFd*>(f.get());
  if (IsAlarm(t->clockid()) && !HasWakeAlarm()) return -EPERM;
  return t->SetTime(flags, value, old);
}

int TimerFdGetTime(int fd, itimerspec* cur) {
  FileRef f = FdTable::Get().Lookup(fd);
  if (!f) return -EBADF;
  if (f->kind() != FileKind::kTimerfd) return -EINVAL;
  static_cast<TimerFd*>(f.get())->GetTime(cur);
  return 0;
}

}  // namespace uepoll::impl
