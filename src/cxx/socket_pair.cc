#include <uepoll/socket_pair.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {

SocketPair SocketPair::create(int flags) {
  return detail::OrThrow("uepoll_socketpair", [&](std::error_code& ec) {
    return create(flags, ec);
  });
}

SocketPair SocketPair::create(int flags, std::error_code& ec) noexcept {
  int sv[2] = {-1, -1};
  // The type bits of flags (SOCK_TYPE_MASK); none means a stream pair.
  if ((flags & 0xf) == 0) flags |= SOCK_STREAM;
  if (detail::Check(uepoll_socketpair(AF_UNIX, flags, 0, sv), ec) < 0) {
    return {};
  }
  return SocketPair{Socket(Fd(sv[0])), Socket(Fd(sv[1]))};
}

}  // namespace uepoll
