#include <algorithm>
#include <climits>
#include <cstddef>

#include <uepoll/instance.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {
namespace {

// The kernel's EP_MAX_EVENTS: a larger maxevents fails EINVAL. A larger
// span is not an error here; it is just not filled past this.
constexpr std::size_t kMaxEvents = INT_MAX / sizeof(epoll_event);

void Ctl(int epfd, int op, int fd, std::uint32_t events, EventData data,
         std::error_code& ec) noexcept {
  epoll_event ev{};
  ev.events = events;
  ev.data = data.raw();
  detail::Check(uepoll_epoll_ctl(epfd, op, fd, &ev), ec);
}

// A timeout for epoll_pwait2: null for none (negative). The count fits:
// nanoseconds::max() is 292 years, well within time_t.
const timespec* ToTimespec(std::chrono::nanoseconds timeout, timespec& ts) {
  if (timeout.count() < 0) return nullptr;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  return &ts;
}

}  // namespace

Instance Instance::create(int flags) {
  return detail::OrThrow("uepoll_epoll_create1", [&](std::error_code& ec) {
    return create(flags, ec);
  });
}

Instance Instance::create(int flags, std::error_code& ec) noexcept {
  return Instance(Fd(detail::Check(uepoll_epoll_create1(flags), ec)));
}

void Instance::add(int fd, std::uint32_t events, EventData data) {
  detail::OrThrow("uepoll_epoll_ctl(EPOLL_CTL_ADD)",
                  [&](std::error_code& ec) { add(fd, events, data, ec); });
}

void Instance::add(int fd, std::uint32_t events, EventData data,
                   std::error_code& ec) noexcept {
  Ctl(get(), EPOLL_CTL_ADD, fd, events, data, ec);
}

void Instance::modify(int fd, std::uint32_t events, EventData data) {
  detail::OrThrow("uepoll_epoll_ctl(EPOLL_CTL_MOD)",
                  [&](std::error_code& ec) { modify(fd, events, data, ec); });
}

void Instance::modify(int fd, std::uint32_t events, EventData data,
                      std::error_code& ec) noexcept {
  Ctl(get(), EPOLL_CTL_MOD, fd, events, data, ec);
}

void Instance::remove(int fd) {
  detail::OrThrow("uepoll_epoll_ctl(EPOLL_CTL_DEL)",
                  [&](std::error_code& ec) { remove(fd, ec); });
}

void Instance::remove(int fd, std::error_code& ec) noexcept {
  // A non-null event: kernels before 2.6.9 required one, and it costs
  // nothing.
  Ctl(get(), EPOLL_CTL_DEL, fd, 0, {}, ec);
}

std::span<epoll_event> Instance::wait_for(std::span<epoll_event> events,
                                          std::chrono::nanoseconds timeout,
                                          const sigset_t* sigmask) {
  return detail::OrThrow("uepoll_epoll_pwait2", [&](std::error_code& ec) {
    return wait_for(events, timeout, sigmask, ec);
  });
}

std::span<epoll_event> Instance::wait_for(std::span<epoll_event> events,
                                          std::chrono::nanoseconds timeout,
                                          const sigset_t* sigmask,
                                          std::error_code& ec) {
  int max = static_cast<int>(std::min(events.size(), kMaxEvents));
  timespec ts{};
  int n = uepoll_epoll_pwait2(get(), events.data(), max,
                              ToTimespec(timeout, ts), sigmask);
  if (detail::Check(n, ec) < 0) return {};
  return events.first(static_cast<std::size_t>(n));
}

std::span<epoll_event> Instance::wait(std::span<epoll_event> events,
                                      const WaitOptions& options) {
  return detail::OrThrow("uepoll_epoll_pwait3", [&](std::error_code& ec) {
    return wait(events, options, ec);
  });
}

std::span<epoll_event> Instance::wait(std::span<epoll_event> events,
                                      const WaitOptions& options,
                                      std::error_code& ec) {
  int max = static_cast<int>(std::min(events.size(), kMaxEvents));
  timespec ts{};
  uepoll_wait_args args{};
  args.timeout = ToTimespec(options.timeout, ts);
  args.min_wait_ns = options.min_wait.count() > 0
                         ? static_cast<uint64_t>(options.min_wait.count())
                         : 0;
  args.sigmask = options.sigmask;
  int n = uepoll_epoll_pwait3(get(), events.data(), max, &args);
  if (detail::Check(n, ec) < 0) return {};
  return events.first(static_cast<std::size_t>(n));
}

void Instance::set_params(const uepoll_params& params) {
  detail::OrThrow("uepoll_epoll_set_params",
                  [&](std::error_code& ec) { set_params(params, ec); });
}

void Instance::set_params(const uepoll_params& params,
                          std::error_code& ec) noexcept {
  detail::Check(uepoll_epoll_set_params(get(), &params), ec);
}

uepoll_params Instance::params() const {
  return detail::OrThrow("uepoll_epoll_get_params",
                         [&](std::error_code& ec) { return params(ec); });
}

uepoll_params Instance::params(std::error_code& ec) const noexcept {
  uepoll_params p{};
  detail::Check(uepoll_epoll_get_params(get(), &p), ec);
  return p;
}

}  // namespace uepoll
