// EventFd: the kernel's eventfd. A 64-bit counter; readable (IN) when > 0,
// writable (OUT) while a write of 1 would not overflow (count < 2^64 - 2).
//
// Locking: count_ is changed only under wq_.lock_, as the kernel guards it
// with ctx->wqh.lock; wakeups are issued with that lock held, so a
// watcher's callback sees the count of the write that woke it. Poll reads
// it without the lock, as eventfd_poll does (READ_ONCE): a harvest never
// contends with a writer. Stores and that load are seq_cst: they pair with
// the epoll callback's load of EpItem::queued and the scanner's store to it
// (docs/design.md, the wakeup fast path).
#ifndef UEPOLL_SRC_SOURCES_EVENTFD_H_
#define UEPOLL_SRC_SOURCES_EVENTFD_H_

#include <atomic>
#include <cstdint>

#include "core/file.h"
#include "kernel/export.h"

namespace uepoll::impl {

class EventFd final : public File {
 public:
  // Over-aligned (the layout below): allocated on a cache line.
  UEPOLL_LINE_ALLOCATED_CLASS
  // flags: EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC, already validated.
  EventFd(uint64_t initval, int flags);

  uint32_t Poll(int depth) override;
  WaitQueue& PollQueue() override { return wq_; }
  ssize_t Read(void* buf, size_t count) override;
  ssize_t Write(const void* buf, size_t count) override;
  // eventfd_read is a read_iter: the 8 bytes may span segments. Writes
  // keep the per-segment default (eventfd_write is a plain write).
  ssize_t ReadIter(IoIter& it) override {
    return ReadIterOneValue(it, sizeof(uint64_t));
  }

  // Export (kernel/export.h): a kernel eventfd with the same count and
  // flags; from then on every call goes there. 0 or -errno.
  int Kernelize(ExportSession& s);
  bool exported() const { return kfd_.get() >= 0; }
  int kfd() const { return kfd_.get(); }

 private:
  // A call that reached the eventfd after its export: the kernel's.
  ssize_t ForwardOne(const void* buf, size_t n, bool write);

  const bool semaphore_;
  // The line every read and write changes, apart from the File header that
  // every call reads (see Eventpoll's layout): the queue and the count.
  alignas(kCacheLine) WaitQueue wq_;
  std::atomic<uint64_t> count_;  // written under wq_.lock_
  // Set under wq_.lock_ by Kernelize, never cleared; beside count_, which
  // every read and write touches anyway.
  bool exported_ GUARDED_BY(wq_.lock()) = false;
  ForwardFd kfd_;  // the kernel eventfd, once exported_; closed at release

 protected:
  void Release() override {
    DropForward(&kfd_);
    delete this;
  }
};

// uepoll_eventfd: a new eventfd descriptor or -errno.
int CreateEventFd(unsigned int initval, int flags);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_EVENTFD_H_
