// Every time argument at its extremes (saturating deadlines): epoll_wait and
// poll timeouts of INT_MAX and below zero, epoll_pwait2 timespecs up to
// tv_sec = LONG_MAX with tv_nsec = 999999999, busy_poll_usecs = INT32_MAX,
// and (uepoll only: the kernel has no pwait3 nor a min_wait parameter)
// min_wait of INT64_MAX - 1, INT64_MAX and UINT64_MAX. The kernel clamps
// "now + timeout" instead of wrapping; so must uepoll, and UBSan (the asan
// preset) must see no overflow.
//
// An argument that means "forever" cannot be waited out: the call must be
// asleep (or, busy polling, still running) after a window of kWindow, and
// must return once an event arrives - the signed overflow made such calls
// return at once or never. A finite timeout must end the call on time:
// never before it, and within a generous bound after it (a hang is a
// failure, not a slow pass).
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr auto kWindow = std::chrono::milliseconds(200);
constexpr int kTimeoutMs = 300;
constexpr int64_t kTimeoutNs = int64_t{kTimeoutMs} * 1000000;
constexpr int64_t kLateNs = int64_t{5} * 1000000000;  // generous: a hang

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

std::string Str(const timespec& ts) {
  return "{" + std::to_string(ts.tv_sec) + ", " + std::to_string(ts.tv_nsec) +
         "}";
}

// The kernel's EPIOCSPARAMS (Linux 6.9; this machine's headers predate it).
struct KernelEpollParams {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad;
};
constexpr unsigned long kEpiocsparams = _IOW(0x8A, 0x01, KernelEpollParams);

