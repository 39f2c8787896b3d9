// The callback contract of user-defined objects (uepoll_obj_create), where
// no kernel object compares: argument errors, when release runs (once, at
// the last close, never for a failed create), what notify does after the
// last close, how callback results are checked, that read and write run
// with the descriptor pinned (a callback may close it), and, in debug
// builds, that the misuses a poll callback can commit end in a message
// instead of a deadlock.
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

// A test object whose callbacks do what each test says.
struct Probe {
  std::atomic<uint32_t> mask{0};
  std::atomic<int> polls{0};
  std::atomic<int> releases{0};
  ssize_t (*on_read)(Probe*, void*, size_t) = nullptr;
  uepoll_obj* obj = nullptr;
  int fd = -1;
  int ep = -1;  // for the misuse tests
};

uint32_t ProbePoll(void* ctx) {
  auto* p = static_cast<Probe*>(ctx);
  p->polls.fetch_add(1);
  return p->mask.load();
}
ssize_t ProbeRead(void* ctx, void* buf, size_t n) {
  auto* p = static_cast<Probe*>(ctx);
  return p->on_read ? p->on_read(p, buf, n) : -EAGAIN;
}
void ProbeRelease(void* ctx) {
  static_cast<Probe*>(ctx)->releases.fetch_add(1);
}

const uepoll_obj_ops kProbeOps = {&ProbePoll, &ProbeRead, nullptr,
                                  &ProbeRelease};

class UserCallbacks : public ::testing::Test {
 protected:
  int Create(Probe* p, int flags = O_NONBLOCK) {
    p->fd = uepoll_obj_create(&kProbeOps, p, flags, &p->obj);
    EXPECT_GE(p->fd, 0) << strerror(errno);
    return p->fd;
  }
  void TearDown() override { ExpectNoUepollLeaks(); }
};

TEST_F(UserCallbacks, CreateErrors) {
  Probe p;
  uepoll_obj* h = reinterpret_cast<uepoll_obj*>(&p);
  EXPECT_EQ(uepoll_obj_create(&kProbeOps, &p, O_RDWR, &h), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_obj_create(nullptr, &p, 0, &h), -1);
  EXPECT_EQ(errno, EFAULT);
  uepoll_obj_ops no_poll = kProbeOps;
  no_poll.poll = nullptr;
  EXPECT_EQ(uepoll_obj_create(&no_poll, &p, 0, &h), -1);
  EXPECT_EQ(errno, EINVAL);
  // A failed create leaves *objp alone and never calls release.
  EXPECT_EQ(h, reinterpret_cast<uepoll_obj*>(&p));
  EXPECT_EQ(p.releases.load(), 0);
}

TEST_F(UserCallbacks, FailedCreatesChangeNothing) {
  Probe p;
  uepoll_obj* h = nullptr;
  // Out of descriptors: EMFILE. uepoll numbers are the kernel's, so
  // RLIMIT_NOFILE set to the lowest free number leaves none.
  int lowest = ::dup(0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = static_cast<rlim_t>(lowest);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  int r = uepoll_obj_create(&kProbeOps, &p, 0, &h);
  int err = errno;
  setrlimit(RLIMIT_NOFILE, &old);
  EXPECT_EQ(r, -1);
  EXPECT_EQ(err, EMFILE);
  // Out of memory: ENOMEM.
  ASSERT_EQ(uepoll_debug_fail_alloc(1), 0);
  EXPECT_EQ(uepoll_obj_create(&kProbeOps, &p, 0, &h), -1);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(p.releases.load(), 0);
}

TEST_F(UserCallbacks, ReleaseRunsOnceAtTheLastClose) {
  Probe p;
  int fd = Create(&p);
  int d = uepoll_dup(fd);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  ASSERT_EQ(uepoll_close(fd), 0);
  EXPECT_EQ(p.releases.load(), 0);
  ASSERT_EQ(uepoll_close(d), 0);
  EXPECT_EQ(p.releases.load(), 1);
  // The item went with the object; polls stopped with it.
  int polls = p.polls.load();
  epoll_event out;
  EXPECT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 0);
  // The owner's handle outlives the descriptors: notify does nothing.
  uepoll_obj_notify(p.obj, EPOLLIN);
  EXPECT_EQ(p.polls.load(), polls);
  uepoll_obj_put(p.obj);
  uepoll_close(ep);
  EXPECT_EQ(p.releases.load(), 1);
}

