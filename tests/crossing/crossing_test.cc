// Crossing a process boundary (kernel/export.h, docs/design.md "Crossing a
// process boundary"): a uepoll pipe, socket pair or eventfd turned into the
// kernel's equivalent keeps its contents, flags and registrations, and then
// crosses fork, exec and kernel sockets as a kernel object does.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "support/scm.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class Crossing : public ::testing::Test {
 protected:
  void TearDown() override {
    uepoll_set_fork_mode(UEPOLL_FORK_COPY);
    ExpectNoUepollLeaks();
  }
};

std::string ReadN(int fd, size_t n) {
  std::string s(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, s.data() + got, n - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  s.resize(got);
  return s;
}

int ChildExit(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

// The buffered bytes, both ends, their flags and each number's FD_CLOEXEC
// become the kernel pipe's; the numbers stay.
TEST_F(Crossing, pipe__contents_flags_and_numbers_become_the_kernels) {
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
  int dup = uepoll_fcntl(p[0], F_DUPFD_CLOEXEC, 0);
  ASSERT_GE(dup, 0);
  ASSERT_EQ(uepoll_write(p[1], "hello", 5), 5);
  ASSERT_EQ(uepoll_write(p[1], " world", 6), 6);
  ASSERT_EQ(uepoll_export_fd(p[1]), 0);
  for (int fd : {p[0], p[1], dup}) EXPECT_FALSE(uepoll_is_uepoll_fd(fd));
  EXPECT_TRUE(::fcntl(p[0], F_GETFL) & O_NONBLOCK);
  EXPECT_EQ(::fcntl(p[0], F_GETFD), 0);
  EXPECT_EQ(::fcntl(dup, F_GETFD), FD_CLOEXEC);
  char buf[32];
  EXPECT_EQ(::read(dup, buf, sizeof buf), 11);
  EXPECT_EQ(std::string(buf, 11), "hello world");
  EXPECT_EQ(::read(p[0], buf, 1), -1);
  EXPECT_EQ(errno, EAGAIN);
  // Exporting a kernel descriptor does nothing.
  EXPECT_EQ(uepoll_export_fd(p[0]), 0);
  ::close(p[0]);
  ::close(p[1]);
  ::close(dup);
}

// Each end's status flags carry over on their own, whether the two ends
// agree or not, with bytes buffered or none (the kernel pipe is made with
// the flags the ends agree on, and only an end that differs is set).
TEST_F(Crossing, pipe__each_ends_status_flags_carry_over) {
  for (int mask = 0; mask < 16; ++mask) {
    SCOPED_TRACE(mask);
    int want[2] = {mask & 1 ? O_NONBLOCK : 0,
                   (mask & 2 ? O_NONBLOCK : 0) | (mask & 4 ? O_DIRECT : 0)};
    bool data = mask & 8;
    int p[2];
    ASSERT_EQ(uepoll_pipe2(p, 0), 0);
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(uepoll_fcntl(p[i], F_SETFL, want[i]), 0);
    }
    if (data) {
      ASSERT_EQ(uepoll_write(p[1], "abc", 3), 3);
    }
    ASSERT_EQ(uepoll_export_fd(p[0]), 0);
    for (int i = 0; i < 2; ++i) {
      ASSERT_FALSE(uepoll_is_uepoll_fd(p[i]));
      EXPECT_EQ(::fcntl(p[i], F_GETFL) & (O_NONBLOCK | O_DIRECT), want[i])
          << "end " << i;
    }
    char buf[8];
    if (data) {
      EXPECT_EQ(::read(p[0], buf, sizeof buf), 3);
    }
    ::close(p[0]);
    ::close(p[1]);
  }
}

// O_DIRECT packets keep their boundaries, and a closed write end is EOF.
TEST_F(Crossing, pipe__packets_and_a_closed_end) {
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, O_DIRECT), 0);
  ASSERT_EQ(uepoll_write(p[1], "ab", 2), 2);
  ASSERT_EQ(uepoll_write(p[1], "cde", 3), 3);
  ASSERT_EQ(uepoll_close(p[1]), 0);
  ASSERT_EQ(uepoll_export_fd(p[0]), 0);
  char buf[16];
  EXPECT_EQ(::read(p[0], buf, sizeof buf), 2);
  EXPECT_EQ(::read(p[0], buf, sizeof buf), 3);
  EXPECT_EQ(::read(p[0], buf, sizeof buf), 0);
  ::close(p[0]);
}

