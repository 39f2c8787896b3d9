// docs/contract.md section 10, stream socketpairs: masks after data, each kind
// of shutdown and peer close, EOF, EPIPE, and socketpair's argument errors.
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class SourcesSocketpair : public ConformanceTest {
 protected:
  // The mask an LT item with the bits epoll users ask for reports now.
  uint32_t EpollMask(int fd, uint32_t interest = kAll) {
    int ep = Epoll();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, interest, 0), 0);
    std::vector<Ev> evs = Wait(ep);
    Close(ep);
    return evs.empty() ? 0 : evs[0].events;
  }
  static constexpr uint32_t kAll = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI;
};

constexpr uint32_t kShutdownPeer = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
constexpr uint32_t kHungUp = EPOLLIN | EPOLLOUT | EPOLLHUP | EPOLLRDHUP;

TEST_P(SourcesSocketpair, FreshSocketIsOutOnly) {
  int sv[2];
  SocketPair(sv);
  EXPECT_EQ(EpollMask(sv[0]), uint32_t(EPOLLOUT));
  EXPECT_EQ(EpollMask(sv[1]), uint32_t(EPOLLOUT));
}

TEST_P(SourcesSocketpair, DataMakesReceiverInAndOut) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(sv[1], 5), 5);
  EXPECT_EQ(EpollMask(sv[0]), kInOut);
  EXPECT_EQ(EpollMask(sv[1]), uint32_t(EPOLLOUT));
}

TEST_P(SourcesSocketpair, PeerShutWrIsInOutRdhup) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[1], SHUT_WR), 0);
  EXPECT_EQ(EpollMask(sv[0]), kShutdownPeer);
  EXPECT_EQ(EpollMask(sv[1]), uint32_t(EPOLLOUT));
}

TEST_P(SourcesSocketpair, RdhupReportedOnlyIfAsked) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[1], SHUT_WR), 0);
  EXPECT_EQ(EpollMask(sv[0], EPOLLIN), uint32_t(EPOLLIN));
  EXPECT_EQ(EpollMask(sv[0], EPOLLRDHUP), uint32_t(EPOLLRDHUP));
}

TEST_P(SourcesSocketpair, OwnShutRdIsInOutRdhupPeerOutOnly) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_RD), 0);
  EXPECT_EQ(EpollMask(sv[0]), kShutdownPeer);
  EXPECT_EQ(EpollMask(sv[1]), uint32_t(EPOLLOUT));
}

TEST_P(SourcesSocketpair, ShutRdwrIsHupOnBothEnds) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_RDWR), 0);
  EXPECT_EQ(EpollMask(sv[0]), kHungUp);
  EXPECT_EQ(EpollMask(sv[1]), kHungUp);
}

TEST_P(SourcesSocketpair, ShutWrOnBothEndsIsHupOnBothEnds) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_WR), 0);
  ASSERT_EQ(B().shutdown(sv[1], SHUT_WR), 0);
  EXPECT_EQ(EpollMask(sv[0]), kHungUp);
  EXPECT_EQ(EpollMask(sv[1]), kHungUp);
}

TEST_P(SourcesSocketpair, PeerCloseIsInOutHupRdhup) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_EQ(EpollMask(sv[0]), kHungUp);
}

TEST_P(SourcesSocketpair, PeerCloseWithItsDataUnreadAddsErr) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(sv[0], 3), 3);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_EQ(EpollMask(sv[0]), kHungUp | EPOLLERR);
}

TEST_P(SourcesSocketpair, ReadAfterResetFailsEconnresetOnceThenEof) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(sv[0], 3), 3);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_ERRNO(ReadBytes(sv[0], 10), ECONNRESET);
  EXPECT_EQ(EpollMask(sv[0]), kHungUp) << "reading clears ERR";
  EXPECT_EQ(ReadBytes(sv[0], 10), 0);
}

TEST_P(SourcesSocketpair, PeerCloseWithOwnDataUnreadIsNoErr) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(sv[1], 3), 3);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_EQ(EpollMask(sv[0]), kHungUp);
  EXPECT_EQ(ReadBytes(sv[0], 10), 3);
  EXPECT_EQ(ReadBytes(sv[0], 10), 0);
}

TEST_P(SourcesSocketpair, ReadReturnsZeroAtEofAfterPeerShutWr) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(sv[1], 4), 4);
  ASSERT_EQ(B().shutdown(sv[1], SHUT_WR), 0);
  EXPECT_EQ(ReadBytes(sv[0], 10), 4);
  EXPECT_EQ(ReadBytes(sv[0], 10), 0);
}

TEST_P(SourcesSocketpair, ShutRdKeepsQueuedDataReadable) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(WriteBytes(sv[1], 3), 3);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_RD), 0);
  EXPECT_EQ(ReadBytes(sv[0], 10), 3);
  EXPECT_EQ(ReadBytes(sv[0], 10), 0);
}

TEST_P(SourcesSocketpair, ReadOfEmptyNonblockingSocketFailsEagain) {
  int sv[2];
  SocketPair(sv, SOCK_NONBLOCK);
  EXPECT_ERRNO(ReadBytes(sv[0], 10), EAGAIN);
}

TEST_P(SourcesSocketpair, WriteAfterOwnShutWrFailsEpipe) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_WR), 0);
  EXPECT_TRUE(
      RaisesSigpipe([&] { EXPECT_ERRNO(WriteBytes(sv[0], 1), EPIPE); }));
}

