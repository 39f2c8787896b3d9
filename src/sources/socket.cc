// TEMPORARY stub until the socketpair implementation lands.
#include "sources/socket.h"

#include <errno.h>

namespace uepoll::impl {
int CreateSocketPair(int, int, int, int*) { return -ENOSYS; }
}  // namespace uepoll::impl
