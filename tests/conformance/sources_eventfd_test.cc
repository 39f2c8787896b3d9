// docs/contract.md section 10, eventfd: readiness masks by count, the counter's
// limits, semaphore mode, buffer sizes and flags.
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class SourcesEventfd : public ConformanceTest {
 protected:
  // The mask an LT item with every interest bit reports right now.
  uint32_t EpollMask(int fd) {
    int ep = Epoll();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd,
                  EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP | EPOLLRDNORM |
                      EPOLLWRNORM | EPOLLRDBAND | EPOLLWRBAND,
                  0),
              0);
    std::vector<Ev> evs = Wait(ep);
    Close(ep);
    return evs.empty() ? 0 : evs[0].events;
  }
};

constexpr uint64_t kMaxCount = ~uint64_t{0} - 1;  // 2^64 - 2

TEST_P(SourcesEventfd, ZeroCountIsOutOnly) {
  int efd = Eventfd();
  EXPECT_EQ(EpollMask(efd), uint32_t(EPOLLOUT));
}

TEST_P(SourcesEventfd, NonzeroCountIsInAndOut) {
  int efd = Eventfd(3);
  EXPECT_EQ(EpollMask(efd), kInOut);
}

TEST_P(SourcesEventfd, MaxCountIsInOnly) {
  int efd = Eventfd();
  EfdWrite(efd, kMaxCount);
  EXPECT_EQ(EpollMask(efd), uint32_t(EPOLLIN));
}

TEST_P(SourcesEventfd, WriteOneAtMaxCountFailsEagain) {
  int efd = Eventfd();
  EfdWrite(efd, kMaxCount);
  uint64_t one = 1;
  EXPECT_ERRNO(B().write(efd, &one, 8), EAGAIN);
  EXPECT_EQ(EfdRead(efd), kMaxCount);
}

TEST_P(SourcesEventfd, WriteThatWouldPassMaxFailsEagainLeavingCount) {
  int efd = Eventfd(10);
  uint64_t too_much = kMaxCount - 9;
  EXPECT_ERRNO(B().write(efd, &too_much, 8), EAGAIN);
  EfdWrite(efd, kMaxCount - 10);
  EXPECT_EQ(EfdRead(efd), kMaxCount);
}

TEST_P(SourcesEventfd, WriteOfAllOnesFailsEinval) {
  int efd = Eventfd(1);
  uint64_t all = ~uint64_t{0};
  EXPECT_ERRNO(B().write(efd, &all, 8), EINVAL);
  EXPECT_EQ(EfdRead(efd), 1u);
}

TEST_P(SourcesEventfd, InitvalAndWritesAddUp) {
  int efd = Eventfd(5);
  EfdWrite(efd, 2);
  EfdWrite(efd, 3);
  EXPECT_EQ(EfdRead(efd), 10u);
}

TEST_P(SourcesEventfd, ReadReturnsCountAndResetsToZero) {
  int efd = Eventfd(7);
  EXPECT_EQ(EfdRead(efd), 7u);
  EXPECT_EQ(EpollMask(efd), uint32_t(EPOLLOUT));
}

TEST_P(SourcesEventfd, ReadAtZeroNonblockingFailsEagain) {
  int efd = Eventfd(0, EFD_NONBLOCK);
  uint64_t v;
  EXPECT_ERRNO(B().read(efd, &v, 8), EAGAIN);
}

TEST_P(SourcesEventfd, SemaphoreReadReturnsOneAndDecrements) {
  int efd = Eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK);
  EXPECT_EQ(EfdRead(efd), 1u);
  EXPECT_EQ(EfdRead(efd), 1u);
  EXPECT_EQ(EpollMask(efd), kInOut);
  EXPECT_EQ(EfdRead(efd), 1u);
  EXPECT_EQ(EpollMask(efd), uint32_t(EPOLLOUT));
  uint64_t v;
  EXPECT_ERRNO(B().read(efd, &v, 8), EAGAIN);
}

