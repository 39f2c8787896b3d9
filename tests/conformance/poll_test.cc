// poll() on every descriptor kind: the exact revents the kernel computes
// (docs/contract.md section 12: the masks of section 10, seen through poll),
// POLLNVAL, negative fds.
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class Poll : public ConformanceTest {};

constexpr short kSockOut = POLLOUT | POLLWRNORM | POLLWRBAND;
constexpr short kSockIn = POLLIN | POLLRDNORM;

// eventfd reports plain IN/OUT, without the RDNORM/WRNORM companions.
TEST_P(Poll, EventfdMasksHaveNoNormBits) {
  int idle = Eventfd();
  int ready = Eventfd(1);
  EXPECT_EQ(PollMask(idle), POLLOUT);
  EXPECT_EQ(PollMask(ready), POLLIN | POLLOUT);
}

TEST_P(Poll, EventfdAtMaxCountIsInOnly) {
  int efd = Eventfd();
  EfdWrite(efd, ~uint64_t{0} - 1);
  EXPECT_EQ(PollMask(efd), POLLIN);
}

TEST_P(Poll, PipeEndMasks) {
  int p[2];
  Pipe(p);
  EXPECT_EQ(PollMask(p[0]), 0);
  EXPECT_EQ(PollMask(p[1]), POLLOUT | POLLWRNORM);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  EXPECT_EQ(PollMask(p[0]), POLLIN | POLLRDNORM);
}

TEST_P(Poll, PipeHupAndErrMasks) {
  int a[2], b[2];
  Pipe(a);
  Pipe(b);
  ASSERT_EQ(Close(a[1]), 0);
  ASSERT_EQ(Close(b[0]), 0);
  EXPECT_EQ(PollMask(a[0]), POLLHUP);
  EXPECT_EQ(PollMask(b[1]), POLLOUT | POLLWRNORM | POLLERR);
}

TEST_P(Poll, SocketMasksIncludeWrband) {
  int sv[2];
  SocketPair(sv);
  EXPECT_EQ(PollMask(sv[0]), kSockOut);
  ASSERT_EQ(WriteBytes(sv[1], 1), 1);
  EXPECT_EQ(PollMask(sv[0]), kSockIn | kSockOut);
}

TEST_P(Poll, SocketShutdownAndCloseMasks) {
  int sv[2], tv[2];
  SocketPair(sv);
  SocketPair(tv);
  ASSERT_EQ(B().shutdown(sv[1], SHUT_WR), 0);
  EXPECT_EQ(PollMask(sv[0]), kSockIn | kSockOut | POLLRDHUP);
  ASSERT_EQ(WriteBytes(tv[0], 1), 1);
  ASSERT_EQ(Close(tv[1]), 0);
  EXPECT_EQ(PollMask(tv[0]),
            kSockIn | kSockOut | POLLRDHUP | POLLHUP | POLLERR);
}

TEST_P(Poll, EpollInstanceIsInRdnormWhenAnItemIsReady) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 1), 0);
  EXPECT_EQ(PollMask(ep), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(PollMask(ep), POLLIN | POLLRDNORM);
}

TEST_P(Poll, EpollInstanceWithOnlyNonInterestingReadinessIsIdle) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLPRI, 1), 0);
  EXPECT_EQ(PollMask(ep), 0);
}

TEST_P(Poll, OnlyRequestedBitsPlusErrHupAreReported) {
  int efd = Eventfd(1);
  int p[2];
  Pipe(p);
  ASSERT_EQ(Close(p[1]), 0);
  struct pollfd fds[2] = {{efd, POLLPRI, 0}, {p[0], POLLOUT, 0}};
  EXPECT_EQ(B().poll(fds, 2, 0), 1);
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_EQ(fds[1].revents, POLLHUP);
}

TEST_P(Poll, ClosedFdIsPollnvalAndCounted) {
  int efd = Eventfd();
  struct pollfd fds[2] = {{B().closed_fd, POLLIN, 0}, {efd, POLLIN, 0}};
  EXPECT_EQ(B().poll(fds, 2, 0), 1);
  EXPECT_EQ(fds[0].revents, POLLNVAL);
  EXPECT_EQ(fds[1].revents, 0);
}

TEST_P(Poll, PollnvalEvenWithNoEventsRequested) {
  struct pollfd fd = {B().closed_fd, 0, 0};
  EXPECT_EQ(B().poll(&fd, 1, 0), 1);
  EXPECT_EQ(fd.revents, POLLNVAL);
}

TEST_P(Poll, NegativeFdIsIgnoredAndItsReventsCleared) {
  int efd = Eventfd(1);
  struct pollfd fds[2] = {{-1, POLLIN, POLLIN}, {efd, POLLIN, 0}};
  EXPECT_EQ(B().poll(fds, 2, 0), 1);
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_EQ(fds[1].revents, POLLIN);
}

TEST_P(Poll, ReturnsNumberOfEntriesWithEvents) {
  int a = Eventfd(1), b = Eventfd(), c = Eventfd(2);
  struct pollfd fds[3] = {{a, POLLIN, 0}, {b, POLLIN, 0}, {c, POLLIN, 0}};
  EXPECT_EQ(B().poll(fds, 3, 0), 2);
  EXPECT_EQ(fds[1].revents, 0);
}

TEST_P(Poll, DuplicateEntriesAreEachCounted) {
  int efd = Eventfd(1);
  int d = Dup(efd);
  struct pollfd fds[3] = {{efd, POLLIN, 0}, {efd, POLLOUT, 0}, {d, POLLIN, 0}};
  EXPECT_EQ(B().poll(fds, 3, 0), 3);
  EXPECT_EQ(fds[0].revents, POLLIN);
  EXPECT_EQ(fds[1].revents, POLLOUT);
  EXPECT_EQ(fds[2].revents, POLLIN);
}

TEST_P(Poll, StaleReventsAreOverwritten) {
  int efd = Eventfd();
  struct pollfd fd = {efd, POLLIN, static_cast<short>(POLLIN | POLLHUP)};
  EXPECT_EQ(B().poll(&fd, 1, 0), 0);
  EXPECT_EQ(fd.revents, 0);
}

TEST_P(Poll, ShortTimeoutReturnsZeroNoEarlier) {
  int efd = Eventfd();
  struct pollfd fd = {efd, POLLIN, 0};
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().poll(&fd, 1, 25), 0);
  EXPECT_ELAPSED(t0, 25 * 1000000LL);
}

TEST_P(Poll, ReadyEntryReturnsDespiteNegativeTimeout) {
  int efd = Eventfd(1);
  struct pollfd fd = {efd, POLLIN, 0};
  EXPECT_EQ(B().poll(&fd, 1, -1), 1);
}

TEST_P(Poll, PollingDoesNotConsumeAnEtEdge) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  EfdWrite(efd, 1);
  EXPECT_EQ(PollMask(efd), POLLIN | POLLOUT);
  EXPECT_EQ(PollMask(ep), POLLIN | POLLRDNORM);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
}

UEPOLL_INSTANTIATE_BACKENDS(Poll);

}  // namespace
}  // namespace uepoll_test
