// A user-defined object against a kernel object: every body runs on a
// kernel eventfd, on uepoll's built-in eventfd, and on an eventfd written as
// a user object with callbacks (user_eventfd.h), with one set of
// expectations. Trigger modes, one-shot, EXCLUSIVE, nesting, dup/close
// keyed by (object, descriptor), poll(), blocking reads and writes, signals
// and wakeups across threads.
//
//   t --waits--> e1 <- u          u: the eventfd (lt|et|oneshot|exclusive)
//   t --waits--> e0 <- e1 <- u    (nested)
#include <signal.h>
#include <sys/timerfd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "conformance/helpers.h"
#include "threads/waiter.h"
#include "userobj/user_eventfd.h"

namespace uepoll_test {
namespace {

class UserObjEventfd : public ConformanceTest {
 protected:
  void TearDown() override {
    ConformanceTest::TearDown();
    // Every user object's release ran: the callbacks' state is gone too.
    EXPECT_EQ(UserEventfdsLive(), 0);
  }
  std::vector<Ev> WaitSome(int ep) { return Wait(ep, 16, kWaitMs); }
};

TEST_P(UserObjEventfd, MasksFollowTheCount) {
  int efd = Eventfd();
  EXPECT_EQ(PollMask(efd), POLLOUT);
  EfdWrite(efd, 3);
  EXPECT_EQ(PollMask(efd), POLLIN | POLLOUT);
  EXPECT_EQ(EfdRead(efd), 3u);
  EXPECT_EQ(PollMask(efd), POLLOUT);
  EfdWrite(efd, ~uint64_t{0} - 1);
  EXPECT_EQ(PollMask(efd), POLLIN);
  uint64_t one = 1;
  EXPECT_ERRNO(B().write(efd, &one, 8), EAGAIN);
}

TEST_P(UserObjEventfd, IoErrorsComeFromTheCallbacks) {
  int efd = Eventfd(2);
  char small[4];
  EXPECT_ERRNO(B().read(efd, small, 4), EINVAL);
  EXPECT_ERRNO(B().write(efd, small, 4), EINVAL);
  uint64_t all = ~uint64_t{0};
  EXPECT_ERRNO(B().write(efd, &all, 8), EINVAL);
  uint64_t big[2] = {0, 0};
  EXPECT_EQ(B().read(efd, big, sizeof big), 8);
  EXPECT_EQ(big[0], 2u);
  uint64_t v;
  EXPECT_ERRNO(B().read(efd, &v, 8), EAGAIN);
}

TEST_P(UserObjEventfd, LevelTriggeredReportsUntilConsumed) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_TRUE(Wait(ep).empty());
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  EfdRead(efd);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(UserObjEventfd, EdgeTriggeredReportsEachWriteOnce) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLOUT | EPOLLET, 1), 0);
  // ADD found it writable: one OUT edge.
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
  EXPECT_TRUE(Wait(ep).empty());
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN | EPOLLOUT, 1}}));
  EXPECT_TRUE(Wait(ep).empty());
  // Already readable: a second write is a new edge all the same.
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN | EPOLLOUT, 1}}));
  // A read wakes with OUT only: the item is reported with what polls now.
  EfdRead(efd);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
}

TEST_P(UserObjEventfd, EdgeTriggeredInOnlyIgnoresOutWakeups) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  EfdRead(efd);  // wakes with EPOLLOUT, which this item does not want
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(UserObjEventfd, OneshotDisablesUntilMod) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  EfdWrite(efd, 1);
  EXPECT_TRUE(Wait(ep).empty());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN | EPOLLONESHOT, 2), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 2}}));
}

TEST_P(UserObjEventfd, NestedInstancesSeeTheObject) {
  int outer = Epoll(), inner = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(inner, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN | EPOLLET, 2), 0);
  EXPECT_TRUE(Wait(outer).empty());
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(outer), (std::vector<Ev>{{EPOLLIN, 2}}));
  EXPECT_TRUE(Wait(outer).empty());
  EfdWrite(efd, 1);  // a new inner event: a new outer edge
  EXPECT_EQ(Wait(outer), (std::vector<Ev>{{EPOLLIN, 2}}));
  // The outer ET item was consumed; the inner instance is still ready.
  EXPECT_EQ(PollMask(outer), 0);
  EXPECT_EQ(PollMask(inner), POLLIN | POLLRDNORM);
  EfdRead(efd);
  EXPECT_EQ(PollMask(inner), 0);
  EXPECT_EQ(Wait(inner), std::vector<Ev>{});
}

