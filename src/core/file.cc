#include "core/file.h"

#include <errno.h>

#include "core/io_iter.h"
#include "core/sigio.h"
#include "epoll/eventpoll.h"
#include "kernel/placeholder.h"

namespace uepoll::impl {

File::~File() {
  Delete(owner_.load(std::memory_order_relaxed));
  Live::Dec(Live::files);
}

FileOwner* File::MakeOwner() {
  FileOwner* o = owner();
  if (o) return o;
  auto* fresh = New<FileOwner>();
  if (!fresh) return nullptr;
  // acq_rel: publishes the record; on failure, acquires the winner's.
  if (!owner_.compare_exchange_strong(o, fresh, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
    Delete(fresh);
    return o;
  }
  return fresh;
}

ssize_t File::Read(void*, size_t) { return -EINVAL; }
ssize_t File::Write(const void*, size_t) { return -EINVAL; }
int File::Shutdown(int) { return -ENOTSOCK; }
int File::Ioctl(unsigned long, unsigned long) { return -ENOTTY; }

namespace {

// do_loop_readv_writev: one Read/Write per segment (an empty segment
// included: the file decides what 0 bytes mean), stopping at an error, a
// short count or the end. An error after some bytes is dropped.
template <class Op>
ssize_t LoopSegments(IoIter& it, Op op) {
  ssize_t ret = 0;
  while (it.count()) {
    size_t len = it.seg_len();
    ssize_t nr = op(it.seg_base(), len);
    if (nr < 0) {
      if (!ret) ret = nr;
      break;
    }
    ret += nr;
    if (static_cast<size_t>(nr) != len) break;
    it.Advance(len);
  }
  return ret;
}

}  // namespace

ssize_t File::ReadIter(IoIter& it) {
  return LoopSegments(
      it, [this](void* base, size_t len) { return Read(base, len); });
}

ssize_t File::ReadIterOneValue(IoIter& it, size_t size) {
  char value[sizeof(uint64_t)];
  if (it.count() < size || size > sizeof value) return -EINVAL;
  if (it.WouldFault(size)) return -EFAULT;
  ssize_t r = Read(value, size);
  if (r > 0) it.CopyTo(value, static_cast<size_t>(r));
  return r;
}

ssize_t File::WriteIter(IoIter& it) {
  return LoopSegments(
      it, [this](void* base, size_t len) { return Write(base, len); });
}

int File::SetStatusFlags(uint32_t arg) {
  // The kernel's SETFL_MASK, less O_DIRECT (no uepoll object but a pipe
  // supports it; pipes override this).
  constexpr uint32_t kSettable = O_APPEND | O_NONBLOCK | O_NOATIME;
  if (arg & O_DIRECT) return -EINVAL;
  uint32_t old = flags();
  set_flags((old & ~kSettable) | (arg & kSettable));
  return 0;
}

int File::OpenKernelFile(int minfd) { return MakePlaceholder(minfd); }

void File::LastClose() {
  if (left_at_fork_) return;  // leaked: tearing it down takes its locks
  // No descriptor and no call refers to this object any more, so no new
  // item can be added: remove the existing ones, then tear down. Always
  // through watch_lock_, never a lockless "no watchers" shortcut: a DEL or
  // an instance close that just unlinked the last item may still be inside
  // watch_lock_, and taking the lock is what orders our free after its
  // unlock (TSan caught the shortcut freeing the file under it).
  EpollReleaseFile(this);
  Release();
}

}  // namespace uepoll::impl
