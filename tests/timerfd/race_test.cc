// A timer's expiry held while it runs (TimerQueue::SetFireHookForTest), on
// the timer thread or on a parked thread keeping the timers, while the
// owner re-arms, disarms and closes the timer, and while the thread that
// runs it is cancelled: every interleaving the stress tests can only hope
// to hit (tests/stress/timer_stress_test.cc), made deterministic. uepoll
// only: the kernel's expiries run in its interrupt, which nothing holds.
//
// What the kernel guarantees, and these tests check: settime re-decides
// against an expiry in progress (a disarmed timer does not become
// readable; a re-armed one expires at its new time, once); a close waits
// out a running expiry (hrtimer_cancel) and leaves nothing queued; an
// expiry is never cut in half by a thread's cancellation.
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include <uepoll/uepoll.h>

#include "threads/waiter.h"
#include "timer/timer_queue.h"
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

using uepoll::impl::TimerNode;
using uepoll::impl::TimerQueue;

// The next fire blocks the thread that runs it until Release(): a pipe
// handshake each way (kernel pipes, so that the test thread never parks in
// uepoll, where it could become the thread that runs the expiry).
struct HeldFire {
  int entered[2] = {-1, -1};
  int release[2] = {-1, -1};
  std::atomic<bool> armed{false};
  std::atomic<pid_t> firer{0};
  // With this set, the held fire cancels its own thread and reaches a
  // cancellation point before it returns, as a fire whose wakeups write a
  // kernel eventfd does (a watchable instance).
  std::atomic<bool> cancel_self{false};
};
HeldFire* g_held = nullptr;

void HoldHook(TimerNode*) {
  HeldFire* h = g_held;
  if (!h || !h->armed.exchange(false)) return;
  h->firer.store(Gettid());
  char c = 1;
  (void)!::write(h->entered[1], &c, 1);
  (void)!::read(h->release[0], &c, 1);
  if (h->cancel_self.load()) {
    pthread_cancel(pthread_self());
    pthread_testcancel();
  }
}

class TimerRace : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe(held_.entered), 0);
    ASSERT_EQ(::pipe(held_.release), 0);
    g_held = &held_;
    TimerQueue::SetFireHookForTest(&HoldHook);
  }
  void TearDown() override {
    TimerQueue::SetFireHookForTest(nullptr);
    g_held = nullptr;
    for (int fd : {held_.entered[0], held_.entered[1], held_.release[0],
                   held_.release[1]}) {
      ::close(fd);
    }
  }
  void HoldNextFire() { held_.armed.store(true); }
  // Waits (bounded) until a fire is held.
  bool FireHeld() {
    pollfd p{held_.entered[0], POLLIN, 0};
    if (::poll(&p, 1, kExpiryWaitMs) != 1) return false;
    char c;
    return ::read(held_.entered[0], &c, 1) == 1;
  }
  void ReleaseFire() {
    char c = 1;
    ASSERT_EQ(::write(held_.release[1], &c, 1), 1);
  }
  // With t's fire held: re-arms t 30 ms from now (relative, so on the
  // monotonic clock), releases the fire, and expects t readable no sooner
  // than that, with one tick, and nothing left armed.
  void RearmHeldTimerAndExpectOneExpiry30MsLater(int t, const char* early) {
    int64_t rearmed = ClockNs(CLOCK_MONOTONIC);
    itimerspec v = Spec(30 * kMs);
    ASSERT_EQ(uepoll_timerfd_settime(t, 0, &v, nullptr), 0);
    ReleaseFire();
    pollfd p{t, POLLIN, 0};
    ASSERT_EQ(uepoll_poll(&p, 1, kExpiryWaitMs), 1);
    EXPECT_GE(ClockNs(CLOCK_MONOTONIC) - rearmed, 30 * kMs) << early;
    uint64_t ticks = 0;
    ASSERT_EQ(uepoll_read(t, &ticks, 8), 8);
    EXPECT_EQ(ticks, 1u);
    EXPECT_EQ(TimerQueue::Get().armed(), 0);
  }
  HeldFire held_;
};

