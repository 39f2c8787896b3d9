#include <uepoll/socket.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"
#include "cxx/io.h"

namespace uepoll {

std::size_t Socket::read(std::span<std::byte> buf) {
  return detail::OrThrow("uepoll_read(socket)",
                         [&](std::error_code& ec) { return read(buf, ec); });
}

std::size_t Socket::read(std::span<std::byte> buf,
                         std::error_code& ec) noexcept {
  return detail::ReadSome(get(), buf, ec);
}

std::size_t Socket::write(std::span<const std::byte> buf) {
  return detail::OrThrow("uepoll_write(socket)",
                         [&](std::error_code& ec) { return write(buf, ec); });
}

std::size_t Socket::write(std::span<const std::byte> buf,
                          std::error_code& ec) noexcept {
  return detail::WriteSome(get(), buf, ec);
}

void Socket::shutdown(int how) {
  detail::OrThrow("uepoll_shutdown",
                  [&](std::error_code& ec) { shutdown(how, ec); });
}

void Socket::shutdown(int how, std::error_code& ec) noexcept {
  detail::Check(uepoll_shutdown(get(), how), ec);
}

}  // namespace uepoll
