#include "base/private_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>

#include "base/fork_path.h"
#include "base/sys.h"

namespace uepoll::impl {
namespace {

// How far below the top private descriptors start: room for the few a
// process has (two per sleeping thread, a handful otherwise) before they
// spill lower.
constexpr long kPrivateSpan = 256;
// The top: the soft limit, or this where the limit is higher. The kernel's
// descriptor table reaches the highest open number, and every fork() and
// posix_spawn() copies it whole: a descriptor just below a soft limit of
// 20,000 made each posix_spawn about 110 us slower here, and container
// runtimes set 1,048,576 (BENCHMARKS.md, "What a process started under the
// interposer pays"). 1024 is the kernel's default soft limit, so that under
// the default nothing changes.
constexpr long kPrivateTop = 1024;

}  // namespace

namespace {

// The lowest private number: kPrivateSpan below the top of the numbers the
// process may use, or -1 where the limit is so low that the top is where
// the application lives anyway. errno is clobbered.
UEPOLL_FORK_PATH long PrivateFloor() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  long top = rl.rlim_cur >= static_cast<rlim_t>(kPrivateTop)
                 ? kPrivateTop
                 : static_cast<long>(rl.rlim_cur);
  if (top <= 2 * kPrivateSpan) return -1;
  return top - kPrivateSpan;
}

}  // namespace

int MovePrivateFd(int fd) {
  if (fd < 0) return fd;
  int saved = errno;
  long lo = PrivateFloor();
  // Where the kernel put it when there is no private range, or when it is
  // in the range already.
  if (lo < 0 || fd >= lo) {
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

UEPOLL_FORK_PATH int DupPrivateFd(int fd) {
  int saved = errno;
  long lo = PrivateFloor();
  int r = lo < 0
              ? -1
              : sys::Fcntl(fd, F_DUPFD_CLOEXEC, static_cast<unsigned long>(lo));
  if (r < 0) r = sys::Fcntl(fd, F_DUPFD_CLOEXEC, 0);
  errno = saved;
  return r;
}

}  // namespace uepoll::impl
