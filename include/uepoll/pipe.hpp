// uepoll::Pipe: the two ends of a pipe (uepoll_pipe2).
//
// A plain struct, so the ends can be taken apart:
//   auto [r, w] = uepoll::Pipe::create(O_NONBLOCK);
// Closing one end is `p.write_end.close()` or `p.write_end.reset()`.
// Both error forms and the thread-safety rules are as described in fd.hpp.
#ifndef UEPOLL_PIPE_HPP_
#define UEPOLL_PIPE_HPP_

#include <fcntl.h>

#include <cstddef>
#include <span>
#include <system_error>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

namespace uepoll {

struct UEPOLL_CXX_API Pipe {
  Fd read_end;
  Fd write_end;

  // flags: O_NONBLOCK, O_CLOEXEC (O_DIRECT as far as uepoll supports it).
  [[nodiscard]] static Pipe create(int flags = 0);
  [[nodiscard]] static Pipe create(int flags, std::error_code& ec) noexcept;

  // Reads from read_end; returns the bytes read, 0 at end of file (every
  // write end closed). An empty pipe blocks, or fails EAGAIN when
  // nonblocking. The error_code form returns 0 on error.
  [[nodiscard]] std::size_t read(std::span<std::byte> buf);
  [[nodiscard]] std::size_t read(std::span<std::byte> buf,
                                 std::error_code& ec) noexcept;

  // Writes to write_end; returns the bytes written, which may be fewer than
  // buf.size() when nonblocking. The error_code form returns 0 on error.
  std::size_t write(std::span<const std::byte> buf);
  std::size_t write(std::span<const std::byte> buf,
                    std::error_code& ec) noexcept;
};

}  // namespace uepoll

#endif  // UEPOLL_PIPE_HPP_
