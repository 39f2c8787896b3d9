// Deadline: when a wait must give up, on CLOCK_MONOTONIC (as the kernel's
// epoll timeouts are). Three kinds: none (wait forever), zero (never sleep,
// read no clock) and absolute.
//
// Every computation saturates (TimeLimits.*, MinWaitLimits.*): a time
// argument may be anything the kernel accepts - an epoll_wait timeout of
// INT_MAX ms, a timespec with tv_sec = LONG_MAX, a min_wait of UINT64_MAX
// ns - and the kernel clamps the sum with "now" (timespec64_add_safe,
// ktime_add_safe) instead of wrapping. Here a sum past INT64_MAX ns (292
// years of uptime, which no monotonic clock reaches) is the infinite
// deadline, so no caller ever sees a wrapped, past, deadline and no kernel
// call ever gets a timespec of billions of seconds.
#ifndef UEPOLL_SRC_BASE_DEADLINE_H_
#define UEPOLL_SRC_BASE_DEADLINE_H_

#include <time.h>

#include <cstdint>

namespace uepoll::impl {

// a + b, clamped to [INT64_MIN, INT64_MAX].
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
// a * b, clamped likewise.
inline int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    return (a > 0) == (b > 0) ? INT64_MAX : INT64_MIN;
  }
  return r;
}

class Deadline {
 public:
  static Deadline Infinite() { return Deadline(kInfinite, 0); }
  static Deadline Zero() { return Deadline(kZero, 0); }
  // From an epoll_wait timeout in milliseconds: negative is forever.
  static Deadline FromMillis(int ms) {
    if (ms < 0) return Infinite();
    if (ms == 0) return Zero();
    return AfterNs(SaturatingMul(ms, 1000000));
  }
  // From a validated relative timespec (tv_sec >= 0, tv_nsec in range).
  static Deadline FromTimespec(const timespec& ts) {
    if (ts.tv_sec == 0 && ts.tv_nsec == 0) return Zero();
    return AfterNs(
        SaturatingAdd(SaturatingMul(ts.tv_sec, 1000000000), ts.tv_nsec));
  }
  // ns from now (ns >= 0); past INT64_MAX, forever.
  static Deadline AfterNs(int64_t ns) { return At(SaturatingAdd(NowNs(), ns)); }
  // An absolute time on CLOCK_MONOTONIC; INT64_MAX is forever.
  static Deadline At(int64_t at_ns) {
    return at_ns == INT64_MAX ? Infinite() : Deadline(kAt, at_ns);
  }
  // Whichever of a and b expires first.
  static Deadline Earlier(const Deadline& a, const Deadline& b) {
    if (a.is_zero() || b.is_infinite()) return a;
    if (b.is_zero() || a.is_infinite()) return b;
    return a.at_ns_ <= b.at_ns_ ? a : b;
  }

  bool is_infinite() const { return kind_ == kInfinite; }
  bool is_zero() const { return kind_ == kZero; }
  // The absolute time: for a zero deadline, 0 (long past); for an infinite
  // one, INT64_MAX (never reached).
  int64_t at_ns() const { return kind_ == kInfinite ? INT64_MAX : at_ns_; }

  // Remaining time, clamped at zero; meaningless for infinite deadlines.
  // Compared before subtracting, so that no at_ns_ can overflow it.
  int64_t RemainingNs() const {
    if (kind_ == kZero) return 0;
    int64_t now = NowNs();
    return at_ns_ > now ? at_ns_ - now : 0;
  }
  // The remaining time as a relative timespec for a kernel call, written
  // to *ts; nullptr (wait forever) for an infinite deadline.
  const timespec* RemainingTimespec(timespec* ts) const {
    if (is_infinite()) return nullptr;
    int64_t left = RemainingNs();
    ts->tv_sec = left / 1000000000;
    ts->tv_nsec = left % 1000000000;
    return ts;
  }
  bool Expired() const {
    return kind_ == kZero || (kind_ == kAt && RemainingNs() == 0);
  }

  static int64_t NowNs() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO: no syscall
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }

 private:
  enum Kind { kInfinite, kZero, kAt };
  Deadline(Kind k, int64_t at) : kind_(k), at_ns_(at) {}
  Kind kind_;
  int64_t at_ns_;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_DEADLINE_H_
