#include "sources/eventfd.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cstring>
#include <new>

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
  uint64_t v;
  {
    MutexLock l(wq_.lock_);
    if (count_.load(std::memory_order_relaxed) == 0) {
      if (nonblock()) return -EAGAIN;
      int r = WaitEventLocked(wq_, false, [this]() NO_THREAD_SAFETY_ANALYSIS {
        return count_.load(std::memory_order_relaxed) > 0;
      });
      if (r) return r;
    }
    // After WaitEventLocked dropped and re-took wq_.lock_: the count is
    // reloaded here, under the lock, never taken from before the sleep.
    uint64_t c = count_.load(std::memory_order_relaxed);
    v = semaphore_ ? 1 : c;
    count_.store(c - v, std::memory_order_seq_cst);
    wq_.WakeUpLocked(EPOLLOUT, 1);
  }
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
  MutexLock l(wq_.lock_);
  if (kMax - count_.load(std::memory_order_relaxed) <= v) {
    if (nonblock()) return -EAGAIN;
    int r = WaitEventLocked(wq_, false, [this, v]() NO_THREAD_SAFETY_ANALYSIS {
      return kMax - count_.load(std::memory_order_relaxed) > v;
    });
    if (r) return r;
  }
  // After WaitEventLocked dropped and re-took wq_.lock_: the room test held
  // under the re-taken lock, and the count is reloaded for the add.
  count_.store(count_.load(std::memory_order_relaxed) + v,
               std::memory_order_seq_cst);
  wq_.WakeUpLocked(EPOLLIN, 1);
  return sizeof v;
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
