// A stand-in: a kernel object of the same kind and access mode as a uepoll
// object (a pipe's end of the same direction, a socket, an eventfd for the
// anonymous-inode kinds), made to ask the kernel a question whose answer
// depends only on those (capi/hint_api.cc, the stateless fcntl commands in
// capi/fd_api.cc, and the references of capi/stat_api.cc; docs/design.md,
// "Asking the kernel instead of restating it").
#ifndef UEPOLL_SRC_CAPI_STAND_IN_H_
#define UEPOLL_SRC_CAPI_STAND_IN_H_

#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "base/sys.h"
#include "core/file.h"

namespace uepoll::impl {

// A kernel object of `kind` (for a pipe, the end that reads if
// `read_end`, the end that writes otherwise): its descriptor in fds[0]
// (and the other end of a pipe in fds[1], -1 otherwise), or -errno. Every
// kind but a pipe and a socket is an anonymous inode, as an eventfd is.
inline int MakeStandInOf(FileKind kind, bool read_end, int fds[2]) {
  fds[0] = fds[1] = -1;
  switch (kind) {
    case FileKind::kPipe: {
      int p[2];
      if (sys::Pipe2(p, O_CLOEXEC) != 0) return -errno;
      fds[0] = read_end ? p[0] : p[1];
      fds[1] = read_end ? p[1] : p[0];
      return 0;
    }
    case FileKind::kSocket: {
      int s = sys::Socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (s < 0) return -errno;
      fds[0] = s;
      return 0;
    }
    default: {
      int e = sys::Eventfd(0, EFD_CLOEXEC);
      if (e < 0) return -errno;
      fds[0] = e;
      return 0;
    }
  }
}

// The stand-in for f: its kind, and for a pipe's end its direction.
inline int MakeStandIn(File* f, int fds[2]) {
  return MakeStandInOf(f->kind(), (f->flags() & O_ACCMODE) == O_RDONLY, fds);
}

inline void CloseStandIn(const int fds[2]) {
  int saved = errno;
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) sys::Close(fds[i]);
  }
  errno = saved;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CAPI_STAND_IN_H_
