#include <uepoll/timer_fd.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {
namespace {

timespec ToTimespec(std::chrono::nanoseconds d) {
  auto ns = d.count() < 0 ? 0 : d.count();
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  return ts;
}

}  // namespace

TimerFd TimerFd::create(int clockid, int flags) {
  return detail::OrThrow("uepoll_timerfd_create", [&](std::error_code& ec) {
    return create(clockid, flags, ec);
  });
}

TimerFd TimerFd::create(int clockid, int flags, std::error_code& ec) noexcept {
  return TimerFd(Fd(detail::Check(uepoll_timerfd_create(clockid, flags), ec)));
}

itimerspec TimerFd::settime(int flags, const itimerspec& value) {
  return detail::OrThrow("uepoll_timerfd_settime", [&](std::error_code& ec) {
    return settime(flags, value, ec);
  });
}

itimerspec TimerFd::settime(int flags, const itimerspec& value,
                            std::error_code& ec) noexcept {
  itimerspec old{};
  detail::Check(uepoll_timerfd_settime(get(), flags, &value, &old), ec);
  return old;
}

void TimerFd::arm(std::chrono::nanoseconds value,
                  std::chrono::nanoseconds interval) {
  detail::OrThrow("uepoll_timerfd_settime",
                  [&](std::error_code& ec) { arm(value, interval, ec); });
}

void TimerFd::arm(std::chrono::nanoseconds value,
                  std::chrono::nanoseconds interval,
                  std::error_code& ec) noexcept {
  itimerspec v;
  v.it_value = ToTimespec(value);
  v.it_interval = ToTimespec(interval);
  detail::Check(uepoll_timerfd_settime(get(), 0, &v, nullptr), ec);
}

itimerspec TimerFd::gettime() const {
  return detail::OrThrow("uepoll_timerfd_gettime",
                         [&](std::error_code& ec) { return gettime(ec); });
}

itimerspec TimerFd::gettime(std::error_code& ec) const noexcept {
  itimerspec cur{};
  detail::Check(uepoll_timerfd_gettime(get(), &cur), ec);
  return cur;
}

std::uint64_t TimerFd::read() {
  return detail::OrThrow("uepoll_read(timerfd)",
                         [&](std::error_code& ec) { return read(ec); });
}

std::uint64_t TimerFd::read(std::error_code& ec) {
  std::uint64_t ticks = 0;
  ssize_t n = detail::Check(uepoll_read(get(), &ticks, sizeof ticks), ec);
  if (n >= 0 && n != static_cast<ssize_t>(sizeof ticks)) {
    ec = detail::ErrnoCode(EINVAL);  // not a timerfd
    return 0;
  }
  return n < 0 ? 0 : ticks;
}

}  // namespace uepoll
