// docs/contract.md sections 2 and 3: epoll_create and epoll_ctl errors, in the
// kernel's order of checks (the first failing check decides the errno), and
// the descriptor limit.
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class CtlErrors : public ConformanceTest {
 protected:
  // A regular file: the one descriptor kind epoll refuses to watch. Only
  // the kernel has one; uepoll has no unpollable object.
  int RegularFile() {
    char path[] = "/tmp/uepoll_conf_XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0) << strerror(errno);
    unlink(path);
    return Track(fd);
  }
  void ExpectPathLimit(int middles, int limit);
};

constexpr int kUnknownOp = 17;

TEST_P(CtlErrors, NullEventFailsEfault) {
  int ep = Epoll();
  int efd = Eventfd();
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_ADD, efd, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_MOD, efd, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
}

TEST_P(CtlErrors, NullEventEfaultBeatsBadDescriptors) {
  int c = B().closed_fd;
  EXPECT_ERRNO(B().epoll_ctl(c, EPOLL_CTL_ADD, c, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(c, EPOLL_CTL_MOD, c - 1, nullptr), EFAULT);
}

TEST_P(CtlErrors, NullEventEfaultBeatsUnknownOp) {
  int ep = Epoll();
  int efd = Eventfd();
  EXPECT_ERRNO(B().epoll_ctl(ep, kUnknownOp, efd, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(B().closed_fd, -1, B().closed_fd, nullptr),
               EFAULT);
}

TEST_P(CtlErrors, DelIgnoresNullEvent) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
  EXPECT_TRUE(Wait(ep).empty());
  EXPECT_ERRNO(B().epoll_ctl(B().closed_fd, EPOLL_CTL_DEL, efd, nullptr),
               EBADF);
}

TEST_P(CtlErrors, ClosedEpfdFailsEbadf) {
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(B().closed_fd, EPOLL_CTL_ADD, efd, EPOLLIN, 0), EBADF);
}

TEST_P(CtlErrors, ClosedTargetFailsEbadf) {
  int ep = Epoll();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, B().closed_fd, EPOLLIN, 0), EBADF);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, -1, EPOLLIN, 0), EBADF);
}

TEST_P(CtlErrors, ClosedTargetEbadfBeatsNotAnEpoll) {
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, B().closed_fd, EPOLLIN, 0), EBADF);
}

TEST_P(CtlErrors, UnpollableTargetFailsEperm) {
  if (!IsKernel()) GTEST_SKIP() << "uepoll has no unpollable object";
  int ep = Epoll();
  int file = RegularFile();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, file, EPOLLIN, 0), EPERM);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, file, 0, 0), EPERM);
}

TEST_P(CtlErrors, UnpollableTargetEpermBeatsNotAnEpoll) {
  if (!IsKernel()) GTEST_SKIP() << "uepoll has no unpollable object";
  int efd = Eventfd();
  int file = RegularFile();
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, file, EPOLLIN, 0), EPERM);
}

TEST_P(CtlErrors, EpfdNotAnEpollFailsEinval) {
  int efd = Eventfd();
  int other = Eventfd();
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, other, EPOLLIN, 0), EINVAL);
  // Not ENOENT: the kind check comes before the item lookup.
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_MOD, other, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_ctl(efd, EPOLL_CTL_DEL, other, nullptr), EINVAL);
}

TEST_P(CtlErrors, AddInstanceToItselfFailsEinval) {
  int ep = Epoll();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, ep, EPOLLIN, 0), EINVAL);
}

TEST_P(CtlErrors, AddDupOfInstanceToItselfFailsEinval) {
  int ep = Epoll();
  int d = Dup(ep);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(Ctl(d, EPOLL_CTL_ADD, ep, EPOLLIN, 0), EINVAL);
}

TEST_P(CtlErrors, ExclusiveWithAllowedBitsIsAccepted) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(
      Ctl(ep, EPOLL_CTL_ADD, efd,
          EPOLLEXCLUSIVE | EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLET,
          1),
      0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{kInOut, 1}}));
}

