#include <uepoll/uepoll.h>
#include <uepoll/vpoll_fd.hpp>

#include "cxx/error.h"

namespace uepoll {

VpollFd VpollFd::create(std::uint32_t events, int flags) {
  return detail::OrThrow("uepoll_vpoll_create", [&](std::error_code& ec) {
    return create(events, flags, ec);
  });
}

VpollFd VpollFd::create(std::uint32_t events, int flags,
                        std::error_code& ec) noexcept {
  return VpollFd(Fd(detail::Check(uepoll_vpoll_create(events, flags), ec)));
}

void VpollFd::add(std::uint32_t events) {
  detail::OrThrow("uepoll_vpoll_ctl",
                  [&](std::error_code& ec) { add(events, ec); });
}
void VpollFd::add(std::uint32_t events, std::error_code& ec) noexcept {
  detail::Check(uepoll_vpoll_ctl(get(), UEPOLL_VPOLL_ADDEVENTS, events), ec);
}

void VpollFd::del(std::uint32_t events) {
  detail::OrThrow("uepoll_vpoll_ctl",
                  [&](std::error_code& ec) { del(events, ec); });
}
void VpollFd::del(std::uint32_t events, std::error_code& ec) noexcept {
  detail::Check(uepoll_vpoll_ctl(get(), UEPOLL_VPOLL_DELEVENTS, events), ec);
}

void VpollFd::set(std::uint32_t events) {
  detail::OrThrow("uepoll_vpoll_ctl",
                  [&](std::error_code& ec) { set(events, ec); });
}
void VpollFd::set(std::uint32_t events, std::error_code& ec) noexcept {
  detail::Check(uepoll_vpoll_ctl(get(), UEPOLL_VPOLL_SETEVENTS, events), ec);
}

}  // namespace uepoll
