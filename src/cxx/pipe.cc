#include <uepoll/pipe.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll {

Pipe Pipe::create(int flags) {
  return detail::OrThrow(
      "uepoll_pipe2", [&](std::error_code& ec) { return create(flags, ec); });
}

Pipe Pipe::create(int flags, std::error_code& ec) noexcept {
  int fds[2] = {-1, -1};
  if (detail::Check(uepoll_pipe2(fds, flags), ec) < 0) return {};
  return Pipe{PipeReader(Fd(fds[0])), PipeWriter(Fd(fds[1]))};
}

}  // namespace uepoll
