// docs/contract.md section 3: items are keyed by (object, descriptor number),
// they die with the object's last descriptor, wakeup hints only filter, and
// what a wait reports is re-polled at harvest time.
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class ObjectModel : public ConformanceTest {};

TEST_P(ObjectModel, FdAndDupAreTwoIndependentItems) {
  int ep = Epoll();
  int efd = Eventfd();
  int d = Dup(efd);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 2), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(Sorted(Wait(ep)), (std::vector<Ev>{{EPOLLIN, 1}, {EPOLLIN, 2}}));
}

// One wakeup walks the source's watchers newest registration first, so that
// is the order in which they join the ready list (kernel: add_wait_queue
// inserts at the head).
TEST_P(ObjectModel, OneWakeQueuesWatchersNewestFirst) {
  int ep = Epoll();
  int a = Eventfd();
  int b = Dup(a);
  int c = Dup(a);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 3), 0);
  EfdWrite(a, 1);
  EXPECT_EQ(Wait(ep),
            (std::vector<Ev>{{EPOLLIN, 3}, {EPOLLIN, 2}, {EPOLLIN, 1}}));
}

TEST_P(ObjectModel, DelOfOneItemLeavesItsDupItem) {
  int ep = Epoll();
  int efd = Eventfd();
  int d = Dup(efd);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 2), 0);
  ASSERT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 2}}));
}

TEST_P(ObjectModel, StaleItemKeepsReportingWithOldData) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 41), 0);
  int d = Dup(efd);
  ASSERT_EQ(Close(efd), 0);
  EfdWrite(d, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 41}}));
}

TEST_P(ObjectModel, DelThroughClosedNumberFailsEbadf) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  int d = Dup(efd);
  ASSERT_EQ(Close(efd), 0);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), EBADF);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLOUT, 2), EBADF);
  // The stale item survived both failures.
  EfdWrite(d, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

TEST_P(ObjectModel, DelThroughDupOfStaleItemFailsEnoent) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  int d = Dup(efd);
  ASSERT_EQ(Close(efd), 0);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, d, nullptr), ENOENT);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, d, EPOLLIN, 2), ENOENT);
}

TEST_P(ObjectModel, AddThroughDupAfterCloseMakesSecondItem) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  int d = Dup(efd);
  ASSERT_EQ(Close(efd), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 2), 0);
  EfdWrite(d, 1);
  EXPECT_EQ(Sorted(Wait(ep)), (std::vector<Ev>{{EPOLLIN, 1}, {EPOLLIN, 2}}));
}

TEST_P(ObjectModel, DupBackOntoOldNumberFindsStaleItem) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  int d = Dup(efd);
  ASSERT_EQ(Close(efd), 0);
  // Same object under the same number again: the key matches once more.
  ASSERT_EQ(Track(B().dup2(d, efd)), efd);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 9), EEXIST);
  EXPECT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
  EfdWrite(d, 1);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(ObjectModel, LastCloseRemovesItemSilently) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Close(efd), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(ObjectModel, LastCloseRemovesItemAlreadyOnReadyList) {
  int ep = Epoll();
  int efd = Eventfd();
  int other = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, other, EPOLLIN, 2), 0);
  EfdWrite(efd, 1);
  EfdWrite(other, 1);
  ASSERT_EQ(Close(efd), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 2}}));
}

TEST_P(ObjectModel, LastCloseThroughDupRemovesStaleItem) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  int d = Dup(efd);
  ASSERT_EQ(Close(efd), 0);
  EfdWrite(d, 1);
  ASSERT_EQ(Close(d), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(ObjectModel, NumberFreedByLastCloseCanBeAddedAgain) {
  int ep = Epoll();
  int efd = Eventfd();
  int other = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Close(efd), 0);
  ASSERT_EQ(Track(B().dup2(other, efd)), efd);
  EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 2), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 2}}));
}

TEST_P(ObjectModel, HintWithoutInterestBitsIsNoEtEdge) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLOUT | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
  // An eventfd write wakes with an IN hint; an OUT-only watcher is skipped
  // although OUT is still true.
  EfdWrite(efd, 1);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(ObjectModel, HarvestReportsCurrentMaskNotTheHint) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, kInOut | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{kInOut, 1}}));
}

TEST_P(ObjectModel, ReadyThenIdleBeforeWaitNotReportedLt) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EfdWrite(efd, 1);
  EfdRead(efd);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(ObjectModel, ReadyThenIdleBeforeWaitNotReportedEt) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  EfdWrite(efd, 1);
  EfdRead(efd);
  EXPECT_TRUE(Wait(ep).empty());
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

TEST_P(ObjectModel, ReportIsMaskedByInterest) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

TEST_P(ObjectModel, AddWithEmptyInterestStillReportsHup) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], 0, 1), 0);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  EXPECT_TRUE(Wait(ep).empty()) << "data alone is not ERR/HUP";
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLHUP, 1}}));
}

TEST_P(ObjectModel, AddWithEmptyInterestStillReportsErr) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], 0, 1), 0);
  ASSERT_EQ(Close(p[0]), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLERR, 1}}));
}

TEST_P(ObjectModel, ModToEmptyInterestStillReportsHup) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, p[0], 0, 2), 0);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLHUP, 2}}));
}

TEST_P(ObjectModel, UnknownEventBitsAcceptedByAdd) {
  int ep = Epoll();
  int efd = Eventfd(1);
  const uint32_t unknown = (1u << 20) | (1u << 27);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | unknown, 1), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

TEST_P(ObjectModel, UnknownEventBitsAcceptedByMod) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLOUT | (1u << 21), 2), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 2}}));
}

// None of these sources ever raises PRI, so PRI alone never reports,
// however readable they are.
TEST_P(ObjectModel, PriOnlyInterestReportsNothingOnReadableSources) {
  int ep = Epoll();
  int efd = Eventfd(1);
  int p[2], sv[2];
  Pipe(p);
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  ASSERT_EQ(WriteBytes(sv[1], 1), 1);
  for (int fd : {efd, p[0], sv[0]})
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLPRI, 1), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(ObjectModel, OneSourceInThreeInstancesReportsInEach) {
  int eps[3] = {Epoll(), Epoll(), Epoll()};
  int efd = Eventfd();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(Ctl(eps[i], EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, i), 0);
  EfdWrite(efd, 1);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(Wait(eps[i]), (std::vector<Ev>{{EPOLLIN, uint64_t(i)}}));
}

TEST_P(ObjectModel, AddOfReadySourceSatisfiesBlockingWait) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 5), 0);
  EXPECT_EQ(Wait(ep, 4, -1), (std::vector<Ev>{{EPOLLIN, 5}}));
}

TEST_P(ObjectModel, InstanceSurvivesCloseOfOneOfItsDescriptors) {
  int ep = Epoll();
  int d = Dup(ep);
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  ASSERT_EQ(Close(ep), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(Wait(d), (std::vector<Ev>{{EPOLLIN, 1}}));
  EXPECT_ERRNO(Ctl(d, EPOLL_CTL_ADD, efd, EPOLLIN, 2), EEXIST);
}

TEST_P(ObjectModel, ClosingInstanceLeavesSourceUsable) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EfdWrite(efd, 1);
  ASSERT_EQ(Close(ep), 0);
  EXPECT_EQ(EfdRead(efd), 1u);
  int ep2 = Epoll();
  EXPECT_EQ(Ctl(ep2, EPOLL_CTL_ADD, efd, EPOLLIN, 2), 0);
}

UEPOLL_INSTANTIATE_BACKENDS(ObjectModel);

}  // namespace
}  // namespace uepoll_test
