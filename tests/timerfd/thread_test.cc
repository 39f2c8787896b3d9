// How expiries reach sleeping threads, and the timer thread's own rules.
//
// On both backends: a thread blocked in epoll_wait is woken by the expiry
// of a timer in its instance (directly, nested, or in poll()), and many
// timers armed and re-armed from several threads each deliver exactly the
// expirations they should.
//
// On uepoll only (the kernel has no such thread): no thread exists before a
// timer is armed; with nothing armed the thread makes no wakeups; it
// survives fork() (a child that inherited armed timers is woken by them);
// it does not keep the process from exiting; 100,000 timers can be armed,
// disarmed and re-armed; closes race with expiries.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "threads/waiter.h"
#include "timer/timer_queue.h"
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

using uepoll::impl::TimerQueue;

class TimerfdThreads : public TimerfdTest {};

TEST_P(TimerfdThreads, SleepingWaiterIsWokenByTheExpiry) {
  int ep = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 9), 0);
  Waiter w([&](epoll_event* evs) {
    return B().epoll_wait(ep, evs, Waiter::kEvents, kWaitMs);
  });
  ASSERT_TRUE(w.Parked());
  int64_t armed = ClockNs(CLOCK_MONOTONIC);
  Arm(fd, 5 * kMs);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_GE(ClockNs(CLOCK_MONOTONIC) - armed, 5 * kMs);
  ASSERT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).events, uint32_t(EPOLLIN));
  EXPECT_EQ(w.event(0).data.u64, 9u);
}

TEST_P(TimerfdThreads, SleepingWaiterOnAnOuterInstanceIsWoken) {
  int outer = Epoll(), inner = Epoll();
  int fd = Timerfd();
  ASSERT_EQ(Ctl(inner, EPOLL_CTL_ADD, fd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(outer, EPOLL_CTL_ADD, inner, EPOLLIN, 2), 0);
  Waiter w([&](epoll_event* evs) {
    return B().epoll_wait(outer, evs, Waiter::kEvents, kWaitMs);
  });
  ASSERT_TRUE(w.Parked());
  Arm(fd, 2 * kMs);
  ASSERT_TRUE(w.WaitDone());
  ASSERT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 2u);
}

TEST_P(TimerfdThreads, SleepingPollIsWoken) {
  int fd = Timerfd();
  Waiter w([&](epoll_event*) {
    struct pollfd p {};
    p.fd = fd;
    p.events = POLLIN;
    int n = B().poll(&p, 1, kWaitMs);
    return n == 1 && p.revents == POLLIN ? 1 : -1;
  });
  ASSERT_TRUE(w.Parked());
  Arm(fd, 2 * kMs);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

// Several threads each own a few periodic timers in one shared instance
// and re-arm them as one-shots; a harvester reads whatever fires. Every
// one-shot arming must be delivered exactly once: the sum of the ticks read
// equals the number of armings (an exact oracle: a lost wakeup leaves the
// harvester short and the bounded wait fails the test).
TEST_P(TimerfdThreads, EveryArmingIsDeliveredExactlyOnce) {
  constexpr int kThreads = 3, kPerThread = 4, kRounds = 40;
  int ep = Epoll();
  std::vector<int> fds;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    fds.push_back(Timerfd());
    ASSERT_EQ(
        Ctl(ep, EPOLL_CTL_ADD, fds.back(), EPOLLIN | EPOLLET, uint64_t(i)), 0);
  }
  // Each timer is re-armed only after its previous expiry was read, so no
  // arming replaces a pending one.
  std::vector<std::atomic<int>> delivered(fds.size());
  std::atomic<bool> failed{false};
  std::vector<std::thread> armers;
  for (int t = 0; t < kThreads; ++t) {
    armers.emplace_back([&, t] {
      for (int r = 0; r < kRounds && !failed; ++r) {
        for (int k = 0; k < kPerThread; ++k) {
          int i = t * kPerThread + k;
          itimerspec v = Spec(((r + k) % 3 + 1) * 100000);  // 0.1-0.3 ms
          if (B().timerfd_settime(fds[i], 0, &v, nullptr) != 0) failed = true;
        }
        for (int k = 0; k < kPerThread; ++k) {
          int i = t * kPerThread + k;
          auto end = std::chrono::steady_clock::now() + kDeadline;
          while (delivered[i].load() < r + 1 && !failed) {
            if (std::chrono::steady_clock::now() > end) failed = true;
            std::this_thread::yield();
          }
        }
      }
    });
  }
  int64_t total = 0;
  const int64_t want = int64_t(kThreads) * kPerThread * kRounds;
  while (total < want && !failed) {
    epoll_event evs[16];
    int n = B().epoll_wait(ep, evs, 16, kWaitMs);
    if (n <= 0) {
      failed = true;
      break;
    }
    for (int j = 0; j < n; ++j) {
      int i = int(evs[j].data.u64);
      uint64_t ticks = 0;
      if (B().read(fds[i], &ticks, 8) != 8) failed = true;
      EXPECT_EQ(ticks, 1u);
      total += int64_t(ticks);
      delivered[i].fetch_add(int(ticks));
    }
  }
  for (auto& th : armers) th.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(total, want);
}

