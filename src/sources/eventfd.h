// EventFd: the kernel's eventfd. A 64-bit counter; readable (IN) when > 0,
// writable (OUT) while a write of 1 would not overflow (count < 2^64 - 2).
//
// Locking: count_ is guarded by wq_.lock_, as the kernel guards it with
// ctx->wqh.lock; wakeups are issued with that lock held, so a watcher's
// callback sees the count of the write that woke it.
#ifndef UEPOLL_SRC_SOURCES_EVENTFD_H_
#define UEPOLL_SRC_SOURCES_EVENTFD_H_

#include <cstdint>

#include "core/file.h"

namespace uepoll::impl {

class EventFd final : public File {
 public:
  // flags: EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC, already validated.
  EventFd(uint64_t initval, int flags);

  uint32_t Poll(int depth) override;
  WaitQueue& PollQueue() override { return wq_; }
  ssize_t Read(void* buf, size_t count) override;
  ssize_t Write(const void* buf, size_t count) override;

 private:
  WaitQueue wq_;
  uint64_t count_ GUARDED_BY(wq_.lock_);
  const bool semaphore_;
};

// uepoll_eventfd: a new eventfd descriptor or -errno.
int CreateEventFd(unsigned int initval, int flags);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_EVENTFD_H_