int UTimer() {
  int fd = uepoll_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  EXPECT_GE(fd, 0);
  return fd;
}

int USet(int fd, int64_t value_ns, int64_t interval_ns = 0) {
  itimerspec v = Spec(value_ns, interval_ns);
  return uepoll_timerfd_settime(fd, 0, &v, nullptr);
}

int UEpollWith(int fd, uint64_t data) {
  int ep = uepoll_epoll_create1(0);
  EXPECT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = data;
  EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  return ep;
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return uepoll_poll(&p, 1, 0) == 1;
}

// A thread blocked in a read of a blocking eventfd: a sleep that may not
// keep (docs/design.md, "Timers"), so that while it is parked the timer
// thread runs every expiry at its time, whatever an earlier test left (a
// keeper that left with nobody parked leaves expiries to whoever looks
// next, which here would be the test thread itself).
struct Bystander {
  int efd = uepoll_eventfd(0, 0);
  Waiter w{[this](epoll_event*) {
    uint64_t v;
    return int(uepoll_read(efd, &v, 8));
  }};
  ~Bystander() {
    uint64_t one = 1;
    uepoll_write(efd, &one, 8);
    w.WaitDone();
    uepoll_close(efd);
  }
};

// A thread parked in epoll_wait on an eventfd's instance that keeps the
// timers, with the timer thread dormant (as keeper_test.cc's DormantSetup):
// the expiry of `cover_fd`, armed `cover_ns` ahead, is then run by it.
struct Keeper {
  int efd = -1, ep = -1, early = -1;
  std::unique_ptr<Waiter> w;
  bool Start(int cover_fd, int64_t cover_ns) {
    efd = uepoll_eventfd(0, EFD_NONBLOCK);
    ep = UEpollWith(efd, 1);
    early = UTimer();
    if (USet(cover_fd, cover_ns) != 0) return false;
    w = std::make_unique<Waiter>([this](epoll_event* evs) {
      return uepoll_epoll_wait(ep, evs, Waiter::kEvents, kWaitMs);
    });
    if (!w->Parked()) return false;
    if (!Eventually([] { return TimerQueue::Get().has_keeper(); })) {
      return false;
    }
    // The timer thread runs this one, then finds the keeper covering what
    // is left and sleeps with no timeout.
    if (USet(early, 2 * kMs) != 0) return false;
    return Eventually([] { return TimerQueue::Get().thread_dormant(); });
  }
  ~Keeper() {
    if (w && !w->Done()) {
      uint64_t one = 1;
      uepoll_write(efd, &one, 8);
    }
    w.reset();
    uepoll_close(early);
    uepoll_close(ep);
    uepoll_close(efd);
  }
};

// The timer is re-armed (later than the expiry being run) and closed while
// its expiry runs on `firer`: the close waits for the expiry to return, and
// afterwards nothing of the timer is queued (the expiry put it back on the
// queue after the close had taken it off; the queue later ran freed
// memory).
void CloseAfterRearmWhileFiring(HeldFire& held, int t, pid_t not_firer) {
  ASSERT_EQ(USet(t, 10 * kSec), 0);  // re-armed while its expiry runs
  EXPECT_EQ(TimerQueue::Get().armed(), 1);
  std::atomic<bool> closed{false};
  std::thread closer([&] {
    EXPECT_EQ(uepoll_close(t), 0);
    closed.store(true);
  });
  // The close took it off the queue, and now waits for the expiry.
  EXPECT_TRUE(Eventually([] { return TimerQueue::Get().armed() == 0; }));
  // (A close that did not wait would be done by now; this bounded look
  // can miss such a close, never fail a correct one.)
  EXPECT_FALSE(
      Eventually([&] { return closed.load(); }, std::chrono::milliseconds(100)))
      << "the close did not wait for the running expiry";
  EXPECT_NE(held.firer.load(), not_firer);
  char c = 1;
  ASSERT_EQ(::write(held.release[1], &c, 1), 1);
  closer.join();
  EXPECT_EQ(TimerQueue::Get().armed(), 0)
      << "the running expiry put the closed timer back on the queue";
}

