// A fixture for timerfd tests on both backends: creating, arming and
// reading timers through B(), and time bounds that turn the kernel's
// counting rules into exact checks.
#ifndef UEPOLL_TESTS_TIMERFD_TIMERFD_TEST_H_
#define UEPOLL_TESTS_TIMERFD_TIMERFD_TEST_H_

#include <sys/timerfd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include <uepoll/uepoll.h>

#include "conformance/helpers.h"

namespace uepoll_test {

inline constexpr int64_t kMs = 1000000;
inline constexpr int64_t kSec = 1000000000;
// Every wait for an expiry is bounded by this (ms): a lost wakeup fails.
inline constexpr int kExpiryWaitMs = 10000;

inline timespec Ts(int64_t ns) {
  timespec t;
  t.tv_sec = ns / kSec;
  t.tv_nsec = ns % kSec;
  return t;
}
inline int64_t Ns(const timespec& t) { return t.tv_sec * kSec + t.tv_nsec; }
inline itimerspec Spec(int64_t value_ns, int64_t interval_ns = 0) {
  itimerspec s;
  s.it_value = Ts(value_ns);
  s.it_interval = Ts(interval_ns);
  return s;
}
inline int64_t ClockNs(clockid_t c) {
  timespec t;
  clock_gettime(c, &t);
  return Ns(t);
}

// Arms the uepoll timer t, watched by the uepoll instance ep, to expire
// 30 ms from now and every `period` ns after; waits for that expiry in
// uepoll_epoll_wait (so the thread keeps, where it may) and reads it.
// Returns the expiry's CLOCK_MONOTONIC instant, or -1 after a failed check.
inline int64_t KeepFirstIntervalExpiry(int ep, int t, int64_t period) {
  int64_t at = ClockNs(CLOCK_MONOTONIC) + 30 * kMs;
  itimerspec v = Spec(at, period);
  epoll_event ev{};
  uint64_t ticks = 0;
  bool ok = uepoll_timerfd_settime(t, TFD_TIMER_ABSTIME, &v, nullptr) == 0 &&
            uepoll_epoll_wait(ep, &ev, 1, kExpiryWaitMs) == 1 &&
            uepoll_read(t, &ticks, 8) == 8;
  EXPECT_TRUE(ok) << strerror(errno);
  return ok ? at : -1;
}

class TimerfdTest : public ConformanceTest {
 protected:
  int Timerfd(int clockid = CLOCK_MONOTONIC, int flags = TFD_NONBLOCK) {
    int fd = B().timerfd_create(clockid, flags);
    EXPECT_GE(fd, 0) << "timerfd_create: " << strerror(errno);
    return Track(fd);
  }
  // settime that must succeed; returns the old value.
  itimerspec Arm(int fd, int64_t value_ns, int64_t interval_ns = 0,
                 int flags = 0) {
    itimerspec v = Spec(value_ns, interval_ns), old{};
    EXPECT_EQ(B().timerfd_settime(fd, flags, &v, &old), 0)
        << "timerfd_settime: " << strerror(errno);
    return old;
  }
  itimerspec Get(int fd) {
    itimerspec cur{};
    EXPECT_EQ(B().timerfd_gettime(fd, &cur), 0)
        << "timerfd_gettime: " << strerror(errno);
    return cur;
  }
  // A read that must return 8 bytes: the expiration count.
  uint64_t Ticks(int fd) {
    uint64_t v = 0;
    EXPECT_EQ(B().read(fd, &v, sizeof v), 8) << "read: " << strerror(errno);
    return v;
  }
  // Blocks in poll() until fd is readable; false on timeout.
  bool WaitReadable(int fd, int timeout_ms = kExpiryWaitMs) {
    struct pollfd p {};
    p.fd = fd;
    p.events = POLLIN;
    int n = B().poll(&p, 1, timeout_ms);
    EXPECT_GE(n, 0) << "poll: " << strerror(errno);
    return n == 1 && (p.revents & POLLIN);
  }
  // Lets time pass without waiting on anything that may become ready: a
  // blocking wait on an empty instance. Not synchronization: the checks
  // after it derive their bounds from clock readings, not from its length.
  void Pass(int ms) {
    int ep = Epoll();
    epoll_event ev;
    EXPECT_EQ(B().epoll_wait(ep, &ev, 1, ms), 0);
    Close(ep);
  }
};

// The CPU whose queue holds a kernel hrtimer of CLOCK_MONOTONIC, with no
// slack, that expires at `at_ns` and runs `function` (a timerfd's is
// "timerfd_tmrproc", an io_uring timeout's "io_timeout_fn"), from
// /proc/timer_list; -1 if none is listed or the list cannot be read (it
// is root's only).
inline int KernelTimerCpuAt(int64_t at_ns, const std::string& function) {
  std::ifstream list("/proc/timer_list");
  if (!list) return -1;
  const std::string expires = " # expires at ";
  const std::string named = ", " + function + ",";
  std::string line;
  int cpu = -1, clock = -1;
  bool ours = false;
  while (std::getline(list, line)) {
    if (line.rfind("cpu: ", 0) == 0) {
      cpu = std::stoi(line.substr(5));
    } else if (line.rfind(" clock ", 0) == 0) {
      clock = std::stoi(line.substr(7));
    } else if (line.rfind(" #", 0) == 0 && line.rfind(expires, 0) != 0) {
      ours = line.find(named) != std::string::npos;
    } else if (ours && clock == 0 && line.rfind(expires, 0) == 0) {
      // " # expires at SOFT-HARD nsecs [...]": no slack, SOFT is the instant.
      if (std::stoll(line.substr(expires.size())) == at_ns) return cpu;
      ours = false;
    }
  }
  return -1;
}

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_TIMERFD_TIMERFD_TEST_H_
