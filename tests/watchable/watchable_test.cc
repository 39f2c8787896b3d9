// Watchable instances (uepoll_epoll_make_watchable): the kernel's epoll,
// poll() and select() see a uepoll instance's own number readable exactly
// while the instance has events to report.
#include <dirent.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

int CountOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

class Watchable : public ::testing::Test {
 protected:
  void SetUp() override {
    ep_ = uepoll_epoll_create1(0);
    ASSERT_EQ(uepoll_epoll_make_watchable(ep_), 0);
    efd_ = uepoll_eventfd(0, EFD_NONBLOCK);
    kep_ = ::epoll_create1(EPOLL_CLOEXEC);
    ASSERT_GE(ep_, 0);
    ASSERT_GE(efd_, 0);
    ASSERT_GE(kep_, 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 7;
    ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, efd_, &ev), 0);
  }
  void TearDown() override {
    ::close(kep_);
    if (efd_ >= 0) uepoll_close(efd_);
    if (ep_ >= 0) uepoll_close(ep_);
    ExpectNoUepollLeaks();
  }
  void Signal() {
    uint64_t one = 1;
    ASSERT_EQ(uepoll_write(efd_, &one, 8), 8);
  }
  void Consume() {
    uint64_t v;
    ASSERT_EQ(uepoll_read(efd_, &v, 8), 8);
  }
  // Events the kernel epoll reports for the watched number now.
  int KernelReports(uint32_t* events = nullptr) {
    epoll_event out[4];
    int n = ::epoll_wait(kep_, out, 4, 0);
    if (n > 0 && events) *events = out[0].events;
    return n;
  }
  int Harvest() {
    epoll_event out[8];
    int n = uepoll_epoll_wait(ep_, out, 8, 0);
    for (int i = 0; i < n; ++i) EXPECT_EQ(out[i].data.u64, 7u);
    return n;
  }
  void Watch(uint32_t mode) {
    epoll_event ev{};
    ev.events = EPOLLIN | mode;
    ASSERT_EQ(::epoll_ctl(kep_, EPOLL_CTL_ADD, ep_, &ev), 0) << errno;
  }

  int ep_ = -1, efd_ = -1, kep_ = -1;
};

TEST_F(Watchable, level_triggered_watcher_sees_exactly_the_ready_periods) {
  Watch(0);
  EXPECT_EQ(KernelReports(), 0);
  Signal();
  uint32_t ev = 0;
  EXPECT_EQ(KernelReports(&ev), 1);
  EXPECT_EQ(ev, uint32_t{EPOLLIN});
  EXPECT_EQ(KernelReports(), 1) << "level-triggered: still ready";
  // The item is LT and still ready: a harvest leaves it queued.
  EXPECT_EQ(Harvest(), 1);
  EXPECT_EQ(KernelReports(), 1);
  Consume();
  // Idle now, but only a harvest can tell: one spurious report at most.
  EXPECT_EQ(Harvest(), 0);
  EXPECT_EQ(KernelReports(), 0) << "a harvest that found nothing disarms";
}

TEST_F(Watchable, edge_triggered_watcher_gets_one_edge_per_transition) {
  Watch(EPOLLET);
  Signal();
  EXPECT_EQ(KernelReports(), 1);
  EXPECT_EQ(KernelReports(), 0) << "one edge";
  Signal();  // more events in the same ready period: no new edge
  EXPECT_EQ(KernelReports(), 0);
  Consume();
  EXPECT_EQ(Harvest(), 0);
  Signal();  // a new transition to ready
  EXPECT_EQ(KernelReports(), 1);
}

// A disarmed mirror stays on the kernel half's ready list until something
// polls the kernel half, and an edge-triggered watcher never does: arming
// must still wake it. One harvest after each emptying, whichever half the
// harvest visits first (they alternate), so both orders are covered.
TEST_F(Watchable,
       edge_triggered_watcher_gets_an_edge_after_every_emptying_harvest) {
  Watch(EPOLLET);
  for (int round = 0; round < 6; ++round) {
    Signal();
    EXPECT_EQ(KernelReports(), 1) << "round " << round;
    EXPECT_EQ(Harvest(), 1);
    Consume();
    EXPECT_EQ(Harvest(), 0);
  }
}

