// docs/contract.md sections 4 and 8: epoll_wait/pwait/pwait2 argument errors,
// timeout rules and signals. Durations are checked from below, and from above
// only by a generous bound (EXPECT_ELAPSED) that turns a hang into a failure.
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

volatile sig_atomic_t g_signals = 0;
void CountSignal(int) { g_signals = g_signals + 1; }

// How many handlers ran. ThreadSanitizer queues a signal that arrives in an
// uninstrumented call (epoll_pwait2 on the kernel backend) and runs the
// handler at the thread's next intercepted call, so under TSan the handler
// may run just after the wait returned: poll for it, bounded, on the
// condition itself. Without TSan it has always run by then.
int SignalsSeen(int want) {
#if defined(__SANITIZE_THREAD__)
  for (int i = 0; i < 10000 && g_signals < want; ++i) usleep(100);
#else
  (void)want;
#endif
  return g_signals;
}

// Installs CountSignal for one signal (SA_RESTART, to show a wait is not
// restarted anyway) and restores the old action and the signal mask.
class SignalGuard {
 public:
  explicit SignalGuard(int sig) : sig_(sig) {
    g_signals = 0;
    struct sigaction sa {};
    sa.sa_handler = CountSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig_, &sa, &old_);
    pthread_sigmask(SIG_SETMASK, nullptr, &old_mask_);
  }
  ~SignalGuard() {
    struct itimerval off {};
    setitimer(ITIMER_REAL, &off, nullptr);
    // Drop a signal still pending so it cannot leak into another test.
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig_);
    pthread_sigmask(SIG_BLOCK, &only, nullptr);
    struct timespec zero {};
    while (sigtimedwait(&only, nullptr, &zero) == sig_) {
    }
    sigaction(sig_, &old_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  void Block() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig_);
    pthread_sigmask(SIG_BLOCK, &s, nullptr);
  }
  bool Pending() const {
    sigset_t s;
    sigpending(&s);
    return sigismember(&s, sig_) == 1;
  }

 private:
  int sig_;
  struct sigaction old_ {};
  sigset_t old_mask_;
};

// The timer repeats: if a loaded machine delivers the first signal before
// the wait has started, the next one still interrupts it.
void ArmAlarmMs(int ms) {
  struct itimerval t {};
  t.it_value.tv_sec = ms / 1000;
  t.it_value.tv_usec = (ms % 1000) * 1000;
  t.it_interval = t.it_value;
  setitimer(ITIMER_REAL, &t, nullptr);
}

class WaitErrors : public ConformanceTest {};

TEST_P(WaitErrors, ClosedEpfdFailsEbadf) {
  epoll_event ev[1];
  EXPECT_ERRNO(B().epoll_wait(B().closed_fd, ev, 1, 0), EBADF);
  EXPECT_ERRNO(B().epoll_pwait(B().closed_fd, ev, 1, 0, nullptr), EBADF);
  struct timespec zero {};
  EXPECT_ERRNO(B().epoll_pwait2(B().closed_fd, ev, 1, &zero, nullptr), EBADF);
}

TEST_P(WaitErrors, NonPositiveMaxeventsFailsEinval) {
  int ep = Epoll();
  epoll_event ev[1];
  EXPECT_ERRNO(B().epoll_wait(ep, ev, 0, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_wait(ep, ev, -1, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_pwait(ep, ev, INT_MIN, 0, nullptr), EINVAL);
}

TEST_P(WaitErrors, MaxeventsAboveIntMaxOverTwelveFailsEinval) {
  int ep = Epoll();
  epoll_event ev[1];
  EXPECT_ERRNO(B().epoll_wait(ep, ev, INT_MAX / 12 + 1, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_wait(ep, ev, INT_MAX, 0), EINVAL);
}

TEST_P(WaitErrors, MaxeventsAtLimitIsAccepted) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 3), 0);
  // The kernel wants the whole maxevents range to lie in user space
  // (access_ok); a stack address near the top may fail it, so the buffer is
  // on the heap, far below.
  std::vector<epoll_event> ev(1);
  ASSERT_EQ(B().epoll_wait(ep, ev.data(), INT_MAX / 12, 0), 1)
      << strerror(errno);
  EXPECT_EQ(ev[0].data.u64, 3u);
}

