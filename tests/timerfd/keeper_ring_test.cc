// The keeper's ring (base/keeper_ring.h; docs/design.md, "The keeper's
// ring"), on uepoll only: a thread that keeps the timers while it waits in
// epoll_wait sleeps in its own io_uring, whose timeouts are its bound and
// its lookahead, and whose FUTEX_WAIT request lets another thread wake it.
//
// Each test skips where the kernel makes no ring (no io_uring, a seccomp
// filter, Linux before 6.7) or UEPOLL_KEEPER_RING=0 turns rings off; the
// keeper then uses its timerfd lookahead, tested in keeper_test.cc.
#include "base/keeper_ring.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

#include <uepoll/uepoll.h>

#include "base/parker.h"
#include "sources/source_test.h"
#include "support/fixture.h"
#include "threads/waiter.h"
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

using uepoll::impl::KeeperRing;
using uepoll::impl::Parker;

int UTimer() {
  int fd = uepoll_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  EXPECT_GE(fd, 0);
  return fd;
}

bool UArmAt(int fd, int64_t at_ns) {
  itimerspec v = Spec(at_ns);
  return uepoll_timerfd_settime(fd, TFD_TIMER_ABSTIME, &v, nullptr) == 0;
}

int UAdd(int ep, int fd, uint64_t data) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = data;
  return uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

// Two timers in one instance; the calling thread waits for the first as
// the keeper, with the second armed after it, and reads it.
struct TwoTimers {
  int ep = uepoll_epoll_create1(0);
  int t1 = UTimer(), t2 = UTimer();
  int64_t at1 = 0, at2 = 0;

  TwoTimers() {
    EXPECT_EQ(UAdd(ep, t1, 1), 0);
    EXPECT_EQ(UAdd(ep, t2, 2), 0);
  }
  void KeepUntilFirst(int64_t first_ns, int64_t second_ns) {
    int64_t now = ClockNs(CLOCK_MONOTONIC);
    at1 = now + first_ns;
    at2 = now + second_ns;
    ASSERT_TRUE(UArmAt(t1, at1));
    ASSERT_TRUE(UArmAt(t2, at2));
    epoll_event ev{};
    ASSERT_EQ(uepoll_epoll_wait(ep, &ev, 1, kExpiryWaitMs), 1);
    EXPECT_EQ(ev.data.u64, 1u);
    EXPECT_GE(ClockNs(CLOCK_MONOTONIC), at1);
    uint64_t ticks = 0;
    ASSERT_EQ(uepoll_read(t1, &ticks, 8), 8);
  }
  ~TwoTimers() {
    uepoll_close(t1);
    uepoll_close(t2);
    uepoll_close(ep);
  }
};

// Skips unless the calling thread kept in a ring: the first keeper sleep
// makes it, if the kernel can.
#define SKIP_WITHOUT_RING()                                             \
  do {                                                                  \
    if (!KeeperRing::Allowed() || !Parker::Current().DebugRingOpen()) { \
      GTEST_SKIP() << "no keeper ring here (io_uring refused, Linux "   \
                      "before 6.7, or UEPOLL_KEEPER_RING=0)";           \
    }                                                                   \
  } while (0)

// The ring slot pending at `at`, or -1.
int RingSlotAt(int64_t at) {
  for (int i = 0; i < 2; ++i) {
    if (Parker::Current().DebugRingAt(i) == at) return i;
  }
  return -1;
}

// The keeper sleeps in its ring with the next expiry pending there: the
// kernel holds an io_uring timeout at that instant, armed before the
// expiry before it fired (so it was not the CPU's earliest timer).
TEST(KeeperRing, KeeperSleepsInItsRingWithTheNextExpiryPending) {
  Parker& p = Parker::Current();
  uint64_t sleeps = p.DebugRingSleeps();
  TwoTimers tt;
  tt.KeepUntilFirst(30 * kMs, 60 * 1000 * kMs);
  SKIP_WITHOUT_RING();
  EXPECT_GT(p.DebugRingSleeps(), sleeps) << "never slept in the ring";
  ASSERT_GE(RingSlotAt(tt.at2), 0) << "nothing pending at the second expiry";
  int cpu = KernelTimerCpuAt(tt.at2, "io_timeout_fn");
  if (std::ifstream("/proc/timer_list")) {
    EXPECT_GE(cpu, 0) << "the kernel holds no io_uring timeout at " << tt.at2;
  }
}

