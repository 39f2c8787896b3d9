// The kernel's nested wakeup topologies (after the shapes of the kernel
// selftest filesystems/epoll/epoll_wakeup_test.c), on both backends.
//
// Diagram legend: t = thread, e = instance, s = source (an eventfd), (ew) the
// thread waits in epoll_wait, (p) in poll() then takes the event with a
// zero-timeout epoll_wait, (lt)/(et) how the child is registered. e0 is the
// outermost instance. In the threaded tests an idle level-triggered stop
// item, not drawn, sits in the outer instance to release a thread that
// rightly got nothing.
#include "nesting/topology.h"

#include <array>

namespace uepoll_test {
namespace {

constexpr uint64_t kS0 = 1, kS1 = 2, kE1 = 11, kE2 = 12;

class NestingTopology : public NestingTest {
 protected:
  // e0 -(outer)-> e1 -(inner)-> s0; returns {e0, e1, s0}.
  std::array<int, 3> Chain(uint32_t outer, uint32_t inner) {
    int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd();
    Watch(e1, s0, inner, kS0);
    Watch(e0, e1, outer, kE1);
    return {e0, e1, s0};
  }

  // e0 over two inner instances e1, e2, each with a source registered LT.
  std::array<int, 5> Fork(uint32_t outer) {
    int e0 = Epoll(), e1 = Epoll(), e2 = Epoll();
    int s0 = Eventfd(), s1 = Eventfd();
    Watch(e1, s0, kLt, kS0);
    Watch(e2, s1, kLt, kS1);
    Watch(e0, e1, outer, kE1);
    Watch(e0, e2, outer, kE2);
    return {e0, e1, e2, s0, s1};
  }

  void SignalBoth(int s0, int s1) {
    Signal(s0);
    Signal(s1);
  }

  // t0 harvests e0 twice with zero timeouts after one event on s0.
  void WaitTwice(uint32_t outer, uint32_t inner, int second) {
    auto [e0, e1, s0] = Chain(outer, inner);
    Signal(s0);
    epoll_event ev;
    EXPECT_EQ(WaitNow(e0, &ev), 1);
    EXPECT_EQ(ev.data.u64, kE1);
    EXPECT_EQ(ev.events, static_cast<uint32_t>(EPOLLIN));
    EXPECT_EQ(WaitNow(e0), second);
  }

