// Handlers installed with uepoll_sigaction may call uepoll
// (base/signal_defer.h): a signal that lands while the thread holds a uepoll
// lock is put off until it holds none, then delivered by the kernel with its
// siginfo. The lock is held here on purpose: a user object's poll callback
// runs under the instance's lock during a harvest (sources/user_object.h),
// and raises the signal from there. The handler then does what a self-pipe
// handler does (a write) and what would wait for the interrupted thread (a
// ctl on the instance being harvested).
#include "base/signal_defer.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <atomic>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

namespace {

std::atomic<bool> g_in_poll{false};
std::atomic<int> g_raise_in_poll{0};  // signals the poll callback raises
std::atomic<int> g_handled{0};
std::atomic<int> g_handled_in_poll{0};  // handler runs inside the lock
std::atomic<int> g_ctl_result{-2};
std::atomic<int> g_si_code{0};
std::atomic<int> g_si_pid{0};
int g_epfd = -1, g_pipe_r = -1, g_pipe_w = -1;

uint32_t PollRaising(void*) {
  g_in_poll = true;
  if (g_raise_in_poll.load() > 0) {
    g_raise_in_poll.fetch_sub(1);
    raise(SIGUSR1);  // delivered before raise returns, unless put off
  }
  g_in_poll = false;
  return EPOLLIN;
}

void OnSignal(int, siginfo_t* info, void*) {
  int saved = errno;
  if (g_in_poll) {
    // Without the deferral: inside the harvest, under the instance's lock.
    // Calling uepoll now would wait for this very thread; record instead.
    g_handled_in_poll.fetch_add(1);
  } else {
    char c = 'x';
    (void)!uepoll_write(g_pipe_w, &c, 1);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 2;
    g_ctl_result = uepoll_epoll_ctl(g_epfd, EPOLL_CTL_MOD, g_pipe_r, &ev);
    g_si_code = info->si_code;
    g_si_pid = info->si_pid;
  }
  g_handled.fetch_add(1);
  errno = saved;
}

class SignalDefer : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer runs a handler at its own points (its interceptors),
    // not where the signal landed, so the lock is never held there.
    GTEST_SKIP() << "signals are delivered by ThreadSanitizer";
#endif
    g_in_poll = false;
    g_raise_in_poll = 0;
    g_handled = 0;
    g_handled_in_poll = 0;
    g_ctl_result = -2;
    struct sigaction sa {};
    sa.sa_sigaction = OnSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(uepoll_sigaction(SIGUSR1, &sa, &old_), 0);
    g_epfd = uepoll_epoll_create1(0);
    ASSERT_GE(g_epfd, 0);
    int p[2];
    ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
    g_pipe_r = p[0];
    g_pipe_w = p[1];
    static const uepoll_obj_ops ops = {PollRaising, nullptr, nullptr, nullptr};
    obj_ = uepoll_obj_create(&ops, nullptr, 0, nullptr);
    ASSERT_GE(obj_, 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 1;
    ASSERT_EQ(uepoll_epoll_ctl(g_epfd, EPOLL_CTL_ADD, obj_, &ev), 0);
    ev.data.u64 = 3;
    ASSERT_EQ(uepoll_epoll_ctl(g_epfd, EPOLL_CTL_ADD, g_pipe_r, &ev), 0);
  }
  void TearDown() override {
    if (obj_ < 0) return;  // skipped
    uepoll_sigaction(SIGUSR1, &old_, nullptr);
    uepoll_close(obj_);
    uepoll_close(g_pipe_r);
    uepoll_close(g_pipe_w);
    uepoll_close(g_epfd);
  }

  struct sigaction old_ {};
  int obj_ = -1;
};