// An event that arrives while a harvest scans (so behind it, on the
// overflow list) and a harvest that then reports nothing: the caller was
// told "nothing", so an edge-triggered watcher must get a new edge even
// though the mirror never went idle. The scan is held open by a user
// object whose poll, once, has another thread signal the eventfd and then
// answers "not ready" (a poll callback may not call uepoll itself).
TEST_F(Watchable, an_event_behind_an_empty_harvest_gets_an_edge) {
  struct Obj {
    std::atomic<bool> ready{true};
    std::atomic<bool> inject{false};
    int efd;
  } obj;
  obj.efd = efd_;
  uepoll_obj_ops ops{};
  ops.poll = [](void* ctx) -> uint32_t {
    auto* o = static_cast<Obj*>(ctx);
    if (o->inject.exchange(false)) {
      std::thread t([o] {
        uint64_t one = 1;
        EXPECT_EQ(uepoll_write(o->efd, &one, 8), 8);
      });
      t.join();
    }
    return o->ready.load() ? uint32_t{EPOLLIN} : 0u;
  };
  uepoll_obj* handle = nullptr;
  int ufd = uepoll_obj_create(&ops, &obj, O_NONBLOCK, &handle);
  ASSERT_GE(ufd, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 7;
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, ufd, &ev), 0);
  Watch(EPOLLET);
  EXPECT_EQ(KernelReports(), 1);
  EXPECT_EQ(Harvest(), 1);  // the object, queued again (LT)
  obj.ready = false;
  obj.inject = true;
  EXPECT_EQ(Harvest(), 0) << "the scan saw only the idle object";
  EXPECT_FALSE(obj.inject.load()) << "the scan polled the object";
  EXPECT_EQ(KernelReports(), 1) << "the eventfd's event needs an edge";
  EXPECT_EQ(Harvest(), 1);
  Consume();
  uepoll_close(ufd);
  uepoll_obj_put(handle);
}

TEST_F(Watchable, poll_and_select_see_the_number) {
  pollfd p{ep_, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  Signal();
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents, POLLIN);
  ASSERT_LT(ep_, FD_SETSIZE);
  fd_set rs;
  FD_ZERO(&rs);
  FD_SET(ep_, &rs);
  timeval tv{0, 0};
  EXPECT_EQ(::select(ep_ + 1, &rs, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(ep_, &rs));
}

TEST_F(Watchable, a_blocked_kernel_watcher_is_woken_from_another_thread) {
  Watch(0);
  Waiter w(
      [&](epoll_event* out) { return ::epoll_wait(kep_, out, 1, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  Signal();
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

TEST_F(Watchable, kernel_descriptors_and_nested_instances_count) {
  Watch(0);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 7;
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, p[0], &ev), 0);
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  EXPECT_EQ(KernelReports(), 1) << "a kernel pipe inside";
  char c;
  ASSERT_EQ(::read(p[0], &c, 1), 1);
  EXPECT_EQ(Harvest(), 0);
  EXPECT_EQ(KernelReports(), 0);
  int child = uepoll_epoll_create1(0);
  int cefd = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(child, 0);
  ASSERT_GE(cefd, 0);
  ASSERT_EQ(uepoll_epoll_ctl(child, EPOLL_CTL_ADD, cefd, &ev), 0);
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, child, &ev), 0);
  uint64_t one = 1;
  ASSERT_EQ(uepoll_write(cefd, &one, 8), 8);
  EXPECT_EQ(KernelReports(), 1) << "a nested uepoll instance";
  EXPECT_EQ(uepoll_close(cefd), 0);
  EXPECT_EQ(uepoll_close(child), 0);
  ::close(p[0]);
  ::close(p[1]);
}

TEST_F(Watchable, harvests_never_report_the_mirror) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 7;
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, p[0], &ev), 0);
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  Signal();
  // Both halves have an event; the mirror is armed. Every harvest returns
  // application events only (Harvest checks their data).
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Harvest(), 2);
  ::close(p[0]);
  ::close(p[1]);
}

