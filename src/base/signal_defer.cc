#include "base/signal_defer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

namespace uepoll::impl {

__thread SignalDeferState t_signal_defer
    __attribute__((tls_model("initial-exec"))) = {0, 0, 0};

void ReleaseDeferredSignals() {
  int saved = errno;
  sigset_t set;
  sigemptyset(&set);
  // Take the bits first: a signal put off while we unblock sets its own.
  uint64_t bits = t_signal_defer.deferred;
  t_signal_defer.deferred = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  for (int s = 1; s <= 64; ++s) {
    if (bits & (uint64_t{1} << (s - 1))) sigaddset(&set, s);
  }
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  errno = saved;
}

#ifndef NDEBUG
void ReportSignalDepthUnderflow() {
  fprintf(stderr,
          "uepoll: a thread released a uepoll lock it did not take "
          "(base/signal_defer.h)\n");
  abort();
}
#endif

}  // namespace uepoll::impl
