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
#include <set>
#include <thread>
#include <vector>

#include "stress/stress.h"
#include "stress/watchdog.h"
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

// Absolute CLOCK_REALTIME `ns` from now, repeating every `interval_ns`.
itimerspec RealtimeIn(long ns, long interval_ns) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  long nsec = now.tv_nsec + ns;
  itimerspec v{};
  v.it_value.tv_sec = now.tv_sec + nsec / 1000000000;
  v.it_value.tv_nsec = nsec % 1000000000;
  v.it_interval.tv_nsec = interval_ns;
  return v;
}

// A harvest polls a timer with its instance's lock held only while the
// timer's poll is one load, that is while it is not armed with
// TFD_TIMER_CANCEL_ON_SET (File::poll_is_a_load): a cancel-on-set timer's
// poll takes the timer's lock, and an expiry holds that lock while it takes
// the instance's to queue the item. Here settime flips the flag on timers
// that keep expiring while a thread harvests them: a poll that took the
// timer's lock under the instance's deadlocks (the watchdog aborts).
// uepoll's mutexes are futexes ThreadSanitizer does not see, so only the
// deadlock itself shows it. After the flipping, each timer still reaches
// the instance when it expires.
TEST_P(StressTimer, HarvestWhileCancelOnSetFlips) {
  constexpr int kTimers = 4;
  constexpr long kIterations = 20000;
  const uint64_t seed = StressSeed("HarvestWhileCancelOnSetFlips");
  const Backend* b = &B();
  Budget budget(kIterations, 2.0);
  ErrnoTally bad;
  int ep = Epoll();
  int fds[kTimers];
  for (int i = 0; i < kTimers; ++i) {
    fds[i] = Track(b->timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK));
    ASSERT_GE(fds[i], 0);
    // Level-triggered and edge-triggered: both reach the head harvest.
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fds[i],
                  EPOLLIN | (i & 1 ? uint32_t{EPOLLET} : 0u),
                  static_cast<uint64_t>(i)),
              0);
  }
  std::atomic<bool> stop{false};
  std::atomic<long> reported{0};
  {
    // A deadlock must fail the test, not hang it. The flipping lasts the
    // budget; the watchdog allows that and a margin.
    Watchdog dog("HarvestWhileCancelOnSetFlips",
                 budget.span() + std::chrono::seconds(25));
    std::thread harvester([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        epoll_event evs[kTimers];
        int n = b->epoll_wait(ep, evs, kTimers, 1);
        bad.Check(n, errno, 0, {EINTR});
        for (int i = 0; i < n; ++i) {
          uint64_t ticks;
          // EAGAIN: a settime since cleared the ticks. ECANCELED: the wall
          // clock was set meanwhile.
          long r = b->read(fds[evs[i].data.u64], &ticks, sizeof ticks);
          bad.Check(r, errno, 1, {EAGAIN, ECANCELED});
        }
        if (n > 0) reported.fetch_add(n, std::memory_order_relaxed);
      }
    });
    std::mt19937_64 rng(seed);
    while (budget.Take()) {
      int fd = fds[rng() % kTimers];
      int flags =
          TFD_TIMER_ABSTIME | ((rng() & 1) ? int{TFD_TIMER_CANCEL_ON_SET} : 0);
      itimerspec v = RealtimeIn(static_cast<long>(rng() % 50000), 20000);
      int r = b->timerfd_settime(fd, flags, &v, nullptr);
      // ECANCELED: the wall clock was set (the timer is armed all the
      // same).
      bad.Check(r, errno, 2, {ECANCELED});
    }
    stop.store(true);
    harvester.join();
  }
  ReportBudget("HarvestWhileCancelOnSetFlips", budget, kIterations);
  EXPECT_EQ(bad.bad(), 0) << "op " << bad.last_op() << ": "
                          << strerror(bad.last_errno());
  EXPECT_GT(reported.load(), 0);
  // Each timer, armed once more (half of them cancel-on-set), is reported
  // when it expires.
  std::set<uint64_t> seen;
  for (int i = 0; i < kTimers; ++i) {
    itimerspec once = RealtimeIn(1000000, 0);
    int flags = TFD_TIMER_ABSTIME | (i & 2 ? int{TFD_TIMER_CANCEL_ON_SET} : 0);
    int r = b->timerfd_settime(fds[i], flags, &once, nullptr);
    ASSERT_TRUE(r == 0 || errno == ECANCELED) << strerror(errno);
  }
  while (seen.size() < kTimers) {
    epoll_event evs[kTimers];
    int n = b->epoll_wait(ep, evs, kTimers, kLongWaitMs);
    ASSERT_GT(n, 0) << "timers reported: " << seen.size() << " of " << kTimers;
    for (int i = 0; i < n; ++i) {
      uint64_t ticks = 0;
      long r = b->read(fds[evs[i].data.u64], &ticks, sizeof ticks);
      if (r == 8) {
        EXPECT_EQ(ticks, 1u);
        seen.insert(evs[i].data.u64);
      } else if (r < 0 && errno == ECANCELED) {
        seen.insert(evs[i].data.u64);  // reported: the wall clock was set
      }
    }
  }
}

UEPOLL_INSTANTIATE_BACKENDS(StressTimer);

}  // namespace
}  // namespace uepoll_test