// A keeper waiting on one interval timer, and nothing else armed, looks
// ahead to that timer's next period: the read that consumes the expiry
// queues it there again, so the sleep for it finds a kernel timer pending
// at its bound and does not program the timer device (the kernel's loop
// re-arms a lone periodic timerfd as the CPU's earliest in every read).
// Without the period there is nothing after the bound to look ahead to.
TEST(KeeperRing, KeeperOfOneIntervalTimerLooksAheadToItsNextPeriod) {
  constexpr int64_t kPeriod = 60 * 1000 * kMs;
  int ep = uepoll_epoll_create1(0);
  int t = UTimer();
  ASSERT_EQ(UAdd(ep, t, 1), 0);
  int64_t at = KeepFirstIntervalExpiry(ep, t, kPeriod);
  ASSERT_GE(at, 0);
  SKIP_WITHOUT_RING();
  EXPECT_GE(RingSlotAt(at + kPeriod), 0) << "nothing pending a period on";
  if (std::ifstream("/proc/timer_list")) {
    EXPECT_GE(KernelTimerCpuAt(at + kPeriod, "io_timeout_fn"), 0)
        << "the kernel holds no io_uring timeout at " << at + kPeriod;
  }
  uepoll_close(t);
  uepoll_close(ep);
  ExpectNoUepollLeaks();
}

// The next period is only a candidate: another timer armed before it is
// the lookahead, as it is the next expiry (a period taken anyway would
// leave that expiry's sleep programming the timer device).
TEST(KeeperRing, AnEarlierTimerComesBeforeAnIntervalTimersNextPeriod) {
  constexpr int64_t kPeriod = 60 * 1000 * kMs;
  TwoTimers tt;
  int64_t now = ClockNs(CLOCK_MONOTONIC);
  tt.at1 = now + 30 * kMs;
  tt.at2 = now + 30 * 1000 * kMs;  // before t1's next period
  itimerspec v1 = Spec(tt.at1, kPeriod);
  ASSERT_EQ(uepoll_timerfd_settime(tt.t1, TFD_TIMER_ABSTIME, &v1, nullptr), 0);
  ASSERT_TRUE(UArmAt(tt.t2, tt.at2));
  epoll_event ev{};
  ASSERT_EQ(uepoll_epoll_wait(tt.ep, &ev, 1, kExpiryWaitMs), 1);
  EXPECT_EQ(ev.data.u64, 1u);
  uint64_t ticks = 0;
  ASSERT_EQ(uepoll_read(tt.t1, &ticks, 8), 8);
  SKIP_WITHOUT_RING();
  EXPECT_GE(RingSlotAt(tt.at2), 0) << "nothing pending at the second timer";
  EXPECT_LT(RingSlotAt(tt.at1 + kPeriod), 0) << "the later period was taken";
}

// The ring has no descriptor number: registered with the thread and closed
// at once, it is out of reach of the application's close(), closefrom()
// and dup2() (semantics.md D19 does not apply to it).
TEST(KeeperRing, NoDescriptorOfTheProcessIsTheRing) {
  TwoTimers tt;
  tt.KeepUntilFirst(20 * kMs, 60 * 1000 * kMs);
  SKIP_WITHOUT_RING();
  DIR* d = opendir("/proc/self/fd");
  ASSERT_NE(d, nullptr);
  int rings = 0, seen = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    char target[256];
    ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    ++seen;
    if (std::string(target) == "anon_inode:[io_uring]") ++rings;
  }
  closedir(d);
  EXPECT_GT(seen, 0);
  EXPECT_EQ(rings, 0) << "a ring has a descriptor number";
}