TEST_P(WaitErrors, ClosedEpfdEbadfBeatsBadMaxevents) {
  epoll_event ev[1];
  EXPECT_ERRNO(B().epoll_wait(B().closed_fd, ev, 0, 0), EBADF);
}

TEST_P(WaitErrors, NotAnEpollFailsEinval) {
  int efd = Eventfd(1);
  epoll_event ev[1];
  EXPECT_ERRNO(B().epoll_wait(efd, ev, 1, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_pwait(efd, ev, 1, 0, nullptr), EINVAL);
}

TEST_P(WaitErrors, NullEventsWithReadyItemFailsEfault) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_ERRNO(B().epoll_wait(ep, nullptr, 1, 0), EFAULT);
}

TEST_P(WaitErrors, NullEventsWithNothingReadyReturnsZero) {
  int ep = Epoll();
  EXPECT_EQ(B().epoll_wait(ep, nullptr, 1, 0), 0);
}

TEST_P(WaitErrors, WaitThroughDupOfInstanceSeesSameItems) {
  int ep = Epoll();
  int d = Dup(ep);
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(d, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 4), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 4}}));
  EXPECT_TRUE(Wait(d).empty());
}

TEST_P(WaitErrors, Pwait2NegativeSecondsFailsEinval) {
  int ep = Epoll();
  epoll_event ev[1];
  struct timespec ts = {-1, 0};
  EXPECT_ERRNO(B().epoll_pwait2(ep, ev, 1, &ts, nullptr), EINVAL);
}

TEST_P(WaitErrors, Pwait2NanosecondsOutOfRangeFailsEinval) {
  int ep = Epoll();
  epoll_event ev[1];
  struct timespec big = {0, 1000000000};
  struct timespec neg = {1, -1};
  EXPECT_ERRNO(B().epoll_pwait2(ep, ev, 1, &big, nullptr), EINVAL);
  EXPECT_ERRNO(B().epoll_pwait2(ep, ev, 1, &neg, nullptr), EINVAL);
}

TEST_P(WaitErrors, Pwait2TimespecCheckedBeforeDescriptor) {
  epoll_event ev[1];
  struct timespec ts = {0, -5};
  EXPECT_ERRNO(B().epoll_pwait2(B().closed_fd, ev, 1, &ts, nullptr), EINVAL);
}

TEST_P(WaitErrors, Pwait2HugeTimespecIsNotAnError) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  epoll_event ev[1];
  struct timespec ts = {LONG_MAX, 999999999};
  EXPECT_EQ(B().epoll_pwait2(ep, ev, 1, &ts, nullptr), 1);
}

TEST_P(WaitErrors, Pwait2NullTimespecWaitsForReadyItem) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  epoll_event ev[1];
  EXPECT_EQ(B().epoll_pwait2(ep, ev, 1, nullptr, nullptr), 1);
}

TEST_P(WaitErrors, Pwait2ZeroTimespecPolls) {
  int ep = Epoll();
  epoll_event ev[1];
  struct timespec zero {};
  EXPECT_EQ(B().epoll_pwait2(ep, ev, 1, &zero, nullptr), 0);
}

TEST_P(WaitErrors, ZeroTimeoutReturnsZeroAtOnce) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  epoll_event ev[1];
  EXPECT_EQ(B().epoll_wait(ep, ev, 1, 0), 0);
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, 0, nullptr), 0);
}

TEST_P(WaitErrors, ShortTimeoutReturnsZeroNoEarlier) {
  int ep = Epoll();
  epoll_event ev[1];
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_wait(ep, ev, 1, 30), 0);
  EXPECT_ELAPSED(t0, 30 * 1000000LL);
}

TEST_P(WaitErrors, PwaitShortTimeoutReturnsZeroNoEarlier) {
  int ep = Epoll();
  epoll_event ev[1];
  sigset_t none;
  sigemptyset(&none);
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, 20, &none), 0);
  EXPECT_ELAPSED(t0, 20 * 1000000LL);
}

TEST_P(WaitErrors, Pwait2ShortTimespecReturnsZeroNoEarlier) {
  int ep = Epoll();
  epoll_event ev[1];
  struct timespec ts = {0, 25 * 1000000 + 123};
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_pwait2(ep, ev, 1, &ts, nullptr), 0);
  EXPECT_ELAPSED(t0, 25 * 1000000LL + 123);
}

