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

}  // namespace uepoll
