// SIGSTOP then SIGCONT with no handler installed: on Linux a thread blocked
// in epoll_wait comes back with EINTR (its sleep is not restarted: epoll_wait
// answers -EINTR, not a restart code). On uepoll that holds where the
// waiter sleeps in epoll_wait itself, on the instance's kernel half: an
// instance that holds a kernel descriptor, and any wait with a signal mask.
// A plain wait on an instance with nothing in its kernel half sleeps on a
// futex, which the kernel restarts after a stop: it waits on (docs/
// semantics.md D6 (c); Deviations-style pin below).
//
// The stop and the continue come from a child process (the whole process
// stops, the test thread included); the child waits until /proc says the
// parent is stopped before it continues it.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

// The state letter of a process, from /proc/<pid>/stat; 0 if unknown.
char ProcessState(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::string s = ReadProcFile(path);
  size_t p = s.rfind(')');
  return p == std::string::npos || p + 2 >= s.size() ? 0 : s[p + 2];
}

// Stops this process and continues it, from a child. True if the child saw
// the stop and sent the continue.
bool StopAndContinueMe() {
  pid_t me = getpid();
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (kill(me, SIGSTOP) != 0) _exit(2);
    for (int i = 0; i < 100000 && ProcessState(me) != 'T'; ++i) usleep(100);
    _exit(kill(me, SIGCONT) == 0 ? 0 : 3);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

class StopContinue : public BackendTest {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                    "process whose child keeps running";
#endif
  }
};

// An instance holding a kernel descriptor: a plain wait.
TEST_P(StopContinue, WaitOnAnInstanceHoldingAKernelDescriptorIsEintr) {
  int ep = Epoll();
  int k = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(k, 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  const Backend* b = &B();
  Waiter w(
      [b, ep](epoll_event* ev) { return b->epoll_wait(ep, ev, 1, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  ASSERT_TRUE(StopAndContinueMe());
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
  ::close(k);
}

// A wait with a signal mask, on an instance of the backend's own objects.
TEST_P(StopContinue, MaskedWaitIsEintr) {
  int ep = Epoll();
  int e = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, e, EPOLLIN, 1), 0);
  const Backend* b = &B();
  Waiter w([b, ep](epoll_event* ev) {
    sigset_t mask;
    sigemptyset(&mask);
    return b->epoll_pwait(ep, ev, 1, kWaitMs, &mask);
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_TRUE(StopAndContinueMe());
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
}

// The deviation (D6 (c)): a plain wait on an instance of uepoll objects only
// sleeps on its futex, which the kernel restarts after the stop: uepoll's
// waits on, and a later event ends it. The kernel's ends EINTR.
TEST_P(StopContinue, PlainWaitOnUepollObjectsOnly) {
  int ep = Epoll();
  int e = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, e, EPOLLIN, 1), 0);
  const Backend* b = &B();
  Waiter w(
      [b, ep](epoll_event* ev) { return b->epoll_wait(ep, ev, 1, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  ASSERT_TRUE(StopAndContinueMe());
  if (IsKernel()) {
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), -1);
    EXPECT_EQ(w.error(), EINTR);
    return;
  }
  // Still in its wait (the kernel restarted the futex sleep: /proc shows
  // restart_syscall, not a wait), so the event ends it; had it ended with
  // EINTR at the continue, its result would be -1.
  uint64_t one = 1;
  ASSERT_EQ(b->write(e, &one, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

// An epoll wait whose thread keeps the timers: the kernel's ends EINTR at
// a stop and continue, and so does uepoll's, whose keeper sleeps in its
// ring (base/keeper_ring.h), a sleep that ends there as epoll_wait's does.
// Where the kernel makes no ring the keeper sleeps on its futex and waits
// on (D6 (c)): skipped.
TEST_P(StopContinue, WaitKeepingTimersIsEintr) {
  const Backend* b = &B();
  int ep = Epoll();
  int t = b->timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  ASSERT_GE(t, 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, t, EPOLLIN, 1), 0);
  itimerspec v{};
  v.it_value.tv_sec = 4;
  ASSERT_EQ(b->timerfd_settime(t, 0, &v, nullptr), 0);
  Waiter w(
      [b, ep](epoll_event* ev) { return b->epoll_wait(ep, ev, 1, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  bool ring = Snapshot(w.tid()).nr == SYS_io_uring_enter;
  ASSERT_TRUE(StopAndContinueMe());
  ASSERT_TRUE(w.WaitDone());
  b->close(t);
  if (!IsKernel() && !ring) GTEST_SKIP() << "no keeper ring here";
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
}

// poll() over timerfds, stopped and continued while it sleeps until the
// second of three expiries: the kernel restarts poll after a stop (its
// restart code), so both backends return that expiry, not EINTR. On
// uepoll the sleeping thread keeps, and rests on its lookahead timerfd
// (base/parker.h, "The lookahead"): the expiry before armed one at this
// bound, and the third expiry makes it rest rather than sleep on the
// futex. That sleep is restarted as the futex sleep is.
TEST_P(StopContinue, PollKeepingTimersWaitsOnAfterTheStop) {
  const Backend* b = &B();
  int t[3];
  for (int& fd : t) {
    fd = b->timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    ASSERT_GE(fd, 0);
  }
  const int64_t kMsNs = 1000000;
  const int64_t after[3] = {30 * kMsNs, 2000 * kMsNs, 4000 * kMsNs};
  for (int i = 0; i < 3; ++i) {
    itimerspec v{};
    v.it_value.tv_sec = after[i] / 1000000000;
    v.it_value.tv_nsec = after[i] % 1000000000;
    ASSERT_EQ(b->timerfd_settime(t[i], 0, &v, nullptr), 0);
  }
  std::atomic<bool> second{false};
  Waiter w([b, &t, &second](epoll_event*) {
    pollfd fds[3] = {{t[0], POLLIN, 0}, {t[1], POLLIN, 0}, {t[2], POLLIN, 0}};
    if (b->poll(fds, 3, kWaitMs) != 1 || fds[0].revents != POLLIN) return -2;
    uint64_t ticks;
    if (b->read(t[0], &ticks, 8) != 8) return -3;
    // The sleep the stop lands in.
    second = true;
    int r = b->poll(fds + 1, 2, kWaitMs);
    if (r < 0) return r;
    return fds[1].revents == POLLIN && fds[2].revents == 0 ? r : -4;
  });
  ASSERT_TRUE(Eventually([&] { return second.load(); }));
  ASSERT_TRUE(w.Parked());
  ASSERT_TRUE(StopAndContinueMe());
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1) << "error " << w.error() << " (-1: the poll, "
                           << "-2 to -4: what it returned)";
  for (int fd : t) b->close(fd);
}

UEPOLL_INSTANTIATE_BACKENDS(StopContinue);

}  // namespace
}  // namespace uepoll_test