// The ready list is non-empty but its item went idle: the harvest finds
// nothing, and the wait sleeps on to its deadline instead of returning.
TEST_P(WaitErrors, IdleQueuedItemDoesNotEndTimedWaitEarly) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  EfdWrite(efd, 1);
  EfdRead(efd);
  epoll_event ev[1];
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_wait(ep, ev, 1, 30), 0);
  EXPECT_ELAPSED(t0, 30 * 1000000LL);
}

TEST_P(WaitErrors, AnyNegativeTimeoutBlocksUntilSignal) {
  int ep = Epoll();
  epoll_event ev[1];
  SignalGuard guard(SIGALRM);
  int64_t t0 = MonotonicNs();
  ArmAlarmMs(20);
  EXPECT_ERRNO(B().epoll_wait(ep, ev, 1, -7), EINTR);
  EXPECT_ELAPSED(t0, 20 * 1000000LL);
  EXPECT_GE(SignalsSeen(1), 1);
}

TEST_P(WaitErrors, SignalInterruptsTimedWaitDespiteSaRestart) {
  int ep = Epoll();
  epoll_event ev[1];
  SignalGuard guard(SIGALRM);
  int64_t t0 = MonotonicNs();
  ArmAlarmMs(20);
  EXPECT_ERRNO(B().epoll_wait(ep, ev, 1, 60000), EINTR);
  EXPECT_ELAPSED(t0, 20 * 1000000LL);
  EXPECT_GE(SignalsSeen(1), 1);
}

TEST_P(WaitErrors, PwaitMaskUnblocksPendingSignalEintr) {
  int ep = Epoll();
  epoll_event ev[1];
  SignalGuard guard(SIGUSR1);
  guard.Block();
  raise(SIGUSR1);
  sigset_t none;
  sigemptyset(&none);
  EXPECT_ERRNO(B().epoll_pwait(ep, ev, 1, -1, &none), EINTR);
  EXPECT_EQ(SignalsSeen(1), 1);
  // The caller's mask is back once the call returns.
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  EXPECT_EQ(sigismember(&now, SIGUSR1), 1);
}

TEST_P(WaitErrors, Pwait2MaskUnblocksPendingSignalEintr) {
  int ep = Epoll();
  epoll_event ev[1];
  SignalGuard guard(SIGUSR1);
  guard.Block();
  raise(SIGUSR1);
  sigset_t none;
  sigemptyset(&none);
  EXPECT_ERRNO(B().epoll_pwait2(ep, ev, 1, nullptr, &none), EINTR);
  EXPECT_EQ(SignalsSeen(1), 1);
}

TEST_P(WaitErrors, PwaitMaskBlocksSignalForTheWait) {
  int ep = Epoll();
  epoll_event ev[1];
  SignalGuard guard(SIGALRM);
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGALRM);
  struct itimerval once {};
  once.it_value.tv_usec = 5000;
  setitimer(ITIMER_REAL, &once, nullptr);
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, 50, &block), 0);
  EXPECT_ELAPSED(t0, 50 * 1000000LL);
  // Delivered once the caller's (unblocking) mask is back.
  EXPECT_EQ(SignalsSeen(1), 1);
}

TEST_P(WaitErrors, ReadyEventsWinOverPendingSignal) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  epoll_event ev[1];
  SignalGuard guard(SIGUSR1);
  guard.Block();
  raise(SIGUSR1);
  sigset_t none;
  sigemptyset(&none);
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, -1, &none), 1);
  EXPECT_EQ(g_signals, 0);
  EXPECT_TRUE(guard.Pending());
}

TEST_P(WaitErrors, ZeroTimeoutIgnoresPendingSignal) {
  int ep = Epoll();
  epoll_event ev[1];
  SignalGuard guard(SIGUSR1);
  guard.Block();
  raise(SIGUSR1);
  sigset_t none;
  sigemptyset(&none);
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, 0, &none), 0);
  EXPECT_EQ(g_signals, 0);
  EXPECT_TRUE(guard.Pending());
}

UEPOLL_INSTANTIATE_BACKENDS(WaitErrors);

}  // namespace
}  // namespace uepoll_test
