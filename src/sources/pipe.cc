// Pipes, as the kernel's fs/pipe.c (Linux 6.18) behaves.
//
// A PipeInode (the kernel's pipe_inode_info) is shared by the two ends. It
// holds a ring of kPipeSlots page-sized buffers: head_ is the next slot to
// fill, tail_ the next to drain. Capacity is counted in slots, not bytes: a
// slot that a read drained in part still occupies a whole slot, and a write
// that does not merge into the last slot takes a new one. This is why the
// writable test is "fewer than 16 slots used" and why writes of up to 4096
// bytes are atomic (they never span two slots).
//
// Each end is its own File (PipeEnd): the read end is O_RDONLY and hooks
// watchers on rd_wait_, the write end O_WRONLY on wr_wait_.
//
// Thread safety: the ring, the counts and tmp_page_ are GUARDED_BY(mu_); the
// rest are atomics read as hints (poll_usage_, the allocation hints) or the
// end count. The queues' locks are never held together with mu_: a wakeup
// is issued right after mu_ is released (as pipe_write/pipe_read do), and a
// sleeper hooks itself on a queue before testing the state under mu_
// (io_wait.h).
//
// Invariants (under mu_):
//  - tail_ <= head_ <= tail_ + kPipeSlots; slots [tail_, head_) hold pages.
//  - readers_, writers_ in {0, 1}; the inode is freed when both ends are.
//  - A slot holds len > 0 bytes at [offset, offset + len) of its page, so
//    offset + len <= kPipePageSize; only the last slot ever grows (merge).
#include "sources/pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "core/fd_table.h"
#include "core/file.h"
#include "sources/io_wait.h"
#include "sources/pipe_page.h"

namespace uepoll::impl {
namespace {

// The kernel's O_NOTIFICATION_PIPE. On 6.18 without CONFIG_WATCH_QUEUE (as
// on this machine) pipe2 accepts the flag and then fails ENOPKG.
constexpr int kNotificationPipe = O_EXCL;

struct PipeBuf {
  Page* page = nullptr;
  uint32_t offset = 0;
  uint32_t len = 0;
  bool packet = false;  // PIPE_BUF_FLAG_PACKET (written in O_DIRECT mode)
};

class PipeInode {
 public:
  UEPOLL_ALLOCATED_CLASS
  PipeInode() = default;
  PipeInode(const PipeInode&) = delete;
  PipeInode& operator=(const PipeInode&) = delete;
  ~PipeInode() {
    for (unsigned i = tail_; i != head_; ++i) delete bufs_[i % kPipeSlots].page;
    delete tmp_page_;
  }

  uint32_t PollRead();
  uint32_t PollWrite();
  ssize_t Read(void* buf, size_t count, bool nonblock);
  ssize_t Write(const void* buf, size_t count, bool nonblock, bool packet);
  // pipe_release for one end; frees the inode when both ends are gone.
  void ReleaseEnd(bool reader);

  WaitQueue rd_wait_;  // read end's watchers and blocked readers
  WaitQueue wr_wait_;  // write end's watchers and blocked writers

