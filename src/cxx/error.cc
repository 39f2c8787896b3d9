#include "cxx/error.h"

namespace uepoll::detail {

void ThrowError(const std::error_code& ec, const char* what) {
  throw std::system_error(ec, what);
}

}  // namespace uepoll::detail
