#include <uepoll/pipe.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"
#include "cxx/io.h"

namespace uepoll {

Pipe Pipe::create(int flags) {
  return detail::OrThrow(
      "uepoll_pipe2", [&](std::error_code& ec) { return create(flags, ec); });
}

Pipe Pipe::create(int flags, std::error_code& ec) noexcept {
  int fds[2] = {-1, -1};
  if (detail::Check(uepoll_pipe2(fds, flags), ec) < 0) return {};
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

std::size_t Pipe::read(std::span<std::byte> buf) {
  return detail::OrThrow("uepoll_read(pipe)",
                         [&](std::error_code& ec) { return read(buf, ec); });
}

std::size_t Pipe::read(std::span<std::byte> buf, std::error_code& ec) noexcept {
  return detail::ReadSome(read_end.get(), buf, ec);
}

std::size_t Pipe::write(std::span<const std::byte> buf) {
  return detail::OrThrow("uepoll_write(pipe)",
                         [&](std::error_code& ec) { return write(buf, ec); });
}

std::size_t Pipe::write(std::span<const std::byte> buf,
                        std::error_code& ec) noexcept {
  return detail::WriteSome(write_end.get(), buf, ec);
}

}  // namespace uepoll