UEPOLL_INSTANTIATE_BACKENDS(TimerfdThreads);

// --- uepoll's timer thread ---------------------------------------------------

// The tids of this process's threads named `name`.
std::vector<pid_t> ThreadsNamed(const std::string& name) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string c;
    std::getline(comm, c);
    if (c == name) out.push_back(pid_t(std::stol(e->d_name)));
  }
  closedir(d);
  return out;
}

long ContextSwitches(pid_t tid) {
  std::ifstream st("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  long total = 0;
  while (std::getline(st, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0 ||
        line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
      total += std::stol(line.substr(line.find(':') + 1));
    }
  }
  return total;
}

int UTimer(int64_t value_ns, int64_t interval_ns = 0) {
  int fd = uepoll_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  EXPECT_GE(fd, 0);
  itimerspec v = Spec(value_ns, interval_ns);
  EXPECT_EQ(uepoll_timerfd_settime(fd, 0, &v, nullptr), 0);
  return fd;
}

bool UWaitReadable(int fd, int ms = kExpiryWaitMs) {
  struct pollfd p {};
  p.fd = fd;
  p.events = POLLIN;
  return uepoll_poll(&p, 1, ms) == 1;
}

TEST(TimerThread, NoThreadBeforeAnArmAndOneAfter) {
  int fd = uepoll_timerfd_create(CLOCK_MONOTONIC, 0);
  ASSERT_GE(fd, 0);
  itimerspec disarm = Spec(0, kSec);
  ASSERT_EQ(uepoll_timerfd_settime(fd, 0, &disarm, nullptr), 0);
  itimerspec cur;
  ASSERT_EQ(uepoll_timerfd_gettime(fd, &cur), 0);
  EXPECT_TRUE(ThreadsNamed("uepoll-timer").empty());
  EXPECT_FALSE(TimerQueue::Get().thread_started());
  itimerspec v = Spec(3600 * kSec);
  ASSERT_EQ(uepoll_timerfd_settime(fd, 0, &v, nullptr), 0);
  EXPECT_TRUE(
      Eventually([] { return ThreadsNamed("uepoll-timer").size() == 1; }));
  EXPECT_EQ(TimerQueue::Get().armed(), 1);
  ASSERT_EQ(uepoll_close(fd), 0);
  EXPECT_EQ(TimerQueue::Get().armed(), 0);
  ExpectNoUepollLeaks();
}

TEST(TimerThread, NoWakeupsWhileNothingIsArmed) {
  int fd = UTimer(1 * kMs);
  ASSERT_TRUE(UWaitReadable(fd));
  ASSERT_EQ(uepoll_close(fd), 0);
  std::vector<pid_t> t;
  ASSERT_TRUE(Eventually([&] {
    t = ThreadsNamed("uepoll-timer");
    return t.size() == 1 && TaskState(t[0]) == 'S';
  }));
  long before = ContextSwitches(t[0]);
  // A far-away timer armed and disarmed again: no reason to wake either.
  int far = UTimer(3600 * kSec);
  ASSERT_EQ(uepoll_close(far), 0);
  long mid = ContextSwitches(t[0]);
  // Letting time pass is the point here; the check is that nothing moved.
  struct timespec pause = {0, 300 * kMs};
  nanosleep(&pause, nullptr);
  EXPECT_LE(ContextSwitches(t[0]) - mid, 1) << "the idle thread woke up";
  EXPECT_LE(mid - before, 1);
  ExpectNoUepollLeaks();
}

TEST(TimerThread, WakesOnlyForTheEarliestExpiry) {
  // Many timers far away and one near: the thread sleeps until the near
  // one, not once per timer.
  std::vector<int> far;
  for (int i = 0; i < 100; ++i) far.push_back(UTimer((3600 + i) * kSec));
  std::vector<pid_t> t;
  ASSERT_TRUE(Eventually([&] {
    t = ThreadsNamed("uepoll-timer");
    return t.size() == 1 && TaskState(t[0]) == 'S';
  }));
  // Asleep until the far timers: the near one must wake it (the kick).
  int near = UTimer(20 * kMs);
  ASSERT_TRUE(UWaitReadable(near));
  ASSERT_TRUE(Eventually([&] { return TaskState(t[0]) == 'S'; }));
  long before = ContextSwitches(t[0]);
  struct timespec pause = {0, 200 * kMs};
  nanosleep(&pause, nullptr);
  EXPECT_LE(ContextSwitches(t[0]) - before, 1);
  for (int fd : far) uepoll_close(fd);
  uepoll_close(near);
  ExpectNoUepollLeaks();
}

TEST(TimerThread, ForkedChildIsWokenByInheritedTimers) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support starting threads in the "
                  "child of a threaded process, which is what this tests";
#endif
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  int warm = UTimer(1 * kMs);  // the parent's thread runs
  ASSERT_TRUE(UWaitReadable(warm));
  int fd = UTimer(50 * kMs);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 42;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child's copy of the armed timer fires in the child, through a
    // timer thread of its own.
    epoll_event out{};
    int n = uepoll_epoll_wait(ep, &out, 1, kExpiryWaitMs);
    if (n != 1 || out.data.u64 != 42) _exit(1);
    uint64_t ticks = 0;
    if (uepoll_read(fd, &ticks, 8) != 8 || ticks != 1) _exit(2);
    // And new timers work too.
    int again = UTimer(1 * kMs);
    if (!UWaitReadable(again)) _exit(3);
    if (ThreadsNamed("uepoll-timer").size() != 1) _exit(4);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's copy is unaffected.
  ASSERT_TRUE(UWaitReadable(fd));
  uint64_t ticks = 0;
  EXPECT_EQ(uepoll_read(fd, &ticks, 8), 8);
  EXPECT_EQ(ticks, 1u);
  uepoll_close(fd);
  uepoll_close(warm);
  uepoll_close(ep);
  ExpectNoUepollLeaks();
}

