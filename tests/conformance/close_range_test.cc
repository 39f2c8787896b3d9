// close_range on both backends (fs/file.c): every number in the range
// closed, the backend's objects and kernel files alike, both ends of the
// range included; CLOSE_RANGE_CLOEXEC marking instead of closing; the
// argument checks, which close nothing. Ranges only ever cover numbers the
// test made, above the ones gtest holds.
#include <fcntl.h>
#include <linux/close_range.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "conformance/io_helpers.h"

namespace uepoll_test {
namespace {

class CloseRange : public IoTest {
 protected:
  bool IsOpen(int fd) { return B().fcntl(fd, F_GETFD, 0) >= 0; }
  // Objects of every kind at consecutive numbers from a high start: a
  // pipe's read end, an eventfd, a kernel file, a socket, the pipe's write
  // end last. Their numbers come back in out (in that order).
  void Make(std::vector<int>& out, int base) {
    int p[2], sv[2];
    ASSERT_EQ(B().pipe2(p, 0), 0);
    ASSERT_EQ(B().socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int e = B().eventfd(0, 0);
    int k = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(e, 0);
    ASSERT_GE(k, 0);
    int order[] = {p[0], e, k, sv[0], p[1]};
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(B().dup2(order[i], base + i), base + i) << strerror(errno);
      out.push_back(Track(base + i));
      B().close(order[i]);
    }
    peer_ = Track(sv[1]);
  }
  int peer_ = -1;
};

TEST_P(CloseRange, closes_every_number_both_ends_included) {
  std::vector<int> fds;
  Make(fds, 300);
  // The pipe's write end stays: [300, 303].
  ASSERT_EQ(B().close_range(300, 303, 0), 0) << strerror(errno);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(IsOpen(fds[i])) << fds[i];
  EXPECT_TRUE(IsOpen(fds[4]));
  // The socket's peer sees the close.
  char c;
  EXPECT_EQ(B().read(peer_, &c, 1), 0);
  // The last number of a range is closed too.
  ASSERT_EQ(B().close_range(304, 304, 0), 0);
  EXPECT_FALSE(IsOpen(304));
  // The numbers are free for the next object, lowest first.
  int e = Track(B().eventfd(0, 0));
  int again = Track(B().fcntl(e, F_DUPFD, 300));
  EXPECT_EQ(again, 300);
  EXPECT_EQ(B().close_range(300, ~0U, 0), 0) << "up to the last number";
  EXPECT_FALSE(IsOpen(300));
}

TEST_P(CloseRange, cloexec_marks_instead) {
  std::vector<int> fds;
  Make(fds, 310);
  ASSERT_EQ(B().close_range(310, 314, CLOSE_RANGE_CLOEXEC), 0);
  for (int fd : fds) {
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), FD_CLOEXEC) << fd;
  }
  EXPECT_EQ(WriteStr(fds[4], "x"), 1) << "still open";
}

TEST_P(CloseRange, bad_arguments_close_nothing) {
  std::vector<int> fds;
  Make(fds, 320);
  EXPECT_ERRNO(B().close_range(324, 320, 0), EINVAL);
  EXPECT_ERRNO(B().close_range(320, 324, 1), EINVAL);
  EXPECT_ERRNO(B().close_range(320, 324, 8), EINVAL);
  for (int fd : fds) EXPECT_TRUE(IsOpen(fd)) << fd;
  // A range with nothing open in it.
  EXPECT_EQ(B().close_range(900, 950, 0), 0);
}

UEPOLL_INSTANTIATE_BACKENDS(CloseRange);

}  // namespace
}  // namespace uepoll_test
