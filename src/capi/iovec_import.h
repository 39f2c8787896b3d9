// import_iovec (lib/iov_iter.c, Linux 6.18): the checks the kernel makes on
// a user's iovec array before any I/O, and the IoIter over it.
//
//   - more than UIO_MAXIOV (1024) segments: EINVAL for readv/writev (the
//     socket calls check first and fail EMSGSIZE);
//   - the array itself: EFAULT when it cannot be read (NULL here);
//   - any length that is negative as an ssize_t: EINVAL (all segments are
//     read before any range is checked);
//   - each range against the user address space: EFAULT; a single
//     segment is first clamped to MAX_RW_COUNT, more segments are checked
//     whole and then clamped so the total stays within MAX_RW_COUNT.
//
// The array is copied (on the stack up to UIO_FASTIOV segments), as the
// kernel copies it, so the caller may change its own while we work and the
// clamped lengths never reach it.
#ifndef UEPOLL_SRC_CAPI_IOVEC_IMPORT_H_
#define UEPOLL_SRC_CAPI_IOVEC_IMPORT_H_

#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstring>

#include "base/alloc.h"
#include "capi/user_access.h"
#include "core/io_iter.h"

namespace uepoll::impl {

inline constexpr long kUioMaxIov = 1024;  // UIO_MAXIOV
inline constexpr int kUioFastIov = 8;     // UIO_FASTIOV

class ImportedIovec {
 public:
  ImportedIovec() = default;
  ImportedIovec(const ImportedIovec&) = delete;
  ImportedIovec& operator=(const ImportedIovec&) = delete;
  ~ImportedIovec() {
    if (iov_ != fast_) DeleteArray(iov_);
  }

  // 0 or -errno; nr_segs already known to be in [0, UIO_MAXIOV].
  int Import(const iovec* uvec, long nr_segs) {
    n_ = static_cast<size_t>(nr_segs);
    if (n_ == 0) return 0;
    if (n_ > kUioFastIov) {
      iov_ = NewArray<iovec>(n_);
      if (!iov_) return -ENOMEM;
    }
    if (!uvec || reinterpret_cast<uintptr_t>(uvec) < 4096 ||
        !AccessOk(uvec, n_ * sizeof(iovec))) {
      return -EFAULT;
    }
    std::memcpy(iov_, uvec, n_ * sizeof(iovec));
    for (size_t i = 0; i < n_; ++i) {
      if (static_cast<ssize_t>(iov_[i].iov_len) < 0) return -EINVAL;
    }
    if (n_ == 1) {  // import_ubuf: clamp, then check
      if (iov_[0].iov_len > kMaxRwCount) iov_[0].iov_len = kMaxRwCount;
      if (!AccessOk(iov_[0].iov_base, iov_[0].iov_len)) return -EFAULT;
      total_ = iov_[0].iov_len;
      return 0;
    }
    total_ = 0;
    for (size_t i = 0; i < n_; ++i) {
      size_t len = iov_[i].iov_len;
      if (!AccessOk(iov_[i].iov_base, len)) return -EFAULT;
      if (len > kMaxRwCount - total_) {
        len = kMaxRwCount - total_;
        iov_[i].iov_len = len;
      }
      total_ += len;
    }
    return 0;
  }

  size_t total() const { return total_; }
  IoIter iter() const { return IoIter(iov_, n_, total_); }

 private:
  iovec fast_[kUioFastIov];
  iovec* iov_ = fast_;
  size_t n_ = 0;
  size_t total_ = 0;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CAPI_IOVEC_IMPORT_H_