// A registration watching the object becomes one of its kernel descriptor,
// same events and data: it reports the next write, once (edge-triggered).
TEST_F(Crossing, registration__moves_to_the_kernel_half) {
  int ep = uepoll_epoll_create1(0);
  int p[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = 0x1234567890ull;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
  ASSERT_EQ(uepoll_export_fd(p[0]), 0);
  epoll_event out[4];
  EXPECT_EQ(uepoll_epoll_wait(ep, out, 4, 0), 0);
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  ASSERT_EQ(uepoll_epoll_wait(ep, out, 4, 1000), 1);
  EXPECT_EQ(out[0].data.u64, 0x1234567890ull);
  EXPECT_EQ(out[0].events, uint32_t{EPOLLIN});
  EXPECT_EQ(uepoll_epoll_wait(ep, out, 4, 0), 0);  // ET: one edge
  // The kernel's rules from here on: DEL through the number works.
  EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_DEL, p[0], nullptr), 0);
  ::close(p[0]);
  ::close(p[1]);
  EXPECT_EQ(uepoll_close(ep), 0);
}

// fork() in UEPOLL_FORK_SHARE: parent and child share the pipe; what was
// buffered before the fork is read once, in order, and each side's writes
// reach the other; the parent's registration still reports.
TEST_F(Crossing, fork__parent_and_child_share_the_pipe) {
  ASSERT_EQ(uepoll_set_fork_mode(UEPOLL_FORK_SHARE), 0);
  int down[2], up[2];
  ASSERT_EQ(uepoll_pipe(down), 0);
  ASSERT_EQ(uepoll_pipe(up), 0);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 7;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, up[0], &ev), 0);
  ASSERT_EQ(uepoll_write(down[1], "before", 6), 6);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    char buf[16];
    bool ok = uepoll_read(down[0], buf, 6) == 6 &&
              std::memcmp(buf, "before", 6) == 0 &&
              uepoll_write(up[1], "child", 5) == 5;
    ::_exit(ok ? 0 : 1);
  }
  EXPECT_FALSE(uepoll_is_uepoll_fd(down[0]));
  epoll_event out[2];
  ASSERT_EQ(uepoll_epoll_wait(ep, out, 2, 10000), 1);
  EXPECT_EQ(out[0].data.u64, 7u);
  EXPECT_EQ(ReadN(up[0], 5), "child");
  EXPECT_EQ(ChildExit(pid), 0);
  // The child read the buffered bytes: nothing is left for the parent.
  ASSERT_EQ(::fcntl(down[0], F_SETFL, O_NONBLOCK), 0);
  char c;
  EXPECT_EQ(::read(down[0], &c, 1), -1);
  for (int fd : {down[0], down[1], up[0], up[1]}) ::close(fd);
  EXPECT_EQ(uepoll_close(ep), 0);
}

