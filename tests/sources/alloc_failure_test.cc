// Allocation failure in the pipe and socket-pair sources (uepoll only: the
// kernel cannot be made to fail an allocation). Each failing call must
// return ENOMEM (or a partial count), change nothing else and leak nothing.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

// Runs create() with the nth allocation failing, for n = 1, 2, ... until
// it succeeds; every failure must be ENOMEM with no object left behind.
template <class Create>
void EveryAllocationSiteFailsCleanly(Create create) {
  for (long n = 1; n < 20; ++n) {
    SCOPED_TRACE(n);
    int fds[2] = {-1, -1};
    ASSERT_EQ(uepoll_debug_fail_alloc(n), 0);
    errno = 0;
    int r = create(fds);
    int err = errno;
    uepoll_debug_fail_alloc(0);
    if (r == 0) {
      EXPECT_GT(n, 3) << "the object, its two ends and the descriptor table";
      EXPECT_EQ(uepoll_close(fds[0]), 0);
      EXPECT_EQ(uepoll_close(fds[1]), 0);
      ExpectNoUepollLeaks();
      return;
    }
    EXPECT_EQ(r, -1);
    EXPECT_EQ(err, ENOMEM);
    EXPECT_EQ(fds[0], -1) << "nothing stored on failure";
    ExpectNoUepollLeaks();
  }
  ADD_FAILURE() << "creation never succeeded";
}

TEST(SourcesAllocFailure, pipe2__each_allocation_fails_with_enomem) {
  EveryAllocationSiteFailsCleanly(
      [](int fds[2]) { return uepoll_pipe2(fds, O_NONBLOCK); });
}

TEST(SourcesAllocFailure, socketpair__each_allocation_fails_with_enomem) {
  EveryAllocationSiteFailsCleanly([](int fds[2]) {
    return uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
  });
}

TEST(SourcesAllocFailure, pipe_write__stops_where_a_page_is_missing) {
  for (long n = 1; n <= 4; ++n) {
    SCOPED_TRACE(n);
    int p[2];
    ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
    std::vector<char> out(3 * 4096 + 5);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i % 251);
    ASSERT_EQ(uepoll_debug_fail_alloc(n), 0);
    errno = 0;
    ssize_t w = uepoll_write(p[1], out.data(), out.size());
    int err = errno;
    uepoll_debug_fail_alloc(0);
    std::vector<char> in(out.size() + 1);
    ssize_t r = uepoll_read(p[0], in.data(), in.size());
    if (n <= 3) {
      EXPECT_LT(w, static_cast<ssize_t>(out.size())) << "page n failed";
    }
    if (w < 0) {
      EXPECT_EQ(err, ENOMEM);
      EXPECT_EQ(r, -1) << "nothing was written";
    } else {
      ASSERT_EQ(r, w) << "exactly the reported bytes are in the pipe";
      in.resize(static_cast<size_t>(r));
      EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin()));
    }
    EXPECT_EQ(uepoll_close(p[0]), 0);
    EXPECT_EQ(uepoll_close(p[1]), 0);
    ExpectNoUepollLeaks();
  }
}

TEST(SourcesAllocFailure, socket_write__enomem_leaves_the_send_buffer_intact) {
  int sv[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  char buf[4096] = {};
  ASSERT_EQ(uepoll_debug_fail_alloc(1), 0);
  errno = 0;
  EXPECT_EQ(uepoll_write(sv[0], buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENOMEM);
  uepoll_debug_fail_alloc(0);
  struct pollfd pfd[2] = {{sv[0], POLLIN | POLLOUT, 0}, {sv[1], POLLIN, 0}};
  EXPECT_EQ(uepoll_poll(pfd, 2, 0), 1);
  EXPECT_EQ(pfd[0].revents, POLLOUT) << "the charge was given back";
  EXPECT_EQ(pfd[1].revents, 0) << "nothing was queued";
  int writes = 0;
  while (uepoll_write(sv[0], buf, sizeof buf) == 4096) ++writes;
  EXPECT_EQ(writes, 44);
  EXPECT_EQ(uepoll_close(sv[0]), 0);
  EXPECT_EQ(uepoll_close(sv[1]), 0);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
