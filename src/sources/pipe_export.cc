// A uepoll pipe turned into the kernel's (kernel/export.h): a kernel pipe of
// the same capacity that holds the same bytes, in order, with the packet
// boundaries of O_DIRECT writes, and ends with the same status flags; an
// end that was closed is closed there too.
#include <errno.h>
#include <fcntl.h>

#include "base/sys.h"
#include "kernel/export.h"
#include "sources/pipe_inode.h"

namespace uepoll::impl {
namespace {

int SetFl(int fd, int fl) {
  return sys::Fcntl(fd, F_SETFL, static_cast<unsigned long>(fl)) < 0 ? -errno
                                                                     : 0;
}

// The status flags of end i (0 the read end) that its kernel end carries:
// O_NONBLOCK and O_ASYNC on both, O_DIRECT on the write end
// (create_pipe_files sets packet mode there only).
int WantedFlags(int i) {
  return O_NONBLOCK | O_ASYNC | (i == 0 ? 0 : O_DIRECT);
}

}  // namespace

int PipeInode::FillKernel(const int k[2], int flags) {
  // Each end's status flags as they are (pipe2's) and as they must be.
  int cur[2] = {flags & O_NONBLOCK, flags & O_NONBLOCK};
  // One kernel slot per uepoll slot at most (a write of a slot's bytes
  // never spans two kernel slots), so the same capacity holds them all;
  // the write end is non-blocking, so a shortfall is an error, not a hang.
  if (max_usage_ != kPipeSlots &&
      sys::Fcntl(k[1], F_SETPIPE_SZ, max_usage_ * kPipePageSize) < 0) {
    return -errno;
  }
  for (unsigned i = tail_; i != head_; ++i) {
    const PipeBuf& b = Slot(i);
    int want = O_NONBLOCK | (b.packet ? O_DIRECT : 0);
    if (cur[1] != want) {
      if (int err = SetFl(k[1], want)) return err;
      cur[1] = want;
    }
    ssize_t n = sys::Write(k[1], b.page->bytes + b.offset, b.len);
    if (n < 0) return -errno;
    if (static_cast<size_t>(n) != b.len) return -EAGAIN;
  }
  // Each end as the application left it, with no call where it is so
  // already.
  for (int i = 0; i < 2; ++i) {
    if (!end_[i]) continue;
    int want = static_cast<int>(end_[i]->flags() & WantedFlags(i));
    if (want != cur[i]) {
      if (int err = SetFl(k[i], want)) return err;
    }
  }
  return 0;
}

int PipeInode::KernelPipeFlags() const {
  // Non-blocking while bytes are copied in (a shortfall is then an
  // error, not a hang); else as the ends want it, if they agree.
  if (!EmptyLocked()) return O_NONBLOCK;
  int nonblock = O_NONBLOCK;
  for (int i = 0; i < 2; ++i) {
    if (end_[i] && !(end_[i]->flags() & O_NONBLOCK)) nonblock = 0;
  }
  return nonblock;
}

int PipeInode::Kernelize(ExportSession& s) {
  if (int err = s.Reserve(2)) return err;
  DrainedPages to_free;
  File* ends[2] = {nullptr, nullptr};
  int kfds[2] = {-1, -1};
  {
    MutexLock l(mu_);
    // Converted before: the session only finishes what is left (a number
    // that still names an end). Else the kernel pipe is made here, with
    // the status flags its ends want when they agree: an export before a
    // fork makes no fcntl (BENCHMARKS.md, "Signals before the engine").
    if (!exported_.load(kRelaxed)) {
      int flags = KernelPipeFlags();
      int k[2];
      if (KernelPipe2(k, O_CLOEXEC | flags) < 0) return -errno;
      if (int err = FillKernel(k, flags)) {
        sys::Close(k[0]);
        sys::Close(k[1]);
        return err;
      }
      // The bytes are the kernel's now: empty the ring (pages freed after
      // mu_), close the kernel ends nobody has, and turn every later call
      // into the kernel's.
      for (unsigned i = tail_; i != head_; ++i) {
        to_free.Push(Slot(i).page);
        Slot(i).page = nullptr;
      }
      tail_ = head_;
      SyncHint();
      if (readers_ == 0) {
        sys::Close(k[0]);
        k[0] = -1;
      }
      if (writers_ == 0) {
        sys::Close(k[1]);
        k[1] = -1;
      }
      AdoptForward(&kfd_[0], k[0]);
      AdoptForward(&kfd_[1], k[1]);
      exported_.store(true, std::memory_order_release);
    }
    for (int i = 0; i < 2; ++i) {
      // An end in its last close is not handed over: its release closes
      // its forward descriptor.
      if (end_[i] && kfd_[i].get() >= 0 && end_[i]->TryRef()) {
        ends[i] = end_[i];
        kfds[i] = kfd_[i].get();
      }
    }
  }
  to_free.FreeAll();
  for (int i = 0; i < 2; ++i) {
    if (ends[i]) s.Add(ends[i], kfds[i]);
  }
  return 0;
}

int PipeEnd::ExportedIoctl(unsigned long cmd, unsigned long arg) {
  int r = sys::Ioctl(inode_->kfd(reader_), cmd, arg);
  return r < 0 ? -errno : r;
}

}  // namespace uepoll::impl
