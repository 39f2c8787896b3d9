// TEMPORARY stub until the pipe implementation lands.
#include "sources/pipe.h"

#include <errno.h>

namespace uepoll::impl {
int CreatePipe(int*, int) { return -ENOSYS; }
}  // namespace uepoll::impl
