// Descriptor operations that the object model rests on (docs/contract.md
// sections 3 and 11): fcntl flags per object vs per descriptor,
// dup/dup2/dup3/F_DUPFD numbering, and how replacing a descriptor affects epoll
// items. Numbers are only compared with each other: the backends number from
// different bases.
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class Descriptors : public ConformanceTest {
 protected:
  // Three descriptors taken in a row, each the lowest free one: a < b < c
  // and no free number between a and c.
  void Three(int* a, int* b, int* c) {
    *a = Eventfd();
    *b = Eventfd();
    *c = Eventfd();
    ASSERT_LT(*a, *b);
    ASSERT_LT(*b, *c);
  }
  // The lowest number >= from that is not open, found by asking the backend
  // about each number (F_GETFD fails EBADF only on a free number).
  int LowestFreeFrom(int from) {
    int n = from;
    while (B().fcntl(n, F_GETFD, 0) != -1 || errno != EBADF) ++n;
    return n;
  }
};

TEST_P(Descriptors, GetflReportsAccessModeOfEachKind) {
  int p[2], sv[2];
  Pipe(p);
  SocketPair(sv);
  EXPECT_EQ(B().fcntl(Eventfd(), F_GETFL, 0) & O_ACCMODE, O_RDWR);
  EXPECT_EQ(B().fcntl(Epoll(), F_GETFL, 0) & O_ACCMODE, O_RDWR);
  EXPECT_EQ(B().fcntl(p[0], F_GETFL, 0) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(B().fcntl(p[1], F_GETFL, 0) & O_ACCMODE, O_WRONLY);
  EXPECT_EQ(B().fcntl(sv[0], F_GETFL, 0) & O_ACCMODE, O_RDWR);
}

TEST_P(Descriptors, SetflNonblockMakesEmptyReadFailEagain) {
  int p[2];
  Pipe(p);
  int fl = B().fcntl(p[0], F_GETFL, 0);
  ASSERT_EQ(B().fcntl(p[0], F_SETFL, fl | O_NONBLOCK), 0);
  EXPECT_TRUE(B().fcntl(p[0], F_GETFL, 0) & O_NONBLOCK);
  EXPECT_ERRNO(ReadBytes(p[0], 1), EAGAIN);
  ASSERT_EQ(B().fcntl(p[0], F_SETFL, fl & ~O_NONBLOCK), 0);
  EXPECT_FALSE(B().fcntl(p[0], F_GETFL, 0) & O_NONBLOCK);
}

TEST_P(Descriptors, SetflIgnoresAccessModeBits) {
  int efd = Eventfd(0, 0);
  ASSERT_EQ(B().fcntl(efd, F_SETFL, O_WRONLY | O_NONBLOCK), 0);
  EXPECT_EQ(B().fcntl(efd, F_GETFL, 0) & (O_ACCMODE | O_NONBLOCK),
            O_RDWR | O_NONBLOCK);
}

TEST_P(Descriptors, StatusFlagsBelongToTheObjectSharedByDups) {
  int efd = Eventfd(0, 0);
  int d = Dup(efd);
  ASSERT_EQ(B().fcntl(d, F_SETFL, O_NONBLOCK), 0);
  EXPECT_TRUE(B().fcntl(efd, F_GETFL, 0) & O_NONBLOCK);
  uint64_t v;
  EXPECT_ERRNO(B().read(efd, &v, 8), EAGAIN);
}

TEST_P(Descriptors, CloexecBelongsToTheDescriptor) {
  int efd = Eventfd(0, EFD_CLOEXEC);
  int d = Dup(efd);
  EXPECT_EQ(B().fcntl(efd, F_GETFD, 0), FD_CLOEXEC);
  EXPECT_EQ(B().fcntl(d, F_GETFD, 0), 0) << "dup clears close-on-exec";
  ASSERT_EQ(B().fcntl(d, F_SETFD, FD_CLOEXEC), 0);
  ASSERT_EQ(B().fcntl(efd, F_SETFD, 0), 0);
  EXPECT_EQ(B().fcntl(d, F_GETFD, 0), FD_CLOEXEC);
  EXPECT_EQ(B().fcntl(efd, F_GETFD, 0), 0);
}

TEST_P(Descriptors, DupReturnsLowestFreeNumber) {
  int a, b, c;
  Three(&a, &b, &c);
  ASSERT_EQ(Close(b), 0);
  EXPECT_EQ(Dup(c), b);
}

TEST_P(Descriptors, DupfdReturnsLowestFreeAtOrAboveArg) {
  int a, b, c;
  Three(&a, &b, &c);
  ASSERT_EQ(Close(b), 0);
  EXPECT_EQ(Track(B().fcntl(a, F_DUPFD, a)), b);
  const int expected = LowestFreeFrom(b + 1);
  EXPECT_GT(expected, c);
  int above = Track(B().fcntl(a, F_DUPFD, b + 1));
  EXPECT_EQ(above, expected);
  EXPECT_EQ(B().fcntl(above, F_GETFD, 0), 0);
}

TEST_P(Descriptors, DupfdCloexecSetsCloexec) {
  int efd = Eventfd();
  const int expected = LowestFreeFrom(efd);
  EXPECT_GT(expected, efd);
  int d = Track(B().fcntl(efd, F_DUPFD_CLOEXEC, efd));
  EXPECT_EQ(d, expected);
  EXPECT_EQ(B().fcntl(d, F_GETFD, 0), FD_CLOEXEC);
  EXPECT_EQ(B().fcntl(efd, F_GETFD, 0), 0);
}

TEST_P(Descriptors, Dup2OfSameOpenFdReturnsIt) {
  int efd = Eventfd(0, EFD_CLOEXEC);
  EXPECT_EQ(B().dup2(efd, efd), efd);
  EXPECT_EQ(B().fcntl(efd, F_GETFD, 0), FD_CLOEXEC) << "nothing changed";
  EXPECT_ERRNO(B().dup2(B().closed_fd, B().closed_fd), EBADF);
}

TEST_P(Descriptors, Dup3OfSameFdFailsEinval) {
  int efd = Eventfd();
  EXPECT_ERRNO(B().dup3(efd, efd, 0), EINVAL);
  EXPECT_ERRNO(B().dup3(efd, efd, O_CLOEXEC), EINVAL);
}

TEST_P(Descriptors, Dup3UnknownFlagsFailEinval) {
  int a, b, c;
  Three(&a, &b, &c);
  ASSERT_EQ(Close(b), 0);
  EXPECT_ERRNO(B().dup3(a, b, O_NONBLOCK), EINVAL);
  EXPECT_ERRNO(B().dup3(a, b, 1), EINVAL);
  EXPECT_EQ(Dup(a), b) << "the failures did not take the number";
}

TEST_P(Descriptors, Dup3CloexecSetsCloexecDup2DoesNot) {
  int a, b, c;
  Three(&a, &b, &c);
  ASSERT_EQ(Close(b), 0);
  ASSERT_EQ(Close(c), 0);
  ASSERT_EQ(Track(B().dup3(a, b, O_CLOEXEC)), b);
  ASSERT_EQ(Track(B().dup2(b, c)), c);
  EXPECT_EQ(B().fcntl(b, F_GETFD, 0), FD_CLOEXEC);
  EXPECT_EQ(B().fcntl(c, F_GETFD, 0), 0);
}

TEST_P(Descriptors, Dup2OntoLastReferenceClosesObjectAndItsItems) {
  int ep = Epoll();
  int victim = Eventfd(1);
  int other = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, victim, EPOLLIN, 1), 0);
  ASSERT_EQ(B().dup2(other, victim), victim);
  EXPECT_TRUE(Wait(ep).empty());
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, victim, nullptr), ENOENT);
  EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, victim, EPOLLIN, 2), 0);
}

