// timerfd's state machine on both backends: arming, disarming, the old
// value settime returns, gettime, expiration counts and overruns of
// interval timers, absolute timers on each clock, blocking reads and
// signals. Counts are checked against bounds computed from clock readings
// taken around each step, which hold for any scheduling delay.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <thread>

#include "threads/waiter.h"
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

class TimerfdSemantics : public TimerfdTest {
 protected:
  // The number of expiries of a timer whose first expiry was at `first` and
  // whose interval is `iv`, by time `now` (both on one clock).
  static int64_t Expiries(int64_t first, int64_t iv, int64_t now) {
    if (now < first) return 0;
    return (now - first) / iv + 1;
  }
};

TEST_P(TimerfdSemantics, NewTimerIsDisarmed) {
  int fd = Timerfd();
  itimerspec cur = Get(fd);
  EXPECT_EQ(Ns(cur.it_value), 0);
  EXPECT_EQ(Ns(cur.it_interval), 0);
  uint64_t v;
  EXPECT_ERRNO(B().read(fd, &v, sizeof v), EAGAIN);
  EXPECT_EQ(PollMask(fd), 0);
}

TEST_P(TimerfdSemantics, RelativeOneShotFiresOnceAndNotEarly) {
  int fd = Timerfd();
  int64_t before = ClockNs(CLOCK_MONOTONIC);
  Arm(fd, 30 * kMs);
  int64_t left = Ns(Get(fd).it_value);
  EXPECT_GT(left, 0);
  EXPECT_LE(left, 30 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  // An expiry never comes early.
  EXPECT_GE(ClockNs(CLOCK_MONOTONIC) - before, 30 * kMs);
  EXPECT_EQ(PollMask(fd), POLLIN);
  EXPECT_EQ(Ticks(fd), 1u);
  uint64_t v;
  EXPECT_ERRNO(B().read(fd, &v, sizeof v), EAGAIN);
  EXPECT_EQ(PollMask(fd), 0);
  // Expired one-shot: nothing left, no interval.
  EXPECT_EQ(Ns(Get(fd).it_value), 0);
  EXPECT_EQ(Ns(Get(fd).it_interval), 0);
}

TEST_P(TimerfdSemantics, SettimeReturnsTheOldValueAndInterval) {
  int fd = Timerfd();
  itimerspec old = Arm(fd, 100 * kSec, 7 * kSec);
  EXPECT_EQ(Ns(old.it_value), 0);
  EXPECT_EQ(Ns(old.it_interval), 0);
  old = Arm(fd, 50 * kSec);
  EXPECT_GT(Ns(old.it_value), 99 * kSec);
  EXPECT_LE(Ns(old.it_value), 100 * kSec);
  EXPECT_EQ(Ns(old.it_interval), 7 * kSec);
  // A NULL old_value is allowed.
  itimerspec v = Spec(20 * kSec);
  EXPECT_EQ(B().timerfd_settime(fd, 0, &v, nullptr), 0);
  EXPECT_GT(Ns(Get(fd).it_value), 19 * kSec);
}

TEST_P(TimerfdSemantics, ZeroValueDisarmsButKeepsTheInterval) {
  int fd = Timerfd();
  Arm(fd, 100 * kSec);
  itimerspec old = Arm(fd, 0, 5 * kMs);
  EXPECT_GT(Ns(old.it_value), 99 * kSec);
  itimerspec cur = Get(fd);
  EXPECT_EQ(Ns(cur.it_value), 0);
  EXPECT_EQ(Ns(cur.it_interval), 5 * kMs);
  // Disarmed: no expiry however long we wait for one.
  EXPECT_FALSE(WaitReadable(fd, 30));
}

TEST_P(TimerfdSemantics, SettimeDropsPendingExpirations) {
  int fd = Timerfd();
  Arm(fd, 1 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  Arm(fd, 100 * kSec);
  EXPECT_EQ(PollMask(fd), 0);
  uint64_t v;
  EXPECT_ERRNO(B().read(fd, &v, sizeof v), EAGAIN);
}

TEST_P(TimerfdSemantics, IntervalTimerCountsOverruns) {
  int fd = Timerfd();
  const int64_t iv = 10 * kMs;
  int64_t t0 = ClockNs(CLOCK_MONOTONIC);
  Arm(fd, iv, iv);
  int64_t t1 = ClockNs(CLOCK_MONOTONIC);
  ASSERT_TRUE(WaitReadable(fd));
  Pass(55);
  int64_t r0 = ClockNs(CLOCK_MONOTONIC);
  uint64_t n = Ticks(fd);
  int64_t r1 = ClockNs(CLOCK_MONOTONIC);
  // The first expiry is in [t0 + iv, t1 + iv]; the read counts every
  // expiry up to its own clock reading, in [r0, r1].
  EXPECT_GE(int64_t(n), Expiries(t1 + iv, iv, r0));
  EXPECT_LE(int64_t(n), Expiries(t0 + iv, iv, r1));
  EXPECT_GE(n, 5u);
  // The read re-armed the timer for the next period.
  itimerspec cur = Get(fd);
  EXPECT_GT(Ns(cur.it_value), 0);
  EXPECT_LE(Ns(cur.it_value), iv);
  EXPECT_EQ(Ns(cur.it_interval), iv);
  // And it keeps firing.
  ASSERT_TRUE(WaitReadable(fd));
  EXPECT_GE(Ticks(fd), 1u);
}

TEST_P(TimerfdSemantics, GettimeForwardsAnExpiredIntervalTimer) {
  int fd = Timerfd();
  const int64_t iv = 10 * kMs;
  int64_t t0 = ClockNs(CLOCK_MONOTONIC);
  Arm(fd, iv, iv);
  int64_t t1 = ClockNs(CLOCK_MONOTONIC);
  ASSERT_TRUE(WaitReadable(fd));
  Pass(35);
  int64_t g0 = ClockNs(CLOCK_MONOTONIC);
  itimerspec cur = Get(fd);
  int64_t g1 = ClockNs(CLOCK_MONOTONIC);
  // The value is the time to the next period, not 0.
  EXPECT_GT(Ns(cur.it_value), 0);
  EXPECT_LE(Ns(cur.it_value), iv);
  // The periods gettime skipped are kept as expirations for the read,
  // which may also count periods that passed after gettime.
  uint64_t n = Ticks(fd);
  int64_t r = ClockNs(CLOCK_MONOTONIC);
  EXPECT_GE(int64_t(n), Expiries(t1 + iv, iv, g0));
  EXPECT_LE(int64_t(n), Expiries(t0 + iv, iv, r));
  EXPECT_GE(g1, g0);
}

TEST_P(TimerfdSemantics, AbsoluteTimersOnEveryClock) {
  for (clockid_t c : {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME}) {
    int fd = Timerfd(c);
    int64_t at = ClockNs(c) + 20 * kMs;
    Arm(fd, at, 0, TFD_TIMER_ABSTIME);
    EXPECT_LE(Ns(Get(fd).it_value), 20 * kMs) << "clock " << c;
    ASSERT_TRUE(WaitReadable(fd)) << "clock " << c;
    EXPECT_GE(ClockNs(c), at) << "clock " << c << " fired early";
    EXPECT_EQ(Ticks(fd), 1u);
    Close(fd);
  }
}

TEST_P(TimerfdSemantics, RelativeTimersOnEveryClock) {
  for (clockid_t c : {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME}) {
    int fd = Timerfd(c);
    Arm(fd, 5 * kMs);
    ASSERT_TRUE(WaitReadable(fd)) << "clock " << c;
    EXPECT_EQ(Ticks(fd), 1u);
    Close(fd);
  }
}

TEST_P(TimerfdSemantics, AbsoluteTimeInThePastFiresAtOnce) {
  int fd = Timerfd(CLOCK_MONOTONIC);
  int64_t past = ClockNs(CLOCK_MONOTONIC) - kSec;
  Arm(fd, past, 0, TFD_TIMER_ABSTIME);
  ASSERT_TRUE(WaitReadable(fd));
  EXPECT_EQ(Ticks(fd), 1u);
  EXPECT_EQ(Ns(Get(fd).it_value), 0);
}

TEST_P(TimerfdSemantics, PastAbsoluteIntervalCountsEveryMissedPeriod) {
  int fd = Timerfd(CLOCK_MONOTONIC);
  const int64_t iv = 10 * kMs;
  int64_t first = ClockNs(CLOCK_MONOTONIC) - 105 * kMs;
  Arm(fd, first, iv, TFD_TIMER_ABSTIME);
  ASSERT_TRUE(WaitReadable(fd));
  int64_t r0 = ClockNs(CLOCK_MONOTONIC);
  uint64_t n = Ticks(fd);
  int64_t r1 = ClockNs(CLOCK_MONOTONIC);
  EXPECT_GE(int64_t(n), Expiries(first, iv, r0));
  EXPECT_LE(int64_t(n), Expiries(first, iv, r1));
  EXPECT_GE(n, 11u);
}

TEST_P(TimerfdSemantics, HugeValuesSaturate) {
  int fd = Timerfd(CLOCK_MONOTONIC);
  itimerspec v;
  v.it_value.tv_sec = INT64_MAX;
  v.it_value.tv_nsec = 0;
  v.it_interval.tv_sec = INT64_MAX / 2;
  v.it_interval.tv_nsec = 999999999;
  ASSERT_EQ(B().timerfd_settime(fd, 0, &v, nullptr), 0);
  itimerspec cur = Get(fd);
  // Expiry at KTIME_MAX (2^63 - 1 ns): the remaining time is that minus
  // the monotonic clock, within the time the two calls took.
  int64_t expect = INT64_MAX - ClockNs(CLOCK_MONOTONIC);
  EXPECT_NEAR(double(Ns(cur.it_value)), double(expect), 1e9);
  EXPECT_EQ(Ns(cur.it_interval), INT64_MAX);
  EXPECT_EQ(PollMask(fd), 0);
}

TEST_P(TimerfdSemantics, ReadOfALargerBufferMovesEightBytes) {
  int fd = Timerfd();
  Arm(fd, 1 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  uint64_t buf[2] = {0, 77};
  EXPECT_EQ(B().read(fd, buf, sizeof buf), 8);
  EXPECT_EQ(buf[0], 1u);
  EXPECT_EQ(buf[1], 77u);
}

TEST_P(TimerfdSemantics, DupSharesTheTimer) {
  int fd = Timerfd();
  int d = Dup(fd);
  Arm(d, 1 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  EXPECT_EQ(Ticks(d), 1u);
  uint64_t v;
  EXPECT_ERRNO(B().read(fd, &v, sizeof v), EAGAIN);
  EXPECT_GE(Close(fd), 0);
  Arm(d, 1 * kMs);
  ASSERT_TRUE(WaitReadable(d));
  EXPECT_EQ(Ticks(d), 1u);
}

TEST_P(TimerfdSemantics, NonblockViaFcntl) {
  int fd = Timerfd(CLOCK_MONOTONIC, 0);
  ASSERT_EQ(B().fcntl(fd, F_SETFL, O_NONBLOCK), 0);
  uint64_t v;
  EXPECT_ERRNO(B().read(fd, &v, sizeof v), EAGAIN);
  EXPECT_EQ(B().fcntl(fd, F_GETFL, 0), O_RDWR | O_NONBLOCK);
}

TEST_P(TimerfdSemantics, BlockingReadWaitsForTheExpiry) {
  int fd = Timerfd(CLOCK_MONOTONIC, 0);
  int64_t before = ClockNs(CLOCK_MONOTONIC);
  Arm(fd, 20 * kMs);
  EXPECT_EQ(Ticks(fd), 1u);
  EXPECT_GE(ClockNs(CLOCK_MONOTONIC) - before, 20 * kMs);
}

TEST_P(TimerfdSemantics, BlockingReadIsWokenFromAnotherThread) {
  int fd = Timerfd(CLOCK_MONOTONIC, 0);
  uint64_t got = 0;
  Waiter w([&](epoll_event*) { return int(B().read(fd, &got, sizeof got)); });
  ASSERT_TRUE(w.Parked());
  Arm(fd, 1 * kMs);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 8);
  EXPECT_EQ(got, 1u);
}

void Nop(int) {}

// A handler without SA_RESTART ends a blocking read with EINTR; with
// SA_RESTART the read goes on and returns the expiry.
TEST_P(TimerfdSemantics, BlockingReadAndSignals) {
  for (bool restart : {false, true}) {
    struct sigaction sa {
    }, old;
    sa.sa_handler = Nop;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    int fd = Timerfd(CLOCK_MONOTONIC, 0);
    uint64_t got = 0;
    Waiter w([&](epoll_event*) { return int(B().read(fd, &got, sizeof got)); });
    ASSERT_TRUE(w.Parked());
    pthread_kill(w.handle(), SIGUSR1);
    if (restart) {
      // Still blocked after the handler ran: only the expiry ends it.
      ASSERT_TRUE(w.Parked());
      Arm(fd, 1 * kMs);
      ASSERT_TRUE(w.WaitDone());
      EXPECT_EQ(w.result(), 8);
      EXPECT_EQ(got, 1u);
    } else {
      ASSERT_TRUE(w.WaitDone());
      EXPECT_EQ(w.result(), -1);
      EXPECT_EQ(w.error(), EINTR);
    }
    sigaction(SIGUSR1, &old, nullptr);
    Close(fd);
  }
}

TEST_P(TimerfdSemantics, ReArmingBeforeExpiryMovesIt) {
  int fd = Timerfd();
  Arm(fd, 5 * kMs);
  int64_t before = ClockNs(CLOCK_MONOTONIC);
  Arm(fd, 40 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  EXPECT_GE(ClockNs(CLOCK_MONOTONIC) - before, 40 * kMs);
  EXPECT_EQ(Ticks(fd), 1u);
}

TEST_P(TimerfdSemantics, CancelOnSetIsAcceptedWithoutAClockStep) {
  // The machine's clock is not ours to set: with no step, a cancel-on-set
  // timer behaves as any absolute realtime timer on both backends.
  int fd = Timerfd(CLOCK_REALTIME);
  int64_t at = ClockNs(CLOCK_REALTIME) + 5 * kMs;
  Arm(fd, at, 0, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET);
  ASSERT_TRUE(WaitReadable(fd));
  EXPECT_EQ(Ticks(fd), 1u);
  // Relative or on another clock the flag is accepted and ignored.
  int m = Timerfd(CLOCK_MONOTONIC);
  Arm(m, 1 * kMs, 0, TFD_TIMER_CANCEL_ON_SET);
  ASSERT_TRUE(WaitReadable(m));
  EXPECT_EQ(Ticks(m), 1u);
}

UEPOLL_INSTANTIATE_BACKENDS(TimerfdSemantics);

}  // namespace
}  // namespace uepoll_test
