#include "timer/timed_futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "timer/clock.h"

namespace uepoll::impl {

void TimedFutex::Wait(uint32_t expected, int64_t deadline_ns) {
  timespec ts;
  timespec* timeout = nullptr;
  if (deadline_ns != kNsMax) {
    ts = NsToTimespec(deadline_ns < 0 ? 0 : deadline_ns);
    timeout = &ts;
  }
  // FUTEX_WAIT_BITSET takes an absolute timeout, on CLOCK_MONOTONIC unless
  // FUTEX_CLOCK_REALTIME is given: no clock read and no drift between
  // computing a relative timeout and entering the kernel.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_),
          FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, timeout, nullptr,
          FUTEX_BITSET_MATCH_ANY);
}

void TimedFutex::Wake() {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_),
          FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, nullptr, nullptr, 0);
}

}  // namespace uepoll::impl