TEST_P(CtlErrors, ExclusiveWithOtherBitsFailsEinval) {
  int ep = Epoll();
  int efd = Eventfd();
  for (uint32_t bit :
       {uint32_t(EPOLLPRI), uint32_t(EPOLLRDHUP), uint32_t(EPOLLONESHOT),
        uint32_t(EPOLLRDNORM), uint32_t(EPOLLWRNORM), 1u << 20}) {
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLEXCLUSIVE | EPOLLIN | bit, 0),
                 EINVAL);
  }
  // None of the refusals registered anything.
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
}

TEST_P(CtlErrors, ExclusiveOnEpollTargetFailsEinval) {
  int ep = Epoll();
  int inner = Epoll();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, inner, EPOLLEXCLUSIVE | EPOLLIN, 0),
               EINVAL);
}

TEST_P(CtlErrors, ExclusiveInModFailsEinvalBeforeLookup) {
  int ep = Epoll();
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLEXCLUSIVE | EPOLLIN, 0),
               EINVAL);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLEXCLUSIVE | EPOLLIN, 2),
               EINVAL);
}

TEST_P(CtlErrors, ExclusiveBitCheckBeatsEexist) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLEXCLUSIVE | EPOLLPRI, 2),
               EINVAL);
}

TEST_P(CtlErrors, ModOfExclusiveItemFailsEinvalAndKeepsIt) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLEXCLUSIVE | EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLOUT, 2), EINVAL);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  EXPECT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
}

TEST_P(CtlErrors, AddOfExistingItemFailsEexistKeepingOriginalData) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLOUT, 2), EEXIST);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

TEST_P(CtlErrors, ModOrDelOfMissingItemFailsEnoent) {
  int ep = Epoll();
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN, 0), ENOENT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 0), 0);
  ASSERT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
}

// A ctl right after a wait most often names the item just reported, and
// uepoll looks that one up first (BENCHMARKS.md, "The ctl's lookup
// hint"): a removed item, or another number for the same object, must
// still be told apart.
TEST_P(CtlErrors, ReportedItemDeletedThenModOrDelFailsEnoent) {
  int ep = Epoll();
  int other_ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  ASSERT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
  // Another instance's item for the same number, likely in the memory the
  // deleted one had: still not ep's.
  ASSERT_EQ(Ctl(other_ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 4), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN, 2), ENOENT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
  EXPECT_TRUE(Wait(ep).empty());
  EXPECT_EQ(Wait(other_ep), (std::vector<Ev>{{EPOLLIN, 4}}));
  EXPECT_TRUE(Wait(other_ep).empty());
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 3), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 3}}));
}

TEST_P(CtlErrors, ReportedItemsNumberReusedThenModFailsEnoent) {
  int ep = Epoll();
  int efd = Eventfd(1);
  int other = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  // The last close removes the item; the same number then names another
  // object, which the instance does not hold.
  ASSERT_EQ(B().dup2(other, efd), efd);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, efd, EPOLLIN, 2), ENOENT);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(CtlErrors, ModAfterAReportNamesTheItemOfItsOwnNumber) {
  int ep = Epoll();
  int efd = Eventfd(1);
  int dup = Dup(efd);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLONESHOT, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, dup, EPOLLIN | EPOLLONESHOT, 2), 0);
  std::vector<Ev> first = Wait(ep, 1);
  ASSERT_EQ(first.size(), 1u);
  // The same object under the other number: its item, still armed and
  // ready, takes the new data; the reported one stays disabled.
  int reported = first[0].data == 1 ? efd : dup;
  int other = reported == efd ? dup : efd;
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, other, EPOLLIN, 7), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
  EXPECT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, other, nullptr), 0);
  EXPECT_TRUE(Wait(ep).empty());
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, reported, EPOLLIN, 9), EEXIST);
}