// A kernel loop (or poll()) watching the instance wakes for a kernel
// descriptor held by an instance nested in it, with no uepoll thread
// running, whichever of the two ADDs came first: the nested instance's
// kernel half is registered in ours, so the kernel carries the event.
//  L(kernel) - W(watchable) -(lt)- C -(lt)- k(kernel)
TEST_F(Watchable, kernel_loop_wakes_for_a_kernel_descriptor_nested_below) {
  Watch(0);
  for (bool k_first : {true, false}) {
    SCOPED_TRACE(k_first ? "k into C, then C into W" : "C into W, then k");
    int c = uepoll_epoll_create1(0);
    int k = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(c, 0);
    ASSERT_GE(k, 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 7;
    auto add_k = [&] {
      ASSERT_EQ(uepoll_epoll_ctl(c, EPOLL_CTL_ADD, k, &ev), 0);
    };
    auto add_c = [&] {
      ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, c, &ev), 0);
    };
    if (k_first) {
      add_k();
      add_c();
    } else {
      add_c();
      add_k();
    }
    EXPECT_EQ(KernelReports(), 0);
    // Blocked in libc's epoll_wait before the event, woken by it.
    std::atomic<int> got{-1};
    Waiter w([&](epoll_event*) {
      epoll_event out[4];
      got = ::epoll_wait(kep_, out, 4, kWaitMs);
      return got.load();
    });
    ASSERT_TRUE(w.Parked());
    uint64_t one = 1;
    ASSERT_EQ(::write(k, &one, 8), 8);
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 1);
    pollfd pf{ep_, POLLIN, 0};
    EXPECT_EQ(::poll(&pf, 1, 0), 1);
    EXPECT_EQ(pf.revents, POLLIN);
    // The loop's harvest reports the nested instance (data 7), once.
    EXPECT_EQ(Harvest(), 1);
    uint64_t v;
    ASSERT_EQ(::read(k, &v, 8), 8);
    EXPECT_EQ(Harvest(), 0);
    EXPECT_EQ(KernelReports(), 0);
    EXPECT_EQ(uepoll_close(c), 0);
    ::close(k);
  }
}

// The mirror never takes the caller's slots. Its registration is armed
// while the uepoll half has events, and stays armed when they go idle
// without a harvest (a read, here): a harvest with maxevents 1 must then
// still return the ready kernel descriptor, whichever half it serves first.
TEST_F(Watchable, a_stale_mirror_does_not_hide_a_kernel_event) {
  int k = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(k, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 9;
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, k, &ev), 0);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    // Harvests serve the two halves first in turn: an odd round starts on
    // the other one.
    epoll_event skip{};
    if (round % 2) EXPECT_EQ(uepoll_epoll_wait(ep_, &skip, 1, 0), 0);
    Signal();   // arms the mirror
    Consume();  // idle again, the mirror still armed
    uint64_t one = 1;
    ASSERT_EQ(::write(k, &one, 8), 8);
    epoll_event out{};
    ASSERT_EQ(uepoll_epoll_wait(ep_, &out, 1, 0), 1);
    EXPECT_EQ(out.data.u64, 9u);
    uint64_t v;
    ASSERT_EQ(::read(k, &v, 8), 8);
    EXPECT_EQ(uepoll_epoll_wait(ep_, &out, 1, 0), 0);
  }
  ::close(k);
}

// With a uepoll event and a kernel descriptor ready, epoll_wait with
// maxevents 1 never returns 0, and an edge-triggered loop that harvests
// with maxevents 1 until empty gets both.
TEST_F(Watchable, maxevents_one_is_never_taken_by_the_mirror) {
  int k = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(k, 0);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = 9;
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, k, &ev), 0);
  ev.data.u64 = 7;
  ASSERT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_MOD, efd_, &ev), 0);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    Signal();  // arms the mirror
    uint64_t one = 1;
    ASSERT_EQ(::write(k, &one, 8), 8);
    std::vector<uint64_t> seen;
    for (int i = 0; i < 4; ++i) {
      epoll_event out{};
      int n = uepoll_epoll_wait(ep_, &out, 1, 0);
      if (n == 0) break;
      ASSERT_EQ(n, 1);
      seen.push_back(out.data.u64);
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<uint64_t>{7, 9}));
  }
  ::close(k);
}

