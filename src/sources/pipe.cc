// Pipes, as the kernel's fs/pipe.c (Linux 6.18) behaves.
//
// A PipeInode (the kernel's pipe_inode_info) is shared by the two ends. It
// holds a ring of page-sized buffers of which max_usage_ may be used (16 by
// default; F_SETPIPE_SZ sets any power of two): head_ is the next slot to
// fill, tail_ the next to drain. Capacity is counted in slots, not bytes: a
// slot that a read drained in part still occupies a whole slot, and a write
// that does not merge into the last slot takes a new one. This is why the
// writable test is "fewer than max_usage_ slots used" and why writes of up
// to 4096 bytes, vectored or not, are atomic (they never span two slots).
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
//  - tail_ <= head_ <= tail_ + max_usage_ <= tail_ + ring_mask_ + 1; slots
//    [tail_, head_) hold pages; the ring is inline_bufs_ while it has 16
//    slots, a heap array otherwise.
//  - readers_, writers_ in {0, 1}; the inode is freed when both ends are.
//  - A slot holds len > 0 bytes at [offset, offset + len) of its page, so
//    offset + len <= kPipePageSize; only the last slot ever grows (merge).
#include "sources/pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/caps.h"
#include "base/sys.h"
#include "core/fd_table.h"
#include "core/file.h"
#include "core/io_iter.h"
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
  ~PipeInode() NO_THREAD_SAFETY_ANALYSIS {  // the last end is gone
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

  WaitQueue rd_wait_;  // read end's watchers and blocked readers
  WaitQueue wr_wait_;  // write end's watchers and blocked writers

 private:
  PipeBuf& Slot(unsigned i) REQUIRES(mu_) { return bufs_[i & ring_mask_]; }
  bool EmptyLocked() const REQUIRES(mu_) { return head_ == tail_; }
  bool FullLocked() const REQUIRES(mu_) { return head_ - tail_ >= max_usage_; }
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

ssize_t PipeInode::Read(IoIter& to, bool nonblock) {
  size_t total = to.count();
  if (total == 0) return 0;
  ssize_t ret = 0;
  bool wake_writer = false;
  bool wake_next_reader = false;
  // Drained pages are freed after mu_ is released, on every way out (a
  // cancelled sleep included: the destructor). A resized ring may drain
  // more than kPipeSlots pages, hence a chain rather than a PagePool.
  DrainedPages to_free;
  mu_.Lock();
  for (;;) {
    if (!EmptyLocked()) {
      PipeBuf& b = Slot(tail_);
      size_t chars = std::min<size_t>(b.len, total);
      // A copy that faults part way leaves the slot as it was (the bytes
      // before the fault reached the caller's buffer all the same), as
      // copy_page_to_iter falling short does in pipe_read.
      size_t written = to.CopyTo(b.page->bytes + b.offset, chars);
      if (written < chars) {
        if (!ret) ret = -EFAULT;
        break;
      }
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
          to_free.Push(b.page);
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
  to_free.FreeAll();
  if (wake_writer) wr_wait_.WakeUp(EPOLLOUT | EPOLLWRNORM, 1);
  if (wake_next_reader) rd_wait_.WakeUp(EPOLLIN | EPOLLRDNORM, 1);
  return ret;
}

ssize_t PipeInode::Write(IoIter& from, bool nonblock, bool packet) {
  size_t left = from.count();
  if (left == 0) return 0;
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
    // the rest of a large write then starts page-aligned. A vectored write
    // is one write of its total: up to PIPE_BUF it lands in one slot.
    size_t chars = left & (kPipePageSize - 1);
    if (chars && !was_empty) {
      PipeBuf& last = Slot(head_ - 1);
      if (!last.packet && last.offset + last.len + chars <= kPipePageSize) {
        // A fault part way merges nothing (the slot's length is not
        // advanced), as in pipe_write.
        if (from.CopyFrom(last.page->bytes + last.offset + last.len, chars) !=
            chars) {
          ret = -EFAULT;
          goto out;
        }
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
      size_t chunk = std::min(left, kPipePageSize);
      // A page whose copy faults part way is dropped whole: 6.18 leaves no
      // slot behind for it, and the bytes before the fault are lost.
      if (from.CopyFrom(page->bytes, chunk) != chunk) {
        pool.Put(page);
        if (!ret) ret = -EFAULT;
        break;
      }
      PipeBuf& b = Slot(head_);
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

// fs.pipe-max-size as the kernel has it now (it may change at any time), or
// its default when it cannot be read.
unsigned long PipeMaxSize() {
  constexpr unsigned long kDefault = 1048576;
  int fd = sys::Open("/proc/sys/fs/pipe-max-size", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kDefault;
  char text[32];
  ssize_t n = sys::Read(fd, text, sizeof text - 1);
  sys::Close(fd);
  if (n <= 0) return kDefault;
  text[n] = '\0';
  char* end = nullptr;
  unsigned long v = std::strtoul(text, &end, 10);
  return end == text ? kDefault : v;
}

// round_pipe_size: 0 (invalid) above 2^31, else at least a page and a power
// of two.
unsigned long RoundPipeSize(unsigned int size) {
  if (size > (1u << 31)) return 0;
  if (size < kPipePageSize) return kPipePageSize;
  return std::bit_ceil(size);
}

long PipeInode::SetSize(unsigned int arg) {
  // pipe_set_size's order: the size (EINVAL), growing beyond
  // fs.pipe-max-size without CAP_SYS_RESOURCE (EPERM), then the contents
  // (EBUSY). The per-user page limits (fs.pipe-user-pages-*) count the
  // kernel's pipes of the whole user and are not modelled
  // (docs/semantics.md).
  unsigned long size = RoundPipeSize(arg);
  auto nr_slots = static_cast<unsigned>(size / kPipePageSize);
  if (nr_slots == 0) return -EINVAL;
  if (nr_slots > max_hint_.load(std::memory_order_relaxed) &&
      size > PipeMaxSize() && !HasCapability(CAP_SYS_RESOURCE)) {
    // Re-checked against the current size below: the hint only spares a
    // shrink the two syscalls.
    MutexLock l(mu_);
    if (nr_slots > max_usage_) return -EPERM;
  }
  // The new ring, allocated outside mu_: the inline one when 16 slots are
  // enough (the ring's size is a power of two at least max_usage_).
  PipeBuf* fresh = nullptr;
  if (nr_slots > kPipeSlots) {
    fresh = NewArray<PipeBuf>(nr_slots);
    if (!fresh) return -ENOMEM;
  }
  PipeBuf* old = nullptr;
  {
    MutexLock l(mu_);
    unsigned used = head_ - tail_;
    if (used > nr_slots) {  // pipe_resize_ring: the contents do not fit
      DeleteArray(fresh);
      return -EBUSY;
    }
    PipeBuf* target = fresh ? fresh : inline_bufs_;
    unsigned target_mask = fresh ? nr_slots - 1 : kPipeSlots - 1;
    if (target != bufs_) {
      for (unsigned i = 0; i < used; ++i) target[i] = Slot(tail_ + i);
      if (bufs_ != inline_bufs_) old = bufs_;
      bufs_ = target;
      ring_mask_ = target_mask;
      tail_ = 0;
      head_ = used;
    }
    max_usage_ = nr_slots;
    max_hint_.store(nr_slots, std::memory_order_relaxed);
    SyncHint();
  }
  DeleteArray(old);
  // "This might have made more room for writers": pipe_resize_ring wakes
  // one writer with no hint after every resize, a shrink included (an
  // edge for edge-triggered watchers of the write end).
  wr_wait_.WakeUp(0, 1);
  return static_cast<long>(size);
}

int PipeInode::Unread() {
  MutexLock l(mu_);
  size_t n = 0;
  for (unsigned i = tail_; i != head_; ++i) n += Slot(i).len;
  return static_cast<int>(n);
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
  PipeInode* inode() const { return inode_; }

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

long PipeFcntl(File* f, int cmd, unsigned long arg) {
  // get_pipe_info: any other kind of file is EBADF.
  if (f->kind() != FileKind::kPipe) return -EBADF;
  PipeInode* inode = static_cast<PipeEnd*>(f)->inode();
  switch (cmd) {
    case F_GETPIPE_SZ:
      return inode->Size();
    case F_SETPIPE_SZ:
      // pipe_fcntl takes the argument as an unsigned int.
      return inode->SetSize(static_cast<unsigned int>(arg));
    default:
      return -EINVAL;
  }
}

}  // namespace uepoll::impl
