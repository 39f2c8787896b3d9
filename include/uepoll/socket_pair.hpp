// uepoll::SocketPair: two connected sockets (uepoll_socketpair with
// AF_UNIX): stream sockets unless flags name another type.
//
// A plain struct, so the ends can be taken apart:
//   auto [a, b] = uepoll::SocketPair::create(SOCK_NONBLOCK);
//   auto [c, d] = uepoll::SocketPair::create(SOCK_SEQPACKET | SOCK_CLOEXEC);
#ifndef UEPOLL_SOCKET_PAIR_HPP_
#define UEPOLL_SOCKET_PAIR_HPP_

#include <system_error>

#include <uepoll/config.hpp>
#include <uepoll/socket.hpp>

namespace uepoll {

struct UEPOLL_CXX_API SocketPair {
  Socket first;
  Socket second;

  // flags: SOCK_NONBLOCK, SOCK_CLOEXEC, and at most one type
  // (SOCK_STREAM, the default; SOCK_DGRAM; SOCK_SEQPACKET).
  [[nodiscard]] static SocketPair create(int flags = 0);
  [[nodiscard]] static SocketPair create(int flags,
                                         std::error_code& ec) noexcept;
};

}  // namespace uepoll

#endif  // UEPOLL_SOCKET_PAIR_HPP_
