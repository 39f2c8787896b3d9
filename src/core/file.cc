#include "core/file.h"

#include <errno.h>

#include "epoll/eventpoll.h"

namespace uepoll::impl {

ssize_t File::Read(void*, size_t) { return -EINVAL; }
ssize_t File::Write(const void*, size_t) { return -EINVAL; }
int File::Shutdown(int) { return -ENOTSOCK; }

int File::SetStatusFlags(uint32_t arg) {
  // The kernel's SETFL_MASK, less O_DIRECT (no uepoll object but a pipe
  // supports it; pipes override this).
  constexpr uint32_t kSettable = O_APPEND | O_NONBLOCK | O_NOATIME;
  if (arg & O_DIRECT) return -EINVAL;
  uint32_t old = flags();
  set_flags((old & ~kSettable) | (arg & kSettable));
  return 0;
}

void File::LastClose() {
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