// Another thread's event ends a keeper's sleep in its ring (Unpark's
// FUTEX_WAKE completes the ring's FUTEX_WAIT request), long before the
// expiry it covers.
TEST(KeeperRing, AnotherThreadsEventEndsTheRingSleep) {
  int efd = uepoll_eventfd(0, EFD_NONBLOCK);
  int t = UTimer();
  int ep = uepoll_epoll_create1(0);
  ASSERT_EQ(UAdd(ep, efd, 5), 0);
  ASSERT_EQ(UAdd(ep, t, 6), 0);
  // Before the wait's own deadline, or the sleep would not keep.
  int64_t far = ClockNs(CLOCK_MONOTONIC) + 3 * kWaitMs / 2 * kMs;
  ASSERT_TRUE(UArmAt(t, far));
  std::atomic<bool> ring{false};
  Waiter w([&](epoll_event* evs) {
    int r = uepoll_epoll_wait(ep, evs, Waiter::kEvents, 2 * kWaitMs);
    ring = KeeperRing::Allowed() && Parker::Current().DebugRingOpen();
    return r;
  });
  ASSERT_TRUE(w.Parked());
  long nr = Snapshot(w.tid()).nr;
  uint64_t one = 1;
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  ASSERT_TRUE(w.WaitDone()) << "the keeper slept through the event";
  if (!ring) {
    uepoll_close(ep);
    uepoll_close(t);
    uepoll_close(efd);
    GTEST_SKIP() << "no keeper ring here";
  }
  EXPECT_EQ(nr, SYS_io_uring_enter) << "the keeper slept elsewhere";
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 5u);
  EXPECT_LT(ClockNs(CLOCK_MONOTONIC), far);
  uepoll_close(ep);
  uepoll_close(t);
  uepoll_close(efd);
  ExpectNoUepollLeaks();
}

// The ring's FUTEX_WAIT request outlives the sleep that queued it (an
// expiry ended that sleep). The thread's next sleep, on the futex itself,
// must still be woken by one Unpark: the wake reaches every waiter on the
// word, the request and the thread (one waiter woken could be the request
// alone, and the thread would sleep until its timeout).
TEST(KeeperRing, FutexSleepAfterARingSleepIsWoken) {
  int efd = uepoll_eventfd(0, EFD_NONBLOCK);
  int eep = uepoll_epoll_create1(0);
  ASSERT_EQ(UAdd(eep, efd, 8), 0);
  std::atomic<int> phase{0};
  std::atomic<bool> pending{false};
  Waiter w([&](epoll_event* evs) {
    {
      TwoTimers tt;
      tt.KeepUntilFirst(20 * kMs, 40 * kMs);
      epoll_event ev;
      if (uepoll_epoll_wait(tt.ep, &ev, 1, kExpiryWaitMs) != 1) return -2;
      pending = KeeperRing::Allowed() && Parker::Current().DebugRingOpen() &&
                Parker::Current().DebugRingFutexPending();
    }  // no timer armed from here: the next sleep does not keep
    phase = 1;
    return uepoll_epoll_wait(eep, evs, Waiter::kEvents, 3 * kWaitMs);
  });
  ASSERT_TRUE(Eventually([&] { return phase.load() == 1 || w.Done(); }));
  ASSERT_TRUE(w.Parked());
  long nr = Snapshot(w.tid()).nr;
  uint64_t one = 1;
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  bool done = w.WaitDone();
  if (!done) uepoll_write(efd, &one, 8);  // lets the thread go (failed)
  if (!pending) {
    uepoll_close(eep);
    uepoll_close(efd);
    GTEST_SKIP() << "no keeper ring here, or no request left pending";
  }
  EXPECT_EQ(nr, SYS_futex);
  EXPECT_TRUE(done) << "the wakeup went to the ring's request only";
  EXPECT_EQ(w.result(), 1);
  uepoll_close(eep);
  uepoll_close(efd);
  ExpectNoUepollLeaks();
}

