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

}  // namespace

int PipeInode::FillKernel(const int k[2]) {
  // One kernel slot per uepoll slot at most (a write of a slot's bytes
  // never spans two kernel slots), so the same capacity holds them all;
  // the write end is non-blocking, so a shortfall is an error, not a hang.
  if (max_usage_ != kPipeSlots &&
      sys::Fcntl(k[1], F_SETPIPE_SZ, max_usage_ * kPipePageSize) < 0) {
    return -errno;
  }
  bool direct = false;
  for (unsigned i = tail_; i != head_; ++i) {
    const PipeBuf& b = Slot(i);
    if (b.packet != direct) {
      direct = b.packet;
      if (int err = SetFl(k[1], O_NONBLOCK | (direct ? O_DIRECT : 0))) {
        return err;
      }
    }
    ssize_t n = sys::Write(k[1], b.page->bytes + b.offset, b.len);
    if (n < 0) return -errno;
    if (static_cast<size_t>(n) != b.len) return -EAGAIN;
  }
  // Each end as the application left it (O_NONBLOCK on both, O_DIRECT on
  // the write end: create_pipe_files sets packet mode there only).
  for (int i = 0; i < 2; ++i) {
    if (!end_[i]) continue;
    uint32_t keep = O_NONBLOCK | O_ASYNC | (i == 0 ? 0 : O_DIRECT);
    if (int err = SetFl(k[i], static_cast<int>(end_[i]->flags() & keep))) {
      return err;
    }
  }
  return 0;
}

int PipeInode::Kernelize(ExportSession& s) {
  if (int err = s.Reserve(2)) return err;
  int k[2];
  if (KernelPipe2(k, O_CLOEXEC | O_NONBLOCK) < 0) return -errno;
  DrainedPages to_free;
  File* ends[2] = {nullptr, nullptr};
  int kfds[2] = {-1, -1};
  {
    MutexLock l(mu_);
    if (exported_.load(kRelaxed)) {
      // Converted before: the session only finishes what is left (a
      // number that still names an end).
      sys::Close(k[0]);
      sys::Close(k[1]);
      k[0] = k[1] = -1;
    } else {
      if (int err = FillKernel(k)) {
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
