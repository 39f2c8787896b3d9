// tests/threads/wakeup_test.cc redone with kernel sources in the backend's
// instance: which blocked waiters a kernel event wakes, on both backends
// with one set of expectations. "Exactly one woke" is observed as "exactly
// one returned the event"; waiters still blocked at the end are released
// through a level-triggered kernel "stop" item.
#include <memory>
#include <thread>
#include <vector>

#include "bridge/bridge.h"
#include "threads/waiter_group.h"

namespace uepoll_test {
namespace {

constexpr uint64_t kEventData = 1;
constexpr uint64_t kOtherData = 2;
constexpr uint64_t kStopData = 99;

class BridgeWakeup : public BridgeTest {
 protected:
  std::unique_ptr<Waiter> StartWaiter(int ep, int max = 1) {
    return StartEpollWaiter(B(), ep, max);
  }
  Waiters StartWaiters(int n, int ep) { return StartEpollWaiters(B(), n, ep); }
};

TEST_P(BridgeWakeup, EtKernelEventWakesExactlyOneOfNWaiters) {
  constexpr int kWaiters = 4;
  for (Kind kind : {Kind::kEventfd, Kind::kPipe, Kind::kTcp}) {
    SCOPED_TRACE(KindName(kind));
    int ep = Epoll();
    Src s = MakeSrc(kind);
    int stop = KEventfd();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLET, kEventData), 0);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
    auto ws = StartWaiters(kWaiters, ep);
    for (auto& w : ws) ASSERT_TRUE(w->Parked());

    Fire(s);
    ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 1; }));
    KSignal(stop);
    for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
    EXPECT_EQ(CountGot(ws, kEventData), 1);
    EXPECT_EQ(CountGot(ws, kStopData), kWaiters - 1);
  }
}

TEST_P(BridgeWakeup, LtKernelEventWakesEveryWaiterInTurn) {
  constexpr int kWaiters = 4;
  for (Kind kind : {Kind::kEventfd, Kind::kSocketPair, Kind::kTimerfd}) {
    SCOPED_TRACE(KindName(kind));
    int ep = Epoll();
    Src s = MakeSrc(kind);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, kEventData), 0);
    auto ws = StartWaiters(kWaiters, ep);
    for (auto& w : ws) ASSERT_TRUE(w->Parked());

    Fire(s);
    for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
    EXPECT_EQ(CountGot(ws, kEventData), kWaiters);
  }
}

TEST_P(BridgeWakeup, TwoEtKernelItemsReadyTogetherWakeTwoWaiters) {
  constexpr int kWaiters = 3;
  int ep = Epoll();
  int a = KEventfd();
  int b = KEventfd();
  int stop = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN | EPOLLET, kEventData), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN | EPOLLET, kOtherData), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
  auto ws = StartWaiters(kWaiters, ep);
  for (auto& w : ws) ASSERT_TRUE(w->Parked());

  KSignal(a);
  KSignal(b);
  ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 2; }));
  KSignal(stop);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), 1);
  EXPECT_EQ(CountGot(ws, kOtherData), 1);
  EXPECT_EQ(CountGot(ws, kStopData), kWaiters - 2);
}

TEST_P(BridgeWakeup, SameKernelSourceInNInstancesWakesAll) {
  constexpr int kInstances = 3;
  int src = KEventfd();
  std::vector<std::unique_ptr<Waiter>> ws;
  for (int i = 0; i < kInstances; ++i) {
    int ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, kEventData), 0);
    ws.push_back(StartWaiter(ep));
  }
  for (auto& w : ws) ASSERT_TRUE(w->Parked());
  KSignal(src);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), kInstances);
}

