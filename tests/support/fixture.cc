#include "support/fixture.h"

#include <sys/socket.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

namespace uepoll_test {

void ExpectNoUepollLeaks() {
  uepoll_live_counts c{};
  ASSERT_EQ(uepoll_debug_live_counts(&c), 0);
  EXPECT_EQ(c.descriptors, 0) << "uepoll descriptors left open";
  EXPECT_EQ(c.files, 0) << "uepoll objects still alive";
  EXPECT_EQ(c.items, 0) << "epoll items still alive";
  EXPECT_EQ(c.instances, 0) << "epoll instances still alive";
}

int CloseAllUepollDescriptors() {
  int n = 0;
  for (int base : {0, UEPOLL_FD_BASE}) {
    for (int fd = base; fd < base + 65536; ++fd) {
      if (uepoll_is_uepoll_fd(fd) && uepoll_close(fd) == 0) ++n;
    }
  }
  return n;
}

int BackendTest::Track(int fd) {
  if (fd >= 0) tracked_.insert(fd);
  return fd;
}

int BackendTest::Close(int fd) {
  tracked_.erase(fd);
  return B().close(fd);
}

int BackendTest::Epoll(int flags) {
  int fd = B().epoll_create1(flags);
  EXPECT_GE(fd, 0) << "epoll_create1: " << strerror(errno);
  return Track(fd);
}

int BackendTest::Eventfd(unsigned int initval, int flags) {
  int fd = B().eventfd(initval, flags);
  EXPECT_GE(fd, 0) << "eventfd: " << strerror(errno);
  return Track(fd);
}

void BackendTest::Pipe(int fds[2], int flags) {
  ASSERT_EQ(B().pipe2(fds, flags), 0) << "pipe2: " << strerror(errno);
  Track(fds[0]);
  Track(fds[1]);
}

void BackendTest::SocketPair(int sv[2], int flags) {
  ASSERT_EQ(B().socketpair(AF_UNIX, SOCK_STREAM | flags, 0, sv), 0)
      << "socketpair: " << strerror(errno);
  Track(sv[0]);
  Track(sv[1]);
}

int BackendTest::Ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
  struct epoll_event ev {};
  ev.events = events;
  ev.data.u64 = data;
  return B().epoll_ctl(epfd, op, fd, &ev);
}

void BackendTest::TearDown() {
  for (int fd : tracked_) B().close(fd);
  tracked_.clear();
  ExpectNoUepollLeaks();
}

}  // namespace uepoll_test
