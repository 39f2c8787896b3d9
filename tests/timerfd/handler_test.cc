// A timer's expiry never waits for a signal handler running on another
// thread, on both backends. The kernel runs expiries in its interrupt; on
// uepoll a parked thread usually runs them (the keeper, docs/design.md
// "Timers"), and a handler that runs on it during its sleep holds it: the
// timer thread must notice and run the expiry itself.
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "threads/waiter.h"
#include "timer/timer_queue.h"
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

using uepoll::impl::TimerQueue;

// The handler announces itself on one kernel pipe and blocks reading
// another until the test lets it go (read and write are async-signal-safe).
int g_entered[2] = {-1, -1};
int g_release[2] = {-1, -1};

void BlockingHandler(int) {
  int saved = errno;
  char c = 1;
  (void)!::write(g_entered[1], &c, 1);
  (void)!::read(g_release[0], &c, 1);
  errno = saved;
}

class TimerfdHandler : public TimerfdTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(g_entered), 0);
    ASSERT_EQ(::pipe(g_release), 0);
    struct sigaction sa {};
    sa.sa_handler = BlockingHandler;  // no SA_RESTART
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_), 0);
  }
  void TearDown() override {
    sigaction(SIGUSR1, &old_, nullptr);
    for (int fd : {g_entered[0], g_entered[1], g_release[0], g_release[1]}) {
      ::close(fd);
    }
    TimerfdTest::TearDown();
  }
  struct sigaction old_ {};
  // The scenario of the ParkedOnNothingArmed tests below.
  void ParkedOnNothingArmed(bool earlier);
  // An instance holding fd, reported with `data`.
  int EpollWith(int fd, uint64_t data) {
    int ep = Epoll();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, data), 0);
    return ep;
  }
  // Runs the blocking handler on a's thread, returning once it runs.
  void HoldInHandler(Waiter& a) {
    ASSERT_EQ(pthread_kill(a.handle(), SIGUSR1), 0);
    pollfd p{g_entered[0], POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, kExpiryWaitMs), 1) << "the handler never ran";
  }
  // Lets the handler go; b got its timer (data 9), a's wait failed EINTR.
  void ReleaseAndCheck(Waiter& a, Waiter& b) {
    char c = 1;
    ASSERT_EQ(::write(g_release[1], &c, 1), 1);
    ASSERT_TRUE(b.WaitDone());
    EXPECT_EQ(b.result(), 1);
    EXPECT_EQ(b.event(0).data.u64, 9u);
    ASSERT_TRUE(a.WaitDone());
    EXPECT_EQ(a.result(), -1);
    EXPECT_EQ(a.error(), EINTR);
  }
  // Thread A, waiting on aep; on uepoll it keeps, and `early` (armed here,
  // before A's bound) made the timer thread decide while A keeps: it runs
  // `early`, then finds A covering the rest and sleeps past the expiry.
  // Null if A never parked, kept, or the timer thread never decided.
  std::unique_ptr<Waiter> ParkKeeper(int aep, int early) {
    auto a = std::make_unique<Waiter>([this, aep](epoll_event* evs) {
      return B().epoll_wait(aep, evs, Waiter::kEvents, kWaitMs);
    });
    if (!a->Parked()) return nullptr;
    if (!IsKernel()) {
      if (!Eventually([] { return TimerQueue::Get().has_keeper(); })) {
        return nullptr;
      }
      Arm(early, 2 * kMs);
      if (!Eventually([] { return TimerQueue::Get().thread_dormant(); })) {
        return nullptr;
      }
    }
    return a;
  }
};

// How far ahead the expiry is armed: the setup (threads parked, the timer
// thread gone dormant on uepoll) must be done before it.
constexpr int64_t kAheadNs = 3000 * kMs;