// EXCLUSIVE on every registration of a kernel source: the kernel wakes one
// instance's waiter when each has one. A uepoll instance's waiters sleep in
// epoll_wait on its kernel half (kernel/kernel_half.h), so the kernel sees
// an epoll waiter behind each exclusive entry, as with its own instances.
TEST_P(BridgeWakeup, ExclusiveOnEveryRegistrationWakesExactlyOne) {
  constexpr int kInstances = 3;
  int src = KEventfd();
  int stop = KEventfd();
  std::vector<std::unique_ptr<Waiter>> ws;
  for (int i = 0; i < kInstances; ++i) {
    int ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLEXCLUSIVE, kEventData),
              0);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
    ws.push_back(StartWaiter(ep));
  }
  for (auto& w : ws) ASSERT_TRUE(w->Parked());
  KSignal(src);
  ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 1; }));
  KSignal(stop);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), 1);
  EXPECT_EQ(CountGot(ws, kStopData), kInstances - 1);
}

TEST_P(BridgeWakeup, AddOfAReadyKernelSourceWakesABlockedWaiter) {
  for (Kind kind : kAllKinds) {
    SCOPED_TRACE(KindName(kind));
    int ep = Epoll();
    Src s = MakeSrc(kind);
    Fire(s);
    auto w = StartWaiter(ep);
    ASSERT_TRUE(w->Parked());
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, kEventData), 0);
    ASSERT_TRUE(w->WaitDone());
    EXPECT_EQ(w->result(), 1);
    EXPECT_EQ(w->event(0).data.u64, kEventData);
    EXPECT_EQ(w->event(0).events, static_cast<uint32_t>(EPOLLIN));
  }
}

// The first kernel descriptor of an instance arrives while a thread is
// already blocked on it (on uepoll: the instance gains its kernel half
// under the sleeper), and becomes ready only afterwards.
TEST_P(BridgeWakeup, FirstKernelSourceAddedUnderABlockedWaiterWakesIt) {
  int ep = Epoll();
  int k = KEventfd();
  auto w = StartWaiter(ep);
  ASSERT_TRUE(w->Parked());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, kEventData), 0);
  ASSERT_TRUE(w->Parked()) << "an idle ADD ended the wait";
  KSignal(k);
  ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(w->result(), 1);
  EXPECT_EQ(w->event(0).data.u64, kEventData);
}

// A fresh kernel eventfd is writable but not readable: MOD from IN to OUT
// makes the item ready without any write.
TEST_P(BridgeWakeup, ModMakingAKernelItemReadyWakesAWaiter) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, kEventData), 0);
  auto w = StartWaiter(ep);
  ASSERT_TRUE(w->Parked());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, k, EPOLLOUT, kOtherData), 0);
  ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(w->result(), 1);
  EXPECT_EQ(w->event(0).data.u64, kOtherData);
  EXPECT_EQ(w->event(0).events, static_cast<uint32_t>(EPOLLOUT));
}

// The event is stolen by a zero-timeout wait between the waiter's wakeup
// and its harvest whenever the race goes that way; the waiter then sleeps
// on. Every round accounts for its event exactly once either way.
TEST_P(BridgeWakeup, WaiterWhoseKernelEventWasStolenKeepsWaiting) {
  constexpr int kRounds = 200;
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN | EPOLLET, kEventData), 0);
  int stolen = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto w = StartWaiter(ep);
    ASSERT_TRUE(w->Parked()) << "round " << round;
    KSignal(k);
    epoll_event ev;
    int n = B().epoll_wait(ep, &ev, 1, 0);
    ASSERT_GE(n, 0);
    if (n == 1) {
      ++stolen;
      ASSERT_TRUE(w->Parked())
          << "round " << round << ": returned " << w->result();
      KSignal(k);
    }
    ASSERT_TRUE(w->WaitDone());
    ASSERT_EQ(w->result(), 1) << "round " << round;
    ASSERT_EQ(w->event(0).data.u64, kEventData);
    ASSERT_EQ(B().epoll_wait(ep, &ev, 1, 0), 0) << "event reported twice";
  }
  RecordProperty("stolen_rounds", stolen);
}

UEPOLL_INSTANTIATE_BACKENDS(BridgeWakeup);

}  // namespace
}  // namespace uepoll_test
