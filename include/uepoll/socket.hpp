// uepoll::Socket: one end of a uepoll socket pair. It reads and writes by
// itself (read, write, try_read, try_write: byte_io.hpp), sends and
// receives with MSG_* flags, and can shut either direction down.
//
// Errors and thread safety: fd.hpp.
#ifndef UEPOLL_SOCKET_HPP_
#define UEPOLL_SOCKET_HPP_

#include <sys/socket.h>

#include <cstddef>
#include <span>
#include <system_error>
#include <utility>

#include <uepoll/byte_io.hpp>
#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

namespace uepoll {

class UEPOLL_CXX_API Socket : public detail::ReadOps<Socket>,
                              public detail::WriteOps<Socket> {
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

  // read returns 0 once the peer has shut down writing or closed; write to
  // a peer that has shut down reading or closed fails EPIPE (and raises
  // SIGPIPE), as in Linux.

  // how: SHUT_RD, SHUT_WR or SHUT_RDWR.
  void shutdown(int how);
  void shutdown(int how, std::error_code& ec) noexcept;

  // uepoll_send / uepoll_recv with MSG_* flags (MSG_DONTWAIT, MSG_PEEK,
  // MSG_NOSIGNAL, MSG_WAITALL, MSG_TRUNC): the count, as the calls return
  // it (with MSG_TRUNC on a datagram socket, the message's whole length,
  // which may exceed buf). The throwing forms throw std::system_error; the
  // ec forms return 0 with ec set.
  std::size_t send(std::span<const std::byte> buf, int flags);
  std::size_t send(std::span<const std::byte> buf, int flags,
                   std::error_code& ec) noexcept;
  [[nodiscard]] std::size_t recv(std::span<std::byte> buf, int flags);
  [[nodiscard]] std::size_t recv(std::span<std::byte> buf, int flags,
                                 std::error_code& ec) noexcept;

 private:
  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_SOCKET_HPP_
