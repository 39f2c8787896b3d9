// The corners of kernel descriptors inside instances, where the kernel
// half is joined to the rest: a failed call on an instance's number, the
// descriptor limit, an instance in flight over SCM_RIGHTS, fork(), cycles
// through kernel epolls, and uepoll's own descriptors. Differential: on the
// kernel backend every instance is a kernel epoll, and the expectations are
// the kernel's. docs/design.md, "The kernel half".
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "bridge/bridge.h"
#include "support/scm.h"

namespace uepoll_test {
namespace {

using Evs = std::vector<Ev>;

class BridgeCorners : public BridgeTest {
 protected:
  // Runs body in a fork child, which exits 0 if body returns; body exits
  // with the number of the check that failed. Expects 0.
  template <class F>
  void InForkedChild(F body) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      body();
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  // A number certainly not open in the process.
  int ClosedNumber() {
    int fd = ::dup(0);
    EXPECT_GE(fd, 0);
    ::close(fd);
    return fd;
  }
  // The soft RLIMIT_NOFILE is set for the test and restored after it.
  void SetSoftLimit(rlim_t soft) {
    if (!saved_) {
      ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old_), 0);
      saved_ = true;
    }
    rlimit r = old_;
    r.rlim_cur = soft;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &r), 0) << strerror(errno);
  }
  void TearDown() override {
    if (saved_) setrlimit(RLIMIT_NOFILE, &old_);
    BridgeTest::TearDown();
  }

 private:
  rlimit old_{};
  bool saved_ = false;
};

// A failing call changes nothing: a dup2 or dup3 from a closed number onto
// an instance holding a kernel descriptor fails EBADF, and the instance
// (through that number and its dup) still reports the descriptor.
TEST_P(BridgeCorners, FailedDup2OntoAnInstanceChangesNothing) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 9), 0);
  int bad = ClosedNumber();
  // Its only number first, then with a dup beside it.
  EXPECT_ERRNO(B().dup2(bad, ep), EBADF);
  EXPECT_ERRNO(B().dup3(bad, ep, O_CLOEXEC), EBADF);
  KSignal(k);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 9}}));
  int dup = Track(B().dup(ep));
  bad = ClosedNumber();
  EXPECT_ERRNO(B().dup2(bad, dup), EBADF);
  EXPECT_ERRNO(B().dup2(bad, ep), EBADF);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 9}}));
  EXPECT_EQ(Wait(dup), (Evs{{EPOLLIN, 9}}));
  // The kernel half still takes descriptors through either number.
  int k2 = KEventfd(1);
  EXPECT_EQ(Ctl(dup, EPOLL_CTL_ADD, k2, EPOLLIN, 10), 0);
  EXPECT_EQ(Sorted(Wait(ep)), (Evs{{EPOLLIN, 9}, {EPOLLIN, 10}}));
}

// An ADD never needs a descriptor of its own: at RLIMIT_NOFILE, with every
// number taken, a kernel descriptor goes into an instance as on the kernel.
TEST_P(BridgeCorners, KernelDescriptorAddedWithEveryNumberTaken) {
  int ep = Epoll();
  int k = KEventfd(1);
  int top = ::dup(0);
  ASSERT_GE(top, 0);
  ::close(top);
  // Every number below the limit taken.
  SetSoftLimit(static_cast<rlim_t>(top) + 8);
  std::vector<int> fill;
  for (int fd; (fd = ::dup(0)) >= 0;) fill.push_back(fd);
  ASSERT_EQ(errno, EMFILE);
  EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 3), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 3}}));
  for (int fd : fill) ::close(fd);
}

// With the limit lowered below the instance's own number, its kernel half
// still takes descriptors, and a MOD or DEL of one never added is ENOENT.
TEST_P(BridgeCorners, KernelDescriptorAddedWithTheLimitBelowTheInstance) {
  int k = KEventfd(1);
  int k_other = KEventfd(1);
  std::vector<int> pad;  // push the instance's number above the new limit
  for (int i = 0; i < 8; ++i) pad.push_back(::dup(0));
  int ep = Epoll();
  SetSoftLimit(static_cast<rlim_t>(ep));
  EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 4), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 4}}));
  errno = 0;
  EXPECT_EQ(Ctl(ep, EPOLL_CTL_MOD, k_other, EPOLLIN, 5), -1);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(Ctl(ep, EPOLL_CTL_DEL, k_other, 0, 0), -1);
  EXPECT_EQ(errno, ENOENT);
  for (int fd : pad) ::close(fd);
}

