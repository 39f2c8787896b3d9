// The loop tools/footprint/run.sh traces: N periodic uepoll timerfds in one
// instance, expiring one at a time, SPACING_MS apart (slow enough for
// valgrind to keep up), and one thread that waits and reads each one, as
// `uepoll-bench timers` does. After each wait and its reads it calls
// footprint_mark(), whose entry the trace parser uses to cut the trace
// into expiries. It exits 1 unless every wait of the second half returned
// exactly one timer with one expiration: a trace of catch-up batches
// would count many expiries as one.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>

#include <uepoll/uepoll.h>

extern "C" __attribute__((noinline)) void footprint_mark(int k) {
  asm volatile("" ::"r"(k));
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1000;
  const int waits = argc > 2 ? atoi(argv[2]) : 120;
  const int64_t spacing = (argc > 3 ? atoll(argv[3]) : 20) * 1000000LL;
  if (n < 1 || waits < 2 || spacing < 1000000) {
    fprintf(stderr, "usage: expiry_loop [timers] [waits] [spacing_ms]\n");
    return 2;
  }
  int ep = uepoll_epoll_create1(0);
  if (ep < 0) return perror("uepoll_epoll_create1"), 1;
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  // The first expiry well after the set-up, which valgrind slows.
  const int64_t start = now.tv_sec * 1000000000LL + now.tv_nsec + 2000000000LL;
  const int64_t period = spacing * n;
  for (int i = 0; i < n; ++i) {
    int t = uepoll_timerfd_create(CLOCK_MONOTONIC, 0);
    if (t < 0) return perror("uepoll_timerfd_create"), 1;
    const int64_t at = start + int64_t(i) * spacing;
    itimerspec its{{period / 1000000000, period % 1000000000},
                   {at / 1000000000, at % 1000000000}};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = t;
    if (uepoll_timerfd_settime(t, TFD_TIMER_ABSTIME, &its, nullptr) < 0 ||
        uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev) < 0)
      return perror("arming a timer"), 1;
  }
  int steady = 0;
  for (int k = 0; k < waits; ++k) {
    epoll_event evs[64];
    int r = uepoll_epoll_wait(ep, evs, 64, -1);
    uint64_t total = 0;
    for (int j = 0; j < r; ++j) {
      uint64_t v = 0;
      if (uepoll_read(evs[j].data.fd, &v, sizeof v) == sizeof v) total += v;
    }
    if (k >= waits / 2 && r == 1 && total == 1) ++steady;
    footprint_mark(k);
  }
  printf("expiry_loop: %d of the last %d waits took one expiry\n", steady,
         waits - waits / 2);
  return steady == waits - waits / 2 ? 0 : 1;
}