TEST_F(TimerRace, CloseAfterARearmWhileTheTimerThreadRunsTheExpiry) {
  auto by = std::make_unique<Bystander>();
  ASSERT_TRUE(by->w.Parked());
  int t = UTimer();
  HoldNextFire();
  ASSERT_EQ(USet(t, 1 * kMs), 0);
  ASSERT_TRUE(FireHeld());
  CloseAfterRearmWhileFiring(held_, t, Gettid());
  by.reset();
  ExpectNoUepollLeaks();
}

TEST_F(TimerRace, CloseAfterARearmWhileAKeeperRunsTheExpiry) {
  int t = UTimer();
  {
    Keeper k;
    ASSERT_TRUE(k.Start(t, 300 * kMs));
    HoldNextFire();
    ASSERT_TRUE(FireHeld());
    CloseAfterRearmWhileFiring(held_, t, Gettid());
  }
  ExpectNoUepollLeaks();
}

// settime re-decides against an expiry in progress, as the kernel's
// hrtimer_try_to_cancel does: a timer disarmed while its expiry runs does
// not become readable, and one re-armed later expires at its new time.
TEST_F(TimerRace, DisarmWhileTheExpiryRunsLeavesTheTimerUnread) {
  auto by = std::make_unique<Bystander>();
  ASSERT_TRUE(by->w.Parked());
  int t = UTimer();
  HoldNextFire();
  ASSERT_EQ(USet(t, 1 * kMs), 0);
  ASSERT_TRUE(FireHeld());
  ASSERT_EQ(USet(t, 0), 0);
  ReleaseFire();
  // The held expiry has returned once the queue is idle again: a later
  // timer's expiry is run after it (fire_mu_ orders them).
  int probe = UTimer();
  ASSERT_EQ(USet(probe, 1 * kMs), 0);
  pollfd p{probe, POLLIN, 0};
  ASSERT_EQ(uepoll_poll(&p, 1, kExpiryWaitMs), 1);
  EXPECT_FALSE(Readable(t)) << "a disarmed timer expired";
  itimerspec cur;
  ASSERT_EQ(uepoll_timerfd_gettime(t, &cur), 0);
  EXPECT_EQ(Ns(cur.it_value), 0);
  EXPECT_EQ(TimerQueue::Get().armed(), 0);
  uepoll_close(probe);
  uepoll_close(t);
  by.reset();
  ExpectNoUepollLeaks();
}

TEST_F(TimerRace, RearmWhileTheExpiryRunsExpiresAtTheNewTimeOnce) {
  auto by = std::make_unique<Bystander>();
  ASSERT_TRUE(by->w.Parked());
  int t = UTimer();
  HoldNextFire();
  ASSERT_EQ(USet(t, 1 * kMs), 0);
  ASSERT_TRUE(FireHeld());
  RearmHeldTimerAndExpectOneExpiry30MsLater(
      t, "the expiry of the old arming made the re-armed timer readable");
  uepoll_close(t);
  by.reset();
  ExpectNoUepollLeaks();
}

// The expiry runs with the clock the queue read when it found it due, and
// that reading is of the clock the timer was queued on. A CLOCK_REALTIME
// timerfd armed with an absolute time sits on the realtime base; re-armed
// with a relative time it moves to the monotonic one (a relative realtime
// timer follows the monotonic clock, as the kernel's hrtimer does). A
// realtime reading, some 1.7e18 ns, is past any monotonic expiry: the
// expiry running for the old arming must read the monotonic clock itself,
// or the timer is readable at once instead of 30 ms later.
TEST_F(TimerRace, RearmOnAnotherClockWhileTheExpiryRunsExpiresAtTheNewTime) {
  auto by = std::make_unique<Bystander>();
  ASSERT_TRUE(by->w.Parked());
  int t = uepoll_timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
  ASSERT_GE(t, 0);
  HoldNextFire();
  itimerspec abs = Spec(ClockNs(CLOCK_REALTIME) + 1 * kMs);
  ASSERT_EQ(uepoll_timerfd_settime(t, TFD_TIMER_ABSTIME, &abs, nullptr), 0);
  ASSERT_TRUE(FireHeld());
  RearmHeldTimerAndExpectOneExpiry30MsLater(
      t, "the old arming's realtime reading made the relative re-arm due");
  uepoll_close(t);
  by.reset();
  ExpectNoUepollLeaks();
}