// An instance passed over SCM_RIGHTS lives on in the message when the
// sender closes its last number: the receiver's number reports its kernel
// descriptors and takes new ones (on the kernel: a struct file in flight).
TEST_P(BridgeCorners, InstanceInFlightKeepsItsKernelHalf) {
  int ep = Epoll();
  int k1 = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k1, EPOLLIN, 1), 0);
  int sv[2];
  ASSERT_EQ(B().socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Track(sv[0]);
  Track(sv[1]);
  char byte = 'x';
  OneFdMsg out(&byte, 1, ep);
  ASSERT_EQ(B().sendmsg(sv[0], out.msg(), 0), 1);
  ASSERT_EQ(Close(ep), 0);  // the sender's last number
  OneFdMsg in(&byte, 1);
  ASSERT_EQ(B().recvmsg(sv[1], in.msg(), 0), 1);
  int got = in.ReceivedFd();
  ASSERT_GE(got, 0);
  Track(got);
  KSignal(k1);
  EXPECT_EQ(Wait(got), (Evs{{EPOLLIN, 1}}));
  int k2 = KEventfd(1);
  EXPECT_EQ(Ctl(got, EPOLL_CTL_ADD, k2, EPOLLIN, 2), 0);
  EXPECT_EQ(Sorted(Wait(got)), (Evs{{EPOLLIN, 1}, {EPOLLIN, 2}}));
}

// A cycle through a kernel epoll that neither side alone can see:
//  W -(lt)- U -(lt)- K -(lt)- W     (K a kernel epoll; W a watchable
//                                    instance on uepoll, so that K can hold
//                                    it)
// Whichever link comes last is refused with ELOOP, and nothing is reported
// afterwards (before, the last link was accepted and an event circled
// forever).
TEST_P(BridgeCorners, CycleThroughAKernelEpollIsEloopWhicheverLinkIsLast) {
  for (int last = 0; last < 3; ++last) {
    SCOPED_TRACE(last);
    int W = Epoll(), U = Epoll();
    if (!IsKernel()) {
      ASSERT_EQ(uepoll_epoll_make_watchable(W), 0);
    }
    int K = KEpoll();
    epoll_event ev{};
    ev.events = EPOLLIN;
    auto link = [&](int i) {
      errno = 0;
      switch (i) {
        case 0:
          return Ctl(W, EPOLL_CTL_ADD, U, EPOLLIN, 1) == 0 ? 0 : errno;
        case 1:
          return Ctl(U, EPOLL_CTL_ADD, K, EPOLLIN, 2) == 0 ? 0 : errno;
        default:
          return ::epoll_ctl(K, EPOLL_CTL_ADD, W, &ev) == 0 ? 0 : errno;
      }
    };
    for (int i = 0; i < 3; ++i) {
      if (i != last) {
        ASSERT_EQ(link(i), 0) << i;
      }
    }
    EXPECT_EQ(link(last), ELOOP);
    EXPECT_TRUE(Wait(W).empty());
    EXPECT_TRUE(Wait(U).empty());
    epoll_event out{};
    EXPECT_EQ(::epoll_wait(K, &out, 1, 0), 0);
  }
}

