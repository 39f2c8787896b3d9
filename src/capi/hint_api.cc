// The calls about a file's pages and its filesystem: posix_fadvise,
// posix_fallocate, fallocate, readahead, sync_file_range and syncfs. None
// has anything to do on a pipe, a socket or an anonymous-inode file; each
// succeeds or fails as the kernel decides from the file's kind, access mode
// and the arguments (mm/fadvise.c, fs/open.c's vfs_fallocate,
// mm/readahead.c, fs/sync.c), and the order of those checks changes from
// one kernel to the next. So uepoll does not restate them: it makes the
// same call on a kernel object of the same kind and access mode (a pipe's
// end of the same direction, a socket, an eventfd for the anonymous-inode
// kinds), made for the call and closed after it, and answers with what the
// kernel answered. The calls change nothing on such an object.
//
// The cost is the object's creation (a pipe2, a socket or an eventfd, and
// its close), paid only by these calls, which programs make on files. When
// no descriptor can be made (the table is full), the call fails with the
// creation's errno (EMFILE, ENFILE), where the kernel would answer:
// docs/semantics.md D36.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "capi/stand_in.h"
#include "core/fd_table.h"

namespace uepoll::impl {
namespace {

// call(kernel_fd) for the uepoll object at fd, or call(fd) itself when the
// number is not uepoll's. Returns what the call returned, with its errno;
// `failed(err)` is what a failed creation returns (the -1/errno calls and
// the posix_* calls, which return the error number, differ).
template <class Call, class Failed>
auto OnStandIn(int fd, Call call, Failed failed) {
  FileRef f = FdTable::Get().Lookup(fd);
  if (!f) return call(fd);
  int fds[2];
  if (int err = MakeStandIn(f.get(), fds)) return failed(-err);
  auto r = call(fds[0]);
  CloseStandIn(fds);
  return r;
}

int SetErrno(int err) {
  errno = err;
  return -1;
}

}  // namespace
}  // namespace uepoll::impl

namespace sys = uepoll::impl::sys;
using uepoll::impl::OnStandIn;
using uepoll::impl::SetErrno;

extern "C" {

// These two report through their return value and leave errno alone, as
// glibc's do, even when the stand-in cannot be made.
int uepoll_posix_fadvise(int fd, off_t offset, off_t len, int advice) {
  int saved = errno;
  int r = OnStandIn(
      fd, [&](int k) { return sys::PosixFadvise(k, offset, len, advice); },
      [](int err) { return err; });
  errno = saved;
  return r;
}

int uepoll_posix_fallocate(int fd, off_t offset, off_t len) {
  int saved = errno;
  int r = OnStandIn(
      fd, [&](int k) { return sys::PosixFallocate(k, offset, len); },
      [](int err) { return err; });
  errno = saved;
  return r;
}

int uepoll_fallocate(int fd, int mode, off_t offset, off_t len) {
  return OnStandIn(
      fd, [&](int k) { return sys::Fallocate(k, mode, offset, len); },
      SetErrno);
}

ssize_t uepoll_readahead(int fd, off_t offset, size_t count) {
  return OnStandIn(
      fd, [&](int k) { return sys::Readahead(k, offset, count); },
      [](int err) { return static_cast<ssize_t>(SetErrno(err)); });
}

int uepoll_sync_file_range(int fd, off_t offset, off_t nbytes,
                           unsigned int flags) {
  return OnStandIn(
      fd, [&](int k) { return sys::SyncFileRange(k, offset, nbytes, flags); },
      SetErrno);
}

int uepoll_syncfs(int fd) {
  return OnStandIn(
      fd, [](int k) { return sys::Syncfs(k); }, SetErrno);
}

}  // extern "C"