TEST_P(UserObjEventfd, ItemsAreKeyedByObjectAndDescriptor) {
  int ep = Epoll();
  int efd = Eventfd();
  int d = Dup(efd);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 2), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(Sorted(Wait(ep)), (std::vector<Ev>{{EPOLLIN, 1}, {EPOLLIN, 2}}));
  // Closing one number keeps both items (the object is still open).
  EXPECT_EQ(Close(efd), 0);
  EXPECT_EQ(Sorted(Wait(ep)), (std::vector<Ev>{{EPOLLIN, 1}, {EPOLLIN, 2}}));
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, efd, 0, 0), EBADF);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_DEL, d, 0, 0), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  // The last close removes the remaining item silently.
  EXPECT_EQ(Close(d), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(UserObjEventfd, PollWithOtherSources) {
  int efd = Eventfd(1);
  int p[2];
  Pipe(p);
  struct pollfd fds[3] = {};
  fds[0].fd = efd;
  fds[0].events = POLLIN;
  fds[1].fd = p[0];
  fds[1].events = POLLIN;
  fds[2].fd = p[1];
  fds[2].events = POLLOUT;
  EXPECT_EQ(B().poll(fds, 3, 0), 2);
  EXPECT_EQ(fds[0].revents, POLLIN);
  EXPECT_EQ(fds[1].revents, 0);
  EXPECT_EQ(fds[2].revents, POLLOUT);
}

TEST_P(UserObjEventfd, SitsBesideATimerfdAndAPipe) {
  int ep = Epoll();
  int efd = Eventfd();
  int tfd = Track(B().timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK));
  ASSERT_GE(tfd, 0);
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, tfd, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 3), 0);
  itimerspec v{};
  v.it_value.tv_nsec = 1000000;
  ASSERT_EQ(B().timerfd_settime(tfd, 0, &v, nullptr), 0);
  EXPECT_EQ(Wait(ep, 16, kWaitMs), (std::vector<Ev>{{EPOLLIN, 2}}));
  EfdWrite(efd, 1);
  ASSERT_EQ(B().write(p[1], "ab", 2), 2);
  EXPECT_EQ(Wait(ep),
            (std::vector<Ev>{{EPOLLIN, 2}, {EPOLLIN, 1}, {EPOLLIN, 3}}));
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 2}, {EPOLLIN, 3}}));
  uint64_t ticks;
  ASSERT_EQ(B().read(tfd, &ticks, 8), 8);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 3}}));
}

TEST_P(UserObjEventfd, SleepingWaiterIsWokenByAWriteFromAnotherThread) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 7), 0);
  Waiter w([&](epoll_event* evs) {
    return B().epoll_wait(ep, evs, Waiter::kEvents, kWaitMs);
  });
  ASSERT_TRUE(w.Parked());
  EfdWrite(efd, 5);
  ASSERT_TRUE(w.WaitDone());
  ASSERT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 7u);
}

TEST_P(UserObjEventfd, ExclusiveWakesOneWaiterPerWrite) {
  //   t1 --waits--> e1 <- u (exclusive)
  //   t2 --waits--> e2 <- u (exclusive)
  int e1 = Epoll(), e2 = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET | EPOLLEXCLUSIVE, 1),
            0);
  ASSERT_EQ(Ctl(e2, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET | EPOLLEXCLUSIVE, 2),
            0);
  Waiter w1([&](epoll_event* evs) {
    return B().epoll_wait(e1, evs, Waiter::kEvents, kWaitMs);
  });
  Waiter w2([&](epoll_event* evs) {
    return B().epoll_wait(e2, evs, Waiter::kEvents, kWaitMs);
  });
  ASSERT_TRUE(w1.Parked());
  ASSERT_TRUE(w2.Parked());
  EfdWrite(efd, 1);
  ASSERT_TRUE(Eventually([&] { return w1.Done() || w2.Done(); }));
  // One write, one exclusive wakeup: the other stays asleep until the
  // second write.
  EXPECT_FALSE(w1.Done() && w2.Done());
  EfdWrite(efd, 1);
  ASSERT_TRUE(w1.WaitDone());
  ASSERT_TRUE(w2.WaitDone());
  EXPECT_EQ(w1.result(), 1);
  EXPECT_EQ(w2.result(), 1);
}

