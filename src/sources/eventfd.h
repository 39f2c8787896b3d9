// EventFd: the kernel's eventfd. A 64-bit counter; readable (IN) when > 0,
// writable (OUT) while a write of 1 would not overflow (count < 2^64 - 2).
//
// Locking: count_ is one atomic word, changed by a seq_cst read-modify-
// write (a compare-and-swap) without any lock, and then the queue is
// woken: WaitQueue::WakeUpBorrowed, which calls the one epoll item
// watching the eventfd without the queue's lock (docs/design.md, "Lockless
// eventfd wakeups"). The kernel changes its count under ctx->wqh.lock; the
// difference is only that a wakeup may now come after a reader consumed
// what woke it, which every watcher already allows (it polls again). A
// read or write that would block takes wq_.lock_ and sleeps there. Poll
// reads count_ without a lock, as eventfd_poll does (READ_ONCE). The RMW
// and that load are seq_cst: they pair with the epoll callback's load of
// EpItem::queued and the scanner's store to it (docs/design.md, the
// wakeup fast path), and with WaitQueue::Active().
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
  // Its poll is always one load (count_).
  uint32_t PollNoLock() override { return Poll(0); }
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
  // One attempt at the change, a compare-and-swap: kDone (*v: what a read
  // took), kBlocked (nothing to read, or no room for v), or kExported
  // (seen without wq_.lock_, only Kernelize's holder knows it for sure).
  enum Try { kDone, kBlocked, kExported };
  Try TryRead(uint64_t* v);
  Try TryWrite(uint64_t v);
  // The part of Read and Write that takes wq_.lock_: sleeps while kBlocked
  // (or -EAGAIN), and settles kExported. The result of the last attempt,
  // or -errno.
  int LockedRead(uint64_t* v);
  int LockedWrite(uint64_t v);

  const bool semaphore_;
  // The line every read and write changes, apart from the File header that
  // every call reads (see Eventpoll's layout): the queue and the count.
  alignas(kCacheLine) WaitQueue wq_;
  // The count, or kExportedCount once Kernelize moved it to the kernel
  // (no write reaches that value: a write stops at 2^64 - 2). Set to it
  // under wq_.lock_, never changed afterwards.
  std::atomic<uint64_t> count_;
  ForwardFd kfd_;  // the kernel eventfd, once exported; closed at release

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
