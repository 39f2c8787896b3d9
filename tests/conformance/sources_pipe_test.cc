// docs/contract.md section 10, pipes: masks of both ends, HUP/ERR rules,
// capacity, write atomicity and EPIPE.
#include <string.h>

#include <string>
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

class SourcesPipe : public ConformanceTest {
 protected:
  uint32_t EpollMask(int fd) {
    int ep = Epoll();
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd,
                  EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP | EPOLLRDNORM |
                      EPOLLWRNORM,
                  0),
              0);
    std::vector<Ev> evs = Wait(ep);
    Close(ep);
    return evs.empty() ? 0 : evs[0].events;
  }
  // Fills the pipe with 4096-byte writes; returns how many succeeded.
  int Fill(int wfd) {
    int n = 0;
    while (n < 100 && WriteBytes(wfd, 4096) == 4096) ++n;
    return n;
  }
};

constexpr uint32_t kInData = EPOLLIN | EPOLLRDNORM;
constexpr uint32_t kOutSpace = EPOLLOUT | EPOLLWRNORM;

TEST_P(SourcesPipe, FreshReadEndIdleWriteEndOut) {
  int p[2];
  Pipe(p);
  EXPECT_EQ(EpollMask(p[0]), 0u);
  EXPECT_EQ(EpollMask(p[1]), kOutSpace);
}

TEST_P(SourcesPipe, DataMakesReadEndIn) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  EXPECT_EQ(EpollMask(p[0]), kInData);
  EXPECT_EQ(EpollMask(p[1]), kOutSpace);
}

TEST_P(SourcesPipe, WriterClosedAndEmptyIsHupOnly) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(EpollMask(p[0]), uint32_t(EPOLLHUP));
}

TEST_P(SourcesPipe, WriterClosedWithDataIsInAndHup) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(WriteBytes(p[1], 3), 3);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(EpollMask(p[0]), kInData | EPOLLHUP);
}

TEST_P(SourcesPipe, WriterDupKeepsPipeOpen) {
  int p[2];
  Pipe(p);
  int d = Dup(p[1]);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(EpollMask(p[0]), 0u);
  ASSERT_EQ(Close(d), 0);
  EXPECT_EQ(EpollMask(p[0]), uint32_t(EPOLLHUP));
}

TEST_P(SourcesPipe, ReaderClosedIsOutAndErr) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(Close(p[0]), 0);
  EXPECT_EQ(EpollMask(p[1]), kOutSpace | EPOLLERR);
}

TEST_P(SourcesPipe, ReaderClosedOnFullPipeIsErrOnly) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  Fill(p[1]);
  ASSERT_EQ(Close(p[0]), 0);
  EXPECT_EQ(EpollMask(p[1]), uint32_t(EPOLLERR));
}

TEST_P(SourcesPipe, CapacityIsSixteen4096ByteWrites) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  EXPECT_EQ(Fill(p[1]), 16);
  EXPECT_ERRNO(WriteBytes(p[1], 1), EAGAIN);
  EXPECT_EQ(EpollMask(p[1]), 0u);
  EXPECT_EQ(ReadBytes(p[0], 70000), 65536);
}

TEST_P(SourcesPipe, SmallWriteIsAtomicUnderNonblock) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  for (int i = 0; i < 15; ++i) ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  ASSERT_EQ(WriteBytes(p[1], 4000), 4000);
  // 96 bytes left: a 97-byte write must not be split.
  EXPECT_ERRNO(WriteBytes(p[1], 97), EAGAIN);
  EXPECT_EQ(WriteBytes(p[1], 96), 96);
  EXPECT_ERRNO(WriteBytes(p[1], 1), EAGAIN);
}

TEST_P(SourcesPipe, LargeWriteIsPartialUnderNonblock) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  for (int i = 0; i < 14; ++i) ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  EXPECT_EQ(WriteBytes(p[1], 3 * 4096), 2 * 4096);
  EXPECT_ERRNO(WriteBytes(p[1], 5000), EAGAIN);
}

