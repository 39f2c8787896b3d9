#include <uepoll/socket.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {

void Socket::shutdown(int how) {
  detail::OrThrow("uepoll_shutdown",
                  [&](std::error_code& ec) { shutdown(how, ec); });
}

void Socket::shutdown(int how, std::error_code& ec) noexcept {
  detail::Check(uepoll_shutdown(get(), how), ec);
}

std::size_t Socket::send(std::span<const std::byte> buf, int flags) {
  return detail::OrThrow(
      "uepoll_send", [&](std::error_code& ec) { return send(buf, flags, ec); });
}

std::size_t Socket::send(std::span<const std::byte> buf, int flags,
                         std::error_code& ec) noexcept {
  ssize_t n =
      detail::Check(uepoll_send(get(), buf.data(), buf.size(), flags), ec);
  return n < 0 ? 0 : static_cast<std::size_t>(n);
}

std::size_t Socket::recv(std::span<std::byte> buf, int flags) {
  return detail::OrThrow(
      "uepoll_recv", [&](std::error_code& ec) { return recv(buf, flags, ec); });
}

std::size_t Socket::recv(std::span<std::byte> buf, int flags,
                         std::error_code& ec) noexcept {
  ssize_t n =
      detail::Check(uepoll_recv(get(), buf.data(), buf.size(), flags), ec);
  return n < 0 ? 0 : static_cast<std::size_t>(n);
}

}  // namespace uepoll
