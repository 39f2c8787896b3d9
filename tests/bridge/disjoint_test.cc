// The opt-in disjoint numbering (UEPOLL_FD_MODE_DISJOINT) still does the
// basics: numbers from UEPOLL_FD_BASE, lowest free first; sources,
// instances, nesting, poll() and dup work; kernel descriptors pass through
// every call and mix in poll() arrays, but cannot join an instance or be
// dup2'ed across kinds. The whole binary runs in that mode (each test
// process sets it before its first descriptor).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <thread>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "conformance/helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class DisjointMode : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), 0);
  }
};
[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new DisjointMode);

class BridgeDisjoint : public ::testing::Test {
 protected:
  int Keep(int fd) {
    EXPECT_GE(fd, 0) << strerror(errno);
    if (fd >= 0) fds_.insert(fd);
    return fd;
  }
  void Drop(int fd) { fds_.erase(fd); }
  void TearDown() override {
    for (int fd : fds_) uepoll_close(fd);
    fds_.clear();
    ExpectNoUepollLeaks();
  }
  std::set<int> fds_;
};

TEST_F(BridgeDisjoint, NumbersStartAtTheBaseLowestFreeFirst) {
  EXPECT_EQ(uepoll_get_fd_mode(), UEPOLL_FD_MODE_DISJOINT);
  int a = Keep(uepoll_eventfd(0, 0));
  int b = Keep(uepoll_epoll_create1(0));
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, 0), 0);
  Keep(p[0]);
  Keep(p[1]);
  EXPECT_EQ(a, UEPOLL_FD_BASE);
  EXPECT_EQ(b, UEPOLL_FD_BASE + 1);
  EXPECT_EQ(p[0], UEPOLL_FD_BASE + 2);
  EXPECT_EQ(p[1], UEPOLL_FD_BASE + 3);
  ASSERT_EQ(uepoll_close(b), 0);
  Drop(b);
  EXPECT_EQ(Keep(uepoll_dup(a)), UEPOLL_FD_BASE + 1);
  EXPECT_EQ(Keep(uepoll_fcntl(a, F_DUPFD, 5)), UEPOLL_FD_BASE + 4)
      << "a minimum below the base is the base";
  EXPECT_ERRNO(uepoll_set_fd_mode(UEPOLL_FD_MODE_KERNEL), EBUSY);
  // The numbers are not the kernel's.
  EXPECT_LT(::fcntl(a, F_GETFD), 0);
}

