// uepoll_read/write/close/dup*/fcntl and the source constructors.
#include <errno.h>
#include <limits.h>
#include <stdarg.h>

#include <cstdint>

#include <uepoll/uepoll.h>

#include "base/fork_path.h"
#include "base/sys.h"
#include "capi/errors.h"
#include "capi/interpose_hooks.h"
#include "capi/stand_in.h"
#include "capi/user_access.h"
#include "core/fd_table.h"
#include "core/sigio.h"
#include "sources/eventfd.h"
#include "sources/pipe.h"
#include "sources/socket.h"
#include "sources/unix_gc.h"

using uepoll::impl::FdTable;
using uepoll::impl::FileBorrow;
using uepoll::impl::FileRef;
using uepoll::impl::ToErrno;
namespace sys = uepoll::impl::sys;

using uepoll::impl::AccessOk;
using uepoll::impl::kMaxRwCount;

namespace {

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

int uepoll_is_uepoll_fd(int fd) { return FdTable::Get().IsOpen(fd); }

int uepoll_set_fd_mode(int mode) {
  return ToErrno(FdTable::Get().SetMode(mode));
}

int uepoll_get_fd_mode(void) {
  return FdTable::Get().mode() == uepoll::impl::FdMode::kDisjoint
             ? UEPOLL_FD_MODE_DISJOINT
             : UEPOLL_FD_MODE_KERNEL;
}

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

// Every call below gives a descriptor that is not uepoll's to libc: a
// program renames its calls and stops caring which kind a descriptor is.

int uepoll_shutdown(int sockfd, int how) {
  FileRef f = FdTable::Get().Lookup(sockfd);
  if (!f) return sys::Shutdown(sockfd, how);
  return ToErrno(f->Shutdown(how));
}

// ksys_lseek: whence is checked first, then the file's llseek. Pipes and
// sockets have none (ESPIPE); the other kinds stand for anonymous-inode
// files, whose noop_llseek answers the position, which never moves from 0.
off_t uepoll_lseek(int fd, off_t offset, int whence) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Lseek(fd, offset, whence);
  constexpr unsigned kSeekMax = 4;  // SEEK_HOLE
  if (static_cast<unsigned>(whence) > kSeekMax) return ToErrno<off_t>(-EINVAL);
  switch (f->kind()) {
    case uepoll::impl::FileKind::kPipe:
    case uepoll::impl::FileKind::kSocket:
      return ToErrno<off_t>(-ESPIPE);
    default:
      return 0;
  }
}

// do_fsync: no uepoll kind has an fsync operation.
int uepoll_fsync(int fd) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Fsync(fd);
  return ToErrno(-EINVAL);
}

int uepoll_fdatasync(int fd) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Fdatasync(fd);
  return ToErrno(-EINVAL);
}

ssize_t uepoll_read(int fd, void* buf, size_t count) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Read(fd, buf, count);
  if (int r = CheckIo(*f.get(), false, buf, count)) return ToErrno<ssize_t>(r);
  if (count > kMaxRwCount) count = kMaxRwCount;
  return ToErrno(f->Read(buf, count));
}

ssize_t uepoll_write(int fd, const void* buf, size_t count) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Write(fd, buf, count);
  if (int r = CheckIo(*f.get(), true, buf, count)) return ToErrno<ssize_t>(r);
  if (count > kMaxRwCount) count = kMaxRwCount;
  return ToErrno(f->Write(buf, count));
}

void uepoll_forget_orphan(int fd) {
  if (fd < 0) return;
  FdTable& t = FdTable::Get();
  if (!t.IsOpen(fd)) return;  // the common case: one load
  int saved = errno;
  t.ForgetOrphan(fd);
  uepoll::impl::UnixGc::MaybeCollect();  // as after a close
  errno = saved;
}

UEPOLL_FORK_PATH int uepoll_close(int fd) {
  int r = FdTable::Get().Close(fd);
  if (r == -EBADF) return sys::Close(fd);
  // The number may have held the last reference to a cycle of sockets in
  // flight from outside it (sources/unix_gc.h).
  uepoll::impl::UnixGc::MaybeCollect();
  return ToErrno(r);
}

int uepoll_dup(int oldfd) {
  FdTable& t = FdTable::Get();
  if (!t.IsOpen(oldfd)) {
    int r = sys::Dup(oldfd);
    if (r >= 0) t.ForgetOrphan(r);
    return r;
  }
  return ToErrno(t.Dup(oldfd, 0, false));
}

UEPOLL_FORK_PATH int uepoll_dup2(int oldfd, int newfd) {
  int r = FdTable::Get().Dup3(oldfd, newfd, 0, /*is_dup2=*/true);
  uepoll::impl::UnixGc::MaybeCollect();  // newfd's old file, as close
  return ToErrno(r);
}

UEPOLL_FORK_PATH int uepoll_dup3(int oldfd, int newfd, int flags) {
  int r = FdTable::Get().Dup3(oldfd, newfd, flags, /*is_dup2=*/false);
  uepoll::impl::UnixGc::MaybeCollect();
  return ToErrno(r);
}