// A nested instance ready on both sides at once (a uepoll event and a
// kernel one) is reported once per harvest, whichever half the parent's
// harvest serves first.
//  P -(lt)- C -(lt)- u (backend's eventfd), k (kernel eventfd)
TEST_P(BridgeCorners, ChildReadyOnBothSidesIsReportedOncePerHarvest) {
  int P = Epoll(), C = Epoll();
  int u = Eventfd();
  int k = KEventfd();
  ASSERT_EQ(Ctl(C, EPOLL_CTL_ADD, u, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(C, EPOLL_CTL_ADD, k, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(P, EPOLL_CTL_ADD, C, EPOLLIN, 3), 0);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    EfdWrite(u, 1);
    KSignal(k);
    EXPECT_EQ(Wait(P), (Evs{{EPOLLIN, 3}}));
    EXPECT_EQ(Wait(P), (Evs{{EPOLLIN, 3}})) << "level-triggered: again";
    EfdRead(u);
    uint64_t v;
    ASSERT_EQ(::read(k, &v, 8), 8);
    EXPECT_TRUE(Wait(P).empty());
  }
}

// fork(): in the child, a waiter of an instance above one that holds a
// kernel descriptor wakes for it, as in the parent (the child's instances
// have kernel halves of their own, nested as the parent's are).
//  t - P -(lt)- C -(lt)- k
TEST_P(BridgeCorners, ForkedChildWaiterWakesForAKernelDescriptorBelow) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int P = Epoll(), C = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(C, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
  ASSERT_EQ(Ctl(P, EPOLL_CTL_ADD, C, EPOLLIN, 8), 0);
  const Backend* b = &B();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A waiter already asleep when the event comes, then one that finds it.
    std::atomic<int> got{-1};
    std::atomic<uint64_t> data{0};
    std::atomic<pid_t> tid{0};
    std::thread t([&] {
      tid = Gettid();
      epoll_event ev{};
      got = b->epoll_wait(P, &ev, 1, 10000);
      data = ev.data.u64;
    });
    if (!Eventually([&] { return tid != 0; }) || !WaitUntilParked(tid)) {
      _exit(2);
    }
    uint64_t one = 1;
    if (::write(k, &one, 8) != 8) _exit(3);
    t.join();
    if (got != 1 || data != 8) _exit(4);
    epoll_event ev{};
    if (b->epoll_wait(P, &ev, 1, 0) != 1 || ev.data.u64 != 8) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's instances are untouched by the child's.
  EXPECT_EQ(Wait(P), (Evs{{EPOLLIN, 8}}));
}

// fork(): the child's instance keeps the kernel descriptors the parent's
// held, each with its events and its data (uepoll reads them back from the
// kernel at the fork and parses them: a level-triggered and an
// edge-triggered one, data with hexadecimal letters in both halves).
TEST_P(BridgeCorners, ForkedChildKeepsTheEventsAndDataOfKernelDescriptors) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  constexpr uint64_t kLevel = 0xabcdef12;
  constexpr uint64_t kEdge = 0x1234f00dcafeULL;
  int ep = Epoll();
  int lt = KEventfd(), et = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, lt, EPOLLIN, kLevel), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, et, EPOLLIN | EPOLLET, kEdge), 0);
  const Backend* b = &B();
  InForkedChild([&] {
    uint64_t one = 1;
    if (::write(lt, &one, 8) != 8 || ::write(et, &one, 8) != 8) _exit(2);
    epoll_event ev[4]{};
    if (b->epoll_wait(ep, ev, 4, 10000) != 2) _exit(3);
    bool level = false, edge = false;
    for (int i = 0; i < 2; ++i) {
      if (ev[i].events != EPOLLIN) _exit(4);
      level |= ev[i].data.u64 == kLevel;
      edge |= ev[i].data.u64 == kEdge;
    }
    if (!level || !edge) _exit(5);
    // Only the level-triggered one again: the other is edge-triggered.
    if (b->epoll_wait(ep, ev, 4, 0) != 1 || ev[0].data.u64 != kLevel) {
      _exit(6);
    }
  });
}

// The copy of the kernel registrations is made at the child's first
// operation on the instance (kernel/kernel_half.h, RebuildInChild); these
// reach it through each path that does not go through an epoll call on the
// instance itself. Each child exits with the number of the check that
// failed.

// poll() on the instance's number first.
TEST_P(BridgeCorners, ForkedChildPollSeesTheInheritedKernelDescriptors) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 5), 0);
  const Backend* b = &B();
  InForkedChild([&] {
    uint64_t one = 1;
    if (::write(k, &one, 8) != 8) _exit(2);
    pollfd p{ep, POLLIN, 0};
    if (b->poll(&p, 1, 10000) != 1 || p.revents != POLLIN) _exit(3);
    epoll_event ev{};
    if (b->epoll_wait(ep, &ev, 1, 0) != 1 || ev.data.u64 != 5) _exit(4);
  });
}

// The instance added to a new instance first: the new one's waiter wakes
// for the inherited kernel descriptor below.
TEST_P(BridgeCorners, ForkedChildNestsAnInheritedInstanceFirst) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int C = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(C, EPOLL_CTL_ADD, k, EPOLLIN, 5), 0);
  const Backend* b = &B();
  InForkedChild([&] {
    int P = b->epoll_create1(0);
    if (P < 0) _exit(2);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 9;
    if (b->epoll_ctl(P, EPOLL_CTL_ADD, C, &ev) != 0) _exit(3);
    uint64_t one = 1;
    if (::write(k, &one, 8) != 8) _exit(4);
    if (b->epoll_wait(P, &ev, 1, 10000) != 1 || ev.data.u64 != 9) _exit(5);
    if (b->epoll_wait(C, &ev, 1, 0) != 1 || ev.data.u64 != 5) _exit(6);
  });
}

