// docs/contract.md section 6: reports come in the order items became ready, a
// short buffer takes exactly maxevents, and nothing is reported twice.
#include <set>
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class Ordering : public ConformanceTest {
 protected:
  std::vector<uint64_t> Datas(int ep, int max = 16) {
    std::vector<uint64_t> out;
    for (const Ev& e : Wait(ep, max)) out.push_back(e.data);
    return out;
  }
  // n idle eventfds registered with data 0..n-1.
  std::vector<int> Items(int ep, int n, uint32_t events) {
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
      fds.push_back(Eventfd());
      EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, fds.back(), events, uint64_t(i)), 0);
    }
    return fds;
  }
};

using Ids = std::vector<uint64_t>;

TEST_P(Ordering, ReportOrderIsOrderOfBecomingReady) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 4, EPOLLIN);
  for (int i : {2, 0, 3, 1}) EfdWrite(f[i], 1);
  EXPECT_EQ(Datas(ep), (Ids{2, 0, 3, 1}));
}

TEST_P(Ordering, ItemsReadyAtAddQueueInAddOrder) {
  int ep = Epoll();
  int a = Eventfd(1), b = Eventfd(1), c = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN, 0), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN, 1), 0);
  EXPECT_EQ(Datas(ep), (Ids{2, 0, 1}));
}

TEST_P(Ordering, NewEventOnQueuedItemKeepsItsPlace) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 3, EPOLLIN | EPOLLET);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  EfdWrite(f[0], 1);
  EfdWrite(f[2], 1);
  EXPECT_EQ(Datas(ep), (Ids{0, 1, 2}));
}

TEST_P(Ordering, ModOfQueuedItemKeepsItsPlace) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 2, EPOLLIN);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, f[0], EPOLLIN, 7), 0);
  EXPECT_EQ(Datas(ep), (Ids{7, 1}));
}

TEST_P(Ordering, DelAndReAddMovesItemToTail) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 2, EPOLLIN);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  ASSERT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, f[0], nullptr), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, f[0], EPOLLIN, 0), 0);
  EXPECT_EQ(Datas(ep), (Ids{1, 0}));
}

TEST_P(Ordering, LtItemGoesBehindLaterReadyItems) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 3, EPOLLIN);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  ASSERT_EQ(Datas(ep, 1), (Ids{0}));
  EfdWrite(f[2], 1);
  EXPECT_EQ(Datas(ep), (Ids{1, 0, 2}));
}

TEST_P(Ordering, MaxeventsSmallerThanReadyReturnsExactlyMaxNoDuplicates) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 5, EPOLLIN | EPOLLET);
  for (int fd : f) EfdWrite(fd, 1);
  std::vector<size_t> sizes;
  std::set<uint64_t> seen;
  for (int round = 0; round < 4; ++round) {
    Ids got = Datas(ep, 2);
    sizes.push_back(got.size());
    for (uint64_t d : got) EXPECT_TRUE(seen.insert(d).second) << d;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1, 0}));
  EXPECT_EQ(seen.size(), 5u);
}

TEST_P(Ordering, LeftoverItemsComeFirstInTheNextCall) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 4, EPOLLIN | EPOLLET);
  for (int fd : f) EfdWrite(fd, 1);
  ASSERT_EQ(Datas(ep, 3), (Ids{0, 1, 2}));
  EfdWrite(f[0], 1);
  EXPECT_EQ(Datas(ep), (Ids{3, 0}));
}

TEST_P(Ordering, IdleQueuedItemDoesNotUseASlot) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 3, EPOLLIN);
  for (int fd : f) EfdWrite(fd, 1);
  EfdRead(f[1]);
  EXPECT_EQ(Datas(ep, 2), (Ids{0, 2}));
}

TEST_P(Ordering, OneshotItemLeavesRoundRobin) {
  int ep = Epoll();
  int a = Eventfd(1), b = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN | EPOLLONESHOT, 0), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN, 1), 0);
  EXPECT_EQ(Datas(ep, 1), (Ids{0}));
  EXPECT_EQ(Datas(ep), (Ids{1}));
  EXPECT_EQ(Datas(ep), (Ids{1}));
}

UEPOLL_INSTANTIATE_BACKENDS(Ordering);

}  // namespace
}  // namespace uepoll_test
