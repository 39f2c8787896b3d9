#include "base/cancellable.h"

#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/sys.h"

namespace uepoll::impl {

[[gnu::noinline]] long CancellableSyscall(long nr, long a1, long a2, long a3,
                                          long a4, long a5, long a6) {
  int old_type;
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old_type);
  // libc's syscall(), never the interposer's (which would send the epoll
  // calls back into uepoll).
  long r = sys::Syscall(nr, a1, a2, a3, a4, a5, a6);
  int saved = errno;
  pthread_setcanceltype(old_type, nullptr);
  errno = saved;
  return r;
}

}  // namespace uepoll::impl
