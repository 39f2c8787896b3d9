// uepoll_read/write/close/dup*/fcntl and the source constructors.
#include <errno.h>
#include <limits.h>
#include <stdarg.h>

#include <cstdint>

#include <uepoll/uepoll.h>

#include "capi/errors.h"
#include "core/fd_table.h"
#include "sources/eventfd.h"
#include "sources/pipe.h"
#include "sources/socket.h"

using uepoll::impl::FdTable;
using uepoll::impl::FileBorrow;
using uepoll::impl::FileRef;
using uepoll::impl::ToErrno;

namespace {

// The kernel's access_ok() on x86-64: the range must lie below TASK_SIZE_MAX.
constexpr uintptr_t kTaskSizeMax = (uintptr_t{1} << 47) - 4096;
// MAX_RW_COUNT: reads and writes are clamped to this many bytes.
constexpr size_t kMaxRwCount = INT_MAX & ~size_t{4095};

bool AccessOk(const void* buf, size_t count) {
  auto addr = reinterpret_cast<uintptr_t>(buf);
  return count <= kTaskSizeMax && addr <= kTaskSizeMax - count;
}

// vfs_read/vfs_write's order: not open for that direction (EBADF), no such
// operation (EINVAL: an epoll instance), then the buffer (EFAULT).
int CheckIo(const uepoll::impl::File& f, bool write, const void* buf,
            size_t count) {
  uint32_t acc = f.flags() & O_ACCMODE;
  if (acc == (write ? O_RDONLY : O_WRONLY)) return -EBADF;
  if (f.is_epoll()) return -EINVAL;
  if (!AccessOk(buf, count)) return -EFAULT;
  return 0;
}

}  // namespace

extern "C" {

int uepoll_is_uepoll_fd(int fd) { return FdTable::InRange(fd); }

int uepoll_eventfd(unsigned int initval, int flags) {
  return ToErrno(uepoll::impl::CreateEventFd(initval, flags));
}

int uepoll_pipe(int pipefd[2]) { return uepoll_pipe2(pipefd, 0); }

int uepoll_pipe2(int pipefd[2], int flags) {
  return ToErrno(uepoll::impl::CreatePipe(pipefd, flags));
}

int uepoll_socketpair(int domain, int type, int protocol, int sv[2]) {
  return ToErrno(uepoll::impl::CreateSocketPair(domain, type, protocol, sv));
}

int uepoll_shutdown(int sockfd, int how) {
  FileRef f = FdTable::Get().Lookup(sockfd);
  if (!f) return ToErrno(-EBADF);
  return ToErrno(f->Shutdown(how));
}

ssize_t uepoll_read(int fd, void* buf, size_t count) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return ToErrno<ssize_t>(-EBADF);
  if (int r = CheckIo(*f.get(), false, buf, count)) return ToErrno<ssize_t>(r);
  if (count > kMaxRwCount) count = kMaxRwCount;
  return ToErrno(f->Read(buf, count));
}

ssize_t uepoll_write(int fd, const void* buf, size_t count) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return ToErrno<ssize_t>(-EBADF);
  if (int r = CheckIo(*f.get(), true, buf, count)) return ToErrno<ssize_t>(r);
  if (count > kMaxRwCount) count = kMaxRwCount;
  return ToErrno(f->Write(buf, count));
}

int uepoll_close(int fd) { return ToErrno(FdTable::Get().Close(fd)); }

int uepoll_dup(int oldfd) {
  return ToErrno(FdTable::Get().Dup(oldfd, 0, false));
}

int uepoll_dup2(int oldfd, int newfd) {
  return ToErrno(FdTable::Get().Dup3(oldfd, newfd, 0, /*is_dup2=*/true));
}

int uepoll_dup3(int oldfd, int newfd, int flags) {
  return ToErrno(FdTable::Get().Dup3(oldfd, newfd, flags, /*is_dup2=*/false));
}

int uepoll_fcntl(int fd, int cmd, ...) {
  FdTable& t = FdTable::Get();
  long arg = 0;
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC:
    case F_SETFD:
    case F_SETFL: {
      va_list ap;
      va_start(ap, cmd);
      arg = va_arg(ap, long);
      va_end(ap);
      break;
    }
    default:
      break;
  }
  FileRef f = t.Lookup(fd);
  if (!f) return ToErrno(-EBADF);
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      // The kernel compares arg, as unsigned, with RLIMIT_NOFILE.
      if (arg < 0 || arg >= FdTable::kBase + t.limit()) return ToErrno(-EINVAL);
      int minfd = arg < FdTable::kBase ? FdTable::kBase : static_cast<int>(arg);
      return ToErrno(t.Dup(fd, minfd, cmd == F_DUPFD_CLOEXEC));
    }
    case F_GETFD:
      return ToErrno(t.GetFdFlags(fd));
    case F_SETFD:
      return ToErrno(t.SetFdFlags(fd, arg));
    case F_GETFL:
      return static_cast<int>(f->flags());
    case F_SETFL:
      return ToErrno(f->SetStatusFlags(static_cast<uint32_t>(arg)));
    default:
      return ToErrno(-EINVAL);
  }
}

}  // extern "C"
