// docs/contract.md section 5: level-triggered, edge-triggered and one-shot
// items, and MOD as a re-poll.
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class TriggerModes : public ConformanceTest {};

using Evs = std::vector<Ev>;

TEST_P(TriggerModes, LtReportsOnEveryWaitWhileReady) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}})) << i;
  EfdRead(efd);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, LtRoundRobinFiveReadyMaxTwo) {
  int ep = Epoll();
  for (uint64_t i = 0; i < 5; ++i)
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, Eventfd(1), EPOLLIN, i), 0);
  const std::vector<std::vector<uint64_t>> rounds = {
      {0, 1}, {2, 3}, {4, 0}, {1, 2}};
  for (const auto& want : rounds) {
    std::vector<uint64_t> got;
    for (const Ev& e : Wait(ep, 2)) got.push_back(e.data);
    EXPECT_EQ(got, want);
  }
}

TEST_P(TriggerModes, EtReportsOncePerEdge) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EXPECT_TRUE(Wait(ep).empty()) << "still readable, but no new edge";
}

TEST_P(TriggerModes, EtReadyAtAddReportedOnce) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, EtEventfdWriteIsEdgeWithUnreadCount) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  for (int i = 0; i < 3; ++i) {
    EfdWrite(efd, 1);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}})) << i;
  }
  EXPECT_EQ(EfdRead(efd), 3u);
}

TEST_P(TriggerModes, EtEventfdWriteOfZeroIsEdge) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EfdWrite(efd, 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
}

TEST_P(TriggerModes, EtEventfdWriteOfZeroOnZeroCountReportsNothing) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  // The edge is delivered but re-polling finds the count still 0.
  EfdWrite(efd, 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, EtPipeWriteIsEdgeWithUnreadData) {
  int ep = Epoll();
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLET, 1), 0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(WriteBytes(p[1], 10), 10);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}})) << i;
  }
}

TEST_P(TriggerModes, EtSocketWriteIsEdgeWithUnreadData) {
  int ep = Epoll();
  int sv[2];
  SocketPair(sv, SOCK_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[0], EPOLLIN | EPOLLET, 1), 0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(WriteBytes(sv[1], 10), 10);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}})) << i;
  }
}

TEST_P(TriggerModes, EtPartialPipeReadIsNoEdge) {
  int ep = Epoll();
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(WriteBytes(p[1], 10), 10);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  ASSERT_EQ(ReadBytes(p[0], 4), 4);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, EtPartialSocketReadIsNoEdge) {
  int ep = Epoll();
  int sv[2];
  SocketPair(sv, SOCK_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[0], kInOut | EPOLLET, 1), 0);
  ASSERT_EQ(WriteBytes(sv[1], 10), 10);
  ASSERT_EQ(Wait(ep), (Evs{{kInOut, 1}}));
  ASSERT_EQ(ReadBytes(sv[0], 4), 4);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, EtReadThatMakesRoomInFullPipeIsOutEdge) {
  int ep = Epoll();
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], EPOLLOUT | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLOUT, 1}}));
  for (int i = 0; i < 100 && WriteBytes(p[1], 4096) == 4096; ++i) {
  }
  EXPECT_TRUE(Wait(ep).empty());
  ASSERT_EQ(ReadBytes(p[0], 4096), 4096);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLOUT, 1}}));
}

TEST_P(TriggerModes, ModWithIdenticalFlagsReportsReadyEtItemAgain) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  ASSERT_TRUE(Wait(ep).empty());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN | EPOLLET, 1), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, ModReportsNewDataAndInterest) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLOUT, 2), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLOUT, 2}}));
}

TEST_P(TriggerModes, ModOfIdleItemReportsNothing) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN | EPOLLET, 1), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, ModLtToEtReportsOnce) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN | EPOLLET, 2), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, ModEtToLtReportsEveryWait) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  ASSERT_TRUE(Wait(ep).empty());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN, 2), 0);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}})) << i;
}

TEST_P(TriggerModes, OneshotReportsOnceThenDisabled) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EXPECT_TRUE(Wait(ep).empty()) << "LT readiness does not revive it";
  EfdWrite(efd, 1);
  EXPECT_TRUE(Wait(ep).empty()) << "new edges do not revive it";
}

TEST_P(TriggerModes, OneshotDisabledItemIgnoresHup) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, OneshotDisabledItemIgnoresErr) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], EPOLLOUT | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLOUT, 1}}));
  ASSERT_EQ(Close(p[0]), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, OneshotDisabledItemStaysRegistered) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 2), EEXIST);
  EXPECT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
}

TEST_P(TriggerModes, OneshotModRearmsWithCurrentState) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  ASSERT_EQ(Close(p[1]), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, p[0], EPOLLIN | EPOLLONESHOT, 2), 0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN | EPOLLHUP, 2}}));
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(TriggerModes, OneshotRearmedIdleItemWaitsForNextEvent) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EfdRead(efd);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  EXPECT_TRUE(Wait(ep).empty());
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
}

// A reported ONESHOT item may keep its "queued" mark while disabled
// (src/epoll/wait.cc, HarvestItem); the MOD that re-arms it, in any mode,
// must leave it where the next write's wakeup links it
// (mutant ep-mod-keeps-stale-queued).
TEST_P(TriggerModes, OneshotRearmedAsEtOrLtSeesTheNextWrite) {
  for (uint32_t mode : {uint32_t{EPOLLET}, uint32_t{0}}) {
    int ep = Epoll();
    int efd = Eventfd(1);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
    ASSERT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    EfdRead(efd);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN | mode, 2), 0);
    EXPECT_TRUE(Wait(ep).empty()) << mode;
    EfdWrite(efd, 1);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}})) << mode;
  }
}

// A ONESHOT item queued while ready and idle by its harvest is dropped
// unreported and still armed: the next write reports it
// (mutant ep-oneshot-harvest-keeps-mark-when-idle).
TEST_P(TriggerModes, OneshotFoundIdleByAHarvestReportsTheNextWrite) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  EfdRead(efd);
  EXPECT_TRUE(Wait(ep).empty());
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EXPECT_TRUE(Wait(ep).empty()) << "reported: disabled now";
}

TEST_P(TriggerModes, OneshotEtReportsOnce) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET | EPOLLONESHOT, 1),
            0);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  EfdWrite(efd, 1);
  EXPECT_TRUE(Wait(ep).empty());
}

UEPOLL_INSTANTIATE_BACKENDS(TriggerModes);

}  // namespace
}  // namespace uepoll_test