// fork(): the child's instances have kernel halves of their own, so a
// child that harvests and empties its copy of the instance leaves the
// parent's kernel face as it was: the parent's kernel loop still sees the
// instance readable while the parent's copy has events.
TEST_F(Watchable, forked_child_harvest_leaves_the_parent_armed) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  Watch(0);
  Signal();
  ASSERT_EQ(KernelReports(), 1);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    epoll_event out[4];
    if (uepoll_epoll_wait(ep_, out, 4, 0) != 1) _exit(2);
    uint64_t v;
    if (uepoll_read(efd_, &v, 8) != 8) _exit(3);
    if (uepoll_epoll_wait(ep_, out, 4, 0) != 0) _exit(4);
    // The child's own kernel face follows the child's copy (kep_ is the
    // parent's loop too, and watches the parent's face).
    int mine = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (::epoll_ctl(mine, EPOLL_CTL_ADD, ep_, &ev) != 0) _exit(5);
    if (::epoll_wait(mine, out, 4, 0) != 0) _exit(6);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(KernelReports(), 1) << "the parent's instance still has its event";
  EXPECT_EQ(Harvest(), 1);
}

// A failed dup2 onto a watchable instance's number changes nothing: the
// kernel loop still sees it.
TEST_F(Watchable, failed_dup2_onto_the_instance_changes_nothing) {
  Watch(0);
  int bad = ::dup(0);
  ASSERT_GE(bad, 0);
  ::close(bad);
  errno = 0;
  EXPECT_EQ(uepoll_dup2(bad, ep_), -1);
  EXPECT_EQ(errno, EBADF);
  Signal();
  EXPECT_EQ(KernelReports(), 1);
  EXPECT_EQ(Harvest(), 1);
}

TEST(WatchableSetup, only_watchable_instances_join_a_kernel_epoll) {
  int ep = uepoll_epoll_create1(0);
  int kep = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  errno = 0;
  EXPECT_EQ(uepoll_epoll_ctl(kep, EPOLL_CTL_ADD, ep, &ev), -1);
  EXPECT_EQ(errno, EPERM) << "not watchable: its uepoll events are not seen";
  EXPECT_EQ(uepoll_epoll_make_watchable(ep), 0);
  EXPECT_EQ(uepoll_epoll_make_watchable(ep), 0) << "again: nothing to do";
  EXPECT_EQ(uepoll_epoll_ctl(kep, EPOLL_CTL_ADD, ep, &ev), 0);
  int efd = uepoll_eventfd(0, 0);
  EXPECT_EQ(uepoll_epoll_make_watchable(efd), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_epoll_make_watchable(-1), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(uepoll_close(efd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  ::close(kep);
  ExpectNoUepollLeaks();
}

TEST(WatchableSetup, loops_through_the_kernel_are_refused) {
  int ep = uepoll_epoll_create1(0);
  int kep = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  ASSERT_EQ(uepoll_epoll_make_watchable(ep), 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, ep, &ev), -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(::epoll_ctl(kep, EPOLL_CTL_ADD, ep, &ev), 0);
  EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, kep, &ev), -1);
  EXPECT_EQ(errno, ELOOP);
  EXPECT_EQ(uepoll_close(ep), 0);
  ::close(kep);
  ExpectNoUepollLeaks();
}

TEST(WatchableSetup, closing_the_instance_releases_its_kernel_descriptors) {
  int before = CountOpenFds();
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  ASSERT_EQ(uepoll_epoll_make_watchable(ep), 0);
  int dup = uepoll_dup(ep);
  ASSERT_GE(dup, 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  // The dup keeps the instance, watchable: its number is a kernel epoll.
  int kep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT_EQ(::epoll_ctl(kep, EPOLL_CTL_ADD, dup, &ev), 0);
  ::close(kep);
  EXPECT_EQ(uepoll_close(dup), 0);
  EXPECT_EQ(CountOpenFds(), before) << "the mirror or the kernel half leaked";
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