// `call` runs on a thread and must wait for the event `wake` makes:
// still blocked after kWindow (asleep, unless `spins`), then returns
// `want` once woken. A call that never returns ends the process with a
// message: its thread cannot be joined.
void ExpectWaitsForTheEvent(const std::string& what,
                            const std::function<int(epoll_event*)>& call,
                            const std::function<void()>& wake, int want,
                            bool spins = false) {
  Waiter w(call);
  bool parked = spins ? Eventually([&] { return w.Done() || w.handle() != 0; })
                      : w.Parked();
  bool early = w.Done();
  if (!early) {
    auto end = std::chrono::steady_clock::now() + kWindow;
    while (!w.Done() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    early = w.Done();
  }
  wake();
  if (!w.WaitDone()) {
    std::fprintf(stderr, "%s: still blocked %lld s after the event\n",
                 what.c_str(), static_cast<long long>(kDeadline.count()));
    ADD_FAILURE() << what << ": still blocked after the event";
    std::fflush(stdout);
    std::_Exit(1);
  }
  EXPECT_TRUE(parked) << what;
  EXPECT_FALSE(early) << what << ": returned " << w.result() << " (errno "
                      << w.error() << ") before any event";
  EXPECT_EQ(w.result(), want) << what << " (errno " << w.error() << ")";
}

// f, which has a timeout of kTimeoutMs, returns `want` no sooner than
// that and not much later. It runs on a thread so that a call that never
// returns fails with a message (and ends the process: it cannot be
// joined) instead of running into the CTest timeout.
void ExpectReturnsAtTimeout(const std::string& what, int want,
                            const std::function<int()>& f) {
  std::atomic<bool> done{false};
  int result = 0;
  int error = 0;
  int64_t took = 0;
  std::thread t([&] {
    int64_t t0 = NowNs();
    result = f();
    error = errno;
    took = NowNs() - t0;
    done.store(true, std::memory_order_release);  // publishes the above
  });
  int64_t give_up = NowNs() + kTimeoutNs + kLateNs;
  while (!done.load(std::memory_order_acquire) && NowNs() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!done.load(std::memory_order_acquire)) {
    std::fprintf(stderr, "%s: still blocked %lld ms after a %d ms timeout\n",
                 what.c_str(), static_cast<long long>(kLateNs / 1000000),
                 kTimeoutMs);
    ADD_FAILURE() << what << ": still blocked long after its timeout";
    std::fflush(stdout);
    std::_Exit(1);
  }
  t.join();
  EXPECT_EQ(result, want) << what << " (errno " << error << ")";
  EXPECT_GE(took, kTimeoutNs) << what;
  EXPECT_LT(took, kTimeoutNs + kLateNs) << what;
}

class TimeLimits : public BackendTest {
 protected:
  void SetUp() override {
    ep_ = Epoll();
    efd_ = Eventfd();
    ASSERT_EQ(Ctl(ep_, EPOLL_CTL_ADD, efd_, EPOLLIN, 7), 0);
  }
  std::function<void()> Signal() {
    return [this] {
      uint64_t one = 1;
      ASSERT_EQ(B().write(efd_, &one, 8), 8);
    };
  }
  void Consume() {
    uint64_t v;
    ASSERT_EQ(B().read(efd_, &v, 8), 8);
  }
  // busy_poll_usecs through EPIOCSPARAMS (kernel) or set_params (uepoll).
  int SetBusyPoll(uint32_t usecs) {
    if (IsKernel()) {
      KernelEpollParams p{usecs, 0, 0, 0};
      return ioctl(ep_, kEpiocsparams, &p);
    }
    uepoll_params p{};
    p.busy_poll_usecs = usecs;
    return uepoll_epoll_set_params(ep_, &p);
  }
  int ep_ = -1;
  int efd_ = -1;
};

TEST_P(TimeLimits, EpollWaitTimeoutsThatMeanForeverWaitForTheEvent) {
  for (int t : {INT_MAX, INT_MAX - 1, -1, -2, INT_MIN}) {
    ExpectWaitsForTheEvent(
        "epoll_wait timeout " + std::to_string(t),
        [&](epoll_event* evs) { return B().epoll_wait(ep_, evs, 1, t); },
        Signal(), 1);
    Consume();
  }
}

TEST_P(TimeLimits, EpollPwait2HugeTimespecsWaitForTheEvent) {
  const timespec huge[] = {
      {LONG_MAX, 999999999},
      {LONG_MAX, 0},
      {LONG_MAX / 2, 999999999},
      {INT64_MAX / 1000000000, INT64_MAX % 1000000000},  // INT64_MAX ns
      {INT64_MAX / 1000000000, INT64_MAX % 1000000000 + 1},
      {INT64_MAX / 1000000000 + 1, 0},
      {UINT32_MAX, 999999999},
  };
  for (const timespec& ts : huge) {
    ExpectWaitsForTheEvent(
        "epoll_pwait2 " + Str(ts),
        [&](epoll_event* evs) {
          return B().epoll_pwait2(ep_, evs, 1, &ts, nullptr);
        },
        Signal(), 1);
    Consume();
  }
}

TEST_P(TimeLimits, PollTimeoutsThatMeanForeverWaitForTheEvent) {
  for (int t : {INT_MAX, -1, INT_MIN}) {
    ExpectWaitsForTheEvent(
        "poll timeout " + std::to_string(t),
        [&](epoll_event*) {
          pollfd p{efd_, POLLIN, 0};
          return B().poll(&p, 1, t);
        },
        Signal(), 1);
    Consume();
  }
}

TEST_P(TimeLimits, FiniteTimeoutsEndOnTime) {
  epoll_event evs[2];
  ExpectReturnsAtTimeout(
      "epoll_wait", 0, [&] { return B().epoll_wait(ep_, evs, 2, kTimeoutMs); });
  const timespec ts{0, kTimeoutNs};
  ExpectReturnsAtTimeout("epoll_pwait2", 0, [&] {
    return B().epoll_pwait2(ep_, evs, 2, &ts, nullptr);
  });
  ExpectReturnsAtTimeout("poll", 0, [&] {
    pollfd p{efd_, POLLIN, 0};
    return B().poll(&p, 1, kTimeoutMs);
  });
}

// busy_poll_usecs at its maximum (35 minutes): the timeout still ends the
// wait, and an event still ends a wait without timeout (uepoll spins on
// its ready list; the kernel, with no NAPI queue to spin on, sleeps).
TEST_P(TimeLimits, LongestBusyPollEndsAtTheTimeoutOrTheEvent) {
  ASSERT_EQ(SetBusyPoll(INT32_MAX), 0) << "errno " << errno;
  epoll_event evs[1];
  ExpectReturnsAtTimeout("epoll_wait with busy polling", 0, [&] {
    return B().epoll_wait(ep_, evs, 1, kTimeoutMs);
  });
  const timespec ts{0, kTimeoutNs};
  ExpectReturnsAtTimeout("epoll_pwait2 with busy polling", 0, [&] {
    return B().epoll_pwait2(ep_, evs, 1, &ts, nullptr);
  });
  const timespec huge{LONG_MAX, 999999999};
  ExpectWaitsForTheEvent(
      "epoll_pwait2 " + Str(huge) + " with busy polling",
      [&](epoll_event* out) {
        return B().epoll_pwait2(ep_, out, 1, &huge, nullptr);
      },
      Signal(), 1, /*spins=*/!IsKernel());
  Consume();
  ExpectWaitsForTheEvent(
      "epoll_wait INT_MAX with busy polling",
      [&](epoll_event* out) { return B().epoll_wait(ep_, out, 1, INT_MAX); },
      Signal(), 1, /*spins=*/!IsKernel());
}

UEPOLL_INSTANTIATE_BACKENDS(TimeLimits);

// min_wait: a uepoll extension, so uepoll only.
class MinWaitLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    ep_ = uepoll_epoll_create1(0);
    ASSERT_GE(ep_, 0);
    for (int i = 0; i < 2; ++i) {
      efd_[i] = uepoll_eventfd(0, EFD_NONBLOCK);
      ASSERT_GE(efd_[i], 0);
      epoll_event ev{};
      // Edge-triggered: a harvested item leaves the ready list, so that
      // each round starts with none (min_wait counts queued items).
      ev.events = EPOLLIN | EPOLLET;
      ev.data.u64 = static_cast<uint64_t>(i);
      ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, efd_[i], &ev), 0);
    }
  }
  void TearDown() override {
    for (int fd : efd_) uepoll_close(fd);
    uepoll_close(ep_);
    ExpectNoUepollLeaks();
  }
  void Signal(int i) {
    uint64_t one = 1;
    ASSERT_EQ(uepoll_write(efd_[i], &one, 8), 8);
  }
  void Consume(int i) {
    uint64_t v;
    ASSERT_EQ(uepoll_read(efd_[i], &v, 8), 8);
  }
  int Wait3(epoll_event* evs, int max, const timespec* timeout,
            uint64_t min_wait_ns) {
    uepoll_wait_args a{};
    a.timeout = timeout;
    a.min_wait_ns = min_wait_ns;
    return uepoll_epoll_pwait3(ep_, evs, max, &a);
  }
  int ep_ = -1;
  int efd_[2] = {-1, -1};
};