// A keeper that moved to another CPU since it armed the timeout pending at
// its bound moves that timeout to its new CPU before it sleeps (the ring's
// form of "the lookahead follows the thread", docs/design.md).
TEST(KeeperRing, KeeperThatMovedRearmsItsPendingTimeoutOnItsNewCpu) {
  std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  auto pin = [](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    return sched_setaffinity(0, sizeof one, &one) == 0 && sched_getcpu() == c;
  };
  ASSERT_TRUE(pin(cpus[0]));
  TwoTimers tt;
  tt.KeepUntilFirst(30 * kMs, 500 * kMs);
  if (!Parker::Current().DebugRingOpen()) {
    ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
  }
  SKIP_WITHOUT_RING();
  Parker& p = Parker::Current();
  int slot = RingSlotAt(tt.at2);
  ASSERT_GE(slot, 0) << "nothing pending at the second expiry";
  EXPECT_EQ(p.DebugRingCpu(slot), cpus[0]);
  int before = KernelTimerCpuAt(tt.at2, "io_timeout_fn");
  int t3 = UTimer();
  ASSERT_EQ(UAdd(tt.ep, t3, 3), 0);
  ASSERT_TRUE(UArmAt(t3, ClockNs(CLOCK_MONOTONIC) + 3000 * kMs));
  ASSERT_TRUE(pin(cpus[1]));
  pid_t self = Gettid();
  std::atomic<int> during{-3};
  std::thread look([&] {
    if (Eventually([&] { return SleepsInSyscall(self); })) {
      during = KernelTimerCpuAt(tt.at2, "io_timeout_fn");
    }
  });
  epoll_event ev{};
  int r = uepoll_epoll_wait(tt.ep, &ev, 1, kExpiryWaitMs);
  look.join();
  ASSERT_EQ(sched_setaffinity(0, sizeof allowed, &allowed), 0);
  ASSERT_EQ(r, 1);
  EXPECT_EQ(ev.data.u64, 2u);
  EXPECT_GE(ClockNs(CLOCK_MONOTONIC), tt.at2);
  EXPECT_EQ(p.DebugRingCpu(slot), cpus[1]) << "left on the old CPU";
  EXPECT_EQ(p.DebugRingCpu(1 - slot), cpus[1]);
  if (before >= 0) {
    // The kernel's own view, where the list can be read.
    EXPECT_EQ(before, cpus[0]);
    EXPECT_EQ(during, cpus[1]) << "the kernel still queues it elsewhere";
  }
  uepoll_close(t3);
}

