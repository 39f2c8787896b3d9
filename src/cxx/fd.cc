#include <uepoll/fd.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {

void Fd::reset(int fd) noexcept {
  // reset(get()) keeps the descriptor rather than adopting a closed number.
  // Errors ignored: see ~Fd.
  if (fd_ >= 0 && fd_ != fd) (void)uepoll_close(fd_);
  fd_ = fd;
}

void Fd::close() {
  detail::OrThrow("uepoll_close", [&](std::error_code& ec) { close(ec); });
}

void Fd::close(std::error_code& ec) noexcept {
  // Empty after the call whatever close says: the descriptor is gone even
  // when close fails (see ~Fd).
  detail::Check(uepoll_close(release()), ec);
}

Fd Fd::dup() const {
  return detail::OrThrow("uepoll_dup",
                         [&](std::error_code& ec) { return dup(ec); });
}

Fd Fd::dup(std::error_code& ec) const noexcept {
  return Fd(detail::Check(uepoll_dup(fd_), ec));
}

}  // namespace uepoll