 private:
  bool EmptyLocked() const REQUIRES(mu_) { return head_ == tail_; }
  bool FullLocked() const REQUIRES(mu_) { return head_ - tail_ >= kPipeSlots; }
  bool Readable() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return !EmptyLocked() || writers_ == 0;
  }
  bool Writable() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return !FullLocked() || readers_ == 0;
  }
  // How many pages a write of `left` bytes will likely need: one per page
  // of data, at most one per free slot, and at least one (the slot count may
  // be stale by the time mu_ is taken).
  unsigned PagesWanted(size_t left) const {
    unsigned used = used_hint_.load(std::memory_order_relaxed);
    unsigned free_slots = used >= kPipeSlots ? 1 : kPipeSlots - used;
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
  PipeBuf bufs_[kPipeSlots] GUARDED_BY(mu_);
  unsigned head_ GUARDED_BY(mu_) = 0;
  unsigned tail_ GUARDED_BY(mu_) = 0;
  int readers_ GUARDED_BY(mu_) = 1;
  int writers_ GUARDED_BY(mu_) = 1;
  // One drained page kept for the next write (the kernel's tmp_page).
  Page* tmp_page_ GUARDED_BY(mu_) = nullptr;
  // The kernel's poll_usage: once the pipe was polled, every write wakes
  // rd_wait (epoll's "every write is an edge"). Set, never cleared.
  std::atomic<bool> poll_usage_{false};
  // head_ - tail_ as last seen under mu_; only sizes the page pre-allocation.
  std::atomic<unsigned> used_hint_{0};
  std::atomic<bool> has_tmp_hint_{false};  // tmp_page_ != nullptr, a hint
  std::atomic<int> ends_{2};
};

uint32_t PipeInode::PollRead() {
  poll_usage_.store(true, std::memory_order_relaxed);
  MutexLock l(mu_);
  uint32_t mask = 0;
  if (!EmptyLocked()) mask |= EPOLLIN | EPOLLRDNORM;
  if (writers_ == 0) mask |= EPOLLHUP;
  return mask;
}

uint32_t PipeInode::PollWrite() {
  poll_usage_.store(true, std::memory_order_relaxed);
  MutexLock l(mu_);
  uint32_t mask = 0;
  if (!FullLocked()) mask |= EPOLLOUT | EPOLLWRNORM;
  if (readers_ == 0) mask |= EPOLLERR;
  return mask;
}

ssize_t PipeInode::Read(void* buf, size_t count, bool nonblock) {
  if (count == 0) return 0;
  char* out = static_cast<char*>(buf);
  size_t total = count;
  ssize_t ret = 0;
  bool wake_writer = false;
  bool wake_next_reader = false;
  // Drained pages are freed after mu_ is released, on every way out (a
  // cancelled sleep included): at most one per slot.
  PagePool to_free;
  mu_.Lock();
  for (;;) {
    if (!EmptyLocked()) {
      PipeBuf& b = bufs_[tail_ % kPipeSlots];
      size_t chars = std::min<size_t>(b.len, total);
      if (UserFault(out + ret)) {  // the copy-out faults: nothing consumed
        if (!ret) ret = -EFAULT;
        break;
      }
      std::memcpy(out + ret, b.page->bytes + b.offset, chars);
      ret += static_cast<ssize_t>(chars);
      b.offset += static_cast<uint32_t>(chars);
      b.len -= static_cast<uint32_t>(chars);
      if (b.packet) {  // a packet is read whole or its rest is discarded
        total = chars;
        b.len = 0;
      }
      if (b.len == 0) {
        wake_writer |= FullLocked();
        if (!tmp_page_) {
          tmp_page_ = b.page;
        } else {
          to_free.Put(b.page);
        }
        b.page = nullptr;
        ++tail_;
        SyncHint();
      }
      total -= chars;
      if (total == 0) break;
      if (!EmptyLocked()) continue;
    }
    if (writers_ == 0) break;
    if (ret) break;
    if (nonblock) {
      ret = -EAGAIN;
      break;
    }
    mu_.Unlock();
    if (wake_writer) wr_wait_.WakeUp(EPOLLOUT | EPOLLWRNORM, 1);
    wake_writer = false;
    int r = WaitForIo(rd_wait_, /*exclusive=*/true, SignalRule::kRestartable,
                      [this] { return Readable(); });
    if (r) return r;
    mu_.Lock();
    // Relock: nothing decided before the drop is used. The wake owed to
    // writers was issued above; emptiness, writers_ and FullLocked() are
    // re-tested by the loop; wake_next_reader is re-checked at the end.
    wake_next_reader = true;
  }
  if (EmptyLocked()) wake_next_reader = false;
  mu_.Unlock();
  if (wake_writer) wr_wait_.WakeUp(EPOLLOUT | EPOLLWRNORM, 1);
  if (wake_next_reader) rd_wait_.WakeUp(EPOLLIN | EPOLLRDNORM, 1);
  return ret;
}

ssize_t PipeInode::Write(const void* buf, size_t count, bool nonblock,
                         bool packet) {
  if (count == 0) return 0;
  const char* in = static_cast<const char*>(buf);
  size_t left = count;
  ssize_t ret = 0;
  bool sigpipe = false;
  bool wake_next_writer = false;
  PagePool pool;
  // An allocation that failed is not retried: the write then stops where
  // it needed the page (-ENOMEM, or the count so far), as alloc_page()
  // failing does in pipe_write.
  bool oom = !pool.Fill(PagesWanted(left) - Cached(left));
  mu_.Lock();
  bool was_empty = EmptyLocked();
  if (readers_ == 0) {
    sigpipe = true;
    ret = -EPIPE;
    goto out;
  }
  {
    // Merge the sub-page remainder into the last slot if it fits whole;
    // the rest of a large write then starts page-aligned.
    size_t chars = left & (kPipePageSize - 1);
    if (chars && !was_empty) {
      PipeBuf& last = bufs_[(head_ - 1) % kPipeSlots];
      if (!last.packet && last.offset + last.len + chars <= kPipePageSize) {
        if (UserFault(in)) {
          ret = -EFAULT;
          goto out;
        }
        std::memcpy(last.page->bytes + last.offset + last.len, in, chars);
        last.len += static_cast<uint32_t>(chars);
        ret = static_cast<ssize_t>(chars);
        left -= chars;
        if (left == 0) goto out;
      }
    }
  }
  for (;;) {
    if (readers_ == 0) {
      sigpipe = true;
      if (!ret) ret = -EPIPE;
      break;
    }
    if (!FullLocked()) {
      Page* page = pool.Take();
      if (!page) {
        page = tmp_page_;
        tmp_page_ = nullptr;
      }
      if (!page) {
        // The pool ran out (a reader freed slots meanwhile, or the hint
        // expected a merge): allocate outside mu_, then re-check
        // everything, since the pipe may have changed while unlocked.
        if (!oom) {
          mu_.Unlock();
          oom = !pool.Fill(PagesWanted(left));
          mu_.Lock();
          // Relock: was_empty recomputed because a reader may have drained
          // the pipe while mu_ was dropped and gone to sleep on rd_wait_;
          // the page written next makes the pipe non-empty again, and this
          // write is then the only one that can wake it (issue 15, bug 1).
          // OR-ed in: a wake owed for what we wrote before the drop is
          // still owed. readers_ and the slot count are re-tested by the
          // loop below, the merge is not retried (D15).
          was_empty = was_empty || EmptyLocked();
          page = pool.Take();
        }
        if (!page) {
          if (!ret) ret = -ENOMEM;
          break;
        }
        pool.Put(page);
        continue;
      }
      if (UserFault(in + ret)) {  // 6.18 leaves no empty slot behind
        pool.Put(page);
        if (!ret) ret = -EFAULT;
        break;
      }
      size_t chunk = std::min(left, kPipePageSize);
      std::memcpy(page->bytes, in + ret, chunk);
      PipeBuf& b = bufs_[head_ % kPipeSlots];
      b.page = page;
      b.offset = 0;
      b.len = static_cast<uint32_t>(chunk);
      b.packet = packet;
      ++head_;
      SyncHint();
      ret += static_cast<ssize_t>(chunk);
      left -= chunk;
      if (left == 0) break;
    }
    if (!FullLocked()) continue;
    if (nonblock) {
      if (!ret) ret = -EAGAIN;
      break;
    }
    mu_.Unlock();
    if (was_empty) rd_wait_.WakeUp(EPOLLIN | EPOLLRDNORM, 1);
    int r = WaitForIo(wr_wait_, /*exclusive=*/true,
                      ret ? SignalRule::kPartial : SignalRule::kRestartable,
                      [this] { return Writable(); });
    if (r == 0 && !oom) oom = !pool.Fill(PagesWanted(left) - Cached(left));
    mu_.Lock();
    // Relock: was_empty recomputed (the wake owed so far was issued just
    // above); readers_ and the slot count are re-tested by the loop.
    was_empty = EmptyLocked();
    wake_next_writer = true;
    if (r) {
      if (!ret) ret = r;
      break;
    }
  }
out:
  if (FullLocked()) wake_next_writer = false;
  if (!tmp_page_) tmp_page_ = pool.Take();
  SyncHint();
  mu_.Unlock();
  if (was_empty || poll_usage_.load(std::memory_order_relaxed)) {
    rd_wait_.WakeUp(EPOLLIN | EPOLLRDNORM, 1);
  }
  if (wake_next_writer) wr_wait_.WakeUp(EPOLLOUT | EPOLLWRNORM, 1);
  if (sigpipe) RaiseSigpipe();
  return ret;
}

void PipeInode::ReleaseEnd(bool reader) {
  bool wake;
  {
    MutexLock l(mu_);
    if (reader) {
      --readers_;
    } else {
      --writers_;
    }
    // The last reader or writer went but not the other side: everybody
    // sleeping or watching must re-check (EOF, EPIPE, HUP, ERR).
    wake = (readers_ == 0) != (writers_ == 0);
  }
  if (wake) {
    rd_wait_.WakeUp(0, 0);
    wr_wait_.WakeUp(0, 0);
  }
  if (ends_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

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
    if (!reader_) return -EBADF;
    return inode_->Read(buf, count, nonblock());
  }
  ssize_t Write(const void* buf, size_t count) override {
    if (reader_) return -EBADF;
    return inode_->Write(buf, count, nonblock(), flags() & O_DIRECT);
  }
  // Pipes have FMODE_CAN_ODIRECT: F_SETFL may switch packet mode.
  int SetStatusFlags(uint32_t arg) override {
    constexpr uint32_t kSettable = O_APPEND | O_NONBLOCK | O_NOATIME | O_DIRECT;
    uint32_t old = flags();
    set_flags((old & ~kSettable) | (arg & kSettable));
    return 0;
  }

 protected:
  void Release() override {
    inode_->ReleaseEnd(reader_);
    delete this;
  }

 private:
  PipeInode* const inode_;  // shared; freed by the last end's Release()
  const bool reader_;
};

}  // namespace