// A child that forks again before using the instance: the grandchild gets
// the registrations (the copy still pending in the child is its source).
TEST_P(BridgeCorners, ForkedGrandchildKeepsTheRegistrations) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 5), 0);
  const Backend* b = &B();
  InForkedChild([&] {
    pid_t g = fork();
    if (g < 0) _exit(2);
    if (g == 0) {
      uint64_t one = 1;
      if (::write(k, &one, 8) != 8) _exit(3);
      epoll_event ev{};
      if (b->epoll_wait(ep, &ev, 1, 10000) != 1 || ev.data.u64 != 5) _exit(4);
      _exit(0);
    }
    int st = 0;
    if (waitpid(g, &st, 0) != g || !WIFEXITED(st)) _exit(5);
    if (WEXITSTATUS(st) != 0) _exit(10 + WEXITSTATUS(st));
    // And the child's own copy, made after its child's.
    epoll_event ev{};
    if (b->epoll_wait(ep, &ev, 1, 10000) != 1 || ev.data.u64 != 5) _exit(6);
  });
}

// A child that closes uepoll's private descriptors (as closefrom() does)
// and puts a file of its own at one of their numbers before its first call
// on the instance: that file is neither closed nor read as the inherited
// epoll (uepoll checks that its two copies of the inherited epoll still
// name one file, and here they do not). What the kernel does differs past
// that: its epoll is shared with the parent and keeps every registration,
// where uepoll's copy, its source gone, has none (docs/semantics.md D12).
TEST_P(BridgeCorners, ForkedChildThatReusesPrivateNumbersKeepsItsFile) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 5), 0);
  // A kernel epoll of the child's own, with a ready registration whose
  // data no check expects.
  int foreign = KEpoll();
  int ready = KEventfd(1);
  epoll_event fev{};
  fev.events = EPOLLIN;
  fev.data.u64 = 0xf0f0;
  ASSERT_EQ(::epoll_ctl(foreign, EPOLL_CTL_ADD, ready, &fev), 0);
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  int top = rl.rlim_cur < 1024 ? static_cast<int>(rl.rlim_cur) : 1024;
  const Backend* b = &B();
  InForkedChild([&] {
    // Every open number of the private range, closed; the first of them
    // (or the range's first) now names the foreign epoll.
    int first = -1;
    for (int n = top - 256; n < top; ++n) {
      if (n == ep || n == k || n == foreign || n == ready) continue;
      if (::fcntl(n, F_GETFD) >= 0) {
        if (first < 0) first = n;
        ::close(n);
      }
    }
    if (first < 0) first = top - 256;
    if (::dup2(foreign, first) != first) _exit(2);
    uint64_t one = 1;
    if (::write(k, &one, 8) != 8) _exit(3);
    epoll_event ev[4]{};
    int n = b->epoll_wait(ep, ev, 4, 100);
    if (n < 0) _exit(4);
    for (int i = 0; i < n; ++i) {
      if (ev[i].data.u64 == 0xf0f0) _exit(5);
    }
    // The child's file is still open, and still the foreign epoll.
    if (::fcntl(first, F_GETFD) < 0) _exit(6);
    if (::epoll_wait(first, ev, 4, 0) != 1 || ev[0].data.u64 != 0xf0f0) {
      _exit(7);
    }
  });
}

// fork() while another thread sleeps in an instance's kernel half (it holds
// a kernel descriptor): the child closes the instance's numbers, as a JVM's
// child does with every descriptor before exec, and goes on. The sleeper
// does not exist in the child; a close that waited for it to leave the
// kernel half spun forever (found with realprog.java's VFORK and FORK
// launch mechanisms). The child's alarm turns a hang into a failure.
TEST_P(BridgeCorners, ForkedChildClosesAnInstanceAnotherThreadSleepsIn) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
  int ep2 = B().dup(ep);
  ASSERT_GE(ep2, 0);
  const Backend* b = &B();
  std::atomic<int> got{-1};
  std::atomic<pid_t> tid{0};
  std::thread t([&] {
    tid = Gettid();
    epoll_event ev{};
    got = b->epoll_wait(ep, &ev, 1, kWaitMs);
  });
  ASSERT_TRUE(Eventually([&] { return tid != 0; }));
  ASSERT_TRUE(WaitUntilParked(tid));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(10);
    if (b->close(ep) != 0) _exit(2);
    if (b->close(ep2) != 0) _exit(3);
    // The child's own instances work.
    int e = b->epoll_create1(0);
    if (e < 0) _exit(4);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 9;
    if (b->epoll_ctl(e, EPOLL_CTL_ADD, k, &ev) != 0) _exit(5);
    uint64_t one = 1;
    if (::write(k, &one, 8) != 8) _exit(6);
    if (b->epoll_wait(e, &ev, 1, 0) != 1 || ev.data.u64 != 9) _exit(7);
    _exit(b->close(e) == 0 ? 0 : 8);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " : "exit status ")
      << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  // The parent's sleeper is untouched: the child's write (the eventfd is
  // shared) wakes it, in its own instance.
  t.join();
  EXPECT_EQ(got, 1);
  B().close(ep2);
}

