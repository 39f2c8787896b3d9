// IoIter: the user's buffers for one read or write, as a list of segments
// (the kernel's struct iov_iter over an iovec array). read and write use a
// single segment; readv, writev, sendmsg and recvmsg the caller's array.
//
// The C API builds it after checking the array the kernel's way
// (capi/iovec_import.h): at most UIO_MAXIOV segments, each length a valid
// ssize_t, each range below the user address space limit, the total
// clamped to MAX_RW_COUNT. Sources then copy to and from it in order, each
// copy advancing the position.
//
// Faults: a segment whose next byte lies in the NULL page (base < 4096)
// faults, as copy_to_user would; any other address is trusted (an unmapped
// one crashes the caller, docs/semantics.md D10). A copy stops at the first
// faulting byte and returns how much it copied, as copy_to_iter and
// copy_from_iter do; the bytes before the fault have been written.
//
// Thread safety: none; an IoIter is a local of one call.
#ifndef UEPOLL_SRC_CORE_IO_ITER_H_
#define UEPOLL_SRC_CORE_IO_ITER_H_

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace uepoll::impl {

// Whether copying to or from p would fault in the kernel, as far as uepoll
// can tell: only the NULL page, which is never mapped. The C API already
// rejects ranges beyond the user address space (access_ok); any other
// unmapped buffer crashes the caller instead of failing EFAULT
// (docs/semantics.md D10).
inline bool UserFault(const void* p) {
  return reinterpret_cast<uintptr_t>(p) < 4096;
}

class IoIter {
 public:
  // segs[0..n) with total length `count` (already clamped). The array must
  // outlive the iterator and is not modified.
  IoIter(const iovec* segs, size_t n, size_t count)
      : iov_(segs), nsegs_(n), count_(count) {}

  // A single buffer (read, write, send, recv): `storage` holds the segment.
  static IoIter Single(void* base, size_t len, iovec& storage) {
    storage.iov_base = base;
    storage.iov_len = len;
    return IoIter(&storage, 1, len);
  }

  // Bytes left to copy.
  size_t count() const { return count_; }

  // Copies up to n bytes from src into the user's buffers; returns how
  // many it copied (less than min(n, count()) only at a fault).
  size_t CopyTo(const void* src, size_t n) {
    return Copy(const_cast<void*>(src), n, /*to_user=*/true);
  }
  // Copies up to n bytes from the user's buffers into dst.
  size_t CopyFrom(void* dst, size_t n) { return Copy(dst, n, false); }

  // Skips n bytes (n <= count()).
  void Advance(size_t n) {
    count_ -= n;
    while (n) {
      size_t left = iov_[seg_].iov_len - off_;
      size_t step = std::min(left, n);
      off_ += step;
      n -= step;
      if (off_ == iov_[seg_].iov_len) NextSeg();
    }
    SkipEmpty();
  }

  // Whether copying the next n bytes (n <= count()) would fault.
  bool WouldFault(size_t n) const {
    size_t seg = seg_;
    size_t off = off_;
    while (n) {
      while (seg < nsegs_ && iov_[seg].iov_len == off) {
        ++seg;
        off = 0;
      }
      if (seg >= nsegs_) return false;
      if (Faults(static_cast<const char*>(iov_[seg].iov_base) + off)) {
        return true;
      }
      size_t step = std::min(iov_[seg].iov_len - off, n);
      n -= step;
      off += step;
    }
    return false;
  }

  // The current segment as the kernel's iter_iov_addr/iter_iov_len (for
  // files without read_iter/write_iter, which take one segment per call).
  char* seg_base() const {
    return static_cast<char*>(iov_[seg_].iov_base) + off_;
  }
  size_t seg_len() const { return std::min(iov_[seg_].iov_len - off_, count_); }

  // The bytes left as an iovec array, for a call handed to the kernel
  // instead (kernel/export.h: an object that became the kernel's while the
  // call was in progress). Writes at most max segments into out and
  // returns how many; the last one is clamped to count().
  size_t Remaining(iovec* out, size_t max) const {
    size_t n = 0;
    size_t left = count_;
    for (size_t seg = seg_, off = off_; left && seg < nsegs_ && n < max;
         ++seg, off = 0) {
      size_t len = std::min(iov_[seg].iov_len - off, left);
      if (!len) continue;
      out[n].iov_base = static_cast<char*>(iov_[seg].iov_base) + off;
      out[n].iov_len = len;
      left -= len;
      ++n;
    }
    return n;
  }

 private:
  static bool Faults(const void* p) { return UserFault(p); }
  void NextSeg() {
    ++seg_;
    off_ = 0;
  }
  // Keeps seg_ on a segment with bytes left while count_ > 0.
  void SkipEmpty() {
    while (count_ && seg_ < nsegs_ && iov_[seg_].iov_len == off_) NextSeg();
  }

  size_t Copy(void* kbuf, size_t n, bool to_user) {
    n = std::min(n, count_);
    char* k = static_cast<char*>(kbuf);
    size_t done = 0;
    SkipEmpty();
    while (done < n) {
      char* u = seg_base();
      if (Faults(u)) break;
      size_t step = std::min(iov_[seg_].iov_len - off_, n - done);
      if (to_user) {
        std::memcpy(u, k + done, step);
      } else {
        std::memcpy(k + done, u, step);
      }
      done += step;
      off_ += step;
      count_ -= step;
      if (off_ == iov_[seg_].iov_len) NextSeg();
      SkipEmpty();
    }
    return done;
  }

  const iovec* iov_;
  size_t nsegs_;
  size_t seg_ = 0;
  size_t off_ = 0;
  size_t count_;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_IO_ITER_H_