TEST_P(UserObjEventfd, BlockingReadWaitsForAWrite) {
  int efd = Eventfd(0, 0);
  uint64_t got = 0;
  Waiter w([&](epoll_event*) { return int(B().read(efd, &got, 8)); });
  ASSERT_TRUE(w.Parked());
  EfdWrite(efd, 9);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 8);
  EXPECT_EQ(got, 9u);
}

TEST_P(UserObjEventfd, BlockingWriteWaitsForRoom) {
  int efd = Eventfd(0, 0);
  EfdWrite(efd, ~uint64_t{0} - 2);
  uint64_t two = 2;
  Waiter w([&](epoll_event*) { return int(B().write(efd, &two, 8)); });
  ASSERT_TRUE(w.Parked());
  EXPECT_EQ(EfdRead(efd), ~uint64_t{0} - 2);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 8);
  EXPECT_EQ(EfdRead(efd), 2u);
}

void Nop(int) {}

TEST_P(UserObjEventfd, BlockingReadAndSignals) {
  for (bool restart : {false, true}) {
    struct sigaction sa {
    }, old;
    sa.sa_handler = Nop;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    int efd = Eventfd(0, 0);
    uint64_t got = 0;
    Waiter w([&](epoll_event*) { return int(B().read(efd, &got, 8)); });
    ASSERT_TRUE(w.Parked());
    pthread_kill(w.handle(), SIGUSR1);
    if (restart) {
      ASSERT_TRUE(w.Parked());
      EfdWrite(efd, 4);
      ASSERT_TRUE(w.WaitDone());
      EXPECT_EQ(w.result(), 8);
      EXPECT_EQ(got, 4u);
    } else {
      ASSERT_TRUE(w.WaitDone());
      EXPECT_EQ(w.result(), -1);
      EXPECT_EQ(w.error(), EINTR);
    }
    sigaction(SIGUSR1, &old, nullptr);
    Close(efd);
  }
}

TEST_P(UserObjEventfd, SemaphoreMode) {
  int efd = Eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
  EXPECT_EQ(EfdRead(efd), 1u);
  EXPECT_EQ(EfdRead(efd), 1u);
  uint64_t v;
  EXPECT_ERRNO(B().read(efd, &v, 8), EAGAIN);
}

// Writers on several threads, one reader harvesting with ET: the sum read
// equals the sum written (no wakeup lost: the last wait would time out).
TEST_P(UserObjEventfd, ConcurrentWritersExactSum) {
  constexpr int kWriters = 3, kWrites = 2000;
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&] {
      uint64_t one = 1;
      for (int i = 0; i < kWrites; ++i) {
        while (B().write(efd, &one, 8) != 8) std::this_thread::yield();
      }
    });
  }
  uint64_t sum = 0;
  while (sum < uint64_t(kWriters) * kWrites) {
    epoll_event ev;
    int n = B().epoll_wait(ep, &ev, 1, kWaitMs);
    ASSERT_EQ(n, 1) << "lost a wakeup at " << sum;
    uint64_t v = 0;
    // ET: drain until EAGAIN, then wait for the next edge.
    while (B().read(efd, &v, 8) == 8) sum += v;
    ASSERT_EQ(errno, EAGAIN);
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(sum, uint64_t(kWriters) * kWrites);
}

INSTANTIATE_TEST_SUITE_P(Backends, UserObjEventfd,
                         ::testing::Values(&KernelBackend(), &UepollBackend(),
                                           &UserObjectBackend()),
                         [](const ::testing::TestParamInfo<const Backend*>& i) {
                           return BackendName(i.param);
                         });

}  // namespace
}  // namespace uepoll_test
