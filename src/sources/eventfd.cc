#include "sources/eventfd.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cstring>
#include <new>

#include "base/sys.h"
#include "core/fd_table.h"

namespace uepoll::impl {
namespace {
constexpr uint64_t kMax = UINT64_MAX;  // ULLONG_MAX: the overflow value
}

EventFd::EventFd(uint64_t initval, int flags)
    : File(FileKind::kEventfd, O_RDWR | (flags & EFD_NONBLOCK)),
      semaphore_(flags & EFD_SEMAPHORE),
      count_(initval) {}

uint32_t EventFd::Poll(int) {
  uint64_t count = count_.load(std::memory_order_seq_cst);
  uint32_t mask = 0;
  // eventfd reports the plain bits only (no RDNORM/WRNORM).
  if (count > 0) mask |= EPOLLIN;
  if (count == kMax) mask |= EPOLLERR;
  if (kMax - 1 > count) mask |= EPOLLOUT;
  return mask;
}

ssize_t EventFd::Read(void* buf, size_t n) {
  if (n < sizeof(uint64_t)) return -EINVAL;
  // Deviation: a NULL buffer fails before consuming (docs/semantics.md).
  if (!buf) return -EFAULT;
  uint64_t v = 0;
  bool moved = false;  // exported: the kernel eventfd answers (export.h)
  {
    MutexLock l(wq_.lock());
    if (!exported_ && count_.load(std::memory_order_relaxed) == 0) {
      if (nonblock()) return -EAGAIN;
      // Unchecked lambda: WaitEventLocked calls it with wq_.lock_ held, which
      // clang cannot see from the lambda's body.
      int r = WaitEventLocked(wq_, false, [this]() NO_THREAD_SAFETY_ANALYSIS {
        return count_.load(std::memory_order_relaxed) > 0 || exported_;
      });
      if (r) return r;
    }
    // After WaitEventLocked dropped and re-took wq_.lock_: the count (and
    // exported_) are reloaded here, never taken from before the sleep.
    moved = exported_;
    if (!moved) {
      uint64_t c = count_.load(std::memory_order_relaxed);
      v = semaphore_ ? 1 : c;
      count_.store(c - v, std::memory_order_seq_cst);
      wq_.WakeUpLocked(EPOLLOUT, 1);
    }
  }
  if (moved) return ForwardOne(buf, n, false);
  std::memcpy(buf, &v, sizeof v);
  return sizeof v;
}

ssize_t EventFd::Write(const void* buf, size_t n) {
  // Unlike read (which accepts a larger buffer), write wants exactly 8.
  if (n != sizeof(uint64_t)) return -EINVAL;
  if (!buf) return -EFAULT;
  uint64_t v;
  std::memcpy(&v, buf, sizeof v);
  if (v == kMax) return -EINVAL;
  {
    MutexLock l(wq_.lock());
    if (!exported_ && kMax - count_.load(std::memory_order_relaxed) <= v) {
      if (nonblock()) return -EAGAIN;
      // Unchecked lambda: called with wq_.lock_ held (as in Read).
      int r =
          WaitEventLocked(wq_, false, [this, v]() NO_THREAD_SAFETY_ANALYSIS {
            return kMax - count_.load(std::memory_order_relaxed) > v ||
                   exported_;
          });
      if (r) return r;
    }
    // After WaitEventLocked dropped and re-took wq_.lock_: the room test
    // held under the re-taken lock, and the count is reloaded for the add.
    if (!exported_) {
      count_.store(count_.load(std::memory_order_relaxed) + v,
                   std::memory_order_seq_cst);
      wq_.WakeUpLocked(EPOLLIN, 1);
      return sizeof v;
    }
  }
  return ForwardOne(buf, n, true);
}

ssize_t EventFd::ForwardOne(const void* buf, size_t n, bool write) {
  iovec seg;
  IoIter it = IoIter::Single(const_cast<void*>(buf), n, seg);
  return write ? ForwardWrite(kfd_.get(), it) : ForwardRead(kfd_.get(), it);
}

int EventFd::Kernelize(ExportSession& s) {
  if (int err = s.Reserve(1)) return err;
  int k = -1;
  {
    MutexLock l(wq_.lock());
    if (!exported_) {
      // The count as it is, through a write (eventfd2 takes an unsigned
      // int): at most 2^64 - 2, which a non-blocking write always adds to 0.
      k = sys::Eventfd(
          0, EFD_CLOEXEC | EFD_NONBLOCK | (semaphore_ ? EFD_SEMAPHORE : 0));
      if (k < 0) return -errno;
      uint64_t c = count_.load(std::memory_order_relaxed);
      if ((c && sys::Write(k, &c, sizeof c) != sizeof c) ||
          sys::Fcntl(k, F_SETFL, flags() & O_NONBLOCK) < 0) {
        int err = -errno;
        sys::Close(k);
        return err;
      }
      AdoptForward(&kfd_, k);
      // Readiness is the kernel's now; watchers still hooked see OUT
      // alone until their registrations move (kernel/export.h).
      count_.store(0, std::memory_order_seq_cst);
      exported_ = true;
    }
  }
  if (kfd_.get() >= 0 && TryRef()) s.Add(this, kfd_.get());
  return 0;
}

int CreateEventFd(unsigned int initval, int flags) {
  if (flags & ~(EFD_SEMAPHORE | EFD_CLOEXEC | EFD_NONBLOCK)) return -EINVAL;
  auto* f = new (std::nothrow) EventFd(initval, flags);
  if (!f) return -ENOMEM;
  int fd = FdTable::Get().Install(f, flags & EFD_CLOEXEC);
  if (fd < 0) f->Unref();
  return fd;
}

}  // namespace uepoll::impl