TEST_F(UserCallbacks, CreateWithoutAHandle) {
  Probe p;
  int fd = uepoll_obj_create(&kProbeOps, &p, 0, nullptr);
  ASSERT_GE(fd, 0);
  p.mask = EPOLLOUT;
  struct pollfd q {};
  q.fd = fd;
  q.events = POLLOUT;
  EXPECT_EQ(uepoll_poll(&q, 1, 0), 1);
  ASSERT_EQ(uepoll_close(fd), 0);
  EXPECT_EQ(p.releases.load(), 1);
}

TEST_F(UserCallbacks, NotifyWithoutWatchersDoesNotPoll) {
  Probe p;
  Create(&p);
  int before = p.polls.load();
  for (int i = 0; i < 1000; ++i) uepoll_obj_notify(p.obj, EPOLLIN);
  EXPECT_EQ(p.polls.load(), before);
  uepoll_obj_notify(nullptr, EPOLLIN);  // ignored, not a crash
  uepoll_obj_put(nullptr);
  uepoll_close(p.fd);
  uepoll_obj_put(p.obj);
}

TEST_F(UserCallbacks, FlagBitsInAPollAnswerAreDropped) {
  Probe p;
  Create(&p);
  p.mask =
      EPOLLIN | EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | uint32_t(POLLNVAL);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, p.fd, &ev), 0);
  epoll_event out{};
  ASSERT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 1);
  EXPECT_EQ(out.events, uint32_t(EPOLLIN));
  uepoll_close(ep);
  uepoll_close(p.fd);
  uepoll_obj_put(p.obj);
}

TEST_F(UserCallbacks, ReadResultsAreChecked) {
  Probe p;
  Create(&p);
  char buf[8];
  p.on_read = [](Probe*, void*, size_t) -> ssize_t { return 100; };
  EXPECT_EQ(uepoll_read(p.fd, buf, 8), 8);  // clamped to count
  p.on_read = [](Probe*, void*, size_t) -> ssize_t { return -ENOSPC; };
  EXPECT_EQ(uepoll_read(p.fd, buf, 8), -1);
  EXPECT_EQ(errno, ENOSPC);
  p.on_read = [](Probe*, void*, size_t) -> ssize_t { return -100000; };
  EXPECT_EQ(uepoll_read(p.fd, buf, 8), -1);
  EXPECT_EQ(errno, EIO);
  p.on_read = [](Probe*, void*, size_t) -> ssize_t { return 0; };
  EXPECT_EQ(uepoll_read(p.fd, buf, 8), 0);
  // No write callback: EINVAL, as for a file without write.
  EXPECT_EQ(uepoll_write(p.fd, buf, 8), -1);
  EXPECT_EQ(errno, EINVAL);
  uepoll_close(p.fd);
  uepoll_obj_put(p.obj);
}

TEST_F(UserCallbacks, AReadCallbackMayCloseItsOwnDescriptor) {
  Probe p;
  Create(&p);
  // Another thread makes the number borrowable, as a shared one would be.
  std::thread([&] {
    char c;
    p.on_read = nullptr;
    uepoll_read(p.fd, &c, 1);
  }).join();
  p.on_read = [](Probe* self, void*, size_t) -> ssize_t {
    // Without the pin, this close would wait for this very thread's
    // borrow of the descriptor.
    EXPECT_EQ(uepoll_close(self->fd), 0);
    EXPECT_EQ(self->releases.load(), 0);  // the read still holds it
    return 0;
  };
  char c;
  EXPECT_EQ(uepoll_read(p.fd, &c, 1), 0);
  EXPECT_EQ(p.releases.load(), 1);
  uepoll_obj_put(p.obj);
}