TEST_P(CtlErrors, UnknownOpFailsEinvalRegisteredOrNot) {
  int ep = Epoll();
  int efd = Eventfd(1);
  EXPECT_ERRNO(Ctl(ep, kUnknownOp, efd, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(Ctl(ep, 0, efd, EPOLLIN, 0), EINVAL);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, kUnknownOp, efd, EPOLLOUT, 2), EINVAL);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

TEST_P(CtlErrors, UnknownOpCheckedAfterDescriptors) {
  int ep = Epoll();
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(ep, kUnknownOp, B().closed_fd, EPOLLIN, 0), EBADF);
  EXPECT_ERRNO(Ctl(efd, kUnknownOp, ep, EPOLLIN, 0), EINVAL);
}

TEST_P(CtlErrors, AddClosingACycleFailsEloop) {
  int a = Epoll();
  int b = Epoll();
  ASSERT_EQ(Ctl(a, EPOLL_CTL_ADD, b, EPOLLIN, 0), 0);
  EXPECT_ERRNO(Ctl(b, EPOLL_CTL_ADD, a, EPOLLIN, 0), ELOOP);
}

TEST_P(CtlErrors, ChainOfFiveInstancesAllowedSixthFailsEloop) {
  int e[6];
  for (int& x : e) x = Epoll();
  // e4 -> e3 -> e2 -> e1 -> e0: four links, the most allowed.
  for (int i = 1; i < 5; ++i)
    ASSERT_EQ(Ctl(e[i], EPOLL_CTL_ADD, e[i - 1], EPOLLIN, 0), 0) << i;
  EXPECT_ERRNO(Ctl(e[5], EPOLL_CTL_ADD, e[4], EPOLLIN, 0), ELOOP);
  EXPECT_ERRNO(Ctl(e[0], EPOLL_CTL_ADD, e[5], EPOLLIN, 0), ELOOP);
}

