// The opt-in disjoint numbering (UEPOLL_FD_MODE_DISJOINT) still does the
// basics: numbers from UEPOLL_FD_BASE, lowest free first; sources,
// instances, nesting, poll() and dup work; kernel descriptors pass through
// every call and mix in poll() arrays, but cannot join an instance or be
// dup2'ed across kinds. The whole binary runs in that mode (each test
// process sets it before its first descriptor).
#include <sys/resource.h>

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

}  // namespace
}  // namespace uepoll_test