TEST_P(SourcesEventfd, ReadBufferShorterThanEightFailsEinval) {
  int efd = Eventfd(4);
  char buf[7];
  EXPECT_ERRNO(B().read(efd, buf, 7), EINVAL);
  EXPECT_ERRNO(B().read(efd, buf, 0), EINVAL);
  EXPECT_EQ(EfdRead(efd), 4u);
}

TEST_P(SourcesEventfd, WriteBufferShorterThanEightFailsEinval) {
  int efd = Eventfd();
  uint64_t v = 1;
  EXPECT_ERRNO(B().write(efd, &v, 7), EINVAL);
  EXPECT_ERRNO(B().write(efd, &v, 0), EINVAL);
  EXPECT_EQ(EpollMask(efd), uint32_t(EPOLLOUT));
}

TEST_P(SourcesEventfd, ReadLongerBufferMovesEightBytes) {
  int efd = Eventfd(6);
  uint64_t out[2] = {0, 0};
  EXPECT_EQ(B().read(efd, out, sizeof out), 8);
  EXPECT_EQ(out[0], 6u);
  EXPECT_EQ(out[1], 0u);
}

// Unlike read, write wants exactly eight bytes.
TEST_P(SourcesEventfd, WriteBufferLongerThanEightFailsEinval) {
  int efd = Eventfd();
  uint64_t in[2] = {6, 99};
  EXPECT_ERRNO(B().write(efd, in, sizeof in), EINVAL);
  EXPECT_ERRNO(B().write(efd, in, 9), EINVAL);
  EXPECT_EQ(EpollMask(efd), uint32_t(EPOLLOUT));
}

TEST_P(SourcesEventfd, UnknownFlagsFailEinval) {
  EXPECT_ERRNO(B().eventfd(0, 2), EINVAL);
  EXPECT_ERRNO(B().eventfd(0, O_APPEND), EINVAL);
  EXPECT_ERRNO(B().eventfd(0, EFD_NONBLOCK | O_RDWR), EINVAL);
}

TEST_P(SourcesEventfd, FlagsSetNonblockAndCloexec) {
  int plain = Eventfd(0, 0);
  int both = Eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
  EXPECT_EQ(B().fcntl(plain, F_GETFL, 0) & (O_NONBLOCK | O_ACCMODE), O_RDWR);
  EXPECT_EQ(B().fcntl(plain, F_GETFD, 0), 0);
  EXPECT_EQ(B().fcntl(both, F_GETFL, 0) & (O_NONBLOCK | O_ACCMODE),
            O_RDWR | O_NONBLOCK);
  EXPECT_EQ(B().fcntl(both, F_GETFD, 0), FD_CLOEXEC);
}

TEST_P(SourcesEventfd, ReadingToZeroIsOutEdge) {
  int ep = Epoll();
  int efd = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, kInOut | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{kInOut, 1}}));
  EfdRead(efd);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
}

TEST_P(SourcesEventfd, SemaphoreReadIsOutEdgeEvenAboveZero) {
  int ep = Epoll();
  int efd = Eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, kInOut | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{kInOut, 1}}));
  EfdRead(efd);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{kInOut, 1}}));
}

TEST_P(SourcesEventfd, ReadIsNoEdgeForInOnlyWatcher) {
  int ep = Epoll();
  int efd = Eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  EfdRead(efd);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(SourcesEventfd, FailedWriteIsNoEdge) {
  int ep = Epoll();
  int efd = Eventfd();
  EfdWrite(efd, kMaxCount);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  uint64_t one = 1;
  ASSERT_EQ(B().write(efd, &one, 8), -1);
  EXPECT_TRUE(Wait(ep).empty());
}

UEPOLL_INSTANTIATE_BACKENDS(SourcesEventfd);

}  // namespace
}  // namespace uepoll_test