TEST_F(SignalDefer, HandlerRaisedUnderTheInstanceLockRunsAfterIt) {
  g_raise_in_poll = 1;
  epoll_event evs[4];
  int n = uepoll_epoll_wait(g_epfd, evs, 4, 0);
  ASSERT_GE(n, 1);
  // The harvest took the object's readiness under the lock; the handler ran
  // once, after the lock was dropped, and its calls succeeded.
  EXPECT_EQ(g_handled.load(), 1);
  EXPECT_EQ(g_handled_in_poll.load(), 0);
  EXPECT_EQ(g_ctl_result.load(), 0);
  // What the handler wrote is there, under the data its MOD set.
  n = uepoll_epoll_wait(g_epfd, evs, 4, 0);
  bool pipe_seen = false;
  for (int i = 0; i < n; ++i) pipe_seen |= evs[i].data.u64 == 2;
  EXPECT_TRUE(pipe_seen);
  char c;
  EXPECT_EQ(uepoll_read(g_pipe_r, &c, 1), 1);
}

TEST_F(SignalDefer, PutOffSignalKeepsItsSiginfo) {
  g_raise_in_poll = 1;
  epoll_event evs[4];
  ASSERT_GE(uepoll_epoll_wait(g_epfd, evs, 4, 0), 1);
  ASSERT_EQ(g_handled.load(), 1);
  // raise() is tgkill: the kernel's SI_TKILL from this process.
  EXPECT_EQ(g_si_code.load(), SI_TKILL);
  EXPECT_EQ(g_si_pid.load(), getpid());
}

TEST_F(SignalDefer, ManyHarvestsEachRunTheirHandlerOutsideTheLock) {
  for (int round = 0; round < 200; ++round) {
    g_raise_in_poll = 1;
    epoll_event evs[4];
    ASSERT_GE(uepoll_epoll_wait(g_epfd, evs, 4, 0), 1);
    ASSERT_EQ(g_handled.load(), round + 1);
  }
  EXPECT_EQ(g_handled_in_poll.load(), 0);
  // Every handler wrote one byte.
  char buf[256];
  EXPECT_EQ(uepoll_read(g_pipe_r, buf, sizeof buf), 200);
}

TEST_F(SignalDefer, SignalMaskIsRestoredAfterTheHandler) {
  g_raise_in_poll = 1;
  epoll_event evs[4];
  ASSERT_GE(uepoll_epoll_wait(g_epfd, evs, 4, 0), 1);
  ASSERT_EQ(g_handled.load(), 1);
  sigset_t now;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &now), 0);
  EXPECT_FALSE(sigismember(&now, SIGUSR1));
  // And a signal outside any lock is handled at once.
  raise(SIGUSR1);
  EXPECT_EQ(g_handled.load(), 2);
}

// The old action is reported as sigaction would: the application's handler
// and flags, not the trampoline.
TEST_F(SignalDefer, OldActionIsTheApplications) {
  struct sigaction cur {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR1, nullptr, &cur), 0);
  EXPECT_EQ(cur.sa_sigaction, OnSignal);
  EXPECT_TRUE(cur.sa_flags & SA_SIGINFO);
  EXPECT_TRUE(cur.sa_flags & SA_RESTART);
  EXPECT_FALSE(cur.sa_flags & SA_RESETHAND);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  struct sigaction prev {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR1, &ign, &prev), 0);
  EXPECT_EQ(prev.sa_sigaction, OnSignal);
  ASSERT_EQ(uepoll_sigaction(SIGUSR1, nullptr, &cur), 0);
  EXPECT_EQ(cur.sa_handler, SIG_IGN);
}

std::atomic<int> g_plain{0};
void OnPlain(int) { g_plain.fetch_add(1); }

// A plain handler's action, with flags and an empty mask.
struct sigaction PlainAction(void (*handler)(int), int flags) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  return sa;
}

