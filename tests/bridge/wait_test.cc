// Waits on an instance that holds kernel descriptors:
// zero-timeout and blocking waits, timeouts, a blocked wait woken by a
// write from another thread, EINTR from a handled signal (with and without
// SA_RESTART), epoll_pwait's and epoll_pwait2's masks, and poll() of the
// instance. Durations are checked from below only.
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <memory>
#include <vector>

#include "bridge/bridge.h"

namespace uepoll_test {
namespace {

using Evs = std::vector<Ev>;
constexpr uint64_t kRescueData = 77;

std::atomic<int> g_handled{0};
void OnSignal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

// How many handlers ran. Under ThreadSanitizer a signal that arrives in an
// uninstrumented call runs its handler at the thread's next intercepted
// call, possibly just after the wait returned: poll for it, bounded.
int HandledAtLeast(int want) {
  Eventually([&] { return g_handled.load() >= want; });
  return g_handled.load();
}

class BridgeWait : public BridgeTest {
 protected:
  // SIGUSR1 handled by OnSignal, with or without SA_RESTART; restored and
  // drained at TearDown.
  void HandleSigusr1(bool restart) {
    g_handled = 0;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_), 0);
    installed_ = true;
  }
  void TearDown() override {
    if (installed_) {
      sigset_t only;
      sigemptyset(&only);
      sigaddset(&only, SIGUSR1);
      sigset_t old_mask;
      pthread_sigmask(SIG_BLOCK, &only, &old_mask);
      timespec zero{};
      while (sigtimedwait(&only, nullptr, &zero) == SIGUSR1) {
      }
      sigaction(SIGUSR1, &old_, nullptr);
      pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    }
    BridgeTest::TearDown();
  }

  // An instance holding an idle kernel eventfd (data 1) and a kernel
  // "rescue" eventfd that ends a wait a bug would leave blocked.
  int InstanceWithKernelSources(int* k) {
    int ep = Epoll();
    *k = KEventfd();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, *k, EPOLLIN, 1), 0);
    rescue_ = KEventfd();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, rescue_, EPOLLIN, kRescueData), 0);
    return ep;
  }
  void FinishOrRescue(Waiter& w) {
    if (!w.WaitDone()) {
      ADD_FAILURE() << "waiter still blocked at the deadline";
      uint64_t one = 1;
      ASSERT_EQ(::write(rescue_, &one, 8), 8);
      w.WaitDone();
    }
  }

  int rescue_ = -1;

 private:
  struct sigaction old_ {};
  bool installed_ = false;
};

TEST_P(BridgeWait, ZeroTimeoutReturnsAtOnceReadyOrNot) {
  for (Kind kind : kAllKinds) {
    SCOPED_TRACE(KindName(kind));
    int ep = Epoll();
    Src s = MakeSrc(kind);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, 1), 0);
    epoll_event ev[2];
    EXPECT_EQ(B().epoll_wait(ep, ev, 2, 0), 0);
    timespec zero{0, 0};
    EXPECT_EQ(B().epoll_pwait2(ep, ev, 2, &zero, nullptr), 0);
    Fire(s);
    ASSERT_EQ(B().epoll_wait(ep, ev, 2, 0), 1);
    EXPECT_EQ(ev[0].data.u64, 1u);
    ASSERT_EQ(B().epoll_pwait2(ep, ev, 2, &zero, nullptr), 1);
  }
}

TEST_P(BridgeWait, BlockingWaitReturnsAReadySourceAtOnce) {
  int k;
  int ep = InstanceWithKernelSources(&k);
  uint64_t one = 1;
  ASSERT_EQ(::write(k, &one, 8), 8);
  epoll_event ev[2];
  ASSERT_EQ(B().epoll_wait(ep, ev, 2, -1), 1);
  EXPECT_EQ(ev[0].data.u64, 1u);
  ASSERT_EQ(B().epoll_pwait2(ep, ev, 2, nullptr, nullptr), 1);
}