// exec with a pipe on the child's stdout: exported as inheritable first,
// the new image writes into it and the parent reads to EOF.
TEST_F(Crossing, exec__a_pipe_on_the_childs_stdout) {
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(uepoll_fcntl(p[1], F_SETFD, 0), 0);  // the write end crosses
  EXPECT_EQ(uepoll_export_all(UEPOLL_EXPORT_INHERITABLE), 1);
  EXPECT_FALSE(uepoll_is_uepoll_fd(p[0]));
  EXPECT_EQ(::fcntl(p[0], F_GETFD), FD_CLOEXEC);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::execlp("echo", "echo", "from exec", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(p[1]);
  EXPECT_EQ(ReadN(p[0], 64), "from exec\n");
  EXPECT_EQ(ChildExit(pid), 0);
  ::close(p[0]);
}

// A stream pair: queued bytes in both directions, a descriptor in flight
// (a uepoll eventfd, converted with it), and a shutdown.
TEST_F(Crossing, socketpair__data_descriptors_and_shutdown) {
  int sv[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int efd = uepoll_eventfd(5, EFD_SEMAPHORE);
  char byte = 'f';
  OneFdMsg out(&byte, 1, efd);
  ASSERT_EQ(uepoll_sendmsg(sv[0], out.msg(), 0), 1);
  ASSERT_EQ(uepoll_close(efd), 0);
  ASSERT_EQ(uepoll_send(sv[0], "tail", 4, 0), 4);
  ASSERT_EQ(uepoll_send(sv[1], "back", 4, 0), 4);
  ASSERT_EQ(uepoll_shutdown(sv[0], SHUT_WR), 0);
  ASSERT_EQ(uepoll_export_fd(sv[0]), 0);
  EXPECT_FALSE(uepoll_is_uepoll_fd(sv[1]));
  char buf[16];
  OneFdMsg in(buf, sizeof buf);
  // The descriptor arrives with its byte, and the read stops there.
  ASSERT_EQ(::recvmsg(sv[1], in.msg(), 0), 1);
  EXPECT_EQ(buf[0], 'f');
  int got = in.ReceivedFd();
  ASSERT_GE(got, 0);
  EXPECT_FALSE(uepoll_is_uepoll_fd(got));
  uint64_t v = 0;
  EXPECT_EQ(::read(got, &v, sizeof v), 8);  // a semaphore: one at a time
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(ReadN(sv[1], 4), "tail");
  EXPECT_EQ(::read(sv[1], buf, 1), 0);  // the shutdown: EOF
  EXPECT_EQ(ReadN(sv[0], 4), "back");
  ::close(got);
  ::close(sv[0]);
  ::close(sv[1]);
}

// Datagrams keep their boundaries; a closed peer with data left unread
// gives the survivor its ECONNRESET (seqpacket).
TEST_F(Crossing, socketpair__boundaries_and_a_reset_peer) {
  int dg[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_DGRAM, 0, dg), 0);
  ASSERT_EQ(uepoll_send(dg[0], "one", 3, 0), 3);
  ASSERT_EQ(uepoll_send(dg[0], "", 0, 0), 0);
  ASSERT_EQ(uepoll_send(dg[0], "three", 5, 0), 5);
  ASSERT_EQ(uepoll_export_fd(dg[1]), 0);
  char buf[16];
  EXPECT_EQ(::recv(dg[1], buf, sizeof buf, 0), 3);
  EXPECT_EQ(::recv(dg[1], buf, sizeof buf, 0), 0);
  EXPECT_EQ(::recv(dg[1], buf, 2, MSG_TRUNC), 5);
  ::close(dg[0]);
  ::close(dg[1]);

  int sp[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
  ASSERT_EQ(uepoll_send(sp[0], "unread", 6, 0), 6);
  ASSERT_EQ(uepoll_close(sp[1]), 0);
  ASSERT_EQ(uepoll_export_fd(sp[0]), 0);
  EXPECT_EQ(::recv(sp[0], buf, sizeof buf, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  EXPECT_EQ(::recv(sp[0], buf, sizeof buf, 0), 0);
  ::close(sp[0]);
}

// An eventfd keeps its count, beyond 32 bits too, and its flags.
TEST_F(Crossing, eventfd__count_and_flags) {
  int efd = uepoll_eventfd(0, EFD_NONBLOCK);
  uint64_t big = (uint64_t{1} << 40) + 3;
  ASSERT_EQ(uepoll_write(efd, &big, sizeof big), 8);
  ASSERT_EQ(uepoll_export_fd(efd), 0);
  uint64_t v = 0;
  EXPECT_EQ(::read(efd, &v, sizeof v), 8);
  EXPECT_EQ(v, big);
  EXPECT_EQ(::read(efd, &v, sizeof v), -1);
  EXPECT_EQ(errno, EAGAIN);
  ::close(efd);
}

// A thread asleep in a read when the object is converted ends up reading
// the kernel object: what is written after the export reaches it. (The
// pipe's reader would also be woken by its write end's release; the
// eventfd's only by the export.)
void BlockedReaderGoesOnInTheKernel(int rfd, int wfd, const void* msg,
                                    size_t len) {
  pid_t tid = 0;
  char got[8] = {};
  ssize_t n = 0;
  bool done = false;
  std::thread reader([&] {
    __atomic_store_n(&tid, Gettid(), __ATOMIC_SEQ_CST);
    n = uepoll_read(rfd, got, sizeof got);
    __atomic_store_n(&done, true, __ATOMIC_SEQ_CST);
  });
  ASSERT_TRUE(Eventually([&] {
    pid_t t = __atomic_load_n(&tid, __ATOMIC_SEQ_CST);
    return t && SleepsInSyscall(t);
  }));
  ASSERT_EQ(uepoll_export_fd(wfd), 0);
  ASSERT_EQ(::write(wfd, msg, len), static_cast<ssize_t>(len));
  bool finished =
      Eventually([&] { return __atomic_load_n(&done, __ATOMIC_SEQ_CST); });
  EXPECT_TRUE(finished) << "the reader still sleeps in the uepoll object";
  if (!finished) pthread_cancel(reader.native_handle());
  reader.join();
  if (finished) {
    EXPECT_EQ(n, static_cast<ssize_t>(len));
    EXPECT_EQ(std::memcmp(got, msg, len), 0);
  }
}

TEST_F(Crossing, blocked_reader__goes_on_in_the_kernel_pipe) {
  int p[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  BlockedReaderGoesOnInTheKernel(p[0], p[1], "k", 1);
  ::close(p[0]);
  ::close(p[1]);
}

TEST_F(Crossing, blocked_reader__goes_on_in_the_kernel_eventfd) {
  int efd = uepoll_eventfd(0, 0);
  uint64_t v = 9;
  BlockedReaderGoesOnInTheKernel(efd, efd, &v, sizeof v);
  ::close(efd);
}

// SCM_RIGHTS of a uepoll pipe over a kernel socket pair: converted first,
// so the receiver gets the kernel pipe with what was buffered.
TEST_F(Crossing, scm_rights__over_a_kernel_socket) {
  int ks[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, ks), 0);
  int p[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(uepoll_write(p[1], "piped", 5), 5);
  char byte = 'r';
  OneFdMsg out(&byte, 1, p[0]);
  ASSERT_EQ(uepoll_sendmsg(ks[0], out.msg(), 0), 1);
  OneFdMsg in(&byte, 1);
  ASSERT_EQ(::recvmsg(ks[1], in.msg(), 0), 1);
  int got = in.ReceivedFd();
  ASSERT_GE(got, 0);
  ASSERT_EQ(uepoll_close(p[0]), 0);  // a kernel descriptor now
  EXPECT_EQ(ReadN(got, 5), "piped");
  ::close(got);
  ::close(p[1]);
  ::close(ks[0]);
  ::close(ks[1]);
}

// What has no kernel equivalent stays uepoll's (docs/semantics.md D12).
TEST_F(Crossing, unconvertible__timerfd_instance_and_user_object) {
  int tfd = uepoll_timerfd_create(CLOCK_MONOTONIC, 0);
  int ep = uepoll_epoll_create1(0);
  int vp = uepoll_vpoll_create(0, 0);
  for (int fd : {tfd, ep, vp}) {
    EXPECT_EQ(uepoll_export_fd(fd), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
    EXPECT_TRUE(uepoll_is_uepoll_fd(fd));
  }
  EXPECT_EQ(uepoll_export_all(0), 0);
  EXPECT_EQ(uepoll_export_all(2), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_export_fd(1 << 20), -1);
  EXPECT_EQ(errno, EBADF);
  for (int fd : {tfd, ep, vp}) EXPECT_EQ(uepoll_close(fd), 0);
}

}  // namespace
}  // namespace uepoll_test
