// The out-of-line half of byte_io.hpp: one uepoll_read / uepoll_write, and
// the throw, shared by every handle that reads or writes bytes.
#include <uepoll/byte_io.hpp>
#include <uepoll/uepoll.h>

#include "cxx/error.h"

namespace uepoll::detail {

std::size_t ReadSome(int fd, std::span<std::byte> buf, std::error_code& ec) {
  ssize_t n = Check(uepoll_read(fd, buf.data(), buf.size()), ec);
  return n < 0 ? 0 : static_cast<std::size_t>(n);
}

std::size_t WriteSome(int fd, std::span<const std::byte> buf,
                      std::error_code& ec) {
  ssize_t n = Check(uepoll_write(fd, buf.data(), buf.size()), ec);
  return n < 0 ? 0 : static_cast<std::size_t>(n);
}

void ThrowIoError(const std::error_code& ec, const char* what) {
  ThrowError(ec, what);
}

}  // namespace uepoll::detail
