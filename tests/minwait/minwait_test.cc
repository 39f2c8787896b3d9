// min_wait batching, busy polling and per-instance parameters
// (docs/contract.md section 13; the rules are those of the manual pages
// uepoll_epoll_pwait3(3) and uepoll_epoll_set_params(3)). uepoll only: the
// kernel has no pwait3. Every rule
// is pinned without depending on the machine's speed: a minimum wait of an
// hour proves that a call skipped it (it returned at all), and elapsed
// times are only ever checked from below.
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

// True once the thread sleeps in the kernel (uepoll parks in epoll_pwait2).
bool WaitUntilSleeping(pid_t tid) {
  return Eventually([tid] { return TaskState(tid) == 'S'; });
}

constexpr uint64_t kHourNs = 3600ull * 1000000000ull;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void OnSignal(int) {}

class MinWait : public ::testing::Test {
 protected:
  void SetUp() override {
    ep_ = uepoll_epoll_create1(0);
    ASSERT_GE(ep_, 0);
  }
  void TearDown() override {
    for (int fd : fds_) uepoll_close(fd);
    uepoll_close(ep_);
    ExpectNoUepollLeaks();
  }
  // A nonblocking eventfd registered with `events`, data = its index.
  int Source(uint32_t events = EPOLLIN | EPOLLET) {
    int fd = uepoll_eventfd(0, EFD_NONBLOCK);
    EXPECT_GE(fd, 0);
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = fds_.size();
    EXPECT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev), 0);
    fds_.push_back(fd);
    return fd;
  }
  static void Signal(int fd) {
    uint64_t one = 1;
    ASSERT_EQ(uepoll_write(fd, &one, 8), 8);
  }
  int Wait3(epoll_event* evs, int max, const timespec* timeout,
            uint64_t min_wait_ns, const sigset_t* mask = nullptr) {
    uepoll_wait_args a{};
    a.timeout = timeout;
    a.min_wait_ns = min_wait_ns;
    a.sigmask = mask;
    return uepoll_epoll_pwait3(ep_, evs, max, &a);
  }

  int ep_ = -1;
  std::vector<int> fds_;
};

TEST_F(MinWait, ZeroTimeoutIgnoresMinWait) {
  Source();
  epoll_event evs[4];
  timespec zero{0, 0};
  EXPECT_EQ(Wait3(evs, 4, &zero, kHourNs), 0);
}

TEST_F(MinWait, ZeroTimeoutStillReturnsReadyEvents) {
  Signal(Source());
  epoll_event evs[4];
  timespec zero{0, 0};
  EXPECT_EQ(Wait3(evs, 4, &zero, kHourNs), 1);
}

TEST_F(MinWait, ReturnsAtOnceWhenMaxeventsAreReady) {
  Signal(Source());
  Signal(Source());
  epoll_event evs[2];
  ASSERT_EQ(Wait3(evs, 2, nullptr, kHourNs), 2);
  EXPECT_EQ(evs[0].data.u64, 0u);
  EXPECT_EQ(evs[1].data.u64, 1u);
}

TEST_F(MinWait, WaitsOutMinWaitWhenFewerAreReady) {
  Signal(Source());
  Source();
  epoll_event evs[4];
  const uint64_t min_wait = 30'000'000;  // 30 ms
  int64_t t0 = NowNs();
  ASSERT_EQ(Wait3(evs, 4, nullptr, min_wait), 1);
  EXPECT_GE(NowNs() - t0, static_cast<int64_t>(min_wait));
}

TEST_F(MinWait, EventsArrivingDuringMinWaitJoinTheBatch) {
  int a = Source();
  int b = Source();
  Signal(a);
  std::atomic<pid_t> tid{0};
  int got = -1;
  epoll_event evs[4];
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    got = Wait3(evs, 4, nullptr, kHourNs / 3600 * 2);  // 2 s
  });
  while (tid == 0) std::this_thread::yield();
  ASSERT_TRUE(WaitUntilSleeping(tid));
  Signal(b);  // arrives while the waiter sits in its min_wait
  waiter.join();
  ASSERT_EQ(got, 2);
  EXPECT_EQ(evs[0].data.u64, 0u);
  EXPECT_EQ(evs[1].data.u64, 1u);
}

TEST_F(MinWait, WithNothingReadyReturnsAtFirstEventAfterMinWait) {
  int a = Source();
  std::atomic<pid_t> tid{0};
  int got = -1;
  epoll_event evs[4];
  const uint64_t min_wait = 5'000'000;  // 5 ms
  int64_t t0 = NowNs();
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    got = Wait3(evs, 4, nullptr, min_wait);  // timeout: forever
  });
  while (tid == 0) std::this_thread::yield();
  ASSERT_TRUE(WaitUntilSleeping(tid));
  Signal(a);
  waiter.join();
  EXPECT_EQ(got, 1);
  EXPECT_GE(NowNs() - t0, static_cast<int64_t>(min_wait));
}

