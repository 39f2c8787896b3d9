#include "badinput/bad_input.h"

#include <stdlib.h>
#include <unistd.h>

namespace uepoll_test {

Env BadInputTest::MakeEnv() {
  Env e{};
  e.b = &B();
  e.made = &made_;
  e.ep = Epoll();
  e.efd = Eventfd(1, EFD_NONBLOCK);
  EXPECT_EQ(Ctl(e.ep, EPOLL_CTL_ADD, e.efd, EPOLLIN, kItemData), 0);
  int p[2], sv[2], q[2], t[2];
  Pipe(p, O_NONBLOCK);
  e.rd = p[0];
  e.wr = p[1];
  EXPECT_EQ(B().write(e.wr, "abc", 3), 3);
  SocketPair(sv, SOCK_NONBLOCK);
  e.s0 = sv[0];
  e.s1 = sv[1];
  EXPECT_EQ(B().write(e.s1, "xy", 2), 2);
  Pipe(q, O_NONBLOCK);
  Close(q[0]);
  e.orphan = q[1];
  SocketPair(t, SOCK_NONBLOCK);
  e.shut = t[0];
  e.shut_peer = t[1];
  EXPECT_EQ(B().shutdown(e.shut, SHUT_WR), 0);
  e.file = -1;
  if (IsKernel()) {
    char path[] = "/tmp/uepoll_bad_XXXXXX";
    e.file = Track(mkstemp(path));
    unlink(path);
  }
  e.closed = B().closed_fd;
  return e;
}

void BadInputTest::Release(Env& e) {
  for (int fd : made_) Close(fd);
  made_.clear();
  for (int fd : {e.ep, e.efd, e.rd, e.wr, e.s0, e.s1, e.orphan, e.shut,
                 e.shut_peer, e.file}) {
    if (fd >= 0) Close(fd);
  }
}

void BadInputTest::ExpectUnchanged(Env& e, int next_fd) {
  // A leaked or wrongly closed descriptor moves the lowest free number.
  int probe = B().dup(e.efd);
  EXPECT_EQ(probe, next_fd) << "descriptor table changed";
  if (probe >= 0) B().close(probe);
  EXPECT_EQ(Wait(e.ep), (std::vector<Ev>{{EPOLLIN, kItemData}}))
      << "epoll item changed";
  EXPECT_EQ(PollMask(e.efd), POLLIN | POLLOUT);
  EXPECT_EQ(PollMask(e.rd), POLLIN | POLLRDNORM);
  EXPECT_EQ(PollMask(e.wr), POLLOUT | POLLWRNORM);
  EXPECT_EQ(PollMask(e.s0),
            POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLWRBAND);
  EXPECT_EQ(PollMask(e.s1), POLLOUT | POLLWRNORM | POLLWRBAND);
  for (int fd : {e.ep, e.efd, e.rd, e.wr, e.s0, e.s1}) {
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), 0) << fd;
    if (fd != e.ep) {
      EXPECT_TRUE(B().fcntl(fd, F_GETFL, 0) & O_NONBLOCK) << fd;
    }
  }
  uint64_t count = 0;
  EXPECT_EQ(B().read(e.efd, &count, 8), 8);
  EXPECT_EQ(count, 1u);
  char buf[8] = {};
  EXPECT_EQ(B().read(e.rd, buf, sizeof buf), 3);
  EXPECT_STREQ(buf, "abc");
  char sbuf[8] = {};
  EXPECT_EQ(B().read(e.s0, sbuf, sizeof sbuf), 2);
  EXPECT_STREQ(sbuf, "xy");
}

void BadInputTest::RunBad(const BadRow* rows, size_t n) {
  // EPIPE rows raise SIGPIPE; keep it blocked and drain it per row.
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  for (size_t i = 0; i < n; ++i) {
    const BadRow& r = rows[i];
    SCOPED_TRACE(r.what);
    if (r.kernel_only && !IsKernel()) continue;
    Env e = MakeEnv();
    if (HasFatalFailure()) break;
    int next_fd = B().dup(e.efd);
    B().close(next_fd);
    errno = 0;
    long ret = r.call(e);
    int err = errno;
    // Helpers a row made for itself go first, so they do not count as a
    // leak in the descriptor check.
    for (int fd : made_) Close(fd);
    made_.clear();
    EXPECT_EQ(ret, -1);
    EXPECT_EQ(err, r.err) << "got " << strerrorname_np(err);
    if (r.state == State::kKept) ExpectUnchanged(e, next_fd);
    struct timespec zero {};
    while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
    }
    Release(e);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void BadInputTest::RunGood(const GoodRow* rows, size_t n) {
  constexpr int kSentinel = 0x5eed;
  for (size_t i = 0; i < n; ++i) {
    const GoodRow& r = rows[i];
    SCOPED_TRACE(r.what);
    Env e = MakeEnv();
    if (HasFatalFailure()) break;
    errno = kSentinel;
    long ret = r.call(e);
    int err = errno;
    EXPECT_GE(ret, 0);
    EXPECT_EQ(err, kSentinel)
        << "errno touched on success: " << strerrorname_np(err);
    Release(e);
  }
}

}  // namespace uepoll_test