// fork() while another thread is in the middle of a harvest of an instance
// (held in a user object's poll callback, with the instance's locks): the
// child closes the instance's numbers, and an instance that watches it,
// without waiting for a thread that is not there (CPython's subprocess
// with an asyncio loop on another thread hung so, in the child's
// close_range before exec). uepoll only: user objects have no kernel
// counterpart. The child's alarm turns a hang into a failure.
TEST(BridgeForkChild, ClosesInstancesAnotherThreadWasChanging) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  struct Gate {
    std::atomic<bool> armed{false}, entered{false}, open{false};
  } gate;
  static const uepoll_obj_ops ops = {[](void* ctx) -> uint32_t {
                                       auto* g = static_cast<Gate*>(ctx);
                                       if (!g->armed.load()) return 0;
                                       g->entered.store(true);
                                       while (!g->open.load())
                                         std::this_thread::yield();
                                       return EPOLLIN;
                                     },
                                     nullptr, nullptr, nullptr};
  uepoll_obj* obj = nullptr;
  int u = uepoll_obj_create(&ops, &gate, 0, &obj);
  ASSERT_GE(u, 0);
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  int ep2 = uepoll_dup(ep);
  ASSERT_GE(ep2, 0);
  int outer = uepoll_epoll_create1(0);
  ASSERT_GE(outer, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 5;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
  ASSERT_EQ(uepoll_epoll_ctl(outer, EPOLL_CTL_ADD, ep, &ev), 0);
  gate.armed.store(true);
  uepoll_obj_notify(obj, EPOLLIN);
  std::atomic<int> got{-1};
  std::thread c([&] {
    epoll_event e{};
    got = uepoll_epoll_wait(ep, &e, 1, kWaitMs);
  });
  bool in_poll = Eventually([&] { return gate.entered.load(); });
  pid_t pid = in_poll ? fork() : -1;
  if (pid == 0) {
    alarm(10);
    if (uepoll_close(ep) != 0) _exit(2);
    if (uepoll_close(ep2) != 0) _exit(3);
    if (uepoll_close(outer) != 0) _exit(4);
    // The child's own instances work.
    int e = uepoll_epoll_create1(0);
    int efd = uepoll_eventfd(1, 0);
    if (e < 0 || efd < 0) _exit(5);
    epoll_event v{};
    v.events = EPOLLIN;
    v.data.u64 = 9;
    if (uepoll_epoll_ctl(e, EPOLL_CTL_ADD, efd, &v) != 0) _exit(6);
    if (uepoll_epoll_wait(e, &v, 1, 0) != 1 || v.data.u64 != 9) _exit(7);
    _exit(uepoll_close(e) == 0 && uepoll_close(efd) == 0 ? 0 : 8);
  }
  int status = 0;
  pid_t waited = pid > 0 ? waitpid(pid, &status, 0) : -1;
  gate.open.store(true);
  c.join();
  ASSERT_TRUE(in_poll);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(waited, pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " : "exit status ")
      << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  // The parent's instances are whole: the harvest reported the object, and
  // the outer instance reports the inner one.
  EXPECT_EQ(got, 1);
  EXPECT_EQ(uepoll_epoll_wait(outer, &ev, 1, 0), 1);
  for (int fd : {outer, ep2, ep, u}) EXPECT_EQ(uepoll_close(fd), 0);
  uepoll_obj_put(obj);
}

// uepoll's own descriptors do not take the numbers the application gets:
// after this thread's first wait with a signal mask (which gives it its
// sleep descriptors, kept while it lives), the next descriptors the program
// opens have the numbers they would have had without it.
TEST_P(BridgeCorners, OwnDescriptorsLeaveTheLowNumbersFree) {
  int ep = Epoll();
  int want = ::dup(0);
  ASSERT_GE(want, 0);
  ::close(want);
  sigset_t mask;
  sigemptyset(&mask);
  epoll_event ev{};
  EXPECT_EQ(B().epoll_pwait(ep, &ev, 1, 1, &mask), 0);
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(fd, want);
  int e = Track(B().eventfd(0, 0));
  EXPECT_EQ(e, want + 1);
  ::close(fd);
}

// Whatever the soft limit, uepoll's own descriptors stay below 1024: the
// kernel's table grows to the highest open number, and every fork and
// posix_spawn copies it whole (a descriptor at the top of a limit of
// 20,000 cost each posix_spawn about 110 us; BENCHMARKS.md). A new
// thread's first wait with a signal mask gives it its sleep descriptors.
std::vector<int> OpenDescriptors() {
  std::vector<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  while (dirent* e = ::readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != ::dirfd(d)) fds.push_back(fd);
  }
  ::closedir(d);
  return fds;
}