TEST_F(BridgeDisjoint, SourcesInstancesAndNestingWork) {
  int ep = Keep(uepoll_epoll_create1(0));
  int inner = Keep(uepoll_epoll_create1(0));
  int efd = Keep(uepoll_eventfd(0, EFD_NONBLOCK));
  int sv[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  Keep(sv[0]);
  Keep(sv[1]);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 1;
  ASSERT_EQ(uepoll_epoll_ctl(inner, EPOLL_CTL_ADD, efd, &ev), 0);
  ev.data.u64 = 2;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, inner, &ev), 0);
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = 3;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev), 0);
  epoll_event out[4];
  EXPECT_EQ(uepoll_epoll_wait(ep, out, 4, 0), 0);
  uint64_t one = 1;
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  ASSERT_EQ(uepoll_write(sv[1], "x", 1), 1);
  ASSERT_EQ(uepoll_epoll_wait(ep, out, 4, 0), 2);
  EXPECT_EQ(out[0].data.u64 + out[1].data.u64, 5u);
  pollfd pf{ep, POLLIN, 0};
  EXPECT_EQ(uepoll_poll(&pf, 1, 0), 1);
  // A blocked wait is woken from another thread.
  ASSERT_EQ(uepoll_read(efd, &one, 8), 8);
  Waiter w(
      [ep](epoll_event* e) { return uepoll_epoll_wait(ep, e, 4, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  std::thread writer([efd] {
    uint64_t v = 1;
    (void)uepoll_write(efd, &v, 8);
  });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 2u);
}

TEST_F(BridgeDisjoint, KernelDescriptorsPassThroughEveryCall) {
  int u = Keep(uepoll_eventfd(0, 0));
  (void)u;
  int kp[2];
  ASSERT_EQ(::pipe2(kp, O_NONBLOCK), 0);
  EXPECT_EQ(uepoll_write(kp[1], "ab", 2), 2);
  char buf[4];
  EXPECT_EQ(uepoll_read(kp[0], buf, 4), 2);
  EXPECT_ERRNO(uepoll_read(kp[0], buf, 4), EAGAIN);
  int d = uepoll_dup(kp[0]);
  ASSERT_GE(d, 0);
  EXPECT_LT(d, UEPOLL_FD_BASE);
  EXPECT_EQ(uepoll_fcntl(d, F_GETFL), ::fcntl(kp[0], F_GETFL));
  EXPECT_EQ(uepoll_close(d), 0);
  EXPECT_LT(::fcntl(d, F_GETFD), 0) << "closed in the kernel";
  EXPECT_EQ(uepoll_close(kp[0]), 0);
  EXPECT_EQ(uepoll_close(kp[1]), 0);
}

TEST_F(BridgeDisjoint, PollMixesBothKinds) {
  int u = Keep(uepoll_eventfd(0, EFD_NONBLOCK));
  int kp[2];
  ASSERT_EQ(::pipe2(kp, O_NONBLOCK), 0);
  std::atomic<short> rk{0};
  Waiter w([u, &kp, &rk](epoll_event*) {
    pollfd p[] = {{u, POLLIN, 0}, {kp[0], POLLIN, 0}};
    int r = uepoll_poll(p, 2, kWaitMs);
    rk = p[1].revents;
    return r;
  });
  ASSERT_TRUE(w.Parked());
  std::thread writer([&kp] { (void)::write(kp[1], "x", 1); });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(rk.load(), POLLIN);
  ::close(kp[0]);
  ::close(kp[1]);
  pollfd p[] = {{u, POLLIN, 0}, {kp[0], POLLIN, 0}};
  EXPECT_EQ(uepoll_poll(p, 2, 0), 1);
  EXPECT_EQ(p[1].revents, POLLNVAL);
}

// What the disjoint numbering cannot do, failing cleanly and changing
// nothing.
TEST_F(BridgeDisjoint, KernelDescriptorsCannotJoinAnInstanceOrCrossKinds) {
  int ep = Keep(uepoll_epoll_create1(0));
  int u = Keep(uepoll_eventfd(3, EFD_NONBLOCK));
  int k = ::eventfd(0, 0);
  ASSERT_GE(k, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT_ERRNO(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev), EPERM);
  ::close(k);
  EXPECT_ERRNO(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev), EBADF);
  int k2 = ::eventfd(0, 0);
  ASSERT_GE(k2, 0);
  EXPECT_ERRNO(uepoll_dup2(u, k2), EBADF);
  EXPECT_ERRNO(uepoll_dup2(k2, u), EBADF);
  // Both objects are as they were.
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(u, &v, 8), 8);
  EXPECT_EQ(v, 3u);
  EXPECT_EQ(::write(k2, &v, 8), 8);
  ::close(k2);
}

// The disjoint range has uepoll's own limit, not RLIMIT_NOFILE.
TEST_F(BridgeDisjoint, UepollsOwnLimitAppliesNotRlimitNofile) {
  rlimit old{};
  getrlimit(RLIMIT_NOFILE, &old);
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  long prev = uepoll_debug_set_fd_limit(100);
  ASSERT_GT(prev, 0);
  std::vector<int> got;
  int fd;
  while ((fd = uepoll_eventfd(0, 0)) >= 0) got.push_back(fd);
  EXPECT_EQ(errno, EMFILE);
  EXPECT_EQ(got.size(), 100u);
  for (int x : got) uepoll_close(x);
  uepoll_debug_set_fd_limit(prev);
  setrlimit(RLIMIT_NOFILE, &old);
}