constexpr uint64_t kHugeMinWaits[] = {
    uint64_t{INT64_MAX} - 5, uint64_t{INT64_MAX} - 1, uint64_t{INT64_MAX},
    uint64_t{INT64_MAX} + 1, UINT64_MAX};

TEST_F(MinWaitLimits, Pwait3HugeMinWaitEndsAtTheTimeout) {
  const timespec ts{0, kTimeoutNs};
  epoll_event evs[2];
  for (uint64_t mw : kHugeMinWaits) {
    std::string what = "pwait3 min_wait " + std::to_string(mw);
    ExpectReturnsAtTimeout(what + ", nothing ready", 0,
                           [&] { return Wait3(evs, 2, &ts, mw); });
    // One of the two events: min_wait ends at the timeout, which returns
    // what is ready.
    Signal(0);
    ExpectReturnsAtTimeout(what + ", one event ready", 1,
                           [&] { return Wait3(evs, 2, &ts, mw); });
    Consume(0);
  }
}

TEST_F(MinWaitLimits, Pwait3HugeMinWaitWithoutTimeoutWaitsForMaxevents) {
  const timespec huge{LONG_MAX, 999999999};
  for (uint64_t mw : kHugeMinWaits) {
    for (const timespec* ts : {static_cast<const timespec*>(nullptr), &huge}) {
      std::string what = "pwait3 min_wait " + std::to_string(mw) +
                         (ts ? ", timeout " + Str(*ts) : ", no timeout");
      // One event does not end a min_wait that has not passed; the second
      // (maxevents) does.
      Signal(0);
      ExpectWaitsForTheEvent(
          what, [&](epoll_event* evs) { return Wait3(evs, 2, ts, mw); },
          [&] { Signal(1); }, 2);
      Consume(0);
      Consume(1);
    }
  }
}

TEST_F(MinWaitLimits, SetParamsHugeMinWaitEndsAtTheTimeout) {
  const timespec ts{0, kTimeoutNs};
  epoll_event evs[2];
  for (uint64_t mw : kHugeMinWaits) {
    uepoll_params p{};
    p.min_wait_ns = mw;
    ASSERT_EQ(uepoll_epoll_set_params(ep_, &p), 0);
    uepoll_params back{};
    ASSERT_EQ(uepoll_epoll_get_params(ep_, &back), 0);
    EXPECT_EQ(back.min_wait_ns, mw);
    std::string what = "set_params min_wait " + std::to_string(mw);
    ExpectReturnsAtTimeout(what + ", epoll_wait", 0, [&] {
      return uepoll_epoll_wait(ep_, evs, 2, kTimeoutMs);
    });
    ExpectReturnsAtTimeout(what + ", epoll_pwait2", 0, [&] {
      return uepoll_epoll_pwait2(ep_, evs, 2, &ts, nullptr);
    });
    Signal(0);
    ExpectReturnsAtTimeout(what + ", one event ready", 1, [&] {
      return uepoll_epoll_wait(ep_, evs, 2, kTimeoutMs);
    });
    Consume(0);
  }
}

}  // namespace
}  // namespace uepoll_test