// A handler replaced by another is reported, by the call that replaces
// it, as the one it was: its handler and flags, not the new one's.
TEST_F(SignalDefer, ReplacingAHandlerReportsThePreviousOne) {
  struct sigaction plain = PlainAction(OnPlain, SA_RESETHAND);
  struct sigaction prev {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR1, &plain, &prev), 0);
  EXPECT_EQ(prev.sa_sigaction, OnSignal);
  EXPECT_TRUE(prev.sa_flags & SA_SIGINFO);
  EXPECT_FALSE(prev.sa_flags & SA_RESETHAND);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(uepoll_sigaction(SIGUSR1, &ign, &prev), 0);
  EXPECT_EQ(prev.sa_handler, OnPlain);
  EXPECT_FALSE(prev.sa_flags & SA_SIGINFO);
  EXPECT_TRUE(prev.sa_flags & SA_RESETHAND);
  // A refused call reports nothing (32 is one of the two signals glibc
  // keeps for itself, which its sigaction refuses), and the action
  // installed before it on another signal stays.
  struct sigaction untouched {};
  untouched.sa_handler = OnPlain;
  errno = 0;
  EXPECT_EQ(uepoll_sigaction(32, &plain, &untouched), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(untouched.sa_handler, OnPlain);
  struct sigaction cur {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR1, nullptr, &cur), 0);
  EXPECT_EQ(cur.sa_handler, SIG_IGN);
}

TEST_F(SignalDefer, ResetHandRunsOnceThenTheDefaultIsReported) {
  struct sigaction sa = PlainAction(OnPlain, SA_RESETHAND);
  g_plain = 0;
  ASSERT_EQ(uepoll_sigaction(SIGUSR2, &sa, nullptr), 0);
  struct sigaction cur {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR2, nullptr, &cur), 0);
  EXPECT_TRUE(cur.sa_flags & SA_RESETHAND);
  raise(SIGUSR2);
  EXPECT_EQ(g_plain.load(), 1);
  ASSERT_EQ(uepoll_sigaction(SIGUSR2, nullptr, &cur), 0);
  EXPECT_EQ(cur.sa_handler, SIG_DFL);
}

std::atomic<int> g_second{0};
void OnSecond(int) { g_second.fetch_add(1); }

// What the hook installs: the second handler, from inside the delivery of
// the first, after the trampoline read the first's action and before it
// carries out its SA_RESETHAND.
void InstallSecond(int sig) {
  struct sigaction second = PlainAction(OnSecond, 0);
  uepoll_sigaction(sig, &second, nullptr);
}

// The kernel resets an SA_RESETHAND action at delivery, so an action
// installed after the delivery (by another thread, or by the handler)
// stays. The trampoline resets after it read the action: an install in
// between must survive the reset, and the delivery still runs the handler
// it was for.
TEST_F(SignalDefer, AnInstallWhileAResetHandDeliveryIsOnItsWayStays) {
  struct sigaction first = PlainAction(OnPlain, SA_RESETHAND);
  struct sigaction old {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR2, &first, &old), 0);
  g_plain = 0;
  g_second = 0;
  uepoll::impl::SetSignalResetHookForTest(&InstallSecond);
  raise(SIGUSR2);
  uepoll::impl::SetSignalResetHookForTest(nullptr);
  EXPECT_EQ(g_plain.load(), 1);
  EXPECT_EQ(g_second.load(), 0);
  struct sigaction cur {};
  ASSERT_EQ(uepoll_sigaction(SIGUSR2, nullptr, &cur), 0);
  EXPECT_EQ(cur.sa_handler, OnSecond) << "the install was reset";
  if (cur.sa_handler == OnSecond) {
    raise(SIGUSR2);
    EXPECT_EQ(g_second.load(), 1);
  }
  ASSERT_EQ(uepoll_sigaction(SIGUSR2, &old, nullptr), 0);
}

TEST_F(SignalDefer, BadSignalNumbersFailAsSigaction) {
  struct sigaction sa {};
  sa.sa_handler = OnPlain;
  for (int sig : {0, -1, 65, SIGKILL, SIGSTOP}) {
    errno = 0;
    EXPECT_EQ(uepoll_sigaction(sig, &sa, nullptr), -1) << sig;
    EXPECT_EQ(errno, EINVAL) << sig;
  }
}

}  // namespace