// --- Parked numbers (docs/semantics.md D5) ---------------------------------
// A thread's close parks the number for that thread's next create, so that
// threads creating and closing descriptors write no shared word.

// Runs body in a forked child, on a new thread there, and returns its exit
// status: 0, or the body's failure code. The child frees every number the
// parent's threads parked, and a new thread has parked none, so the body
// starts with no parked number (entries the forking thread kept would
// otherwise take numbers the body's threads parked).
int InChild(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int r = 100;
    std::thread([&] { r = body(); }).join();
    _exit(r);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -2;
  return WEXITSTATUS(status);
}

// The same start for tests that need no fork of their own: under
// ThreadSanitizer (which does not support a threaded process's fork whose
// child keeps running) the body runs on a new thread of this process, whose
// create sees no number parked by another thread either.
int InCleanThread(const std::function<int()>& body) {
#if defined(__SANITIZE_THREAD__)
  int r = 100;
  std::thread([&] { r = body(); }).join();
  return r;
#else
  return InChild(body);
#endif
}

#if defined(__SANITIZE_THREAD__)
#define SKIP_FORK_UNDER_TSAN()                                             \
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded " \
                  "process whose child keeps running"
#else
#define SKIP_FORK_UNDER_TSAN() (void)0
#endif

// One thread alone still gets the lowest free number, whether it was
// parked or freed to the shared bitmap (a thread parks at most 8): twelve
// numbers closed highest first come back lowest first.
TEST_F(BridgeDisjoint, OneThreadGetsTheLowestFreeParkedOrNot) {
  std::vector<int> got;
  for (int i = 0; i < 12; ++i) got.push_back(Keep(uepoll_eventfd(0, 0)));
  for (int i = 11; i >= 0; --i) {
    ASSERT_EQ(uepoll_close(got[i]), 0);
    Drop(got[i]);
  }
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(Keep(uepoll_eventfd(0, 0)), got[i]) << "create " << i;
  }
  // And with a minimum: F_DUPFD skips the parked numbers below it.
  ASSERT_EQ(uepoll_close(got[3]), 0);
  Drop(got[3]);
  ASSERT_EQ(uepoll_close(got[7]), 0);
  Drop(got[7]);
  EXPECT_EQ(Keep(uepoll_fcntl(got[0], F_DUPFD, got[4])), got[7]);
  EXPECT_EQ(Keep(uepoll_eventfd(0, 0)), got[3]);
}

// A parked number that a dup2 took is no longer this thread's: the next
// create gets the lowest of the numbers still parked, not the bitmap's
// (higher) one. Twelve numbers; eight parked (the list is full), one freed
// to the bitmap and taken again, then a dup2 onto the lowest parked one.
TEST_F(BridgeDisjoint, Dup2OfTheLowestParkedNumberLeavesTheNextOne) {
  std::vector<int> n;
  for (int i = 0; i < 12; ++i) n.push_back(Keep(uepoll_eventfd(0, 0)));
  for (int i = 11; i >= 4; --i) {
    ASSERT_EQ(uepoll_close(n[i]), 0);
    Drop(n[i]);
  }
  ASSERT_EQ(uepoll_close(n[1]), 0);  // beyond the eight: to the bitmap
  Drop(n[1]);
  EXPECT_EQ(Keep(uepoll_eventfd(0, 0)), n[1]);
  EXPECT_EQ(Keep(uepoll_dup2(n[0], n[4])), n[4]);
  EXPECT_EQ(Keep(uepoll_eventfd(0, 0)), n[5]);
  EXPECT_EQ(Keep(uepoll_eventfd(0, 0)), n[6]);
}

// A thread that parks one number (creates an eventfd and closes it) and
// then waits, so that its parked number stays parked; Finish() lets it run
// `after` on itself, joins it, and returns what `after` returned.
class ParkingThread {
 public:
  explicit ParkingThread(std::function<int()> after = nullptr)
      : thread_([this, after] {
          int x = uepoll_eventfd(0, 0);
          if (x >= 0) uepoll_close(x);
          parked_.set_value(x);
          go_.get_future().wait();
          after_result_ = after ? after() : 0;
        }) {}
  // The number it parked (-1 if its create failed).
  int Parked() {
    if (number_ == kUnknown) number_ = parked_.get_future().get();
    return number_;
  }
  int Finish() {
    go_.set_value();
    thread_.join();
    return after_result_;
  }

