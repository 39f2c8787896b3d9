// The one place where internal results (>= 0, or -errno) become the C
// API's -1/errno. errno is written only on failure.
#ifndef UEPOLL_SRC_CAPI_ERRORS_H_
#define UEPOLL_SRC_CAPI_ERRORS_H_

#include <errno.h>

namespace uepoll::impl {

template <class T>
inline T ToErrno(T r) {
  if (r < 0) {
    errno = static_cast<int>(-r);
    return -1;
  }
  return r;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CAPI_ERRORS_H_
