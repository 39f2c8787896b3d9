// Concurrency stress of timerfds against the thread that runs their
// expiries (the timer thread, or a parked thread keeping the timers:
// docs/design.md, "Timers"), on both backends.
//
// The race: a timer expires and is being fired while its owner re-arms it
// and closes it. The kernel's close waits out a running expiry
// (hrtimer_cancel) and an expiry never re-arms a closed timer; uepoll's
// close must leave nothing of the timer on the queue either, or the queue
// later fires freed memory (ASan reports a heap use after free on the
// timer thread; TimerQueue::armed() stays above 0 in any build).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "stress/stress.h"
#include "support/fixture.h"
#include "timer/timer_queue.h"

namespace uepoll_test {
namespace {

using uepoll::impl::TimerQueue;

class StressTimer : public BackendTest {};

itimerspec After(long ns) {
  itimerspec v{};
  v.it_value.tv_sec = ns / 1000000000;
  v.it_value.tv_nsec = ns % 1000000000;
  return v;
}

// Busy for about `us` microseconds: lets the expiry armed just before
// start to run on the other CPU (a sleep would let it finish first).
void Spin(long us) {
  auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

// Each worker loops: create a batch of timerfds, arm them all to expire at
// once (1 us), re-arm them 10 ms ahead while their first expiry is being
// fired, close them. A parked thread waits on an instance holding some of
// them, so that on uepoll a keeper runs expiries as well as the timer
// thread.
TEST_P(StressTimer, RearmAndCloseWhileTheExpiryRuns) {
  constexpr int kWorkers = 4, kBatch = 8;
  constexpr long kIterations = 40000;
  const uint64_t seed = StressSeed("RearmAndCloseWhileTheExpiryRuns");
  const Backend* b = &B();
  Budget budget(kIterations, 3.0);
  ErrnoTally bad;
  // The parked thread: its instance holds every worker's first timer
  // (closed with the batch, which removes it from the instance).
  int ep = Epoll();
  int stop = Eventfd(0, EFD_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, ~uint64_t{0}), 0);
  std::thread parked([&] {
    for (;;) {
      epoll_event evs[8];
      int n = b->epoll_wait(ep, evs, 8, kLongWaitMs);
      bad.Check(n, errno, 0, {EINTR});
      for (int i = 0; i < n; ++i) {
        if (evs[i].data.u64 == ~uint64_t{0}) return;
      }
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(w));
      int fds[kBatch];
      while (budget.Take()) {
        for (int& fd : fds) {
          fd = b->timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
          bad.Check(fd, errno, 1, {});
        }
        if (fds[0] >= 0) {
          epoll_event ev{};
          ev.events = EPOLLIN | ((rng() & 1) ? uint32_t{EPOLLET} : 0u);
          ev.data.u64 = static_cast<uint64_t>(w);
          bad.Check(b->epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev), errno, 2, {});
        }
        itimerspec soon = After(1000), later = After(10000000);
        for (int fd : fds) {
          if (fd >= 0)
            bad.Check(b->timerfd_settime(fd, 0, &soon, nullptr), errno, 3, {});
        }
        Spin(static_cast<long>(rng() % 150));
        // Each timer re-armed and closed at once, or all re-armed first.
        bool each = rng() & 1;
        for (int fd : fds) {
          if (fd < 0) continue;
          bad.Check(b->timerfd_settime(fd, 0, &later, nullptr), errno, 4, {});
          if (each) bad.Check(b->close(fd), errno, 5, {});
        }
        for (int fd : fds) {
          if (fd >= 0 && !each) bad.Check(b->close(fd), errno, 5, {});
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  uint64_t one = 1;
  ASSERT_EQ(b->write(stop, &one, sizeof one), 8);
  parked.join();
  ReportBudget("RearmAndCloseWhileTheExpiryRuns", budget, kIterations);
  EXPECT_EQ(bad.bad(), 0) << "op " << bad.last_op() << ": "
                          << strerror(bad.last_errno());
  // Every timer is closed: none may be left on the queue (a closed timer
  // put back by the expiry that was running at its close).
  if (!IsKernel()) {
    EXPECT_EQ(TimerQueue::Get().armed(), 0);
  }
}

UEPOLL_INSTANTIATE_BACKENDS(StressTimer);

}  // namespace
}  // namespace uepoll_test