int CreatePipe(int fds[2], int flags) {
  if (flags & ~(O_CLOEXEC | O_NONBLOCK | O_DIRECT | kNotificationPipe)) {
    return -EINVAL;
  }
  if (flags & kNotificationPipe) return -ENOPKG;
  // do_pipe2's order: the files (ENOMEM), the descriptors (EMFILE), then
  // the copy-out (EFAULT).
  auto* inode = new (std::nothrow) PipeInode;
  if (!inode) return -ENOMEM;
  // create_pipe_files: O_DIRECT (packet mode) matters to writes only and
  // is set on the write end alone.
  uint32_t nonblock = static_cast<uint32_t>(flags & O_NONBLOCK);
  uint32_t direct = static_cast<uint32_t>(flags & O_DIRECT);
  auto* r = new (std::nothrow) PipeEnd(inode, true, O_RDONLY | nonblock);
  auto* w =
      new (std::nothrow) PipeEnd(inode, false, O_WRONLY | nonblock | direct);
  if (!r || !w) {
    delete r;
    delete w;
    delete inode;
    return -ENOMEM;
  }
  FdTable& table = FdTable::Get();
  long idx[2];
  int err = table.Reserve2(idx);
  if (!err && !fds) {
    table.Unreserve2(idx);
    err = -EFAULT;
  }
  if (err) {
    r->Unref();  // both ends released: the inode goes with the second
    w->Unref();
    return err;
  }
  table.InstallReserved2(idx, r, w, flags & O_CLOEXEC, fds);
  return 0;
}

}  // namespace uepoll::impl