// Thread A waits on an eventfd's instance (on uepoll it keeps the timers,
// and the timer thread sleeps relying on it); thread B waits for a timer.
// A signal handler that blocks runs on A while the timer becomes due: B
// must get the expiry while the handler still runs. Then A's wait fails
// EINTR, as epoll_wait does after a handler.
TEST_P(TimerfdHandler, ExpiryDoesNotWaitForAHandlerOnTheKeeper) {
  int t = Timerfd();
  int tep = EpollWith(t, 9);
  int efd = Eventfd();
  int aep = EpollWith(efd, 1);
  int64_t due = ClockNs(CLOCK_MONOTONIC) + kAheadNs;
  Arm(t, kAheadNs);
  int early = Timerfd();
  std::unique_ptr<Waiter> keeper = ParkKeeper(aep, early);
  ASSERT_TRUE(keeper) << "A never kept, or the timer thread never decided";
  Waiter& a = *keeper;
  Waiter b([&](epoll_event* evs) {
    return B().epoll_wait(tep, evs, Waiter::kEvents, -1);
  });
  ASSERT_TRUE(b.Parked());
  HoldInHandler(a);
  ASSERT_LT(ClockNs(CLOCK_MONOTONIC), due) << "setup outlasted kAheadNs";
  // The handler blocks on A until released: B is served meanwhile.
  bool served = Eventually([&] { return b.Done(); });
  EXPECT_TRUE(served) << "the expiry waited for the handler";
  if (!IsKernel()) {
    // Served by the timer thread, which found A held past its bound (a
    // backstop wake that ran what was due without that finding would
    // still rely on A for every later expiry).
    EXPECT_TRUE(Eventually([] { return TimerQueue::Get().keeper_stalled(); }))
        << "the held keeper still covers";
  }
  // A timer armed while the handler still runs expires too (on uepoll:
  // the held keeper, found past its bound, covers nothing any more, so
  // the arming wakes the timer thread).
  int t2 = Timerfd();
  int t2ep = EpollWith(t2, 2);
  Waiter c2([&](epoll_event* evs) {
    return B().epoll_wait(t2ep, evs, Waiter::kEvents, -1);
  });
  ASSERT_TRUE(c2.Parked());
  Arm(t2, 1 * kMs);
  EXPECT_TRUE(Eventually([&] { return c2.Done(); }))
      << "a timer armed during the handler waited for it";
  ReleaseAndCheck(a, b);
  EXPECT_EQ(Ticks(t), 1u);
  ASSERT_TRUE(c2.WaitDone());
  EXPECT_EQ(c2.result(), 1);
  EXPECT_EQ(Ticks(t2), 1u);
}

// The same, where the waiter parks while nothing is armed (so it asks the
// timer queue nothing as it parks) and the timer it waits for is armed
// afterwards, behind the keeper's bound: the keeper (A, still the same
// thread) takes that timer at its next bound, and the handler holds it
// there. On uepoll the timer thread, which had found A the only parked
// thread and slept with no backstop, must have been told of B (docs/
// design.md, "No backstop for a keeper alone"). With `earlier`, a timer
// due before A's bound runs first on the timer thread (which then sleeps
// for an empty heap), so that no decision after it may rely on the scan
// made before it.
void TimerfdHandler::ParkedOnNothingArmed(bool earlier) {
  constexpr int64_t kBoundNs = 1000 * kMs;  // room for a loaded machine
  int x = Timerfd();  // A's bound, disarmed before B parks
  int efd = Eventfd();
  int aep = EpollWith(efd, 1);
  int y = Timerfd();
  int yep = EpollWith(y, 9);
  int64_t bound = ClockNs(CLOCK_MONOTONIC) + kBoundNs;
  Arm(x, kBoundNs);
  int early = Timerfd();
  std::unique_ptr<Waiter> keeper = ParkKeeper(aep, early);
  ASSERT_TRUE(keeper) << "A never kept, or the timer thread never decided";
  Waiter& a = *keeper;
  if (earlier) {
    Arm(early, 50 * kMs);  // before A's bound: the timer thread's
    Arm(x, 0);
    if (!IsKernel()) {
      ASSERT_TRUE(Eventually([] {
        return TimerQueue::Get().armed() == 0 &&
               TimerQueue::Get().thread_sleeps_unbounded();
      }));
    }
  } else {
    Arm(x, 0);  // nothing armed now (early has run on uepoll)
  }
  Waiter b([&](epoll_event* evs) {
    return B().epoll_wait(yep, evs, Waiter::kEvents, -1);
  });
  ASSERT_TRUE(b.Parked());
  int64_t due = bound + 1000 * kMs;
  Arm(y, due - ClockNs(CLOCK_MONOTONIC));
  if (!IsKernel()) {
    // A woke at its bound and keeps y.
    ASSERT_TRUE(Eventually([&] {
      int64_t kb = TimerQueue::Get().keeper_bound();
      return kb != INT64_MAX && kb > bound + 500 * kMs;
    }));
  }
  // The bound is published before A's sleep starts: a handler run in
  // between runs before the sleep, as the kernel's would before its wait,
  // and the wait then has no reason to fail EINTR. A must be asleep again.
  ASSERT_TRUE(WaitUntilParked(a.tid())) << "A never slept again";
  ASSERT_LT(ClockNs(CLOCK_MONOTONIC), due) << "setup outlasted the timer";
  HoldInHandler(a);
  bool served = Eventually([&] { return b.Done(); });
  EXPECT_TRUE(served) << "the expiry waited for the handler";
  ReleaseAndCheck(a, b);
  EXPECT_EQ(Ticks(y), 1u);
}

TEST_P(TimerfdHandler, ExpiryArmedAfterAWaiterParkedOnNothingArmedIsServed) {
  ParkedOnNothingArmed(false);
}

TEST_P(TimerfdHandler, ExpiryArmedAfterAnEarlierOneRanIsServed) {
  ParkedOnNothingArmed(true);
}

UEPOLL_INSTANTIATE_BACKENDS(TimerfdHandler);

}  // namespace
}  // namespace uepoll_test
