// uepoll_export_fd, uepoll_export_all, uepoll_set_fork_mode: turning uepoll
// objects into the kernel's equivalent, so that they cross fork, exec and
// kernel sockets (kernel/export.h).
#include <errno.h>

#include <uepoll/uepoll.h>

#include "base/fork_path.h"
#include "capi/errors.h"
#include "kernel/export.h"

using uepoll::impl::ToErrno;

extern "C" {

int uepoll_export_fd(int fd) { return ToErrno(uepoll::impl::ExportFd(fd)); }

UEPOLL_FORK_PATH int uepoll_export_all(int flags) {
  if (flags & ~UEPOLL_EXPORT_INHERITABLE) return ToErrno(-EINVAL);
  return ToErrno(
      uepoll::impl::ExportAll((flags & UEPOLL_EXPORT_INHERITABLE) != 0));
}

int uepoll_set_fork_mode(int mode) {
  return ToErrno(uepoll::impl::SetForkMode(mode));
}

UEPOLL_FORK_PATH int uepoll_get_fork_mode(void) {
  return uepoll::impl::GetForkMode();
}

}  // extern "C"