// A keeper with a cancel pending (pthread_cancel) whose expiry reaches a
// cancellation point: the expiry completes (its waiter is woken, the
// queue's batch lock is released) and the thread is cancelled later, at
// the next cancellation point of its own call. Cancelled inside the fire,
// the thread left the batch lock held: no expiry ran again, and closing
// the timer waited forever.
TEST_F(TimerRace, CancelledWhileRunningExpiries) {
  int t = UTimer();
  int tep = UEpollWith(t, 5);
  {
    // The keeper waits on the timer's own instance.
    int efd = uepoll_eventfd(0, EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(uepoll_epoll_ctl(tep, EPOLL_CTL_ADD, efd, &ev), 0);
    ASSERT_EQ(USet(t, 300 * kMs), 0);
    // Not in the thread's frame: a cancelled thread's frame is unwound
    // without ASan unpoisoning it.
    struct Ctx {
      int ep;
      std::atomic<pid_t> tid{0};
      std::atomic<int> got{-1};
      epoll_event out{};
    } ctx{tep};
    auto fn = +[](void* arg) -> void* {
      auto* c = static_cast<Ctx*>(arg);
      c->tid.store(Gettid());
      c->got.store(uepoll_epoll_wait(c->ep, &c->out, 1, kWaitMs));
      pthread_testcancel();
      return nullptr;
    };
    pthread_t a;
    ASSERT_EQ(pthread_create(&a, nullptr, fn, &ctx), 0);
    ASSERT_TRUE(Eventually([&] { return ctx.tid.load() != 0; }));
    ASSERT_TRUE(WaitUntilParked(ctx.tid.load()));
    ASSERT_TRUE(Eventually([] { return TimerQueue::Get().has_keeper(); }));
    int early = UTimer();
    ASSERT_EQ(USet(early, 2 * kMs), 0);
    ASSERT_TRUE(Eventually([] { return TimerQueue::Get().thread_dormant(); }));
    held_.cancel_self.store(true);
    HoldNextFire();
    ASSERT_TRUE(FireHeld());
    EXPECT_EQ(held_.firer.load(), ctx.tid.load()) << "not run by the keeper";
    ReleaseFire();
    void* ret = nullptr;
    ASSERT_EQ(pthread_join(a, &ret), 0);
    EXPECT_EQ(ret, PTHREAD_CANCELED);
    EXPECT_EQ(ctx.got.load(), 1) << "the expiry did not complete";
    held_.cancel_self.store(false);
    // The queue still runs expiries: another timer's reaches a waiter. On
    // a thread of its own, detached, so that a wedged queue fails the test
    // instead of hanging it.
    int t2 = UTimer();
    int ep2 = UEpollWith(t2, 2);
    ASSERT_EQ(USet(t2, 1 * kMs), 0);
    auto done = std::make_shared<std::atomic<int>>(-1);
    std::thread([done, ep2] {
      epoll_event out;
      done->store(uepoll_epoll_wait(ep2, &out, 1, kWaitMs));
    }).detach();
    bool ok = Eventually([&] { return done->load() >= 0; });
    EXPECT_TRUE(ok) << "no expiry runs any more";
    EXPECT_EQ(done->load(), 1);
    if (!ok) return;  // the queue is wedged: closing would wait forever
    uepoll_close(ep2);
    uepoll_close(t2);
    uepoll_close(early);
    uepoll_close(efd);
  }
  uepoll_close(tep);
  uepoll_close(t);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
