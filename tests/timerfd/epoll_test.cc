// timerfds in epoll instances and poll(), on both backends: trigger modes,
// one-shot re-arming, nesting, dup/close keyed by (object, descriptor), and
// a timerfd beside a pipe and an eventfd in one instance.
//
//   t --waits--> e1 <- timer (lt|et|oneshot)
//   t --waits--> e0 <- e1 <- timer              (nested)
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

class TimerfdEpoll : public TimerfdTest {
 protected:
  // Blocks until the instance reports something (bounded).
  std::vector<Ev> WaitSome(int ep) { return Wait(ep, 16, kExpiryWaitMs); }
};

TEST_P(TimerfdEpoll, LevelTriggeredReportsUntilRead) {
  int ep = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 7), 0);
  EXPECT_TRUE(Wait(ep).empty());
  Arm(fd, 2 * kMs);
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
  EXPECT_EQ(Ticks(fd), 1u);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TimerfdEpoll, EdgeTriggeredReportsEachExpiryOnce) {
  int ep = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 7), 0);
  Arm(fd, 2 * kMs);
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
  // Not read, but no new expiry: no new edge.
  EXPECT_TRUE(Wait(ep, 16, 20).empty());
  EXPECT_EQ(Ticks(fd), 1u);
  Arm(fd, 2 * kMs);
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
}

TEST_P(TimerfdEpoll, EdgeTriggeredIntervalTimerGivesAnEdgePerReArm) {
  int ep = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLET, 1), 0);
  Arm(fd, 2 * kMs, 2 * kMs);
  uint64_t total = 0;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
    total += Ticks(fd);
  }
  EXPECT_GE(total, 5u);
}

TEST_P(TimerfdEpoll, OneshotNeedsModToReport) {
  int ep = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLONESHOT, 3), 0);
  Arm(fd, 1 * kMs, 1 * kMs);
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 3}}));
  EXPECT_TRUE(Wait(ep, 16, 20).empty());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLONESHOT, 4), 0);
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 4}}));
}

TEST_P(TimerfdEpoll, OutAndOtherBitsAreNeverReported) {
  int ep = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd,
                EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDNORM | EPOLLRDHUP, 1),
            0);
  Arm(fd, 1 * kMs);
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, fd, EPOLLOUT, 2), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TimerfdEpoll, NestedInstanceReportsTheInnerExpiry) {
  int outer = Epoll();
  int inner = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(inner, EPOLL_CTL_ADD, fd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN | EPOLLET, 2), 0);
  Arm(fd, 2 * kMs);
  EXPECT_EQ(WaitSome(outer), (std::vector<Ev>{{EPOLLIN, 2}}));
  EXPECT_EQ(Wait(inner), (std::vector<Ev>{{EPOLLIN, 1}}));
  EXPECT_EQ(Ticks(fd), 1u);
  EXPECT_TRUE(Wait(inner).empty());
}

TEST_P(TimerfdEpoll, CloseRemovesTheRegistrationDupKeepsIt) {
  int ep = Epoll();
  int fd = Timerfd();
  int d = Dup(fd);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 5), 0);
  EXPECT_EQ(Close(fd), 0);
  Arm(d, 1 * kMs);
  // The item (keyed by the closed number) still reports: d keeps the
  // timer open.
  EXPECT_EQ(WaitSome(ep), (std::vector<Ev>{{EPOLLIN, 5}}));
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, fd, 0, 0), EBADF);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, d, 0, 0), ENOENT);
  EXPECT_EQ(Close(d), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TimerfdEpoll, ClosingAnArmedTimerLeavesNothingBehind) {
  int ep = Epoll();
  for (int i = 0; i < 50; ++i) {
    int fd = Timerfd();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, uint64_t(i)), 0);
    Arm(fd, (i % 3) * kMs + 1, kMs);
    if (i % 2) WaitReadable(fd);
    EXPECT_EQ(Close(fd), 0);
  }
  EXPECT_TRUE(Wait(ep, 16, 10).empty());
}

TEST_P(TimerfdEpoll, SitsBesideAPipeAndAnEventfd) {
  int ep = Epoll();
  int fd = Timerfd();
  int efd = Eventfd();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLRDNORM, 3), 0);
  EfdWrite(efd, 1);
  ASSERT_EQ(B().write(p[1], "x", 1), 1);
  EXPECT_EQ(Wait(ep),
            (std::vector<Ev>{{EPOLLIN, 2}, {EPOLLIN | EPOLLRDNORM, 3}}));
  Arm(fd, 1 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  // The timer joins the ready list after the two LT items re-queued.
  EXPECT_EQ(Wait(ep),
            (std::vector<Ev>{
                {EPOLLIN, 2}, {EPOLLIN | EPOLLRDNORM, 3}, {EPOLLIN, 1}}));
}

TEST_P(TimerfdEpoll, PollReportsExpiry) {
  int fd = Timerfd();
  Arm(fd, 3 * kMs);
  struct pollfd p[2] = {};
  p[0].fd = fd;
  p[0].events = POLLIN | POLLOUT;
  p[1].fd = fd;
  p[1].events = POLLOUT;
  EXPECT_EQ(B().poll(p, 2, kExpiryWaitMs), 1);
  EXPECT_EQ(p[0].revents, POLLIN);
  EXPECT_EQ(p[1].revents, 0);
}

TEST_P(TimerfdEpoll, ExclusiveWakeupGoesToTheInstanceWithAWaiter) {
  // Two instances watch one timer with EPOLLEXCLUSIVE; this thread waits on
  // e1 when the timer fires, so e1's callback consumes the one exclusive
  // wakeup and e2 never hears of it.
  int e1 = Epoll(), e2 = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLEXCLUSIVE, 1), 0);
  ASSERT_EQ(Ctl(e2, EPOLL_CTL_ADD, fd, EPOLLIN | EPOLLEXCLUSIVE, 2), 0);
  Arm(fd, 5 * kMs);
  EXPECT_EQ(WaitSome(e1), (std::vector<Ev>{{EPOLLIN, 1}}));
  EXPECT_TRUE(Wait(e2, 16, 20).empty());
}

UEPOLL_INSTANTIATE_BACKENDS(TimerfdEpoll);

}  // namespace
}  // namespace uepoll_test
