// Deadline: when a wait must give up, on CLOCK_MONOTONIC (as the kernel's
// epoll timeouts are). Three kinds: none (wait forever), zero (never sleep,
// read no clock) and absolute.
#ifndef UEPOLL_SRC_BASE_DEADLINE_H_
#define UEPOLL_SRC_BASE_DEADLINE_H_

#include <time.h>

#include <cstdint>

namespace uepoll::impl {

class Deadline {
 public:
  static Deadline Infinite() { return Deadline(kInfinite, 0); }
  static Deadline Zero() { return Deadline(kZero, 0); }
  // From an epoll_wait timeout in milliseconds: negative is forever.
  static Deadline FromMillis(int ms) {
    if (ms < 0) return Infinite();
    if (ms == 0) return Zero();
    return Deadline(kAt, NowNs() + static_cast<int64_t>(ms) * 1000000);
  }
  // From a validated relative timespec (tv_sec >= 0, tv_nsec in range).
  static Deadline FromTimespec(const timespec& ts) {
    if (ts.tv_sec == 0 && ts.tv_nsec == 0) return Zero();
    // Saturate: huge values are valid and mean "practically forever".
    constexpr int64_t kMaxSec = INT64_MAX / 1000000000 - 1;
    if (ts.tv_sec >= kMaxSec / 2) return Infinite();
    return Deadline(kAt, NowNs() + ts.tv_sec * 1000000000LL + ts.tv_nsec);
  }
  static Deadline AfterNs(int64_t ns) { return Deadline(kAt, NowNs() + ns); }

  bool is_infinite() const { return kind_ == kInfinite; }
  bool is_zero() const { return kind_ == kZero; }
  int64_t at_ns() const { return at_ns_; }

  // Remaining time, clamped at zero; meaningless for infinite deadlines.
  int64_t RemainingNs() const {
    if (kind_ == kZero) return 0;
    int64_t left = at_ns_ - NowNs();
    return left > 0 ? left : 0;
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
