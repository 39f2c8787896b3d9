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
#include <signal.h>
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
#include "core/inode.h"
#include "core/io_iter.h"
#include "core/sigio.h"
#include "kernel/export.h"
#include "sources/io_wait.h"
#include "sources/pipe_inode.h"
#include "sources/pipe_page.h"

namespace uepoll::impl {
namespace {

// The kernel's O_NOTIFICATION_PIPE. On 6.18 without CONFIG_WATCH_QUEUE (as
// on this machine) pipe2 accepts the flag and then fails ENOPKG.
constexpr int kNotificationPipe = O_EXCL;

}  // namespace

uint32_t PipeInode::PollRead() {
  poll_usage_.store(true, std::memory_order_relaxed);
  MutexLock l(mu_);
  uint32_t mask = 0;
  // An exported pipe reports nothing: its registrations are moving to the
  // kernel object, which reports for it (kernel/export.h).
  if (exported_.load(kRelaxed)) return 0;
  if (!EmptyLocked()) mask |= EPOLLIN | EPOLLRDNORM;
  if (writers_ == 0) mask |= EPOLLHUP;
  return mask;
}

uint32_t PipeInode::PollWrite() {
  poll_usage_.store(true, std::memory_order_relaxed);
  MutexLock l(mu_);
  uint32_t mask = 0;
  if (exported_.load(kRelaxed)) return 0;
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
    if (exported_.load(kRelaxed)) {
      // Exported (now, or while we slept): the rest is the kernel's. What
      // this call already read is returned first.
      if (ret) break;
      mu_.Unlock();
      return ForwardRead(kfd(true), to);
    }
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
    fasync_[1].Kill(POLL_OUT);
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
  // pipe_read signals the write end's owner after every read that got
  // this far, whatever it read (an EAGAIN included).
  fasync_[1].Kill(POLL_OUT);
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
  if (exported_.load(kRelaxed)) {  // kernel/export.h
    mu_.Unlock();
    return ForwardWrite(kfd(false), from);
  }
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
    if (exported_.load(kRelaxed)) {
      // Exported while mu_ was dropped (an allocation, a sleep): what was
      // written is returned; a call that wrote nothing yet goes on in the
      // kernel (kernel/export.h).
      if (ret) break;
      mu_.Unlock();
      return ForwardWrite(kfd(false), from);
    }
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
          // write is then the only one that can wake it
          // (MultiWriter.PipeNeverPolledBlockingWritersBlockingReader).
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
    fasync_[0].Kill(POLL_IN);
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
  // SIGPIPE is thread-directed and delivered first, as the kernel
  // dequeues a thread's own signals before the process's.
  if (sigpipe) RaiseSigpipe();
  // pipe_write signals the read end's owner after every write that got
  // this far (an EPIPE or EAGAIN included).
  fasync_[0].Kill(POLL_IN);
  return ret;
}

namespace {

// fs.pipe-max-size as the kernel has it now (it may change at any time), or
// its default when it cannot be read (a full descriptor table: EMFILE).
// errno is left as it was: the F_SETPIPE_SZ that asks may still succeed
// (IoctlPipeSize.pipe_size__a_full_descriptor_table_leaves_errno_alone).
unsigned long PipeMaxSize() {
  constexpr unsigned long kDefault = 1048576;
  int saved = errno;
  int fd = sys::Open("/proc/sys/fs/pipe-max-size", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved;
    return kDefault;
  }
  char text[32];
  ssize_t n = sys::Read(fd, text, sizeof text - 1);
  sys::Close(fd);
  errno = saved;
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

}  // namespace

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
  DropForward(&kfd_[reader ? 0 : 1]);
  {
    MutexLock l(mu_);
    end_[reader ? 0 : 1] = nullptr;
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
    fasync_[0].Kill(POLL_IN);
    fasync_[1].Kill(POLL_OUT);
  }
  if (ends_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

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
  inode->SetEnds(r, w);
  table.InstallReserved2(idx, r, w, flags & O_CLOEXEC, fds);
  return 0;
}

ssize_t PipeReadIter(File* f, IoIter& it, bool nonblock) {
  return static_cast<PipeEnd*>(f)->inode()->Read(it, nonblock);
}

ssize_t PipeWriteIter(File* f, IoIter& it, bool nonblock) {
  return static_cast<PipeEnd*>(f)->inode()->Write(it, nonblock,
                                                  f->flags() & O_DIRECT);
}

bool SamePipe(File* a, File* b) {
  return a->kind() == FileKind::kPipe && b->kind() == FileKind::kPipe &&
         static_cast<PipeEnd*>(a)->inode() == static_cast<PipeEnd*>(b)->inode();
}

long PipeFcntl(File* f, int cmd, unsigned long arg) {
  // get_pipe_info: any other kind of file is EBADF.
  if (f->kind() != FileKind::kPipe) return -EBADF;
  PipeInode* inode = static_cast<PipeEnd*>(f)->inode();
  if (inode->exported()) {  // a call in progress at the export
    int r =
        sys::Fcntl(inode->kfd((f->flags() & O_ACCMODE) == O_RDONLY), cmd, arg);
    return r < 0 ? -errno : r;
  }
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
