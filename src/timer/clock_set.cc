#include "timer/clock_set.h"

#include <errno.h>
#include <pthread.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <climits>

#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/private_fd.h"
#include "base/sys.h"

namespace uepoll::impl {
namespace {

struct Detector {
  Mutex mu;
  int fd GUARDED_BY(mu) = -1;
  bool failed GUARDED_BY(mu) = false;
  uint64_t gen GUARDED_BY(mu) = 0;
};

Detector& D();

// The detector's read(2) and close(2) are cancellation points, but no
// caller is: settime, epoll_ctl's first poll of the timer, a harvest after
// it consumed events, fork()'s child handler. A cancel pending on the
// calling thread must act at the caller's own cancellation points, never
// in here, where it would unwind through the caller's half-made change
// (ClockDetectorCancel.NoCancellationPointInSettimeOrCtl).
class NoCancel {
 public:
  NoCancel() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_); }
  ~NoCancel() { pthread_setcancelstate(old_, nullptr); }
  NoCancel(const NoCancel&) = delete;
  NoCancel& operator=(const NoCancel&) = delete;

 private:
  int old_ = PTHREAD_CANCEL_ENABLE;
};

// Whether fd is still the detector's timerfd: the application may have
// closed the number (closefrom, close_range) and reused it. Ours is armed
// absolute at the end of time, which no other timer plausibly is; anything
// else is abandoned, never read (a read would consume the application's
// data or expirations) nor closed.
bool IsOurs(int fd) {
  if (fd < 0) return false;
  itimerspec cur;
  constexpr time_t kCentury = time_t{100} * 365 * 24 * 3600;
  return sys::TimerfdGettime(fd, &cur) == 0 && cur.it_value.tv_sec > kCentury;
}

// Unchecked: atfork handlers lock in one function and unlock in another.
UEPOLL_FORK_PATH void Prepare() NO_THREAD_SAFETY_ANALYSIS { D().mu.Lock(); }
UEPOLL_FORK_PATH void Parent() NO_THREAD_SAFETY_ANALYSIS { D().mu.Unlock(); }
// The child shares the kernel descriptor with the parent, and a read
// consumes a step for both: the child makes its own on its next call.
// Unchecked: it runs holding d.mu, taken by Prepare.
UEPOLL_FORK_PATH void Child() NO_THREAD_SAFETY_ANALYSIS {
  NoCancel no_cancel;
  Detector& d = D();
  if (IsOurs(d.fd)) sys::Close(d.fd);
  d.fd = -1;
  d.failed = false;
  d.mu.Unlock();
}

Detector& D() {
  static Detector* d = [] {
    pthread_atfork(Prepare, Parent, Child);
    return new Detector();
  }();
  return *d;
}

}  // namespace

uint64_t ClockSetGeneration() {
  Detector& d = D();
  int saved = errno;
  NoCancel no_cancel;
  MutexLock l(d.mu);
  // Lost to the application (closed, maybe reused): abandoned and made
  // anew; a step in between is missed. Only CANCEL_ON_SET timers get here.
  if (d.fd >= 0 && !IsOurs(d.fd)) d.fd = -1;
  if (d.fd < 0 && !d.failed) {
    d.fd = sys::TimerfdCreate(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
    // Not at a number the application's next open() would get.
    if (d.fd >= 0) d.fd = MovePrivateFd(d.fd);
    itimerspec never = {};
    never.it_value.tv_sec = LONG_MAX;  // saturates at the end of time
    if (d.fd >= 0 &&
        sys::TimerfdSettime(d.fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET,
                            &never, nullptr) != 0) {
      sys::Close(d.fd);
      d.fd = -1;
    }
    d.failed = d.fd < 0;
  }
  if (d.fd >= 0) {
    uint64_t ticks;
    if (sys::Read(d.fd, &ticks, sizeof ticks) < 0 && errno == ECANCELED)
      ++d.gen;
  }
  uint64_t gen = d.gen;
  errno = saved;
  return gen;
}

}  // namespace uepoll::impl
