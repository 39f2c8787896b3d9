// The clocks timers run on, and nanosecond arithmetic with the kernel's
// saturation rules (ktime_t: a signed 64-bit count of nanoseconds, clamped
// at KTIME_MAX instead of overflowing).
//
// A timer runs on one of three bases, as the kernel's hrtimers do: the base
// is the clock its expiry time is measured on. A timerfd's clock picks the
// base, and so does the mode: a relative CLOCK_REALTIME timer runs on the
// monotonic base (the kernel converts it the same way), so that setting the
// wall clock does not move it.
#ifndef UEPOLL_SRC_TIMER_CLOCK_H_
#define UEPOLL_SRC_TIMER_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace uepoll::impl {

enum class TimerBase : uint8_t { kMonotonic, kRealtime, kBoottime };
inline constexpr int kNumTimerBases = 3;

inline constexpr int64_t kNsMax = INT64_MAX;  // KTIME_MAX: "never"
inline constexpr int64_t kNsPerSec = 1000000000;

inline clockid_t ClockOf(TimerBase b) {
  switch (b) {
    case TimerBase::kRealtime:
      return CLOCK_REALTIME;
    case TimerBase::kBoottime:
      return CLOCK_BOOTTIME;
    case TimerBase::kMonotonic:
      break;
  }
  return CLOCK_MONOTONIC;
}

// The base's clock now, in ns (vDSO: no syscall).
inline int64_t ClockNowNs(TimerBase b) {
  timespec ts;
  clock_gettime(ClockOf(b), &ts);
  return ts.tv_sec * kNsPerSec + ts.tv_nsec;
}

// a + b for b >= 0, clamped at kNsMax (ktime_add_safe).
inline int64_t AddNsSat(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return kNsMax;
  return r;
}

// A validated timespec (tv_sec >= 0, tv_nsec in [0, 1e9)) in ns, clamped at
// kNsMax (timespec64_to_ktime).
inline int64_t TimespecToNsSat(const timespec& ts) {
  if (ts.tv_sec >= kNsMax / kNsPerSec) return kNsMax;
  return ts.tv_sec * kNsPerSec + ts.tv_nsec;
}

inline timespec NsToTimespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = ns / kNsPerSec;
  ts.tv_nsec = ns % kNsPerSec;
  return ts;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_TIMER_CLOCK_H_