  // The same, each harvest preceded by a poll() of e0 that must agree.
  void PollTwice(uint32_t outer, uint32_t inner, int second) {
    auto [e0, e1, s0] = Chain(outer, inner);
    Signal(s0);
    EXPECT_EQ(PollIn(e0), 1);
    EXPECT_EQ(WaitNow(e0), 1);
    EXPECT_EQ(PollIn(e0), second);
    EXPECT_EQ(WaitNow(e0), second);
  }
};

//  t0
//   | (ew)
//  e0
//   | (lt)
//  e1
//   | (lt)
//  s0
TEST_P(NestingTopology, WaitOuterLtInnerLt) { WaitTwice(kLt, kLt, 1); }

//  t0
//   | (ew)
//  e0
//   | (lt)
//  e1
//   | (et)
//  s0
// Harvesting e0 only polls e1; e1's ET item stays unconsumed, so e0 (LT)
// reports again.
TEST_P(NestingTopology, WaitOuterLtInnerEt) { WaitTwice(kLt, kEt, 1); }

//  t0
//   | (ew)
//  e0
//   | (et)
//  e1
//   | (lt)
//  s0
TEST_P(NestingTopology, WaitOuterEtInnerLt) { WaitTwice(kEt, kLt, 0); }

//  t0
//   | (ew)
//  e0
//   | (et)
//  e1
//   | (et)
//  s0
TEST_P(NestingTopology, WaitOuterEtInnerEt) { WaitTwice(kEt, kEt, 0); }

//  t0
//   | (p)
//  e0
//   | (lt)
//  e1
//   | (lt)
//  s0
TEST_P(NestingTopology, PollOuterLtInnerLt) { PollTwice(kLt, kLt, 1); }

//  t0
//   | (p)
//  e0
//   | (lt)
//  e1
//   | (et)
//  s0
TEST_P(NestingTopology, PollOuterLtInnerEt) { PollTwice(kLt, kEt, 1); }

//  t0
//   | (p)
//  e0
//   | (et)
//  e1
//   | (lt)
//  s0
TEST_P(NestingTopology, PollOuterEtInnerLt) { PollTwice(kEt, kLt, 0); }

//  t0
//   | (p)
//  e0
//   | (et)
//  e1
//   | (et)
//  s0
TEST_P(NestingTopology, PollOuterEtInnerEt) { PollTwice(kEt, kEt, 0); }

//      t0
//       | (ew)
//      e0
// (lt) /  \ (lt)
//    e1    e2
// (lt)|     | (lt)
//    s0    s1
TEST_P(NestingTopology, WaitForkLt) {
  auto [e0, e1, e2, s0, s1] = Fork(kLt);
  Signal(s0);
  Signal(s1);
  epoll_event ev[2];
  ASSERT_EQ(WaitNow(e0, ev, 2), 2);
  EXPECT_EQ(ev[0].data.u64 + ev[1].data.u64, kE1 + kE2);
  EXPECT_EQ(WaitNow(e0, ev, 2), 2);
}

//      t0
//       | (ew)
//      e0
// (et) /  \ (et)
//    e1    e2
// (lt)|     | (lt)
//    s0    s1
TEST_P(NestingTopology, WaitForkEt) {
  auto [e0, e1, e2, s0, s1] = Fork(kEt);
  Signal(s0);
  Signal(s1);
  epoll_event ev[2];
  ASSERT_EQ(WaitNow(e0, ev, 2), 2);
  EXPECT_EQ(ev[0].data.u64 + ev[1].data.u64, kE1 + kE2);
  EXPECT_EQ(WaitNow(e0, ev, 2), 0);
}

//      t0
//       | (p)
//      e0
// (lt) /  \ (lt)
//    e1    e2
// (lt)|     | (lt)
//    s0    s1
TEST_P(NestingTopology, PollForkLt) {
  auto [e0, e1, e2, s0, s1] = Fork(kLt);
  Signal(s0);
  Signal(s1);
  epoll_event ev[2];
  EXPECT_EQ(PollIn(e0), 1);
  EXPECT_EQ(WaitNow(e0, ev, 2), 2);
  EXPECT_EQ(PollIn(e0), 1);
  EXPECT_EQ(WaitNow(e0, ev, 2), 2);
}

//      t0
//       | (p)
//      e0
// (et) /  \ (et)
//    e1    e2
// (lt)|     | (lt)
//    s0    s1
TEST_P(NestingTopology, PollForkEt) {
  auto [e0, e1, e2, s0, s1] = Fork(kEt);
  Signal(s0);
  Signal(s1);
  epoll_event ev[2];
  EXPECT_EQ(PollIn(e0), 1);
  EXPECT_EQ(WaitNow(e0, ev, 2), 2);
  EXPECT_EQ(PollIn(e0), 0);
  EXPECT_EQ(WaitNow(e0, ev, 2), 0);
}

// Two threads on the outer instance. An LT outer item is handed on to the
// second waiter after the first harvest; an ET one reaches exactly one.
class NestingTwoThreads : public NestingTopology {
 protected:
  int BothOnOuter(Via v0, Via v1, uint32_t outer, uint32_t inner) {
    auto [e0, e1, s0] = Chain(outer, inner);
    int expect = outer == kLt ? 2 : 1;
    // Afterwards an LT outer item stays ready (e1 stays ready: its LT leaf
    // is never read, its ET leaf never harvested); an ET one is spent.
    auto got = Race({{e0, v0}, {e0, v1}}, [&] { Signal(s0); }, expect, {e0},
                    {{e0, outer == kLt ? 1 : 0}, {e1, 1}});
    return static_cast<int>(got[0]) + static_cast<int>(got[1]);
  }
};

//  t0    t1
//  (ew)  (ew)
//    \  /
//     e0
//     | (lt)
//     e1
//     | (lt)
//     s0
TEST_P(NestingTwoThreads, WaitWaitOuterLtInnerLt) {
  EXPECT_EQ(BothOnOuter(Via::kWait, Via::kWait, kLt, kLt), 2);
}

//  t0    t1
//  (ew)  (ew)
//    \  /
//     e0
//     | (lt)
//     e1
//     | (et)
//     s0
TEST_P(NestingTwoThreads, WaitWaitOuterLtInnerEt) {
  EXPECT_EQ(BothOnOuter(Via::kWait, Via::kWait, kLt, kEt), 2);
}

//  t0    t1
//  (ew)  (ew)
//    \  /
//     e0
//     | (et)
//     e1
//     | (lt)
//     s0
TEST_P(NestingTwoThreads, WaitWaitOuterEtInnerLt) {
  EXPECT_EQ(BothOnOuter(Via::kWait, Via::kWait, kEt, kLt), 1);
}

//  t0    t1
//  (ew)  (ew)
//    \  /
//     e0
//     | (et)
//     e1
//     | (et)
//     s0
TEST_P(NestingTwoThreads, WaitWaitOuterEtInnerEt) {
  EXPECT_EQ(BothOnOuter(Via::kWait, Via::kWait, kEt, kEt), 1);
}

//  t0    t1
//  (ew)  (p)
//    \  /
//     e0
//     | (lt)
//     e1
//     | (lt)
//     s0
TEST_P(NestingTwoThreads, WaitPollOuterLtInnerLt) {
  EXPECT_EQ(BothOnOuter(Via::kWait, Via::kPoll, kLt, kLt), 2);
}

//  t0    t1
//  (ew)  (p)
//    \  /
//     e0
//     | (et)
//     e1
//     | (et)
//     s0
TEST_P(NestingTwoThreads, WaitPollOuterEtInnerEt) {
  EXPECT_EQ(BothOnOuter(Via::kWait, Via::kPoll, kEt, kEt), 1);
}

//  t0    t1
//  (p)   (p)
//    \  /
//     e0
//     | (lt)
//     e1
//     | (et)
//     s0
TEST_P(NestingTwoThreads, PollPollOuterLtInnerEt) {
  EXPECT_EQ(BothOnOuter(Via::kPoll, Via::kPoll, kLt, kEt), 2);
}

//  t0    t1
//  (ew)  (ew)
//   |     |
//   |    e0
//    \  / (lt)
//     e1
//     | (lt)
//     s0
// An LT leaf stays ready after t0 takes it, so t1's harvest of e0 finds e1
// ready too.
TEST_P(NestingTwoThreads, InnerAndOuterInnerLt) {
  auto [e0, e1, s0] = Chain(kLt, kLt);
  auto got = Race({{e1, Via::kWait}, {e0, Via::kWait}}, [&] { Signal(s0); }, 2,
                  {e0}, {{e0, 1}, {e1, 1}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

//  t0    t1
//  (ew)  (ew)
//   |     |
//   |    e0
//    \  / (et)
//     e1
//     | (lt)
//     s0
TEST_P(NestingTwoThreads, InnerAndOuterEtOverLt) {
  auto [e0, e1, s0] = Chain(kEt, kLt);
  auto got = Race({{e1, Via::kWait}, {e0, Via::kWait}}, [&] { Signal(s0); }, 2,
                  {e0}, {{e0, 0}, {e1, 1}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

//  t0    t1
//  (ew)  (ew)
//   |     |
//   |    e0
//    \  / (lt)
//     e1
//     | (et)
//     s0
// t0 always gets the ET leaf. t1 gets e1 only if its harvest polls e1 before
// t0 consumed the leaf: the kernel leaves that to the scheduler, so only t0
// is asserted.
TEST_P(NestingTwoThreads, InnerAndOuterInnerEt) {
  auto [e0, e1, s0] = Chain(kLt, kEt);
  auto got = Race({{e1, Via::kWait}, {e0, Via::kWait}}, [&] { Signal(s0); }, 1,
                  {e0}, {{e0, 0}, {e1, 0}});
  EXPECT_TRUE(got[0]);
}

//  t0    t1
//  (p)   (ew)
//   |     |
//   |    e0
//    \  / (lt)
//     e1
//     | (lt)
//     s0
TEST_P(NestingTwoThreads, PollInnerWaitOuterLt) {
  auto [e0, e1, s0] = Chain(kLt, kLt);
  auto got = Race({{e1, Via::kPoll}, {e0, Via::kWait}}, [&] { Signal(s0); }, 2,
                  {e0}, {{e0, 1}, {e1, 1}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

//  t0    t1
//  (ew)  (p)
//   |     |
//   |    e0
//    \  / (et)
//     e1
//     | (lt)
//     s0
TEST_P(NestingTwoThreads, WaitInnerPollOuterEtOverLt) {
  auto [e0, e1, s0] = Chain(kEt, kLt);
  auto got = Race({{e1, Via::kWait}, {e0, Via::kPoll}}, [&] { Signal(s0); }, 2,
                  {e0}, {{e0, 0}, {e1, 1}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

//     t0    t1
//     (ew)  (ew)
//       \  /
//        e0
//  (lt) /  \ (lt)
//     e1    e2
//  (lt)|     | (lt)
//     s0    s1
TEST_P(NestingTwoThreads, WaitWaitForkLt) {
  auto [e0, e1, e2, s0, s1] = Fork(kLt);
  auto got = Race({{e0, Via::kWait}, {e0, Via::kWait}},
                  [&] { SignalBoth(s0, s1); }, 2, {e0}, {{e0, 2}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

//     t0    t1
//     (ew)  (ew)
//       \  /
//        e0
//  (et) /  \ (et)
//     e1    e2
//  (lt)|     | (lt)
//     s0    s1
// Two inner edges, two ET items in e0: one for each waiter.
TEST_P(NestingTwoThreads, WaitWaitForkEt) {
  auto [e0, e1, e2, s0, s1] = Fork(kEt);
  auto got = Race({{e0, Via::kWait}, {e0, Via::kWait}},
                  [&] { SignalBoth(s0, s1); }, 2, {e0}, {{e0, 0}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

//     t0    t1
//     (p)   (p)
//       \  /
//        e0
//  (lt) /  \ (lt)
//     e1    e2
//  (lt)|     | (lt)
//     s0    s1
TEST_P(NestingTwoThreads, PollPollForkLt) {
  auto [e0, e1, e2, s0, s1] = Fork(kLt);
  auto got = Race({{e0, Via::kPoll}, {e0, Via::kPoll}},
                  [&] { SignalBoth(s0, s1); }, 2, {e0}, {{e0, 2}});
  EXPECT_TRUE(got[0]);
  EXPECT_TRUE(got[1]);
}

UEPOLL_INSTANTIATE_BACKENDS(NestingTopology);
UEPOLL_INSTANTIATE_BACKENDS(NestingTwoThreads);

}  // namespace
}  // namespace uepoll_test