TEST_F(UserCallbacks, BlockingReadSleepsUntilNotifiedAndReady) {
  Probe p;
  Create(&p, 0);
  p.on_read = [](Probe* self, void* buf, size_t) -> ssize_t {
    if (!(self->mask.load() & EPOLLIN)) return -EAGAIN;
    std::memcpy(buf, "!", 1);
    return 1;
  };
  char got = 0;
  Waiter w([&](epoll_event*) { return int(uepoll_read(p.fd, &got, 1)); });
  ASSERT_TRUE(w.Parked());
  // A notify while not ready: the reader wakes, polls, sleeps again.
  uepoll_obj_notify(p.obj, EPOLLIN);
  ASSERT_TRUE(w.Parked());
  p.mask = EPOLLIN;
  uepoll_obj_notify(p.obj, EPOLLIN);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(got, '!');
  uepoll_close(p.fd);
  uepoll_obj_put(p.obj);
}

// --- what happens while a poll callback runs ------------------------------
//
// A user object whose poll, once armed, reads its state and then holds
// until another thread has done something: a window of a few instructions
// in the engine, which a stress test hits only when the scheduler helps,
// made as wide as a test wants. (A poll callback must not block; this one
// waits for a thread that takes none of the locks it runs under, which the
// contract promises of the wakeup path.)
struct HeldPoll {
  std::atomic<uint32_t> mask{0};
  std::atomic<bool> hold{false};     // the next poll holds
  std::atomic<int> step{0};          // 1: that poll read the state; 2: done
  std::atomic<bool> gave_up{false};  // the other thread never came
  uepoll_obj* obj = nullptr;
};

uint32_t PollThenHold(void* ctx) {
  auto* p = static_cast<HeldPoll*>(ctx);
  uint32_t m = p->mask.load();
  if (p->hold.exchange(false)) {
    p->step.store(1);
    // Bounded: an engine that made the other thread wait for this poll
    // fails the test instead of hanging it.
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (p->step.load() != 2) {
      if (std::chrono::steady_clock::now() > end) {
        p->gave_up = true;
        break;
      }
      std::this_thread::yield();
    }
  }
  return m;
}

const uepoll_obj_ops kHeldPollOps = {&PollThenHold, nullptr, nullptr, nullptr};

// Runs `call` here, which must poll p, and `during` on another thread while
// that poll holds; returns what `call` returned.
template <class Call, class During>
int WithPollHeld(HeldPoll& p, Call call, During during) {
  std::atomic<bool> returned{false};
  p.step = 0;
  p.hold = true;
  std::thread other([&] {
    while (p.step.load() == 0 && !returned.load()) std::this_thread::yield();
    if (p.step.load() != 1) return;
    during();
    p.step.store(2);
  });
  int r = call();
  returned = true;
  other.join();
  EXPECT_EQ(p.step.load(), 2) << "the call did not poll the object";
  EXPECT_FALSE(p.gave_up.load())
      << "the other thread could not act while the poll ran";
  p.hold = false;
  return r;
}

// ADD hooks the item's wait entry before it polls the object (the kernel's
// ep_insert hooks inside the poll itself): a notify made while that poll
// runs, after the callback read the object's state, reaches the item.
TEST_F(UserCallbacks, ANotifyWhileAddPollsReachesTheItem) {
  for (uint32_t mode : {0u, uint32_t(EPOLLET)}) {
    SCOPED_TRACE(mode ? "EPOLLET" : "level-triggered");
    HeldPoll p;
    int fd = uepoll_obj_create(&kHeldPollOps, &p, O_NONBLOCK, &p.obj);
    ASSERT_GE(fd, 0) << strerror(errno);
    int ep = uepoll_epoll_create1(0);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN | mode;
    ev.data.u64 = 7;
    int r = WithPollHeld(
        p, [&] { return uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev); },
        [&] {
          p.mask = EPOLLIN;
          uepoll_obj_notify(p.obj, EPOLLIN);
        });
    EXPECT_EQ(r, 0);
    epoll_event out{};
    EXPECT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 1);
    EXPECT_EQ(out.events, uint32_t(EPOLLIN));
    EXPECT_EQ(out.data.u64, 7u);
    uepoll_close(ep);
    uepoll_close(fd);
    uepoll_obj_put(p.obj);
  }
}

