// min_wait batching, busy polling and per-instance parameters
// (docs/contract.md section 13; the rules are those of the manual pages
// uepoll_epoll_pwait3(3) and uepoll_epoll_set_params(3)). uepoll only: the
// kernel has no pwait3. Every rule
// is pinned without depending on the machine's speed: a minimum wait of an
// hour proves that a call skipped it (it returned at all), and elapsed
// times are checked from below, and from above only by a generous bound
// (EXPECT_ELAPSED: 10x + 2 s) that turns a hang into a failure.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <ostream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "conformance/helpers.h"
#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr uint64_t kHourNs = 3600ull * 1000000000ull;

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
  int64_t t0 = MonotonicNs();
  ASSERT_EQ(Wait3(evs, 2, nullptr, kHourNs), 2);
  EXPECT_ELAPSED(t0, 0);  // at once, not after the hour
  EXPECT_EQ(evs[0].data.u64, 0u);
  EXPECT_EQ(evs[1].data.u64, 1u);
}

TEST_F(MinWait, WaitsOutMinWaitWhenFewerAreReady) {
  Signal(Source());
  Source();
  epoll_event evs[4];
  const uint64_t min_wait = 30'000'000;  // 30 ms
  int64_t t0 = MonotonicNs();
  ASSERT_EQ(Wait3(evs, 4, nullptr, min_wait), 1);
  EXPECT_ELAPSED(t0, static_cast<int64_t>(min_wait));
}

TEST_F(MinWait, EventsArrivingDuringMinWaitJoinTheBatch) {
  int a = Source();
  int b = Source();
  Signal(a);
  std::atomic<pid_t> tid{0};
  int got = -1;
  int64_t elapsed = 0;
  epoll_event evs[4];
  const int64_t min_wait = 2'000'000'000;  // 2 s
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    int64_t t0 = MonotonicNs();
    got = Wait3(evs, 4, nullptr, min_wait);
    elapsed = MonotonicNs() - t0;
  });
  while (tid == 0) std::this_thread::yield();
  ASSERT_TRUE(WaitUntilParked(tid));
  Signal(b);  // arrives while the waiter sits in its min_wait
  waiter.join();
  // 2 of 4: the batch ends with the min_wait, not at the second event.
  EXPECT_GE(elapsed, min_wait);
  EXPECT_LE(elapsed, GenerousBoundNs(min_wait));
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
  int64_t t0 = MonotonicNs();
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    got = Wait3(evs, 4, nullptr, min_wait);  // timeout: forever
  });
  while (tid == 0) std::this_thread::yield();
  ASSERT_TRUE(WaitUntilParked(tid));
  Signal(a);
  waiter.join();
  EXPECT_EQ(got, 1);
  EXPECT_ELAPSED(t0, static_cast<int64_t>(min_wait));
}

TEST_F(MinWait, TimeoutShorterThanMinWaitWins) {
  Source();
  epoll_event evs[4];
  timespec t{0, 20'000'000};  // 20 ms
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(Wait3(evs, 4, &t, kHourNs), 0);
  EXPECT_ELAPSED(t0, 20'000'000);
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
    EXPECT_TRUE(WaitUntilParked(tid));
    int64_t t_signal = MonotonicNs();
    pthread_kill(waiter.native_handle(), SIGUSR1);
    waiter.join();
    EXPECT_ELAPSED(t_signal, 0);  // ended by the signal, not the hour
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
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 2, -1), 1);
  EXPECT_ELAPSED(t0, 30'000'000);
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

// The kernel's EPIOCSPARAMS/EPIOCGPARAMS (Linux 6.9) with their uapi
// values, defined here because older headers (Debian 12's) lack them.
struct KernelEpollParams {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad;
};
constexpr unsigned long kEpiocSParams = _IOW(0x8A, 0x01, KernelEpollParams);
constexpr unsigned long kEpiocGParams = _IOR(0x8A, 0x02, KernelEpollParams);
#ifdef EPIOCSPARAMS
static_assert(kEpiocSParams == EPIOCSPARAMS && kEpiocGParams == EPIOCGPARAMS);
#endif