namespace {

// Closes (or marks close-on-exec) every uepoll object numbered in
// [first, last]: close_range's uepoll half, before the kernel's.
void CloseUepollRange(unsigned long first, unsigned long last, bool cloexec) {
  FdTable& t = FdTable::Get();
  for (long fd = t.NextOpen(first);
       fd >= 0 && static_cast<unsigned long>(fd) <= last;
       fd = t.NextOpen(static_cast<unsigned long>(fd) + 1)) {
    if (cloexec) {
      t.SetFdFlags(static_cast<int>(fd), FD_CLOEXEC);
    } else {
      t.Close(static_cast<int>(fd));
    }
  }
  // As after close: a closed number may have held the last reference to
  // a cycle of sockets in flight.
  if (!cloexec) uepoll::impl::UnixGc::MaybeCollect();
}

}  // namespace

int uepoll_close_range(unsigned int first, unsigned int last, int flags) {
  // The kernel's argument checks, before anything is closed.
  if (flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) {
    return ToErrno(-EINVAL);
  }
  if (first > last) return ToErrno(-EINVAL);
  CloseUepollRange(first, last, flags & CLOSE_RANGE_CLOEXEC);
  return sys::CloseRange(first, last, flags);
}

void uepoll_closefrom(int lowfd) {
  CloseUepollRange(lowfd < 0 ? 0u : static_cast<unsigned>(lowfd), UINT_MAX,
                   false);
  sys::Closefrom(lowfd);
}

int uepoll_fcntl(int fd, int cmd, ...) {
  FdTable& t = FdTable::Get();
  // Every fcntl argument is an int, a long or a pointer: one register.
  va_list ap;
  va_start(ap, cmd);
  unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  FileRef f = t.Lookup(fd);
  if (!f) {
    int r = sys::Fcntl(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) {
      t.ForgetOrphan(r);
    }
    return r;
  }
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      int argi = static_cast<int>(arg);
      int minfd = argi;
      if (t.mode() == uepoll::impl::FdMode::kDisjoint) {
        // The kernel compares arg, as unsigned, with the limit.
        if (argi < 0 || long{argi} >= FdTable::kBase + t.limit()) {
          return ToErrno(-EINVAL);
        }
        if (argi < FdTable::kBase) minfd = FdTable::kBase;
      }
      return ToErrno(t.Dup(fd, minfd, cmd == F_DUPFD_CLOEXEC));
    }
    case F_GETFD:
      return ToErrno(t.GetFdFlags(fd));
    case F_SETFD:
      return ToErrno(t.SetFdFlags(fd, static_cast<long>(arg)));
    case F_GETFL:
      return static_cast<int>(f->flags());
    case F_SETFL: {
      auto want = static_cast<uint32_t>(arg);
      if (int err = f->SetStatusFlags(want)) return ToErrno(err);
      // setfl: O_ASYNC changes through the kind's fasync, which records
      // the descriptor for si_fd; a kind without one ignores it.
      if ((want ^ f->flags()) & O_ASYNC) {
        int err = f->Fasync(fd, want & O_ASYNC);
        if (err && err != -ENOTTY) return ToErrno(err);
      }
      return 0;
    }
    case F_GETOWN:
    case F_SETOWN:
    case F_GETOWN_EX:
    case F_SETOWN_EX:
    case 17:  // F_GETOWNER_UIDS (not in glibc's headers)
    case F_GETSIG:
    case F_SETSIG:
      // Signal-driven I/O (core/sigio.h). F_GETOWN's result may be
      // negative (a process group) and is not an error, as in the kernel.
      if (cmd == F_GETOWN) {
        return static_cast<int>(uepoll::impl::FcntlOwner(f.get(), cmd, arg));
      }
      return static_cast<int>(
          ToErrno(uepoll::impl::FcntlOwner(f.get(), cmd, arg)));
    case F_GETPIPE_SZ:
    case F_SETPIPE_SZ:
      return static_cast<int>(
          ToErrno(uepoll::impl::PipeFcntl(f.get(), cmd, arg)));
    case F_GETLEASE:
    case F_SETLEASE:
    case F_NOTIFY:
    case F_GET_SEALS:
    case F_ADD_SEALS: {
      // Leases need a regular file, notifications a directory, seals a
      // memfd: on these kinds they only ever answer, never change state, so
      // the kernel is asked with a stand-in (capi/stand_in.h).
      int fds[2];
      if (int err = uepoll::impl::MakeStandIn(f.get(), fds)) {
        return ToErrno(err);
      }
      int r = sys::Fcntl(fds[0], cmd, arg);
      uepoll::impl::CloseStandIn(fds);
      return r;
    }
    default:
      // Locks and write hints are state of the file (of its inode, for a
      // pipe's hints) that no stand-in could keep: EINVAL
      // (docs/semantics.md D3).
      return ToErrno(-EINVAL);
  }
}

}  // extern "C"