// An item that becomes ready while a harvest runs (the kernel's ovflist)
// goes after the items that harvest did not reach, and before the
// level-triggered items it reported (ep_done_scan splices the untouched
// part of its list back in front): a harvest of one event from R, B, C
// while D becomes ready leaves B, C, D, R.
TEST_F(UserCallbacks, AnArrivalDuringAHarvestGoesAfterTheItemsItDidNotReach) {
  HeldPoll r;
  r.mask = EPOLLIN;
  int rfd = uepoll_obj_create(&kHeldPollOps, &r, O_NONBLOCK, &r.obj);
  ASSERT_GE(rfd, 0) << strerror(errno);
  int b = uepoll_vpoll_create(EPOLLIN, O_NONBLOCK);
  int c = uepoll_vpoll_create(EPOLLIN, O_NONBLOCK);
  int d = uepoll_vpoll_create(0, O_NONBLOCK);
  ASSERT_GE(b, 0);
  ASSERT_GE(c, 0);
  ASSERT_GE(d, 0);
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  const int fds[] = {rfd, b, c, d};
  for (int i = 0; i < 4; ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(i);  // R 0, B 1, C 2, D 3
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev), 0);
  }
  epoll_event out[5]{};
  int n = WithPollHeld(
      r, [&] { return uepoll_epoll_wait(ep, out, 1, 0); },
      [&] { uepoll_vpoll_ctl(d, UEPOLL_VPOLL_ADDEVENTS, EPOLLIN); });
  ASSERT_EQ(n, 1);
  EXPECT_EQ(out[0].data.u64, 0u);
  n = uepoll_epoll_wait(ep, out, 5, 0);
  ASSERT_EQ(n, 4);
  std::string order;
  for (int i = 0; i < n; ++i) order += "RBCD"[out[i].data.u64 & 3];
  EXPECT_EQ(order, "BCDR");
  uepoll_close(ep);
  for (int fd : fds) uepoll_close(fd);
  uepoll_obj_put(r.obj);
}

// --- misuse, debug builds only ---------------------------------------------

#ifndef NDEBUG
uint32_t PollThatNotifies(void* ctx) {
  uepoll_obj_notify(static_cast<Probe*>(ctx)->obj, EPOLLIN);
  return 0;
}
uint32_t PollThatReentersItsInstance(void* ctx) {
  auto* p = static_cast<Probe*>(ctx);
  epoll_event ev{};
  ev.events = EPOLLOUT;
  uepoll_epoll_ctl(p->ep, EPOLL_CTL_MOD, p->fd, &ev);
  return 0;
}
uint32_t PollThatPolls(void* ctx) {
  struct pollfd q {};
  q.fd = static_cast<Probe*>(ctx)->fd;
  q.events = POLLIN;
  uepoll_poll(&q, 1, 0);
  return 0;
}

void WatchWith(uint32_t (*poll)(void*), Probe* p) {
  uepoll_obj_ops ops = {poll, nullptr, nullptr, nullptr};
  p->ep = uepoll_epoll_create1(0);
  p->fd = uepoll_obj_create(&ops, p, 0, &p->obj);
  epoll_event ev{};
  ev.events = EPOLLIN;
  // ADD polls the object, under the instance's mtx_.
  uepoll_epoll_ctl(p->ep, EPOLL_CTL_ADD, p->fd, &ev);
}

TEST(UserCallbacksDeathTest, NotifyFromPollAborts) {
  Probe p;
  EXPECT_DEATH(WatchWith(&PollThatNotifies, &p),
               "notify called from a poll callback");
}

TEST(UserCallbacksDeathTest, PollReenteringItsInstanceAborts) {
  Probe p;
  EXPECT_DEATH(WatchWith(&PollThatReentersItsInstance, &p),
               "deadlock: this thread tries to take a uepoll lock it already "
               "holds \\(inside the poll callback of a user object");
}

TEST(UserCallbacksDeathTest, PollCallingUepollAborts) {
  Probe p;
  EXPECT_DEATH(WatchWith(&PollThatPolls, &p),
               "a poll callback called into uepoll");
}
#endif

}  // namespace
}  // namespace uepoll_test
