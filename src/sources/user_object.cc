#include "sources/user_object.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include <new>

#include "base/mutex.h"
#include "core/borrow.h"
#include "core/fd_table.h"
#include "sources/io_wait.h"
#include "sources/no_cancel.h"

namespace uepoll::impl {
namespace {

constexpr int kCreateFlags = O_NONBLOCK | O_CLOEXEC;
// The largest -errno a callback may return; anything below is a bug in it.
constexpr ssize_t kMaxErrno = 4095;

#ifndef NDEBUG
// The user object whose poll callback this thread is running, if any.
// Debug builds only: the checks below cost a thread-local access each.
thread_local const UserObject* tl_polling = nullptr;

[[noreturn]] void Misuse(const char* what) {
  fprintf(stderr,
          "uepoll: misuse of a user object: %s. A poll callback must answer "
          "the object's readiness and return: no uepoll call, no notify "
          "(docs/design.md, \"User-defined objects\")\n",
          what);
  abort();
}

// For base/mutex.h's report of a lock taken twice by one thread: the most
// likely cause, named.
const char* DeadlockContext() {
  return tl_polling ? " (inside the poll callback of a user object: it "
                      "called back into uepoll)"
                    : "";
}

struct PollingScope {
  explicit PollingScope(const UserObject* o) {
    if (tl_polling) Misuse("a poll callback called into uepoll");
    tl_polling = o;
  }
  ~PollingScope() { tl_polling = nullptr; }
};

void InstallDeadlockContext() {
  static const bool once = [] {
    Mutex::SetDeadlockContext(&DeadlockContext);
    return true;
  }();
  (void)once;
}
#else
void InstallDeadlockContext() {}
#endif

// A callback's result: the byte count (at most `count`) or -errno.
ssize_t Checked(ssize_t r, size_t count) {
  if (r > static_cast<ssize_t>(count)) return static_cast<ssize_t>(count);
  if (r < -kMaxErrno) return -EIO;
  return r;
}

}  // namespace

UserObject::UserObject(const uepoll_obj_ops& ops, void* ctx, int flags)
    : File(FileKind::kUser, O_RDWR | (flags & O_NONBLOCK)),
      ops_(ops),
      ctx_(ctx),
      release_(ops.release) {}

UserObject::UserObject(uint32_t mask, int flags)
    : File(FileKind::kUser, O_RDWR | (flags & O_NONBLOCK)),
      ops_{},
      ctx_(nullptr),
      mask_(mask) {}

uint32_t UserObject::Poll(int) {
  if (mask_mode()) return mask_.load(std::memory_order_seq_cst);
#ifndef NDEBUG
  PollingScope scope(this);
#endif
  // Flag bits (EPOLLET, ...) in the answer would reach epoll_wait's
  // caller: only readiness passes.
  return ops_.poll(ctx_) & kUserReadinessBits;
}

void UserObject::Notify(uint32_t events) {
#ifndef NDEBUG
  if (tl_polling) Misuse("notify called from a poll callback");
#endif
  // Active() first (inside WakeUp): with nobody watching, one atomic load.
  wq_.WakeUp(events, 1);
}

ssize_t UserObject::CallIo(bool write, void* buf, size_t count) {
#ifndef NDEBUG
  if (tl_polling) Misuse("a poll callback called uepoll_read/uepoll_write");
#endif
  if (mask_mode() || (write ? !ops_.write : !ops_.read)) return -EINVAL;
  // The callbacks are the application's code: they may close descriptors
  // (even this one) or take long. A borrow would make closers wait for
  // this thread, so it becomes a counted reference first.
  PinBorrowed();
  auto call = [&] {
    return Checked(
        write ? ops_.write(ctx_, buf, count) : ops_.read(ctx_, buf, count),
        count);
  };
  ssize_t r = call();
  if (r != -EAGAIN || nonblock()) return r;
  // A blocking descriptor sleeps until the object notifies, then asks the
  // callback again: the kernel's wait_event_interruptible(wq, the driver's
  // own condition), with the callback as the condition. WaitForIo hooks
  // the thread on the queue before each attempt, so a notify between an
  // attempt and the sleep is not lost.
  int w = WaitForIo(wq_, false, SignalRule::kRestartable, [&] {
    r = call();
    return r != -EAGAIN;
  });
  return w ? w : r;
}

ssize_t UserObject::Read(void* buf, size_t count) {
  return CallIo(false, buf, count);
}

ssize_t UserObject::Write(const void* buf, size_t count) {
  return CallIo(true, const_cast<void*>(buf), count);
}

int UserObject::MaskCtl(int op, uint32_t events) {
  if (!mask_mode()) return -EINVAL;
  if (events & ~kUserReadinessBits) return -EINVAL;
  // seq_cst RMWs, then WakeUp's seq_cst Active(): see mask_.
  switch (op) {
    case UEPOLL_VPOLL_ADDEVENTS:
      mask_.fetch_or(events, std::memory_order_seq_cst);
      break;
    case UEPOLL_VPOLL_DELEVENTS:
      // Bits going away are no event: nobody is woken.
      mask_.fetch_and(~events, std::memory_order_seq_cst);
      return 0;
    case UEPOLL_VPOLL_SETEVENTS:
      mask_.exchange(events, std::memory_order_seq_cst);
      break;
    default:
      return -EINVAL;
  }
  // The bits given are the hint: watchers of other bits are not disturbed.
  if (events) wq_.WakeUp(events, 1);
  return 0;
}

void UserObject::PutHandle() {
  // acq_rel: the last put sees every write made under the other handles.
  if (handles_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void UserObject::Release() {
  // Last close: no descriptor, no call in progress, no epoll item left, so
  // no callback runs now or later; the owner's handles may still notify.
  if (release_) {
    // The callback may close any descriptor, those this thread is using
    // in the call that dropped the last reference included (a recvmsg
    // dropping descriptors it cannot deliver): its borrows become
    // references first, or the close would wait for this very thread.
    PinBorrowed();
    // It runs inside a close, a receive or a collection, none of which can
    // be unwound half way: a cancellation waits for its end (as a kernel
    // release is never interrupted).
    NoCancel no_cancel;
    release_(ctx_);
  }
  PutHandle();
}

int CreateUserObject(const uepoll_obj_ops* ops, void* ctx, int flags,
                     UserObject** handle) {
  if (flags & ~kCreateFlags) return -EINVAL;
  if (!ops) return -EFAULT;
  if (!ops->poll) return -EINVAL;
  InstallDeadlockContext();
  auto* o = new (std::nothrow) UserObject(*ops, ctx, flags);
  if (!o) return -ENOMEM;
  // The handle is the owner's before the descriptor exists: a callback
  // that runs as soon as it does (another thread may use the number) can
  // already notify through it.
  UserObject* saved = nullptr;
  if (handle) {
    o->GetHandle();
    saved = *handle;
    *handle = o;
  }
  int fd = FdTable::Get().Install(o, flags & O_CLOEXEC);
  if (fd < 0) {
    // Nobody else has seen the object and the context is still the
    // caller's: tear it down without calling its release.
    o->release_ = nullptr;
    if (handle) {
      *handle = saved;
      o->PutHandle();
    }
    o->Unref();
  }
  return fd;
}

int CreateVpoll(uint32_t events, int flags) {
  if (flags & ~kCreateFlags) return -EINVAL;
  if (events & ~kUserReadinessBits) return -EINVAL;
  auto* o = new (std::nothrow) UserObject(events, flags);
  if (!o) return -ENOMEM;
  int fd = FdTable::Get().Install(o, flags & O_CLOEXEC);
  if (fd < 0) o->Unref();
  return fd;
}

int VpollCtl(int fd, int op, uint32_t events) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return -EBADF;
  if (f->kind() != FileKind::kUser) return -EINVAL;
  return static_cast<UserObject*>(f.get())->MaskCtl(op, events);
}

}  // namespace uepoll::impl
