// uepoll::Socket: one end of a uepoll socket pair.
//
// Both error forms and the thread-safety rules are as described in fd.hpp.
#ifndef UEPOLL_SOCKET_HPP_
#define UEPOLL_SOCKET_HPP_

#include <sys/socket.h>

#include <cstddef>
#include <span>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

namespace uepoll {

class UEPOLL_CXX_API Socket {
 public:
  Socket() noexcept = default;
  // Adopts a descriptor that refers to a uepoll socket.
  explicit Socket(Fd fd) noexcept : fd_(std::move(fd)) {}

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

  // Returns the bytes read, 0 once the peer has shut down writing or closed.
  // No data blocks, or fails EAGAIN when nonblocking. The error_code form
  // returns 0 on error.
  [[nodiscard]] std::size_t read(std::span<std::byte> buf);
  [[nodiscard]] std::size_t read(std::span<std::byte> buf,
                                 std::error_code& ec) noexcept;

  // Returns the bytes written, which may be fewer than buf.size() when
  // nonblocking. The error_code form returns 0 on error.
  std::size_t write(std::span<const std::byte> buf);
  std::size_t write(std::span<const std::byte> buf,
                    std::error_code& ec) noexcept;

  // how: SHUT_RD, SHUT_WR or SHUT_RDWR.
  void shutdown(int how);
  void shutdown(int how, std::error_code& ec) noexcept;

 private:
  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_SOCKET_HPP_
