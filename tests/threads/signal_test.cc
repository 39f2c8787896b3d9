// Signals and blocked waits (docs/contract.md section 8): a handled
// signal ends a blocked wait with EINTR even under SA_RESTART; epoll_pwait and
// epoll_pwait2 install their mask atomically for the wait; events found before
// sleeping win over a pending signal.
//
// Waits with timeout -1 cannot time out, so each test registers a "rescue"
// eventfd and writes it if the waiter is still blocked at the deadline: a
// missing EINTR fails the test instead of hanging it.
#include <signal.h>

#include <atomic>
#include <memory>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr uint64_t kRescueData = 77;
constexpr uint64_t kEventData = 1;

std::atomic<int> g_handled{0};
void OnSignal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

class ThreadsSignal : public BackendTest {
 protected:
  void SetUp() override {
    g_handled = 0;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sa.sa_flags = SA_RESTART;  // must not make epoll waits restart
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_), 0);
  }
  void TearDown() override {
    sigaction(SIGUSR1, &old_, nullptr);
    BackendTest::TearDown();
  }

  void Signal(int efd) {
    uint64_t one = 1;
    ASSERT_EQ(B().write(efd, &one, sizeof one), 8);
  }

  // An instance with a rescue item; returns the instance.
  int EpollWithRescue() {
    int ep = Epoll();
    rescue_ = Eventfd();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, rescue_, EPOLLIN, kRescueData), 0);
    return ep;
  }

  // Waits for w to finish; rescues it if it does not.
  void FinishOrRescue(Waiter& w) {
    if (!w.WaitDone()) {
      ADD_FAILURE() << "waiter still blocked at the deadline";
      Signal(rescue_);
      w.WaitDone();
    }
  }

  int rescue_ = -1;
  struct sigaction old_ {};
};

// The thread's signal mask with SIGUSR1 blocked (others unchanged).
sigset_t BlockUsr1() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  sigset_t now;
  pthread_sigmask(SIG_BLOCK, nullptr, &now);
  return now;
}

sigset_t MaskWithoutUsr1() {
  sigset_t m;
  pthread_sigmask(SIG_BLOCK, nullptr, &m);
  sigdelset(&m, SIGUSR1);
  return m;
}

bool Usr1Pending() {
  sigset_t p;
  sigpending(&p);
  return sigismember(&p, SIGUSR1) == 1;
}

TEST_P(ThreadsSignal, EpollWaitFailsEintrDespiteSaRestart) {
  int ep = EpollWithRescue();
  const Backend* b = &B();
  Waiter w([b, ep](epoll_event* ev) { return b->epoll_wait(ep, ev, 1, -1); });
  ASSERT_TRUE(w.Parked());

  ASSERT_EQ(pthread_kill(w.handle(), SIGUSR1), 0);
  FinishOrRescue(w);
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
  EXPECT_EQ(g_handled.load(), 1);
}

// The thread blocks SIGUSR1 everywhere except inside the wait.
TEST_P(ThreadsSignal, PwaitMaskUnblocksSignalDuringWait) {
  int ep = EpollWithRescue();
  const Backend* b = &B();
  std::atomic<bool> blocked_after{false};
  Waiter w([&, b, ep](epoll_event* ev) {
    BlockUsr1();
    sigset_t during = MaskWithoutUsr1();
    int r = b->epoll_pwait(ep, ev, 1, -1, &during);
    int e = errno;
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    blocked_after = sigismember(&now, SIGUSR1) == 1;
    errno = e;
    return r;
  });
  ASSERT_TRUE(w.Parked());

  ASSERT_EQ(pthread_kill(w.handle(), SIGUSR1), 0);
  FinishOrRescue(w);
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
  EXPECT_EQ(g_handled.load(), 1);
  EXPECT_TRUE(blocked_after) << "the caller's mask was not restored";
}

// A signal already pending (blocked) when epoll_pwait unblocks it must end
// the wait: a mask installed before the wait in a separate step would let the
// handler run before the wait and then sleep forever.
TEST_P(ThreadsSignal, PwaitInstallsMaskAtomically) {
  int ep = EpollWithRescue();
  const Backend* b = &B();
  std::atomic<bool> pending_before{false};
  Waiter w([&, b, ep](epoll_event* ev) {
    BlockUsr1();
    pthread_kill(pthread_self(), SIGUSR1);
    pending_before = Usr1Pending();
    sigset_t during = MaskWithoutUsr1();
    return b->epoll_pwait(ep, ev, 1, -1, &during);
  });
  FinishOrRescue(w);
  EXPECT_TRUE(pending_before);
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
  EXPECT_EQ(g_handled.load(), 1);
}

TEST_P(ThreadsSignal, Pwait2InstallsMaskAtomically) {
  int ep = EpollWithRescue();
  const Backend* b = &B();
  Waiter w([b, ep](epoll_event* ev) {
    BlockUsr1();
    pthread_kill(pthread_self(), SIGUSR1);
    sigset_t during = MaskWithoutUsr1();
    return b->epoll_pwait2(ep, ev, 1, nullptr, &during);
  });
  FinishOrRescue(w);
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
  EXPECT_EQ(g_handled.load(), 1);
}

// Events found before sleeping win: the wait returns them, and the kernel
// then restores the caller's mask without delivering the signal, which stays
// pending (and dies with the thread).
TEST_P(ThreadsSignal, ReadyEventsWinOverPendingSignal) {
  int ep = EpollWithRescue();
  int src = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, kEventData), 0);
  Signal(src);
  const Backend* b = &B();
  std::atomic<bool> pending_after{false};
  Waiter w([&, b, ep](epoll_event* ev) {
    BlockUsr1();
    pthread_kill(pthread_self(), SIGUSR1);
    sigset_t during = MaskWithoutUsr1();
    int r = b->epoll_pwait(ep, ev, 1, -1, &during);
    int e = errno;
    pending_after = Usr1Pending();
    errno = e;
    return r;
  });
  FinishOrRescue(w);
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, kEventData);
  EXPECT_EQ(g_handled.load(), 0);
  EXPECT_TRUE(pending_after);
}

// A zero timeout never sleeps, so it never looks at signals: with nothing
// ready it returns 0, and the signal unblocked only for the call stays
// pending.
TEST_P(ThreadsSignal, ZeroTimeoutIgnoresPendingSignal) {
  int ep = EpollWithRescue();
  const Backend* b = &B();
  std::atomic<bool> pending_after{false};
  Waiter w([&, b, ep](epoll_event* ev) {
    BlockUsr1();
    pthread_kill(pthread_self(), SIGUSR1);
    sigset_t during = MaskWithoutUsr1();
    int r = b->epoll_pwait(ep, ev, 1, 0, &during);
    int e = errno;
    pending_after = Usr1Pending();
    errno = e;
    return r;
  });
  FinishOrRescue(w);
  EXPECT_EQ(w.result(), 0);
  EXPECT_EQ(g_handled.load(), 0);
  EXPECT_TRUE(pending_after);
}

UEPOLL_INSTANTIATE_BACKENDS(ThreadsSignal);

}  // namespace
}  // namespace uepoll_test
