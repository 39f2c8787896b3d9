// Pipes (the kernel's fs/pipe.c): the shared inode and its two ends. The
// model and its invariants are in pipe.cc; kernel/export.h turns a pipe
// into the kernel's (pipe_export.cc).
#ifndef UEPOLL_SRC_SOURCES_PIPE_INODE_H_
#define UEPOLL_SRC_SOURCES_PIPE_INODE_H_

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/mutex.h"
#include "core/file.h"
#include "core/inode.h"
#include "core/io_iter.h"
#include "core/sigio.h"
#include "core/wait_queue.h"
#include "kernel/export.h"
#include "sources/pipe_page.h"

namespace uepoll::impl {

class ExportSession;
class PipeEnd;

struct PipeBuf {
  Page* page = nullptr;
  uint32_t offset = 0;
  uint32_t len = 0;
  bool packet = false;  // PIPE_BUF_FLAG_PACKET (written in O_DIRECT mode)
};

class PipeInode {
 public:
  UEPOLL_ALLOCATED_CLASS
  PipeInode() { identity_.StampNow(); }
  PipeInode(const PipeInode&) = delete;
  PipeInode& operator=(const PipeInode&) = delete;
  ~PipeInode() {  // the last end is gone
    for (unsigned i = tail_; i != head_; ++i) delete Slot(i).page;
    delete tmp_page_;
    if (bufs_ != inline_bufs_) DeleteArray(bufs_);
  }

  uint32_t PollRead();
  uint32_t PollWrite();
  ssize_t Read(IoIter& to, bool nonblock);
  ssize_t Write(IoIter& from, bool nonblock, bool packet);
  // F_GETPIPE_SZ / F_SETPIPE_SZ (pipe_fcntl): the capacity in bytes, or
  // -errno.
  long Size() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return static_cast<long>(max_usage_) * kPipePageSize;
  }
  long SetSize(unsigned int arg) EXCLUDES(mu_);
  // FIONREAD: the bytes in the pipe.
  int Unread() EXCLUDES(mu_);
  // pipe_release for one end; frees the inode when both ends are gone.
  void ReleaseEnd(bool reader);
  // The two ends, for an export (set once, at creation).
  void SetEnds(PipeEnd* r, PipeEnd* w) EXCLUDES(mu_) {
    MutexLock l(mu_);
    end_[0] = r;
    end_[1] = w;
  }

  // --- export (kernel/export.h; pipe_export.cc) ---
  // Moves the contents into a new kernel pipe and makes this one a shell
  // whose calls go there. 0 or -errno (nothing changed).
  int Kernelize(ExportSession& s) EXCLUDES(mu_);
  bool exported() const { return exported_.load(std::memory_order_acquire); }
  // The forward descriptor of an exported pipe's end: valid while the
  // calling end is alive.
  int kfd(bool reader) const { return kfd_[reader ? 0 : 1].get(); }

  WaitQueue rd_wait_;  // read end's watchers and blocked readers
  WaitQueue wr_wait_;  // write end's watchers and blocked writers
  // fasync_readers and fasync_writers: the end in signal-driven mode, if
  // any (core/sigio.h). Each end is one File, so a slot holds at most it.
  FasyncSlot fasync_[2];    // [0] the read end, [1] the write end
  InodeIdentity identity_;  // fstat's inode (both ends share it)

 private:
  PipeBuf& Slot(unsigned i) REQUIRES(mu_) { return bufs_[i & ring_mask_]; }
  // Kernelize's copy into the kernel pipe k, made with status flags
  // `flags` (KernelPipeFlags): 0 or -errno.
  int FillKernel(const int k[2], int flags) REQUIRES(mu_);
  // pipe2's status flags for that kernel pipe: O_NONBLOCK or 0.
  int KernelPipeFlags() const REQUIRES(mu_);
  bool EmptyLocked() const REQUIRES(mu_) { return head_ == tail_; }
  bool FullLocked() const REQUIRES(mu_) { return head_ - tail_ >= max_usage_; }
  bool Readable() EXCLUDES(mu_) {
    MutexLock l(mu_);
    // An export wakes sleepers: they forward (kernel/export.h).
    return !EmptyLocked() || writers_ == 0 || exported_.load(kRelaxed);
  }
  bool Writable() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return !FullLocked() || readers_ == 0 || exported_.load(kRelaxed);
  }
  // How many pages a write of `left` bytes will likely need: one per page
  // of data, at most one per free slot, and at least one (the slot count may
  // be stale by the time mu_ is taken).
  unsigned PagesWanted(size_t left) const {
    unsigned used = used_hint_.load(std::memory_order_relaxed);
    unsigned max = max_hint_.load(std::memory_order_relaxed);
    unsigned free_slots = used >= max ? 1 : max - used;
    size_t pages = (left + kPipePageSize - 1) / kPipePageSize;
    return static_cast<unsigned>(std::min<size_t>(pages, free_slots));
  }
  // Pages the write can likely do without allocating: the cached
  // tmp_page_, or (for a sub-page write into a non-empty pipe) the merge.
  unsigned Cached(size_t left) const {
    if (left < kPipePageSize &&
        used_hint_.load(std::memory_order_relaxed) != 0) {
      return 1;
    }
    return has_tmp_hint_.load(std::memory_order_relaxed) ? 1 : 0;
  }
  void SyncHint() REQUIRES(mu_) {
    used_hint_.store(head_ - tail_, std::memory_order_relaxed);
    has_tmp_hint_.store(tmp_page_ != nullptr, std::memory_order_relaxed);
  }

  Mutex mu_;  // the kernel's pipe->mutex
  // The ring (the kernel's pipe->bufs): ring_mask_ + 1 slots, a power of
  // two, of which max_usage_ may be used. The default 16 slots live in the
  // inode itself; F_SETPIPE_SZ beyond that allocates a larger ring.
  PipeBuf inline_bufs_[kPipeSlots] GUARDED_BY(mu_);
  PipeBuf* bufs_ GUARDED_BY(mu_) = inline_bufs_;
  unsigned ring_mask_ GUARDED_BY(mu_) = kPipeSlots - 1;
  unsigned max_usage_ GUARDED_BY(mu_) = kPipeSlots;
  unsigned head_ GUARDED_BY(mu_) = 0;
  unsigned tail_ GUARDED_BY(mu_) = 0;
  int readers_ GUARDED_BY(mu_) = 1;
  int writers_ GUARDED_BY(mu_) = 1;
  // One drained page kept for the next write (the kernel's tmp_page).
  Page* tmp_page_ GUARDED_BY(mu_) = nullptr;
  // The kernel's poll_usage: once the pipe was polled, every write wakes
  // rd_wait (epoll's "every write is an edge"). Set, never cleared.
  std::atomic<bool> poll_usage_{false};
  // head_ - tail_ and max_usage_ as last seen under mu_; they only size the
  // page pre-allocation.
  std::atomic<unsigned> used_hint_{0};
  std::atomic<unsigned> max_hint_{kPipeSlots};
  std::atomic<bool> has_tmp_hint_{false};  // tmp_page_ != nullptr, a hint
  std::atomic<int> ends_{2};
  // The ends (nullptr once released), for an export.
  PipeEnd* end_[2] GUARDED_BY(mu_) = {nullptr, nullptr};
  // Set under mu_ by Kernelize, never cleared: from then on the ring is
  // empty and every read and write goes to the kernel pipe through kfd_
  // (read end, write end: -1 for an end that was closed), each closed by
  // its end's release (DropForward) or, in a forked child, at the fork.
  std::atomic<bool> exported_{false};
  ForwardFd kfd_[2];
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;
};