TEST_F(MinWait, TimeoutShorterThanMinWaitWins) {
  Source();
  epoll_event evs[4];
  timespec t{0, 20'000'000};  // 20 ms
  int64_t t0 = NowNs();
  EXPECT_EQ(Wait3(evs, 4, &t, kHourNs), 0);
  EXPECT_GE(NowNs() - t0, 20'000'000);
}

TEST_F(MinWait, LevelTriggeredItemIsNotReportedTwiceInOneBatch) {
  Signal(Source(EPOLLIN));  // LT: stays ready after delivery
  epoll_event evs[4];
  ASSERT_EQ(Wait3(evs, 4, nullptr, 20'000'000), 1);
  EXPECT_EQ(evs[0].data.u64, 0u);
}

class MinWaitSignal : public MinWait {
 protected:
  void SetUp() override {
    MinWait::SetUp();
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART;  // epoll waits fail EINTR even so
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_), 0);
  }
  void TearDown() override {
    sigaction(SIGUSR1, &old_, nullptr);
    MinWait::TearDown();
  }
  // Runs a min_wait of an hour on another thread and signals it once it
  // sleeps; returns the wait's result and errno.
  std::pair<int, int> InterruptedWait(int maxevents) {
    std::atomic<pid_t> tid{0};
    int got = 0, err = 0;
    epoll_event evs[4];
    std::thread waiter([&] {
      tid = static_cast<pid_t>(syscall(SYS_gettid));
      got = Wait3(evs, maxevents, nullptr, kHourNs);
      err = errno;
    });
    while (tid == 0) std::this_thread::yield();
    EXPECT_TRUE(WaitUntilSleeping(tid));
    pthread_kill(waiter.native_handle(), SIGUSR1);
    waiter.join();
    return {got, err};
  }
  struct sigaction old_ {};
};

TEST_F(MinWaitSignal, SignalEndsMinWaitAndReturnsReadyEvents) {
  Signal(Source());
  Source();
  auto [got, err] = InterruptedWait(4);
  EXPECT_EQ(got, 1);
}

TEST_F(MinWaitSignal, SignalEndsMinWaitWithEintrWhenNothingIsReady) {
  Source();
  auto [got, err] = InterruptedWait(4);
  EXPECT_EQ(got, -1);
  EXPECT_EQ(err, EINTR);
}

TEST_F(MinWait, InstanceDefaultAppliesToPlainWaits) {
  uepoll_params p{};
  p.min_wait_ns = kHourNs;
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
  Signal(Source());
  Signal(Source());
  epoll_event evs[2];
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 2, -1), 2);  // maxevents ready: at once
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 2, 0), 0);   // timeout 0: no min_wait

  p.min_wait_ns = 30'000'000;
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
  Signal(fds_[0]);
  int64_t t0 = NowNs();
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 2, -1), 1);
  EXPECT_GE(NowNs() - t0, 30'000'000);
}

TEST_F(MinWait, Pwait3MinWaitOverridesTheInstanceDefault) {
  uepoll_params p{};
  p.min_wait_ns = kHourNs;
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
  Signal(Source());
  Source();
  epoll_event evs[4];
  EXPECT_EQ(Wait3(evs, 4, nullptr, 0), 1);  // no minimum for this call
}