TEST_P(SourcesSocketpair, WriteAfterPeerShutRdFailsEpipe) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().shutdown(sv[1], SHUT_RD), 0);
  EXPECT_TRUE(
      RaisesSigpipe([&] { EXPECT_ERRNO(WriteBytes(sv[0], 1), EPIPE); }));
}

TEST_P(SourcesSocketpair, WriteAfterPeerCloseFailsEpipe) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_TRUE(
      RaisesSigpipe([&] { EXPECT_ERRNO(WriteBytes(sv[0], 1), EPIPE); }));
}

TEST_P(SourcesSocketpair, DataWrittenBeforeShutWrIsEdgeAndShutWrIsEdge) {
  int ep = Epoll();
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[0], EPOLLIN | EPOLLRDHUP | EPOLLET, 1),
            0);
  ASSERT_EQ(WriteBytes(sv[1], 1), 1);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  ASSERT_EQ(B().shutdown(sv[1], SHUT_WR), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN | EPOLLRDHUP, 1}}));
}

// shutdown wakes the caller's own socket too (sk_state_change on both ends):
// an ET item on the end that shut down reading gets the IN|RDHUP edge.
TEST_P(SourcesSocketpair, OwnShutRdIsAnEdgeForEtReader) {
  int ep = Epoll();
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[0], EPOLLIN | EPOLLRDHUP | EPOLLET, 1),
            0);
  ASSERT_EQ(Wait(ep), std::vector<Ev>{});
  ASSERT_EQ(B().shutdown(sv[0], SHUT_RD), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN | EPOLLRDHUP, 1}}));
}

// The data wakeup's key is sock_def_readable's IN|PRI|RDNORM|RDBAND: an
// item that asks for RDNORM (or RDBAND) alone is woken by a write.
TEST_P(SourcesSocketpair, WriteWakesAnItemAskingOnlyForRdnorm) {
  int ep = Epoll();
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[0], EPOLLRDNORM, 1), 0);
  ASSERT_EQ(Wait(ep), std::vector<Ev>{});
  ASSERT_EQ(WriteBytes(sv[1], 1), 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLRDNORM, 1}}));
}

TEST_P(SourcesSocketpair, ShutdownBadHowFailsEinval) {
  int sv[2];
  SocketPair(sv);
  EXPECT_ERRNO(B().shutdown(sv[0], 3), EINVAL);
  EXPECT_ERRNO(B().shutdown(sv[0], -1), EINVAL);
  EXPECT_EQ(EpollMask(sv[1]), uint32_t(EPOLLOUT)) << "no shutdown happened";
}

TEST_P(SourcesSocketpair, ShutdownOnNonSocketFailsEnotsock) {
  int p[2];
  Pipe(p);
  int efd = Eventfd();
  int ep = Epoll();
  EXPECT_ERRNO(B().shutdown(p[0], SHUT_RD), ENOTSOCK);
  EXPECT_ERRNO(B().shutdown(efd, SHUT_RDWR), ENOTSOCK);
  // The kind is checked before how.
  EXPECT_ERRNO(B().shutdown(ep, 9), ENOTSOCK);
  EXPECT_ERRNO(B().shutdown(B().closed_fd, 9), EBADF);
}

TEST_P(SourcesSocketpair, SocketpairErrnoByArgument) {
  int sv[2] = {-1, -1};
  EXPECT_ERRNO(B().socketpair(AF_INET, SOCK_STREAM, 0, sv), EOPNOTSUPP);
  EXPECT_ERRNO(B().socketpair(12345, SOCK_STREAM, 0, sv), EAFNOSUPPORT);
  EXPECT_ERRNO(B().socketpair(-1, SOCK_STREAM, 0, sv), EAFNOSUPPORT);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, 99, 0, sv), EINVAL);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, -1, 0, sv), EINVAL);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, 7, 0, sv), ESOCKTNOSUPPORT);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, SOCK_STREAM | 0x1000, 0, sv), EINVAL);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, SOCK_STREAM, 5, sv), EPROTONOSUPPORT);
}

TEST_P(SourcesSocketpair, FlagsSetNonblockAndCloexecOnBothEnds) {
  int sv[2];
  SocketPair(sv, SOCK_NONBLOCK | SOCK_CLOEXEC);
  for (int fd : sv) {
    EXPECT_EQ(B().fcntl(fd, F_GETFL, 0) & (O_ACCMODE | O_NONBLOCK),
              O_RDWR | O_NONBLOCK);
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), FD_CLOEXEC);
  }
}

TEST_P(SourcesSocketpair, BothEndsCarryBytesInOrder) {
  int sv[2];
  SocketPair(sv);
  ASSERT_EQ(B().write(sv[0], "ping", 4), 4);
  ASSERT_EQ(B().write(sv[1], "pong", 4), 4);
  char a[8] = {}, b[8] = {};
  EXPECT_EQ(B().read(sv[1], a, sizeof a), 4);
  EXPECT_EQ(B().read(sv[0], b, sizeof b), 4);
  EXPECT_STREQ(a, "ping");
  EXPECT_STREQ(b, "pong");
}

UEPOLL_INSTANTIATE_BACKENDS(SourcesSocketpair);

}  // namespace
}  // namespace uepoll_test
