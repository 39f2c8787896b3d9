// uepoll::TimerFd: a timerfd (uepoll_timerfd_create and friends).
//
// Both error forms and the thread-safety rules are as described in fd.hpp.
#ifndef UEPOLL_TIMER_FD_HPP_
#define UEPOLL_TIMER_FD_HPP_

#include <sys/timerfd.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

namespace uepoll {

class UEPOLL_CXX_API TimerFd {
 public:
  TimerFd() noexcept = default;
  // Adopts a descriptor that refers to a timerfd.
  explicit TimerFd(Fd fd) noexcept : fd_(std::move(fd)) {}

  // clockid: CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME (or an _ALARM
  // clock with CAP_WAKE_ALARM); flags: TFD_NONBLOCK, TFD_CLOEXEC.
  [[nodiscard]] static TimerFd create(int clockid = CLOCK_MONOTONIC,
                                      int flags = 0);
  [[nodiscard]] static TimerFd create(int clockid, int flags,
                                      std::error_code& ec) noexcept;

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

  // timerfd_settime: flags TFD_TIMER_ABSTIME, TFD_TIMER_CANCEL_ON_SET.
  // Returns the previous setting.
  itimerspec settime(int flags, const itimerspec& value);
  itimerspec settime(int flags, const itimerspec& value,
                     std::error_code& ec) noexcept;
  // Relative arming: first expiry after `value`, then every `interval`
  // (0: once). A zero value disarms.
  void arm(std::chrono::nanoseconds value,
           std::chrono::nanoseconds interval = std::chrono::nanoseconds{0});
  void arm(std::chrono::nanoseconds value, std::chrono::nanoseconds interval,
           std::error_code& ec) noexcept;
  void disarm() { arm(std::chrono::nanoseconds{0}); }
  void disarm(std::error_code& ec) noexcept {
    arm(std::chrono::nanoseconds{0}, std::chrono::nanoseconds{0}, ec);
  }
  // timerfd_gettime: the time to the next expiry and the interval.
  [[nodiscard]] itimerspec gettime() const;
  [[nodiscard]] itimerspec gettime(std::error_code& ec) const noexcept;

  // The expirations since the last read. None: blocks, or fails EAGAIN
  // with TFD_NONBLOCK. The error_code form returns 0 on error.
  [[nodiscard]] std::uint64_t read();
  [[nodiscard]] std::uint64_t read(std::error_code& ec);

 private:
  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_TIMER_FD_HPP_