// A fork child has no ring (its mappings are not copied, and its thread
// has none registered): it forgets the parent's and makes its own when it
// keeps, and its expiries come.
TEST(KeeperRing, ForkChildForgetsTheRingAndMakesItsOwn) {
  if (kTsan) {
    GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                    "process whose child starts a thread";
  }
  {
    TwoTimers tt;
    tt.KeepUntilFirst(20 * kMs, 60 * 1000 * kMs);
  }
  SKIP_WITHOUT_RING();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Parker& p = Parker::Current();
    if (p.DebugRingOpen()) _exit(1);
    uint64_t sleeps = p.DebugRingSleeps();
    TwoTimers tt;
    int64_t now = ClockNs(CLOCK_MONOTONIC);
    if (!UArmAt(tt.t1, now + 20 * kMs) || !UArmAt(tt.t2, now + 40 * kMs)) {
      _exit(2);
    }
    for (uint64_t want : {1u, 2u}) {
      epoll_event ev{};
      if (uepoll_epoll_wait(tt.ep, &ev, 1, kExpiryWaitMs) != 1) _exit(3);
      if (ev.data.u64 != want) _exit(4);
      uint64_t ticks;
      if (uepoll_read(want == 1 ? tt.t1 : tt.t2, &ticks, 8) != 8) _exit(5);
    }
    _exit(p.DebugRingOpen() && p.DebugRingSleeps() > sleeps ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the parent's ring kept, 2-5: the expiries, 6: no ring of its own";
  // The parent's ring is untouched, and still serves.
  EXPECT_TRUE(Parker::Current().DebugRingOpen());
  uint64_t sleeps = Parker::Current().DebugRingSleeps();
  {
    TwoTimers tt;
    tt.KeepUntilFirst(20 * kMs, 60 * 1000 * kMs);
  }
  EXPECT_GT(Parker::Current().DebugRingSleeps(), sleeps);
  ExpectNoUepollLeaks();
}

void ParentAndVforkChildShareTwoTimers();

// A vfork child runs on its parent's memory, so its thread's Parker is the
// parent thread's, ring and all, but the child's task has no ring
// registered: its keeper sleep's io_uring_enter fails, and the sleep must
// fall back rather than fail or hang, and leave the ring as the parent left
// it. The child gets its expiry; the parent, back from vfork, gets the next
// one, and still keeps in its own ring after.
TEST(KeeperRing, VforkChildThatKeepsGetsItsExpiryAndLeavesTheParentServed) {
  if (kTsan) {
    GTEST_SKIP() << "ThreadSanitizer does not follow a vfork child that runs "
                    "more than exec or _exit";
  }
  {
    TwoTimers warm;
    warm.KeepUntilFirst(20 * kMs, 60 * 1000 * kMs);
  }
  SKIP_WITHOUT_RING();
  Parker& p = Parker::Current();
  const void* ring = p.DebugRingMapping();
  ParentAndVforkChildShareTwoTimers();
  EXPECT_EQ(p.DebugRingMapping(), ring)
      << "the vfork child took the parent's ring (the parent then has none, "
         "or a new one, the old one's mappings and registration left over)";
  uint64_t sleeps = p.DebugRingSleeps();
  {
    TwoTimers after;
    after.KeepUntilFirst(20 * kMs, 60 * 1000 * kMs);
  }
  EXPECT_GT(p.DebugRingSleeps(), sleeps)
      << "the parent no longer keeps in its ring after the vfork child";
  ExpectNoUepollLeaks();
}

void ParentAndVforkChildShareTwoTimers() {
  TwoTimers tt;
  int64_t now = ClockNs(CLOCK_MONOTONIC);
  ASSERT_TRUE(UArmAt(tt.t1, now + 30 * kMs));
  ASSERT_TRUE(UArmAt(tt.t2, now + 60 * kMs));
  // Written by the child into the memory it shares with the parent.
  static volatile int child_result;
  child_result = -1;
  pid_t pid = vfork();
  if (pid == 0) {
    epoll_event ev{};
    uint64_t ticks = 0;
    int r = uepoll_epoll_wait(tt.ep, &ev, 1, kExpiryWaitMs);
    if (r != 1) {
      child_result = 1;
    } else if (ev.data.u64 != 1u) {
      child_result = 2;
    } else if (uepoll_read(tt.t1, &ticks, 8) != 8 || ticks != 1) {
      child_result = 3;
    } else {
      child_result = 0;
    }
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(child_result, 0)
      << "the vfork child's wait: 1 failed or timed out, 2 reported another "
         "timer, 3 its read";
  epoll_event ev{};
  ASSERT_EQ(uepoll_epoll_wait(tt.ep, &ev, 1, kExpiryWaitMs), 1);
  EXPECT_EQ(ev.data.u64, 2u);
  EXPECT_GE(ClockNs(CLOCK_MONOTONIC), tt.at2 = now + 60 * kMs);
  uint64_t ticks = 0;
  ASSERT_EQ(uepoll_read(tt.t2, &ticks, 8), 8);
  EXPECT_EQ(ticks, 1u);
}

}  // namespace
}  // namespace uepoll_test
