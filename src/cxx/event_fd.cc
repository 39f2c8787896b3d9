#include <uepoll/event_fd.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {

EventFd EventFd::create(unsigned int initval, int flags) {
  return detail::OrThrow("uepoll_eventfd", [&](std::error_code& ec) {
    return create(initval, flags, ec);
  });
}

EventFd EventFd::create(unsigned int initval, int flags,
                        std::error_code& ec) noexcept {
  return EventFd(Fd(detail::Check(uepoll_eventfd(initval, flags), ec)));
}

std::uint64_t EventFd::read() {
  return detail::OrThrow("uepoll_read(eventfd)",
                         [&](std::error_code& ec) { return read(ec); });
}

std::uint64_t EventFd::read(std::error_code& ec) {
  std::uint64_t value = 0;
  ssize_t n = detail::Check(uepoll_read(get(), &value, sizeof value), ec);
  // An eventfd moves all 8 bytes or fails. A short count means the adopted
  // descriptor is not an eventfd; fail rather than return part of a value.
  if (n >= 0 && n != static_cast<ssize_t>(sizeof value)) {
    ec = detail::ErrnoCode(EINVAL);
    return 0;
  }
  return n < 0 ? 0 : value;
}

void EventFd::write(std::uint64_t value) {
  detail::OrThrow("uepoll_write(eventfd)",
                  [&](std::error_code& ec) { write(value, ec); });
}

void EventFd::write(std::uint64_t value, std::error_code& ec) {
  ssize_t n = detail::Check(uepoll_write(get(), &value, sizeof value), ec);
  if (n >= 0 && n != static_cast<ssize_t>(sizeof value)) {
    ec = detail::ErrnoCode(EINVAL);
  }
}

}  // namespace uepoll
