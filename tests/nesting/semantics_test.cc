// An epoll instance as a pollable object (docs/contract.md section 9): what it
// reports, that polling it consumes nothing, how edges propagate upward, and
// what closing an inner instance does. Diagram legend as in topology_test.cc.
#include <fcntl.h>
#include <poll.h>

#include "nesting/topology.h"

namespace uepoll_test {
namespace {

constexpr uint64_t kLeaf = 1, kInner = 10;
// Every poll bit there is, to show which ones an instance sets.
constexpr short kAllPollBits = POLLIN | POLLPRI | POLLOUT | POLLRDNORM |
                               POLLRDBAND | POLLWRNORM | POLLWRBAND | POLLMSG |
                               POLLRDHUP;
constexpr uint32_t kAllEpollBits = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDNORM |
                                   EPOLLRDBAND | EPOLLWRNORM | EPOLLWRBAND |
                                   EPOLLMSG | EPOLLRDHUP;

class NestingSemantics : public NestingTest {
 protected:
  short Revents(int fd) {
    pollfd p{fd, kAllPollBits, 0};
    EXPECT_GE(B().poll(&p, 1, 0), 0);
    return p.revents;
  }
};

//  t0
//   | (p, every bit)
//  e1
//   | (lt, IN)
//  s0
// Readable-for-epoll is IN (with its twin RDNORM); an instance is never
// writable and never in error by itself.
TEST_P(NestingSemantics, InstanceReportsInOnlyWhileAnItemIsReportable) {
  int e1 = Epoll();
  EXPECT_EQ(Revents(e1), 0) << "empty instance";
  int s0 = Eventfd();
  Watch(e1, s0, kLt, kLeaf);
  // The eventfd is writable, but OUT is not in the item's interest.
  EXPECT_EQ(Revents(e1), 0) << "item ready but not reportable";
  Signal(s0);
  EXPECT_EQ(Revents(e1), POLLIN | POLLRDNORM);
  uint64_t v;
  ASSERT_EQ(B().read(s0, &v, sizeof v), 8);
  EXPECT_EQ(Revents(e1), 0) << "stale ready item not pruned";
}

//  t0
//   | (ew)
//  e0
//   | (lt, every bit)
//  e1
//   | (lt)
//  s0
TEST_P(NestingSemantics, OuterSeesInnerAsInOnly) {
  int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd();
  Watch(e1, s0, kLt, kLeaf);
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, kAllEpollBits, kInner), 0);
  EXPECT_EQ(WaitNow(e0), 0);
  Signal(s0);
  epoll_event ev;
  ASSERT_EQ(WaitNow(e0, &ev), 1);
  EXPECT_EQ(ev.events, static_cast<uint32_t>(EPOLLIN | EPOLLRDNORM));
  EXPECT_EQ(ev.data.u64, kInner);
}

//  t0
//   | (p, every bit)
//  e1
//  (lt) /  \ (lt)
//    pipe   pipe
//    read   write
//    end    end
// A hung-up and an errored item make the instance readable, nothing more.
TEST_P(NestingSemantics, ItemErrorsAndHangupsShowAsInOnly) {
  int e1 = Epoll();
  int hup[2], err[2];
  Pipe(hup);
  Pipe(err);
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, hup[0], EPOLLIN, 1), 0);
  ASSERT_EQ(Close(hup[1]), 0);
  EXPECT_EQ(Revents(e1), POLLIN | POLLRDNORM);
  int e2 = Epoll();
  ASSERT_EQ(Ctl(e2, EPOLL_CTL_ADD, err[1], EPOLLOUT, 2), 0);
  ASSERT_EQ(Close(err[0]), 0);
  EXPECT_EQ(Revents(e2), POLLIN | POLLRDNORM);
}

//  t0
//   | (ew)
//  e0
//   | (lt, OUT only)
//  e1
//   | (lt)
//  s0
TEST_P(NestingSemantics, OuterInterestedOnlyInOutNeverReports) {
  int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd();
  Watch(e1, s0, kLt, kLeaf);
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, EPOLLOUT, kInner), 0);
  Signal(s0);
  EXPECT_EQ(WaitNow(e0), 0);
  EXPECT_EQ(PollIn(e0), 0);
}

//  t0
//   | (p), then (ew)
//  e1
//   | (et)
//  s0
TEST_P(NestingSemantics, PollingAnInstanceConsumesNothing) {
  int e1 = Epoll(), s0 = Eventfd();
  Watch(e1, s0, kEt, kLeaf);
  Signal(s0);
  EXPECT_EQ(PollIn(e1), 1);
  EXPECT_EQ(PollIn(e1), 1) << "poll consumed the ET item";
  EXPECT_EQ(WaitNow(e1), 1);
  EXPECT_EQ(PollIn(e1), 0);
  EXPECT_EQ(WaitNow(e1), 0);
}

//  t0 (ew e0 several times, then ew e1)
//   |
//  e0
//   | (lt)
//  e1
//   | (et)
//  s0
// A harvest of e0 polls e1 and does not consume e1's ET item either.
TEST_P(NestingSemantics, HarvestingOuterConsumesNothingInInner) {
  int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd();
  Watch(e1, s0, kEt, kLeaf);
  Watch(e0, e1, kLt, kInner);
  Signal(s0);
  EXPECT_EQ(WaitNow(e0), 1);
  EXPECT_EQ(WaitNow(e0), 1);
  EXPECT_EQ(WaitNow(e1), 1);
  EXPECT_EQ(WaitNow(e0), 0) << "e1 has nothing reportable left";
  EXPECT_EQ(PollIn(e0), 0);
}