TEST(TimerThread, DoesNotKeepTheProcessAlive) {
  EXPECT_EXIT(
      {
        int fd = UTimer(1 * kMs, 1 * kMs);
        UWaitReadable(fd);
        // Returning from main (here: exit) ends the process with a timer
        // still armed and its thread running.
        exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(TimerThread, HundredThousandArmedTimers) {
  // 100,000 descriptors: the disjoint numbering, so that RLIMIT_NOFILE
  // (often 20000 or less) does not decide (this test runs alone in its
  // process under CTest).
  if (uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT) != 0) {
    GTEST_SKIP() << "another test of this process created descriptors in "
                    "the default numbering; run it alone (ctest does)";
  }
  constexpr int kN = 100000;
  std::vector<int> fds(kN);
  std::mt19937 rng(1);
  for (int i = 0; i < kN; ++i) {
    fds[i] = uepoll_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    ASSERT_GE(fds[i], 0);
    itimerspec v = Spec((3600 + int64_t(rng() % 3600)) * kSec);
    ASSERT_EQ(uepoll_timerfd_settime(fds[i], 0, &v, nullptr), 0);
  }
  EXPECT_EQ(TimerQueue::Get().armed(), kN);
  // Disarm every other one, re-arm a few hundred to fire soon.
  for (int i = 0; i < kN; i += 2) {
    itimerspec z = Spec(0);
    ASSERT_EQ(uepoll_timerfd_settime(fds[i], 0, &z, nullptr), 0);
  }
  EXPECT_EQ(TimerQueue::Get().armed(), kN / 2);
  int ep = uepoll_epoll_create1(0);
  constexpr int kSoon = 500;
  for (int i = 0; i < kSoon; ++i) {
    int k = i * 197;  // distinct, armed and disarmed ones alike
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = uint64_t(k);
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fds[k], &ev), 0);
    itimerspec v = Spec(int64_t(1 + rng() % 20) * kMs);
    ASSERT_EQ(uepoll_timerfd_settime(fds[k], 0, &v, nullptr), 0);
  }
  int got = 0;
  epoll_event evs[64];
  while (got < kSoon) {
    int n = uepoll_epoll_wait(ep, evs, 64, kExpiryWaitMs);
    ASSERT_GT(n, 0) << "an expiry was lost after " << got;
    for (int j = 0; j < n; ++j) {
      uint64_t ticks = 0;
      ASSERT_EQ(uepoll_read(fds[evs[j].data.u64], &ticks, 8), 8);
      EXPECT_EQ(ticks, 1u);
      ++got;
    }
  }
  EXPECT_EQ(got, kSoon);
  uepoll_close(ep);
  for (int fd : fds) uepoll_close(fd);
  EXPECT_EQ(TimerQueue::Get().armed(), 0);
  ExpectNoUepollLeaks();
}