TEST_F(MinWait, Pwait3ArgumentErrors) {
  epoll_event evs[1];
  uepoll_wait_args a{};
  errno = 0;
  EXPECT_EQ(uepoll_epoll_pwait3(ep_, evs, 1, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  a.flags = 1;
  EXPECT_EQ(uepoll_epoll_pwait3(ep_, evs, 1, &a), -1);
  EXPECT_EQ(errno, EINVAL);
  a.flags = 0;
  timespec bad{0, 1000000000};
  a.timeout = &bad;
  // The timespec is checked before the descriptor, as for pwait2.
  EXPECT_EQ(uepoll_epoll_pwait3(UEPOLL_FD_BASE + 999999, evs, 1, &a), -1);
  EXPECT_EQ(errno, EINVAL);
  timespec zero{0, 0};
  a.timeout = &zero;
  EXPECT_EQ(uepoll_epoll_pwait3(UEPOLL_FD_BASE + 999999, evs, 1, &a), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(uepoll_epoll_pwait3(ep_, evs, 0, &a), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 1234;
  EXPECT_EQ(uepoll_epoll_pwait3(ep_, evs, 1, &a), 0);
  EXPECT_EQ(errno, 1234);  // untouched on success
}

bool HasNetAdmin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32));
}

TEST_F(MinWait, SetParamsValidatesLikeTheKernelAndChangesNothingOnError) {
  uepoll_params good{};
  good.busy_poll_usecs = 50;
  good.busy_poll_budget = 8;
  good.prefer_busy_poll = 1;
  good.min_wait_ns = 1000;
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &good), 0);

  auto expect_fail = [&](uepoll_params p, int err) {
    errno = 0;
    EXPECT_EQ(uepoll_epoll_set_params(ep_, &p), -1);
    EXPECT_EQ(errno, err);
    uepoll_params now{};
    ASSERT_EQ(uepoll_epoll_get_params(ep_, &now), 0);
    EXPECT_EQ(now.busy_poll_usecs, good.busy_poll_usecs);
    EXPECT_EQ(now.busy_poll_budget, good.busy_poll_budget);
    EXPECT_EQ(now.prefer_busy_poll, good.prefer_busy_poll);
    EXPECT_EQ(now.min_wait_ns, good.min_wait_ns);
  };
  uepoll_params p = good;
  p.pad = 1;
  expect_fail(p, EINVAL);
  p = good;
  p.busy_poll_usecs = uint32_t{INT32_MAX} + 1;
  expect_fail(p, EINVAL);
  p = good;
  p.prefer_busy_poll = 2;
  expect_fail(p, EINVAL);
  p = good;
  p.busy_poll_budget = 65;
  if (HasNetAdmin()) {
    EXPECT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
    ASSERT_EQ(uepoll_epoll_set_params(ep_, &good), 0);
  } else {
    expect_fail(p, EPERM);
  }

  EXPECT_EQ(uepoll_epoll_set_params(ep_, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(uepoll_epoll_get_params(ep_, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  int efd = Source();
  EXPECT_EQ(uepoll_epoll_set_params(efd, &good), -1);
  EXPECT_EQ(errno, ENOTTY);
  EXPECT_EQ(uepoll_epoll_get_params(UEPOLL_FD_BASE + 999999, &p), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(MinWait, BusyPollingNeverSpinsForZeroTimeout) {
  uepoll_params p{};
  p.busy_poll_usecs = INT32_MAX;  // 35 minutes
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
  Source();
  epoll_event evs[1];
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 1, 0), 0);
}

TEST_F(MinWait, BusyPollingStopsAtTheTimeout) {
  uepoll_params p{};
  p.busy_poll_usecs = INT32_MAX;
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
  Source();
  epoll_event evs[1];
  int64_t t0 = NowNs();
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 1, 20), 0);
  EXPECT_GE(NowNs() - t0, 20'000'000);
}

TEST_F(MinWait, BusyPollingDeliversAnEventFromAnotherThread) {
  uepoll_params p{};
  p.busy_poll_usecs = 10'000'000;  // 10 s: longer than the test needs
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
  int a = Source();
  std::atomic<bool> started{false};
  std::thread writer([&] {
    while (!started) std::this_thread::yield();
    Signal(a);
  });
  epoll_event evs[1];
  started = true;
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 1, -1), 1);
  writer.join();
}

}  // namespace
}  // namespace uepoll_test

// The C++ forms of pwait3 and the parameters.
#include <uepoll/uepoll.hpp>

namespace uepoll_test {
namespace {

TEST(MinWaitCxx, WaitOptionsAndParamsInBothErrorForms) {
  {
    auto ep = uepoll::Instance::create(0);
    auto a = uepoll::EventFd::create(0, EFD_NONBLOCK);
    auto b = uepoll::EventFd::create(0, EFD_NONBLOCK);
    ep.add(a, EPOLLIN | EPOLLET, 1);
    ep.add(b, EPOLLIN | EPOLLET, 2);
    a.write(1);
    b.write(1);
    epoll_event evs[2];
    uepoll::Instance::WaitOptions opt;
    opt.min_wait = std::chrono::hours(1);  // both ready: returns at once
    auto got = ep.wait(evs, opt);
    ASSERT_EQ(got.size(), 2u);

    uepoll_params p{};
    p.min_wait_ns = 1234;
    ep.set_params(p);
    EXPECT_EQ(ep.params().min_wait_ns, 1234u);
    p.pad = 1;
    std::error_code ec;
    ep.set_params(p, ec);
    EXPECT_EQ(ec, std::errc::invalid_argument);
    EXPECT_THROW(ep.set_params(p), std::system_error);
    EXPECT_EQ(ep.params().min_wait_ns, 1234u);  // unchanged by the failures

    opt.timeout = std::chrono::nanoseconds(0);
    got = ep.wait(evs, opt, ec);
    EXPECT_FALSE(ec);
    EXPECT_TRUE(got.empty());
  }
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