TEST_P(Descriptors, Dup2OntoSharedObjectKeepsItsStaleItem) {
  int ep = Epoll();
  int victim = Eventfd();
  int keep = Dup(victim);
  int other = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, victim, EPOLLIN, 1), 0);
  ASSERT_EQ(B().dup2(other, victim), victim);
  EfdWrite(keep, 1);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  // The number now names another object, so the key no longer matches.
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, victim, nullptr), ENOENT);
}

TEST_P(Descriptors, Dup2OntoFreeNumberTakesExactlyIt) {
  int a, b, c;
  Three(&a, &b, &c);
  ASSERT_EQ(Close(c), 0);
  ASSERT_EQ(Close(b), 0);
  EXPECT_EQ(Track(B().dup2(a, c)), c);
  EXPECT_EQ(Dup(a), b) << "b stayed free";
}

TEST_P(Descriptors, CloseTwiceFailsEbadf) {
  int efd = Eventfd();
  ASSERT_EQ(Close(efd), 0);
  EXPECT_ERRNO(B().close(efd), EBADF);
}

TEST_P(Descriptors, DupOfClosedFdFailsEbadf) {
  EXPECT_ERRNO(B().dup(B().closed_fd), EBADF);
  EXPECT_ERRNO(B().dup2(B().closed_fd, Eventfd()), EBADF);
  EXPECT_ERRNO(B().fcntl(B().closed_fd, F_DUPFD, 0), EBADF);
}

UEPOLL_INSTANTIATE_BACKENDS(Descriptors);

}  // namespace
}  // namespace uepoll_test
