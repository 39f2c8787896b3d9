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
// count_ once exported: a value no write reaches (a write wants the count
// to stay below kMax).
constexpr uint64_t kExportedCount = kMax;
}  // namespace

EventFd::EventFd(uint64_t initval, int flags)
    : File(FileKind::kEventfd, O_RDWR | (flags & EFD_NONBLOCK)),
      semaphore_(flags & EFD_SEMAPHORE),
      count_(initval) {
  set_poll_is_a_load(true);  // always: Poll() is one load of count_
}

uint32_t EventFd::Poll(int) {
  uint64_t count = count_.load(std::memory_order_seq_cst);
  // Exported: watchers still hooked see OUT alone until their
  // registrations move (kernel/export.h).
  if (count == kExportedCount) count = 0;
  uint32_t mask = 0;
  // eventfd reports the plain bits only (no RDNORM/WRNORM).
  if (count > 0) mask |= EPOLLIN;
  if (count == kMax) mask |= EPOLLERR;
  if (kMax - 1 > count) mask |= EPOLLOUT;
  return mask;
}

EventFd::Try EventFd::TryRead(uint64_t* v) {
  uint64_t c = count_.load(std::memory_order_relaxed);
  do {
    if (c == kExportedCount) return kExported;
    if (c == 0) return kBlocked;
    *v = semaphore_ ? 1 : c;
  } while (!count_.compare_exchange_weak(c, c - *v, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  return kDone;
}

EventFd::Try EventFd::TryWrite(uint64_t v) {
  uint64_t c = count_.load(std::memory_order_relaxed);
  do {
    if (c == kExportedCount) return kExported;
    if (kMax - c <= v) return kBlocked;
  } while (!count_.compare_exchange_weak(c, c + v, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  return kDone;
}

int EventFd::LockedRead(uint64_t* v) {
  MutexLock l(wq_.lock());
  for (;;) {
    Try t = TryRead(v);
    if (t == kDone) {
      wq_.WakeUpLocked(EPOLLOUT, 1);
      return t;
    }
    // Under wq_.lock_, Kernelize has finished: kExported is final.
    if (t == kExported) return t;
    if (nonblock()) return -EAGAIN;
    // Unchecked lambda: WaitEventLocked calls it with wq_.lock_ held, which
    // clang cannot see from the lambda's body. seq_cst: WaitEventLocked
    // tests it again after its entry is on the queue, against a lockless
    // writer's RMW then its look at the queue.
    int r = WaitEventLocked(wq_, false, [this]() NO_THREAD_SAFETY_ANALYSIS {
      return count_.load(std::memory_order_seq_cst) > 0;
    });
    if (r) return r;
    // Woken: try again (another reader may have been first).
  }
}

int EventFd::LockedWrite(uint64_t v) {
  MutexLock l(wq_.lock());
  for (;;) {
    Try t = TryWrite(v);
    if (t == kDone) {
      wq_.WakeUpLocked(EPOLLIN, 1);
      return t;
    }
    if (t == kExported) return t;
    if (nonblock()) return -EAGAIN;
    // Unchecked lambda: called with wq_.lock_ held (as in LockedRead).
    // kExportedCount passes the room test: the loop settles it.
    int r = WaitEventLocked(wq_, false, [this, v]() NO_THREAD_SAFETY_ANALYSIS {
      uint64_t c = count_.load(std::memory_order_seq_cst);
      return c == kExportedCount || kMax - c > v;
    });
    if (r) return r;
  }
}

ssize_t EventFd::Read(void* buf, size_t n) {
  if (n < sizeof(uint64_t)) return -EINVAL;
  // Deviation: a NULL buffer fails before consuming (docs/semantics.md).
  if (!buf) return -EFAULT;
  uint64_t v = 0;
  Try t = TryRead(&v);
  if (t == kDone) {
    wq_.WakeUpBorrowed(this, EPOLLOUT);
  } else if (t == kBlocked && nonblock()) {
    return -EAGAIN;  // the count was 0 when the compare-and-swap looked
  } else {
    int r = LockedRead(&v);
    if (r < 0) return r;
    // exported: the kernel eventfd answers (export.h)
    if (r == kExported) return ForwardOne(buf, n, false);
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
  Try t = TryWrite(v);
  if (t == kDone) {
    wq_.WakeUpBorrowed(this, EPOLLIN);
    return sizeof v;
  }
  if (t == kBlocked && nonblock()) return -EAGAIN;
  int r = LockedWrite(v);
  if (r < 0) return r;
  if (r == kExported) return ForwardOne(buf, n, true);
  return sizeof v;
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
    if (count_.load(std::memory_order_relaxed) != kExportedCount) {
      k = sys::Eventfd(
          0, EFD_CLOEXEC | EFD_NONBLOCK | (semaphore_ ? EFD_SEMAPHORE : 0));
      if (k < 0) return -errno;
      // Blocking as ours, before the count moves: a failure here changes
      // nothing.
      if (sys::Fcntl(k, F_SETFL, flags() & O_NONBLOCK) < 0) {
        int err = -errno;
        sys::Close(k);
        return err;
      }
      // The count is frozen from here on: lockless reads and writes see
      // kExportedCount and come to wq_.lock_, where they find it final.
      uint64_t c = count_.exchange(kExportedCount, std::memory_order_seq_cst);
      // The count as it is, through a write (eventfd2 takes an unsigned
      // int): at most 2^64 - 2, which any write adds to 0 without blocking.
      if (c && sys::Write(k, &c, sizeof c) != sizeof c) {
        int err = -errno;
        // Not seen to happen. A harvest may have polled the frozen count
        // as empty meanwhile: every watcher hears of the count again.
        count_.store(c, std::memory_order_seq_cst);
        wq_.WakeUpLocked(0, 1);
        sys::Close(k);
        return err;
      }
      AdoptForward(&kfd_, k);
      // Readiness is the kernel's now; watchers still hooked see OUT
      // alone until their registrations move (kernel/export.h).
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
