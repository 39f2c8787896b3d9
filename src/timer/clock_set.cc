#include "timer/clock_set.h"

#include <errno.h>
#include <pthread.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <climits>

#include "base/mutex.h"
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

void Prepare() NO_THREAD_SAFETY_ANALYSIS { D().mu.Lock(); }
void Parent() NO_THREAD_SAFETY_ANALYSIS { D().mu.Unlock(); }
// The child shares the kernel descriptor with the parent, and a read
// consumes a step for both: the child makes its own on its next call.
void Child() NO_THREAD_SAFETY_ANALYSIS {
  Detector& d = D();
  if (d.fd >= 0) sys::Close(d.fd);
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
  MutexLock l(d.mu);
  if (d.fd < 0 && !d.failed) {
    d.fd = sys::TimerfdCreate(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
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
