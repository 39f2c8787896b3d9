#include "base/private_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>

#include "base/sys.h"

namespace uepoll::impl {
namespace {

// How far below the soft limit private descriptors start: room for the
// few a process has (two per sleeping thread, a handful otherwise) before
// they spill lower.
constexpr long kPrivateSpan = 256;

}  // namespace

int MovePrivateFd(int fd) {
  if (fd < 0) return fd;
  int saved = errno;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
    errno = saved;
    return fd;
  }
  long soft = static_cast<long>(rl.rlim_cur);
  // A limit so low that the top is where the application lives anyway:
  // leave the descriptor where the kernel put it.
  if (soft <= 2 * kPrivateSpan) {
    errno = saved;
    return fd;
  }
  long lo = soft - kPrivateSpan;
  if (fd >= lo) {
    errno = saved;
    return fd;
  }
  int moved = sys::Fcntl(fd, F_DUPFD_CLOEXEC, static_cast<unsigned long>(lo));
  if (moved >= 0) {
    sys::Close(fd);
    fd = moved;
  }
  errno = saved;
  return fd;
}

}  // namespace uepoll::impl