// Pages a read drained, chained through their own first bytes and freed
// once the pipe's mutex is released (a read may drain any number of
// slots; the pages are ours, so the chain needs no memory).
class DrainedPages {
 public:
  DrainedPages() = default;
  DrainedPages(const DrainedPages&) = delete;
  DrainedPages& operator=(const DrainedPages&) = delete;
  ~DrainedPages() { FreeAll(); }
  void Push(Page* p) {
    std::memcpy(p->bytes, &head_, sizeof head_);
    head_ = p;
  }
  void FreeAll() {
    while (Page* p = head_) {
      std::memcpy(&head_, p->bytes, sizeof head_);
      delete p;
    }
  }

 private:
  Page* head_ = nullptr;
};

class PipeEnd final : public File {
 public:
  PipeEnd(PipeInode* inode, bool reader, uint32_t f_flags)
      : File(FileKind::kPipe, f_flags), inode_(inode), reader_(reader) {}

  uint32_t Poll(int) override {
    return reader_ ? inode_->PollRead() : inode_->PollWrite();
  }
  WaitQueue& PollQueue() override {
    return reader_ ? inode_->rd_wait_ : inode_->wr_wait_;
  }
  ssize_t Read(void* buf, size_t count) override {
    iovec seg;
    IoIter it = IoIter::Single(buf, count, seg);
    return ReadIter(it);
  }
  ssize_t Write(const void* buf, size_t count) override {
    iovec seg;
    IoIter it = IoIter::Single(const_cast<void*>(buf), count, seg);
    return WriteIter(it);
  }
  ssize_t ReadIter(IoIter& it) override {
    if (!reader_) return -EBADF;
    return inode_->Read(it, nonblock());
  }
  ssize_t WriteIter(IoIter& it) override {
    if (reader_) return -EBADF;
    return inode_->Write(it, nonblock(), flags() & O_DIRECT);
  }
  // pipe_ioctl: FIONREAD on either end; nothing else.
  int Ioctl(unsigned long cmd, unsigned long arg) override {
    if (cmd != FIONREAD) return -ENOTTY;
    if (inode_->exported()) return ExportedIoctl(cmd, arg);
    int n = inode_->Unread();
    if (UserFault(reinterpret_cast<void*>(arg))) return -EFAULT;
    std::memcpy(reinterpret_cast<void*>(arg), &n, sizeof n);
    return 0;
  }
  // Pipes have FMODE_CAN_ODIRECT: F_SETFL may switch packet mode.
  int SetStatusFlags(uint32_t arg) override {
    constexpr uint32_t kSettable = O_APPEND | O_NONBLOCK | O_NOATIME | O_DIRECT;
    uint32_t old = flags();
    set_flags((old & ~kSettable) | (arg & kSettable));
    return 0;
  }
  // pipe_fasync: the read end joins fasync_readers, the write end
  // fasync_writers.
  int Fasync(int fd, bool on) override {
    return inode_->fasync_[reader_ ? 0 : 1].Set(this, fd, on);
  }
  int FasyncFd() override { return inode_->fasync_[reader_ ? 0 : 1].Fd(this); }
  InodeIdentity* Inode() override { return &inode_->identity_; }
  PipeInode* inode() const { return inode_; }
  bool reader() const { return reader_; }

 protected:
  void Release() override {
    // __fput takes the file off its fasync list before release.
    inode_->fasync_[reader_ ? 0 : 1].Clear(this);
    inode_->ReleaseEnd(reader_);
    delete this;
  }

 private:
  // A call in progress at the export: the kernel pipe answers.
  int ExportedIoctl(unsigned long cmd, unsigned long arg);

  PipeInode* const inode_;  // shared; freed by the last end's Release()
  const bool reader_;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_PIPE_INODE_H_