// Closes, re-arms and reads race with the timer thread firing the same
// timers (ASan/TSan find a use after free or a race; the leak check finds
// a reference lost).
TEST(TimerThread, ClosesRaceWithExpiries) {
  constexpr int kThreads = 3;
  std::atomic<bool> stop{false};
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t) {
    th.emplace_back([&, t] {
      std::mt19937 rng(t);
      int ep = uepoll_epoll_create1(0);
      while (!stop) {
        int fd = uepoll_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
        epoll_event ev{};
        ev.events = EPOLLIN | ((rng() & 1) ? uint32_t{EPOLLET} : 0u);
        uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        itimerspec v = Spec(int64_t(rng() % 50000), int64_t(rng() % 3) * 20000);
        uepoll_timerfd_settime(fd, 0, &v, nullptr);
        if (rng() & 1) {
          epoll_event out[4];
          uepoll_epoll_wait(ep, out, 4, 0);
        }
        if (rng() & 1) {
          uint64_t ticks;
          uepoll_read(fd, &ticks, 8);
        }
        uepoll_close(fd);
      }
      uepoll_close(ep);
    });
  }
  struct timespec run = {1, 0};
  nanosleep(&run, nullptr);
  stop = true;
  for (auto& x : th) x.join();
  EXPECT_EQ(TimerQueue::Get().armed(), 0);
  ExpectNoUepollLeaks();
}

// timerfd_create with the nth allocation failing, for n = 1, 2, ... until
// it succeeds (the first create of a CLOCK_REALTIME timer grows the heap of
// two bases: a failure at the second must give back the first's
// reservation): each failure is ENOMEM with nothing left behind, and the
// timer finally made works.
TEST(TimerThread, CreateFailsCleanlyAtEachAllocation) {
  for (long n = 1; n < 20; ++n) {
    SCOPED_TRACE(n);
    ASSERT_EQ(uepoll_debug_fail_alloc(n), 0);
    errno = 0;
    int fd = uepoll_timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
    int err = errno;
    uepoll_debug_fail_alloc(0);
    if (fd >= 0) {
      itimerspec v = Spec(1 * kMs);
      ASSERT_EQ(uepoll_timerfd_settime(fd, 0, &v, nullptr), 0);
      pollfd p{fd, POLLIN, 0};
      EXPECT_EQ(uepoll_poll(&p, 1, kExpiryWaitMs), 1);
      EXPECT_EQ(uepoll_close(fd), 0);
      EXPECT_EQ(TimerQueue::Get().armed(), 0);
      ExpectNoUepollLeaks();
      return;
    }
    EXPECT_EQ(err, ENOMEM);
    EXPECT_EQ(TimerQueue::Get().armed(), 0);
    ExpectNoUepollLeaks();
  }
  ADD_FAILURE() << "creation never succeeded";
}

}  // namespace
}  // namespace uepoll_test