TEST_P(BridgeCorners, OwnDescriptorsKeepTheKernelTableSmall) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  if (old.rlim_max < 4096) {
    GTEST_SKIP() << "the hard RLIMIT_NOFILE (" << old.rlim_max
                 << ") leaves no room above 1024";
  }
  rlimit raised = old;
  raised.rlim_cur = old.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &raised), 0);
  int ep = Epoll();
  std::vector<int> before = OpenDescriptors(), during;
  std::thread t([&] {
    sigset_t mask;
    sigemptyset(&mask);
    epoll_event ev{};
    EXPECT_EQ(B().epoll_pwait(ep, &ev, 1, 1, &mask), 0);
    during = OpenDescriptors();
  });
  t.join();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  std::vector<int> added;
  for (int fd : during) {
    if (std::find(before.begin(), before.end(), fd) == before.end()) {
      added.push_back(fd);
    }
  }
  if (!IsKernel()) {
    EXPECT_FALSE(added.empty()) << "the thread's sleep descriptors";
  }
  for (int fd : added) {
    EXPECT_LT(fd, 1024);
    EXPECT_GE(fd, 1024 - 256) << "out of the application's way";
  }
}

UEPOLL_INSTANTIATE_BACKENDS(BridgeCorners);

// min_wait (uepoll's own) on an instance holding kernel descriptors: the
// batch holds every kernel event ready when the phase ends, including one
// that came after the first kernel event had woken the waiter. The phase
// is ended by a signal (handled, no SA_RESTART): the harvest it then makes
// is the batch.
void NoopHandler(int) {}

class BridgeCornersMinWait : public BridgeTest {};

TEST_P(BridgeCornersMinWait, BatchHoldsKernelEventsThatCameAfterTheFirst) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = NoopHandler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  int ep = Epoll();
  int k1 = KEventfd(), k2 = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k1, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k2, EPOLLIN | EPOLLET, 2), 0);
  Waiter w([ep](epoll_event* ev) {
    timespec timeout{3600, 0};
    uepoll_wait_args a{};
    a.timeout = &timeout;
    a.min_wait_ns = 3600ull * 1000000000ull;
    return uepoll_epoll_pwait3(ep, ev, Waiter::kEvents, &a);
  });
  ASSERT_TRUE(w.Parked());
  KSignal(k1);
  ASSERT_TRUE(w.Parked()) << "one kernel event ended the phase";
  KSignal(k2);
  ASSERT_EQ(pthread_kill(w.handle(), SIGUSR1), 0);
  ASSERT_TRUE(w.WaitDone());
  sigaction(SIGUSR1, &old, nullptr);
  ASSERT_EQ(w.result(), 2);
  EXPECT_EQ(Sorted({{w.event(0).events, w.event(0).data.u64},
                    {w.event(1).events, w.event(1).data.u64}}),
            (Evs{{EPOLLIN, 1}, {EPOLLIN, 2}}));
  EXPECT_TRUE(Wait(ep).empty()) << "nothing reported twice";
}

INSTANTIATE_TEST_SUITE_P(Uepoll, BridgeCornersMinWait,
                         ::testing::Values(&UepollBackend()),
                         [](const auto& i) { return BackendName(i.param); });

}  // namespace
}  // namespace uepoll_test