TEST_P(BridgeWait, TimedWaitsSleepTheirFullTimeout) {
  int k;
  int ep = InstanceWithKernelSources(&k);
  epoll_event ev[1];
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_wait(ep, ev, 1, 30), 0);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
  t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, 30, nullptr), 0);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
  timespec ts{0, 30 * 1000000L};
  t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_pwait2(ep, ev, 1, &ts, nullptr), 0);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
}

// An ET item that fired and was consumed before the wait: nothing wakes the
// timed wait early.
TEST_P(BridgeWait, ConsumedEdgeDoesNotEndATimedWaitEarly) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN | EPOLLET, 1), 0);
  uint64_t v = 1;
  ASSERT_EQ(::write(k, &v, 8), 8);
  ASSERT_EQ(::read(k, &v, 8), 8);
  epoll_event ev[1];
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_wait(ep, ev, 1, 30), 0);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
}

TEST_P(BridgeWait, BlockedWaitIsWokenByAWriteFromAnotherThread) {
  for (Kind kind : kAllKinds) {
    SCOPED_TRACE(KindName(kind));
    int ep = Epoll();
    Src s = MakeSrc(kind);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, 1), 0);
    const Backend* b = &B();
    Waiter w([b, ep](epoll_event* ev) { return b->epoll_wait(ep, ev, 4, -1); });
    ASSERT_TRUE(w.Parked());
    std::thread writer([&] { Fire(s); });
    writer.join();
    if (!w.WaitDone()) {
      ADD_FAILURE() << "not woken";
      Fire(s);
      ASSERT_TRUE(w.WaitDone());
    }
    EXPECT_EQ(w.result(), 1);
    EXPECT_EQ(w.event(0).data.u64, 1u);
    EXPECT_EQ(w.event(0).events, static_cast<uint32_t>(EPOLLIN));
  }
}

// A timer armed to expire later wakes the blocked wait by itself.
TEST_P(BridgeWait, ArmedTimerfdWakesABlockedWait) {
  int ep = Epoll();
  int t = KTimerfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, t, EPOLLIN, 5), 0);
  itimerspec its{};
  its.it_value.tv_nsec = 20 * 1000000L;
  // Read before the arming: the timer cannot expire sooner than 20 ms
  // after it, while a clock read after it may come late (a descheduled
  // thread: 18.2 ms measured once under ASan).
  int64_t t0 = MonotonicNs();
  ASSERT_EQ(::timerfd_settime(t, 0, &its, nullptr), 0);
  epoll_event ev[1];
  ASSERT_EQ(B().epoll_wait(ep, ev, 1, kWaitMs), 1);
  EXPECT_GE(MonotonicNs() - t0, 20 * 1000000LL);
  EXPECT_EQ(ev[0].data.u64, 5u);
}

TEST_P(BridgeWait, HandledSignalEndsABlockedWaitWithEintr) {
  for (bool restart : {false, true}) {
    SCOPED_TRACE(restart ? "SA_RESTART" : "no SA_RESTART");
    HandleSigusr1(restart);
    int k;
    int ep = InstanceWithKernelSources(&k);
    const Backend* b = &B();
    for (int timeout : {-1, kWaitMs}) {
      SCOPED_TRACE(timeout);
      int before = g_handled.load();
      Waiter w([b, ep, timeout](epoll_event* ev) {
        return b->epoll_wait(ep, ev, 1, timeout);
      });
      ASSERT_TRUE(w.Parked());
      ASSERT_EQ(pthread_kill(w.handle(), SIGUSR1), 0);
      FinishOrRescue(w);
      EXPECT_EQ(w.result(), -1);
      EXPECT_EQ(w.error(), EINTR);
      EXPECT_GE(HandledAtLeast(before + 1), before + 1);
    }
  }
}