 private:
  static constexpr int kUnknown = -2;
  std::promise<int> parked_;
  std::promise<void> go_;
  int number_ = kUnknown;
  int after_result_ = 0;
  std::thread thread_;  // last: starts once the members above exist
};

// Another thread's create skips a number parked by a thread that is still
// running (the deviation), and gets it once that thread has exited.
TEST_F(BridgeDisjoint, NumberParkedByALiveThreadIsItsUntilItExits) {
  EXPECT_EQ(InCleanThread([] {
              ParkingThread t;
              int x = t.Parked();
              int y = uepoll_eventfd(0, 0);
              t.Finish();
              if (x < 0 || y < 0) return 1;
              if (y == x) return 2;  // not parked for its closer
              int z = uepoll_eventfd(0, 0);
              if (z != x) return 3;  // not freed at the thread's exit
              uepoll_close(y);
              uepoll_close(z);
              return 0;
            }),
            0);
}

// A dup2 onto a number another thread parked takes it (the kernel would
// not fail it EBUSY: the number is free); the parker's next create then
// gets another number.
TEST_F(BridgeDisjoint, Dup2OntoANumberAnotherThreadParkedTakesIt) {
  EXPECT_EQ(InCleanThread([] {
              ParkingThread t([] { return uepoll_eventfd(0, 0); });
              int x = t.Parked();
              int a = uepoll_eventfd(0, 0);
              int r = uepoll_dup2(a, x);
              int err = errno;
              int w = t.Finish();
              if (x < 0 || a < 0 || w < 0) return 1;
              if (r != x) return err == EBUSY ? 2 : 3;
              if (w == x) return 4;  // two files at one number
              uint64_t v = 5;
              if (uepoll_write(x, &v, 8) != 8 || uepoll_read(a, &v, 8) != 8 ||
                  v != 5) {
                return 5;  // x is not a's file
              }
              uepoll_close(x);
              uepoll_close(a);
              uepoll_close(w);
              return 0;
            }),
            0);
}

// A create that finds the range full takes back the numbers other threads
// parked before it fails EMFILE.
TEST_F(BridgeDisjoint, FullRangeTakesBackParkedNumbersBeforeEmfile) {
  EXPECT_EQ(InCleanThread([] {
              long prev = uepoll_debug_set_fd_limit(16);
              std::vector<int> got;
              int fd;
              while ((fd = uepoll_eventfd(0, 0)) >= 0) got.push_back(fd);
              if (errno != EMFILE || got.empty()) return 1;
              int last = got.back();
              got.pop_back();
              uepoll_close(last);  // parked by this thread
              // The thread's create takes it back, and parks it there.
              ParkingThread t;
              int x = t.Parked();
              int y = uepoll_eventfd(0, 0);  // takes it back again
              int err = errno;
              t.Finish();
              if (x != last) return 2;
              if (y != last) return err == EMFILE ? 3 : 4;
              got.push_back(y);
              for (int g : got) uepoll_close(g);
              uepoll_debug_set_fd_limit(prev);
              return 0;
            }),
            0);
}

// fork(): the child has only the forking thread, so the numbers the
// parent's other threads parked are free in the child.
TEST_F(BridgeDisjoint, ForkChildGetsNumbersParkedByOtherParentThreads) {
  SKIP_FORK_UNDER_TSAN();
  EXPECT_EQ(InChild([] {
              ParkingThread t;
              int x = t.Parked();
              int inner =
                  InChild([x] { return uepoll_eventfd(0, 0) == x ? 0 : 1; });
              t.Finish();
              if (x < 0) return 1;
              return inner == 0 ? 0 : 10 + inner;
            }),
            0);
}

}  // namespace
}  // namespace uepoll_test