TEST_P(SourcesPipe, BytesComeOutInOrder) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(B().write(p[1], "abc", 3), 3);
  ASSERT_EQ(B().write(p[1], "def", 3), 3);
  char buf[16] = {};
  EXPECT_EQ(B().read(p[0], buf, 4), 4);
  EXPECT_EQ(B().read(p[0], buf + 4, sizeof buf - 4), 2);
  EXPECT_STREQ(buf, "abcdef");
}

TEST_P(SourcesPipe, ReadAtEofReturnsZero) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(WriteBytes(p[1], 2), 2);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(ReadBytes(p[0], 10), 2);
  EXPECT_EQ(ReadBytes(p[0], 10), 0);
  EXPECT_EQ(ReadBytes(p[0], 10), 0);
}

TEST_P(SourcesPipe, ReadOfEmptyNonblockingPipeFailsEagain) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  EXPECT_ERRNO(ReadBytes(p[0], 10), EAGAIN);
}

TEST_P(SourcesPipe, WrongDirectionFailsEbadf) {
  int p[2];
  Pipe(p);
  EXPECT_ERRNO(ReadBytes(p[1], 1), EBADF);
  EXPECT_ERRNO(WriteBytes(p[0], 1), EBADF);
}

TEST_P(SourcesPipe, WriteWithoutReaderFailsEpipeAndRaisesSigpipe) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(Close(p[0]), 0);
  bool raised =
      RaisesSigpipe([&] { EXPECT_ERRNO(WriteBytes(p[1], 1), EPIPE); });
  EXPECT_TRUE(raised);
}

TEST_P(SourcesPipe, Pipe2UnknownFlagsFailEinval) {
  int p[2] = {-1, -1};
  EXPECT_ERRNO(B().pipe2(p, O_APPEND), EINVAL);
  EXPECT_ERRNO(B().pipe2(p, O_RDWR), EINVAL);
  EXPECT_EQ(p[0], -1) << "nothing created on failure";
}

TEST_P(SourcesPipe, Pipe2FlagsApplyToBothEnds) {
  int p[2];
  Pipe(p, O_NONBLOCK | O_CLOEXEC);
  for (int fd : p) {
    EXPECT_TRUE(B().fcntl(fd, F_GETFL, 0) & O_NONBLOCK);
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), FD_CLOEXEC);
  }
  EXPECT_EQ(B().fcntl(p[0], F_GETFL, 0) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(B().fcntl(p[1], F_GETFL, 0) & O_ACCMODE, O_WRONLY);
}

TEST_P(SourcesPipe, PlainPipeIsBlockingWithoutCloexec) {
  int p[2];
  ASSERT_EQ(B().pipe(p), 0);
  Track(p[0]);
  Track(p[1]);
  for (int fd : p) {
    EXPECT_FALSE(B().fcntl(fd, F_GETFL, 0) & O_NONBLOCK);
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), 0);
  }
}

TEST_P(SourcesPipe, ReadingFullPipeIsOutEdgeForWriter) {
  int ep = Epoll();
  int p[2];
  Pipe(p, O_NONBLOCK);
  Fill(p[1]);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], EPOLLOUT | EPOLLET, 1), 0);
  ASSERT_TRUE(Wait(ep).empty());
  ASSERT_EQ(ReadBytes(p[0], 4096), 4096);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
}

// The kernel stores a pipe as 16 page-sized slots and a write never shares
// a slot that another 4096-byte write filled: a read that frees part of a
// slot frees no room, so the writer stays not-ready and a write still fails.
TEST_P(SourcesPipe, PartlyDrainedSlotOfFullPipeIsNoRoom) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  Fill(p[1]);
  ASSERT_EQ(ReadBytes(p[0], 1), 1);
  EXPECT_EQ(EpollMask(p[1]), 0u);
  EXPECT_ERRNO(WriteBytes(p[1], 1), EAGAIN);
  ASSERT_EQ(ReadBytes(p[0], 4095), 4095);
  EXPECT_EQ(EpollMask(p[1]), kOutSpace);
}

TEST_P(SourcesPipe, CloseOfWriterIsHupEdgeForEtReader) {
  int ep = Epoll();
  int p[2];
  Pipe(p);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 1}}));
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN | EPOLLHUP, 1}}));
}

UEPOLL_INSTANTIATE_BACKENDS(SourcesPipe);

}  // namespace
}  // namespace uepoll_test