// One call's outcome: the result and, on failure, errno.
struct Outcome {
  int result;
  int error;
  bool operator==(const Outcome&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  return os << o.result << " (" << (o.result ? strerrorname_np(o.error) : "")
            << ")";
}
template <class F>
Outcome Call(F f) {
  errno = 0;
  int r = f();
  return {r, r == 0 ? 0 : errno};
}

// uepoll_epoll_set_params/get_params validate as the kernel's ioctls do, in
// the same order, and a failure changes nothing: each case runs on a kernel
// epoll descriptor and on a uepoll instance, and both must agree on the
// outcome and on the parameters read back. (Whether CAP_NET_ADMIN is held
// decides the budget cases on both sides alike.)
TEST_F(MinWait, SetParamsValidatesLikeTheKernelsIoctlAndChangesNothingOnError) {
  int kep = epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(kep, 0);
  const KernelEpollParams kgood{50, 8, 1, 0};
  if (ioctl(kep, kEpiocSParams, &kgood) != 0) {
    int err = errno;
    close(kep);
    GTEST_SKIP() << "no EPIOCSPARAMS on this kernel (" << strerrorname_np(err)
                 << "): it needs Linux 6.9 and CONFIG_NET_RX_BUSY_POLL";
  }
  const uint64_t kMinWait = 1000;  // uepoll's own field: never changed here
  auto to_uepoll = [&](const KernelEpollParams& k) {
    uepoll_params u{};
    u.busy_poll_usecs = k.busy_poll_usecs;
    u.busy_poll_budget = k.busy_poll_budget;
    u.prefer_busy_poll = k.prefer_busy_poll;
    u.pad = k.pad;
    u.min_wait_ns = kMinWait;
    return u;
  };
  const uepoll_params ugood = to_uepoll(kgood);
  ASSERT_EQ(uepoll_epoll_set_params(ep_, &ugood), 0);

  struct Case {
    const char* what;
    KernelEpollParams p;
  };
  const uint32_t kI32Max = INT32_MAX;
  const Case cases[] = {
      {"valid", {7, 3, 0, 0}},
      {"valid extremes", {kI32Max, 64, 1, 0}},
      {"pad", {7, 3, 0, 1}},
      {"pad 255", {7, 3, 0, 255}},
      {"usecs INT32_MAX + 1", {kI32Max + 1, 3, 0, 0}},
      {"usecs UINT32_MAX", {UINT32_MAX, 3, 0, 0}},
      {"prefer 2", {7, 3, 2, 0}},
      {"prefer 255", {7, 3, 255, 0}},
      {"budget 65 (CAP_NET_ADMIN)", {7, 65, 0, 0}},
      {"budget 65535 (CAP_NET_ADMIN)", {7, 65535, 1, 0}},
      {"budget 65 and pad", {7, 65, 0, 1}},
      {"budget 65 and prefer 2", {7, 65, 2, 0}},
      {"everything wrong", {UINT32_MAX, 65535, 255, 255}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_EQ(ioctl(kep, kEpiocSParams, &kgood), 0);
    ASSERT_EQ(uepoll_epoll_set_params(ep_, &ugood), 0);
    const uepoll_params u = to_uepoll(c.p);
    Outcome k = Call([&] { return ioctl(kep, kEpiocSParams, &c.p); });
    Outcome mine = Call([&] { return uepoll_epoll_set_params(ep_, &u); });
    EXPECT_EQ(mine, k);
    KernelEpollParams kn{};
    uepoll_params un{};
    ASSERT_EQ(ioctl(kep, kEpiocGParams, &kn), 0);
    ASSERT_EQ(uepoll_epoll_get_params(ep_, &un), 0);
    const KernelEpollParams& want = k.result == 0 ? c.p : kgood;
    EXPECT_EQ(kn.busy_poll_usecs, want.busy_poll_usecs);
    EXPECT_EQ(un.busy_poll_usecs, want.busy_poll_usecs);
    EXPECT_EQ(un.busy_poll_budget, kn.busy_poll_budget);
    EXPECT_EQ(un.prefer_busy_poll, kn.prefer_busy_poll);
    EXPECT_EQ(un.pad, kn.pad);
    EXPECT_EQ(un.min_wait_ns, kMinWait);
  }

  // The descriptor and its kind come before the pointer.
  int kefd = eventfd(0, EFD_CLOEXEC);
  int kp[2];
  ASSERT_EQ(pipe2(kp, O_CLOEXEC), 0);
  int kclosed = dup(kefd);
  close(kclosed);
  int uefd = Source();
  int up[2];
  ASSERT_EQ(uepoll_pipe2(up, 0), 0);
  int uclosed = uepoll_dup(uefd);
  uepoll_close(uclosed);
  struct FdCase {
    const char* what;
    int kfd;
    int ufd;
  };
  const FdCase fds[] = {
      {"instance", kep, ep_},          {"eventfd", kefd, uefd},
      {"pipe read end", kp[0], up[0]}, {"pipe write end", kp[1], up[1]},
      {"closed", kclosed, uclosed},    {"-1", -1, -1}};
  for (const FdCase& f : fds) {
    SCOPED_TRACE(f.what);
    KernelEpollParams kbuf = kgood;
    uepoll_params ubuf = ugood;
    EXPECT_EQ(Call([&] { return uepoll_epoll_set_params(f.ufd, nullptr); }),
              Call([&] { return ioctl(f.kfd, kEpiocSParams, nullptr); }));
    EXPECT_EQ(Call([&] { return uepoll_epoll_get_params(f.ufd, nullptr); }),
              Call([&] { return ioctl(f.kfd, kEpiocGParams, nullptr); }));
    EXPECT_EQ(Call([&] { return uepoll_epoll_set_params(f.ufd, &ubuf); }),
              Call([&] { return ioctl(f.kfd, kEpiocSParams, &kbuf); }));
    EXPECT_EQ(Call([&] { return uepoll_epoll_get_params(f.ufd, &ubuf); }),
              Call([&] { return ioctl(f.kfd, kEpiocGParams, &kbuf); }));
  }
  uepoll_close(up[0]);
  uepoll_close(up[1]);
  close(kp[0]);
  close(kp[1]);
  close(kefd);
  close(kep);
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
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(uepoll_epoll_wait(ep_, evs, 1, 20), 0);
  EXPECT_ELAPSED(t0, 20'000'000);
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