// epoll_pwait's mask unblocks a pending signal for the wait only: EINTR,
// and the caller's mask is back afterwards.
TEST_P(BridgeWait, PwaitMaskUnblocksAPendingSignal) {
  HandleSigusr1(false);
  int k;
  int ep = InstanceWithKernelSources(&k);
  const Backend* b = &B();
  for (bool pwait2 : {false, true}) {
    SCOPED_TRACE(pwait2 ? "pwait2" : "pwait");
    int before = g_handled.load();
    std::atomic<bool> still_blocked{false};
    Waiter w([b, ep, pwait2, &still_blocked](epoll_event* ev) {
      sigset_t block;
      sigemptyset(&block);
      sigaddset(&block, SIGUSR1);
      pthread_sigmask(SIG_BLOCK, &block, nullptr);
      raise(SIGUSR1);  // pending, blocked
      sigset_t none;
      sigemptyset(&none);
      int r = pwait2 ? b->epoll_pwait2(ep, ev, 1, nullptr, &none)
                     : b->epoll_pwait(ep, ev, 1, -1, &none);
      int err = errno;
      sigset_t now;
      pthread_sigmask(SIG_SETMASK, nullptr, &now);
      still_blocked = sigismember(&now, SIGUSR1) == 1;
      errno = err;
      return r;
    });
    FinishOrRescue(w);
    EXPECT_EQ(w.result(), -1);
    EXPECT_EQ(w.error(), EINTR);
    EXPECT_TRUE(still_blocked.load()) << "the caller's mask is back";
    EXPECT_GE(HandledAtLeast(before + 1), before + 1);
  }
}

// The mask blocks the signal for the wait: it sleeps to its timeout, or to
// the kernel event that ends it.
TEST_P(BridgeWait, PwaitMaskBlocksASignalForTheWait) {
  HandleSigusr1(false);
  int k;
  int ep = InstanceWithKernelSources(&k);
  const Backend* b = &B();
  Waiter w([b, ep](epoll_event* ev) {
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    return b->epoll_pwait(ep, ev, 1, kWaitMs, &block);
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(pthread_kill(w.handle(), SIGUSR1), 0);
  ASSERT_TRUE(w.Parked()) << "the blocked signal ended the wait";
  uint64_t one = 1;
  ASSERT_EQ(::write(k, &one, 8), 8);
  FinishOrRescue(w);
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 1u);
  // Delivered once the thread's own mask is back.
  EXPECT_GE(HandledAtLeast(1), 1);
}

TEST_P(BridgeWait, ReadyKernelEventsWinOverAPendingSignal) {
  HandleSigusr1(false);
  int ep = Epoll();
  int k = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  raise(SIGUSR1);
  sigset_t none;
  sigemptyset(&none);
  epoll_event ev[1];
  EXPECT_EQ(B().epoll_pwait(ep, ev, 1, -1, &none), 1);
  EXPECT_EQ(g_handled.load(), 0);
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGUSR1), 1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST_P(BridgeWait, PollOfTheInstanceIsInWhenAKernelSourceIsReady) {
  for (Kind kind : kAllKinds) {
    SCOPED_TRACE(KindName(kind));
    int ep = Epoll();
    Src s = MakeSrc(kind);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, 1), 0);
    EXPECT_EQ(PollMask(ep), 0);
    Fire(s);
    EXPECT_EQ(PollMask(ep), POLLIN | POLLRDNORM);
    // poll() consumes nothing: the wait still gets the event.
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    Drain(s);
    EXPECT_EQ(PollMask(ep), 0);
  }
}

TEST_P(BridgeWait, BlockedPollOfTheInstanceIsWokenFromAnotherThread) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN | EPOLLET, 1), 0);
  const Backend* b = &B();
  std::atomic<short> revents{0};
  Waiter w([b, ep, &revents](epoll_event*) {
    pollfd p{ep, POLLIN, 0};
    int r = b->poll(&p, 1, kWaitMs);
    revents = p.revents;
    return r;
  });
  ASSERT_TRUE(w.Parked());
  std::thread writer([k] {
    uint64_t one = 1;
    (void)::write(k, &one, 8);
  });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(revents.load(), POLLIN);
  // poll() did not consume the ET edge.
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
}

TEST_P(BridgeWait, ShortPollTimeoutOfTheInstanceReturnsZeroNoEarlier) {
  int k;
  int ep = InstanceWithKernelSources(&k);
  pollfd p{ep, POLLIN, 0};
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().poll(&p, 1, 30), 0);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
  EXPECT_EQ(p.revents, 0);
}

UEPOLL_INSTANTIATE_BACKENDS(BridgeWait);

}  // namespace
}  // namespace uepoll_test