// Builds e -> m[0] -> ... -> m[middles-1] and adds `limit` top instances on
// m[last], each one more wakeup path of length middles+1 to the eventfd;
// the next top instance must fail EINVAL and stay unregistered.
void CtlErrors::ExpectPathLimit(int middles, int limit) {
  int e = Eventfd();
  int below = e;
  for (int i = 0; i < middles; ++i) {
    int m = Epoll();
    ASSERT_EQ(Ctl(m, EPOLL_CTL_ADD, below, EPOLLIN, 0), 0) << i;
    below = m;
  }
  for (int i = 0; i < limit; ++i)
    ASSERT_EQ(Ctl(Epoll(), EPOLL_CTL_ADD, below, EPOLLIN, 0), 0) << i;
  int last = Epoll();
  EXPECT_ERRNO(Ctl(last, EPOLL_CTL_ADD, below, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_ctl(last, EPOLL_CTL_DEL, below, nullptr), ENOENT);
}

TEST_P(CtlErrors, PathsOfLengthTwoLimitedToFiveHundred) {
  ExpectPathLimit(1, 500);
}
TEST_P(CtlErrors, PathsOfLengthThreeLimitedToHundred) {
  ExpectPathLimit(2, 100);
}
TEST_P(CtlErrors, PathsOfLengthFourLimitedToFifty) { ExpectPathLimit(3, 50); }
TEST_P(CtlErrors, PathsOfLengthFiveLimitedToTen) { ExpectPathLimit(4, 10); }

TEST_P(CtlErrors, EpollCreateNonPositiveSizeFailsEinval) {
  EXPECT_ERRNO(B().epoll_create(0), EINVAL);
  EXPECT_ERRNO(B().epoll_create(-1), EINVAL);
  EXPECT_ERRNO(B().epoll_create(INT_MIN), EINVAL);
}

// The size is a hint the kernel has ignored since 2.6.8; only its sign
// matters.
TEST_P(CtlErrors, EpollCreateAnyPositiveSizeWorks) {
  for (int size : {1, 2, 1 << 20, INT_MAX}) {
    int ep = Track(B().epoll_create(size));
    EXPECT_GE(ep, 0) << size << ": " << strerror(errno);
  }
}

TEST_P(CtlErrors, EpollCreate1UnknownFlagsFailEinval) {
  EXPECT_ERRNO(B().epoll_create1(1), EINVAL);
  EXPECT_ERRNO(B().epoll_create1(O_NONBLOCK), EINVAL);
  EXPECT_ERRNO(B().epoll_create1(EPOLL_CLOEXEC | 2), EINVAL);
}

TEST_P(CtlErrors, EpollCreate1CloexecSetsFdCloexec) {
  int plain = Epoll(0);
  int cloexec = Epoll(EPOLL_CLOEXEC);
  EXPECT_EQ(B().fcntl(plain, F_GETFD, 0), 0);
  EXPECT_EQ(B().fcntl(cloexec, F_GETFD, 0), FD_CLOEXEC);
}

TEST_P(CtlErrors, ReadOrWriteOnEpollFdFailsEinval) {
  int ep = Epoll();
  char buf[8] = {};
  EXPECT_ERRNO(B().read(ep, buf, sizeof buf), EINVAL);
  EXPECT_ERRNO(B().write(ep, buf, sizeof buf), EINVAL);
}

// Lowers the descriptor limit for one test and always restores it.
class FdLimit {
 public:
  FdLimit(const Backend& b, long limit) : b_(b), prev_(b.set_fd_limit(limit)) {}
  ~FdLimit() {
    if (prev_ > 0) b_.set_fd_limit(prev_);
  }
  bool ok() const { return prev_ > 0; }

 private:
  const Backend& b_;
  long prev_;
};

TEST_P(CtlErrors, FullDescriptorTableFailsEmfileEverywhere) {
  std::vector<int> fds;
  {
    FdLimit limit(B(), 64);
    ASSERT_TRUE(limit.ok()) << strerror(errno);
    for (int i = 0; i < 200; ++i) {
      int fd = B().eventfd(0, 0);
      if (fd < 0) {
        EXPECT_EQ(errno, EMFILE);
        break;
      }
      fds.push_back(Track(fd));
    }
    ASSERT_FALSE(fds.empty());
    ASSERT_LT(fds.size(), 200u);
    int sv[2];
    EXPECT_ERRNO(B().epoll_create1(0), EMFILE);
    EXPECT_ERRNO(B().epoll_create(1), EMFILE);
    EXPECT_ERRNO(B().pipe(sv), EMFILE);
    EXPECT_ERRNO(B().socketpair(AF_UNIX, SOCK_STREAM, 0, sv), EMFILE);
    EXPECT_ERRNO(B().dup(fds[0]), EMFILE);
    EXPECT_ERRNO(B().fcntl(fds[0], F_DUPFD, 0), EMFILE);
    // One free slot: a pair still fails whole, a single descriptor fits.
    ASSERT_EQ(Close(fds.back()), 0);
    fds.pop_back();
    EXPECT_ERRNO(B().pipe(sv), EMFILE);
    EXPECT_ERRNO(B().socketpair(AF_UNIX, SOCK_STREAM, 0, sv), EMFILE);
    int ep = Track(B().epoll_create1(0));
    EXPECT_GE(ep, 0) << strerror(errno);
  }
  for (int fd : fds) ASSERT_EQ(Close(fd), 0);
}

// Direct watchers are not counted (the kernel's table has a 1000 entry for
// them that it never applies): a source may sit in any number of unwatched
// instances.
TEST_P(CtlErrors, DirectWatchersAreUnlimited) {
  FdLimit limit(B(), 2048);
  if (!limit.ok()) GTEST_SKIP() << "cannot raise the descriptor limit";
  int e = Eventfd();
  for (int i = 0; i < 1100; ++i)
    ASSERT_EQ(Ctl(Epoll(), EPOLL_CTL_ADD, e, EPOLLIN, 0), 0) << i;
}

UEPOLL_INSTANTIATE_BACKENDS(CtlErrors);

}  // namespace
}  // namespace uepoll_test