//  t0
//   | (ew)
//  e0
//   | (et)
//  e1
//   | (lt)
//  s0
// Each new event on s0 is one edge for e0. e1 re-queueing its LT item after
// a harvest of e1 is not a new event, and neither is a poll of e1.
TEST_P(NestingSemantics, OuterEtSeesOneEdgePerInnerEvent) {
  int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd();
  Watch(e1, s0, kLt, kLeaf);
  Watch(e0, e1, kEt, kInner);
  for (int round = 0; round < 3; ++round) {
    Signal(s0);
    EXPECT_EQ(WaitNow(e0), 1) << "round " << round;
    EXPECT_EQ(WaitNow(e0), 0) << "round " << round;
    EXPECT_EQ(WaitNow(e1), 1) << "round " << round;
    EXPECT_EQ(WaitNow(e1), 1) << "round " << round;
    EXPECT_EQ(PollIn(e1), 1) << "round " << round;
    EXPECT_EQ(WaitNow(e0), 0) << "LT re-queue seen as an edge, round " << round;
  }
}

//  t0
//   | (ew)
//  e0
//   | (lt)
//  e1
//   | (lt)
//  e2
//   | (lt)
//  e3
//   | (lt)
//  e4
//   | (lt)
//  s0
TEST_P(NestingSemantics, ReadinessPropagatesThroughFiveInstances) {
  int e[5];
  for (int& x : e) x = Epoll();
  int s0 = Eventfd();
  Watch(e[4], s0, kLt, kLeaf);
  for (int i = 3; i >= 0; --i) Watch(e[i], e[i + 1], kLt, 100 + i + 1);
  for (int x : e) EXPECT_EQ(PollIn(x), 0);
  Signal(s0);
  for (int x : e) EXPECT_EQ(PollIn(x), 1);
  epoll_event ev;
  ASSERT_EQ(WaitNow(e[0], &ev), 1);
  EXPECT_EQ(ev.data.u64, 101u);
  uint64_t v;
  ASSERT_EQ(B().read(s0, &v, sizeof v), 8);
  // Every level re-polls its child at harvest time: nothing stale remains.
  EXPECT_EQ(WaitNow(e[0]), 0);
  for (int x : e) EXPECT_EQ(PollIn(x), 0);
}

//  t0
//   | (ew)
//  e0
//   | (et)
//  e1
//   | (et)
//  e2
//   | (et)
//  s0
TEST_P(NestingSemantics, WaiterOnOuterWakesWhenLeafTwoLevelsDownIsReady) {
  int e0 = Epoll(), e1 = Epoll(), e2 = Epoll(), s0 = Eventfd();
  Watch(e2, s0, kEt, kLeaf);
  Watch(e1, e2, kEt, 2);
  Watch(e0, e1, kEt, kInner);
  auto got = Race({{e0, Via::kWait}}, [&] { Signal(s0); }, 1, {e0}, {{e0, 0}});
  EXPECT_TRUE(got[0]);
}

//  t0
//   | (p)
//  e0
//   | (lt)
//  e1
//   | (lt)
//  e2
//   | (lt)
//  s0
TEST_P(NestingSemantics, PollerOnOuterWakesWhenLeafTwoLevelsDownIsReady) {
  int e0 = Epoll(), e1 = Epoll(), e2 = Epoll(), s0 = Eventfd();
  Watch(e2, s0, kLt, kLeaf);
  Watch(e1, e2, kLt, 2);
  Watch(e0, e1, kLt, kInner);
  auto got = Race({{e0, Via::kPoll}}, [&] { Signal(s0); }, 1, {e0}, {{e0, 1}});
  EXPECT_TRUE(got[0]);
}

//  t0
//   | (ew)
//  e0
//   | (lt)
//  e1  <- closed
//   | (lt)
//  s0
TEST_P(NestingSemantics, ClosingInnerRemovesItFromOuter) {
  int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd(), other = Eventfd();
  Watch(e1, s0, kLt, kLeaf);
  Watch(e0, e1, kLt, kInner);
  Watch(e0, other, kLt, 3);
  Signal(s0);
  Signal(other);
  epoll_event ev[4];
  ASSERT_EQ(WaitNow(e0, ev, 4), 2);
  ASSERT_EQ(Close(e1), 0);
  // Only the other item is left, and it keeps working.
  ASSERT_EQ(WaitNow(e0, ev, 4), 1);
  EXPECT_EQ(ev[0].data.u64, 3u);
  EXPECT_EQ(Ctl(e0, EPOLL_CTL_DEL, e1, 0, 0), -1);
  EXPECT_EQ(errno, EBADF);
  uint64_t v;
  ASSERT_EQ(B().read(other, &v, sizeof v), 8);
  EXPECT_EQ(WaitNow(e0, ev, 4), 0);
  EXPECT_EQ(PollIn(e0), 0);
}

//  t0
//   | (ew)
//  e0
//   | (lt)
//  e1 (fd closed, object kept alive by a dup)
//   | (lt)
//  s0
// The item lives as long as the object, not the descriptor number.
TEST_P(NestingSemantics, InnerClosedButDupedStaysInOuter) {
  int e0 = Epoll(), e1 = Epoll(), s0 = Eventfd();
  Watch(e1, s0, kLt, kLeaf);
  Watch(e0, e1, kLt, kInner);
  int dup = Track(B().dup(e1));
  ASSERT_GE(dup, 0);
  ASSERT_EQ(Close(e1), 0);
  Signal(s0);
  epoll_event ev;
  ASSERT_EQ(WaitNow(e0, &ev), 1);
  EXPECT_EQ(ev.data.u64, kInner);
  ASSERT_EQ(Close(dup), 0);
  EXPECT_EQ(WaitNow(e0), 0);
}

UEPOLL_INSTANTIATE_BACKENDS(NestingSemantics);

}  // namespace
}  // namespace uepoll_test
