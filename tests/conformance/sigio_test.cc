// Signal-driven I/O on both backends (fs/fcntl.c, fs/pipe.c,
// net/core/sock.c, net/unix/af_unix.c): the owner commands of fcntl on
// every kind of object, O_ASYNC through FIOASYNC and F_SETFL, and the
// signals the owner gets: when, which (SIGIO, or the F_SETSIG signal with
// si_code, si_band and si_fd), and when not (a stream reader waiting for
// the data, room nobody ran out of).
//
// The signals are blocked in every thread of the test and collected with
// sigtimedwait, so nothing runs a handler and a signal that should not
// have been sent is seen as pending.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "conformance/io_helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr int kGetOwnerUids = 17;  // F_GETOWNER_UIDS
// The backend of the test in progress, for a signal handler.
std::atomic<const Backend*> g_handler_backend{nullptr};

class Sigio : public IoTest {
 protected:
  void SetUp() override {
    IoTest::SetUp();
    sigemptyset(&set_);
    sigaddset(&set_, SIGIO);
    sigaddset(&set_, Rt());
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    Drain();
  }
  void TearDown() override {
    // The closes at teardown signal owners too: collect those as well.
    IoTest::TearDown();
    Drain();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  static int Rt() { return SIGRTMIN + 1; }
  // Every pending signal of the set, in the order sigtimedwait gives them.
  std::vector<siginfo_t> Drain() {
    std::vector<siginfo_t> out;
    struct timespec zero {};
    siginfo_t si;
    while (sigtimedwait(&set_, &si, &zero) > 0) out.push_back(si);
    return out;
  }
  int Fcntl(int fd, int cmd, long arg = 0) { return B().fcntl(fd, cmd, arg); }
  void Async(int fd, int sig = 0) {
    ASSERT_EQ(Fcntl(fd, F_SETOWN, getpid()), 0) << strerror(errno);
    if (sig) {
      ASSERT_EQ(Fcntl(fd, F_SETSIG, sig), 0);
    }
    int on = 1;
    ASSERT_EQ(B().ioctl(fd, FIOASYNC, &on), 0) << strerror(errno);
  }

  sigset_t set_, old_;
};

TEST_P(Sigio, fcntl__the_owner_commands_on_every_kind) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  int e = Eventfd();
  int ep = Epoll();
  int t = Track(B().timerfd_create(CLOCK_MONOTONIC, 0));
  for (int fd : {p[0], sv[0], e, ep, t}) {
    SCOPED_TRACE(fd);
    EXPECT_EQ(Fcntl(fd, F_GETOWN), 0);
    EXPECT_EQ(Fcntl(fd, F_GETSIG), 0);
    f_owner_ex ex{F_OWNER_PGRP, 99};
    ASSERT_EQ(B().fcntl(fd, F_GETOWN_EX, reinterpret_cast<long>(&ex)), 0);
    EXPECT_EQ(ex.type, F_OWNER_TID) << "the kernel's zeroed record";
    EXPECT_EQ(ex.pid, 0);
    uid_t uids[2] = {7, 7};
    ASSERT_EQ(B().fcntl(fd, kGetOwnerUids, reinterpret_cast<long>(uids)), 0);
    EXPECT_EQ(uids[0], 0u);
    EXPECT_EQ(uids[1], 0u);
    ASSERT_EQ(Fcntl(fd, F_SETOWN, getpid()), 0);
    EXPECT_EQ(Fcntl(fd, F_GETOWN), getpid());
    ASSERT_EQ(B().fcntl(fd, F_GETOWN_EX, reinterpret_cast<long>(&ex)), 0);
    EXPECT_EQ(ex.type, F_OWNER_PID);
    EXPECT_EQ(ex.pid, getpid());
    ASSERT_EQ(B().fcntl(fd, kGetOwnerUids, reinterpret_cast<long>(uids)), 0);
    EXPECT_EQ(uids[0], getuid());
    EXPECT_EQ(uids[1], geteuid());
    ASSERT_EQ(Fcntl(fd, F_SETOWN, -getpgrp()), 0);
    EXPECT_EQ(Fcntl(fd, F_GETOWN), -getpgrp());
    ASSERT_EQ(B().fcntl(fd, F_GETOWN_EX, reinterpret_cast<long>(&ex)), 0);
    EXPECT_EQ(ex.type, F_OWNER_PGRP);
    EXPECT_ERRNO(Fcntl(fd, F_SETOWN, 999999), ESRCH);
    EXPECT_ERRNO(Fcntl(fd, F_SETOWN, INT_MIN), EINVAL);
    EXPECT_EQ(Fcntl(fd, F_GETOWN), -getpgrp()) << "unchanged by a failure";
    ASSERT_EQ(Fcntl(fd, F_SETOWN, 0), 0);
    EXPECT_EQ(Fcntl(fd, F_GETOWN), 0);
    EXPECT_EQ(Fcntl(fd, F_SETSIG, 64), 0);
    EXPECT_EQ(Fcntl(fd, F_GETSIG), 64);
    EXPECT_ERRNO(Fcntl(fd, F_SETSIG, 65), EINVAL);
    EXPECT_ERRNO(Fcntl(fd, F_SETSIG, -1), EINVAL);
    EXPECT_EQ(Fcntl(fd, F_SETSIG, 0), 0);
    int bad[2] = {5, 0};  // a type no F_OWNER_* has
    EXPECT_ERRNO(B().fcntl(fd, F_SETOWN_EX, reinterpret_cast<long>(bad)),
                 EINVAL);
    f_owner_ex tid{F_OWNER_TID, Gettid()};
    ASSERT_EQ(B().fcntl(fd, F_SETOWN_EX, reinterpret_cast<long>(&tid)), 0);
    EXPECT_EQ(Fcntl(fd, F_GETOWN), Gettid());
    f_owner_ex none{F_OWNER_PID, 999999};
    EXPECT_ERRNO(B().fcntl(fd, F_SETOWN_EX, reinterpret_cast<long>(&none)),
                 ESRCH);
    EXPECT_ERRNO(Fcntl(fd, F_SETOWN_EX, 0), EFAULT);
    EXPECT_ERRNO(Fcntl(fd, F_GETOWN_EX, 0), EFAULT);
    EXPECT_ERRNO(Fcntl(fd, kGetOwnerUids, 0), EFAULT);
  }
}

TEST_P(Sigio, o_async__pipes_and_sockets_only) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  int e = Eventfd();
  int ep = Epoll();
  int on = 1, off = 0;
  for (int fd : {p[0], p[1], sv[0]}) {
    int base = Fcntl(fd, F_GETFL);
    ASSERT_EQ(B().ioctl(fd, FIOASYNC, &on), 0);
    EXPECT_EQ(Fcntl(fd, F_GETFL), base | O_ASYNC);
    ASSERT_EQ(B().ioctl(fd, FIOASYNC, &off), 0);
    EXPECT_EQ(Fcntl(fd, F_GETFL), base);
    ASSERT_EQ(Fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK), 0);
    EXPECT_EQ(Fcntl(fd, F_GETFL), base | O_ASYNC | O_NONBLOCK);
    ASSERT_EQ(Fcntl(fd, F_SETFL, 0), 0);
    EXPECT_EQ(Fcntl(fd, F_GETFL), base);
  }
  for (int fd : {e, ep}) {
    int base = Fcntl(fd, F_GETFL);
    EXPECT_ERRNO(B().ioctl(fd, FIOASYNC, &on), ENOTTY);
    EXPECT_EQ(B().ioctl(fd, FIOASYNC, &off), 0);
    ASSERT_EQ(Fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK), 0);
    EXPECT_EQ(Fcntl(fd, F_GETFL), base | O_NONBLOCK) << "O_ASYNC ignored";
  }
  EXPECT_ERRNO(B().ioctl(p[0], FIOASYNC, nullptr), EFAULT);
}

TEST_P(Sigio, pipe__every_write_signals_the_reader_and_every_read_the_writer) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  Async(p[0]);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  std::vector<siginfo_t> got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_signo, SIGIO);
  EXPECT_EQ(got[0].si_code, SI_KERNEL) << "plain SIGIO";
  ASSERT_EQ(Fcntl(p[0], F_SETSIG, Rt()), 0);
  ASSERT_EQ(WriteStr(p[1], "y"), 1);
  got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_signo, Rt());
  EXPECT_EQ(got[0].si_code, POLL_IN);
  EXPECT_EQ(got[0].si_band, POLLIN | POLLRDNORM);
  EXPECT_EQ(got[0].si_fd, p[0]);
  EXPECT_EQ(WriteStr(p[1], ""), 0);
  EXPECT_TRUE(Drain().empty()) << "a write of nothing does not reach it";
  // A second number: si_fd stays the one O_ASYNC was set through.
  int d = Dup(p[0]);
  ASSERT_EQ(Fcntl(d, F_SETFL, O_ASYNC | O_NONBLOCK), 0);
  ASSERT_EQ(WriteStr(p[1], "z"), 1);
  got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_fd, p[0]);
  // Reads signal the write end's owner, even one that finds nothing.
  EXPECT_EQ(ReadStr(p[0], 8), "xyz");
  EXPECT_TRUE(Drain().empty()) << "the write end is not in that mode";
  Async(p[1], Rt());
  char c;
  EXPECT_ERRNO(B().read(p[0], &c, 1), EAGAIN);
  got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_code, POLL_OUT);
  EXPECT_EQ(got[0].si_band, POLLOUT | POLLWRNORM | POLLWRBAND);
  EXPECT_EQ(got[0].si_fd, p[1]);
  // The last writer's close: the reader's owner hears it.
  ASSERT_EQ(Close(p[1]), 0);
  got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_signo, Rt());
  EXPECT_EQ(got[0].si_code, POLL_IN);
  // Out of the mode: no more signals.
  int off = 0;
  ASSERT_EQ(B().ioctl(p[0], FIOASYNC, &off), 0);
  EXPECT_EQ(ReadStr(p[0], 8), "");
  EXPECT_TRUE(Drain().empty());
}

TEST_P(Sigio, socket__data_room_and_the_peers_close) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  Async(sv[1], Rt());
  ASSERT_EQ(Send(sv[0], "data"), 4);
  std::vector<siginfo_t> got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_code, POLL_IN);
  EXPECT_EQ(got[0].si_fd, sv[1]);
  // Room: only after a send found none.
  Async(sv[0], Rt());
  EXPECT_EQ(Recv(sv[1], 8), "data");
  EXPECT_TRUE(Drain().empty()) << "the writer never ran out of room";
  std::string chunk(65536, 'x');
  while (Send(sv[0], chunk) > 0) {
  }
  Drain();  // the reader's POLL_IN signals
  while (!Recv(sv[1], 65536).empty()) {
  }
  got = Drain();
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().si_code, POLL_OUT);
  EXPECT_EQ(got.back().si_fd, sv[0]);
  // The peer shuts its writing down, then closes.
  ASSERT_EQ(B().shutdown(sv[0], SHUT_WR), 0);
  got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_code, POLL_IN);
  ASSERT_EQ(Close(sv[0]), 0);
  got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_code, POLL_HUP);
  EXPECT_EQ(got[0].si_band, POLLHUP | POLLERR);
}

TEST_P(Sigio, socket__no_signal_while_a_stream_reader_waits_for_the_data) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  Async(sv[1]);
  // The reader thread inherits the blocked signals.
  std::atomic<pid_t> tid{0};
  std::string read;
  std::thread reader([&] {
    tid = Gettid();
    char buf[8];
    ssize_t n = B().recv(sv[1], buf, sizeof buf, 0);
    if (n > 0) read.assign(buf, static_cast<size_t>(n));
  });
  ASSERT_TRUE(Eventually([&] { return tid != 0 && SleepsInSyscall(tid); }));
  ASSERT_EQ(Send(sv[0], "wake"), 4);
  reader.join();
  EXPECT_EQ(read, "wake");
  EXPECT_TRUE(Drain().empty()) << "SOCKWQ_ASYNC_WAITDATA";
  ASSERT_EQ(Send(sv[0], "more"), 4);
  EXPECT_EQ(Drain().size(), 1u) << "nobody waits now";
}

TEST_P(Sigio, owner__a_thread_gets_its_own_signal) {
  int p[2];
  Pipe(p);
  f_owner_ex tid{F_OWNER_TID, Gettid()};
  ASSERT_EQ(B().fcntl(p[0], F_SETOWN_EX, reinterpret_cast<long>(&tid)), 0);
  ASSERT_EQ(Fcntl(p[0], F_SETSIG, Rt()), 0);
  int on = 1;
  ASSERT_EQ(B().ioctl(p[0], FIOASYNC, &on), 0);
  ASSERT_EQ(WriteStr(p[1], "t"), 1);
  sigset_t pending;
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, Rt()), 1);
  std::vector<siginfo_t> got = Drain();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].si_code, POLL_IN);
  EXPECT_EQ(got[0].si_fd, p[0]);
}

// A handler that closes the very descriptor the interrupted write is using
// (uepoll raises the signal inside the write: its borrow must not make the
// close wait for it, D28 b).
std::atomic<int> g_close_in_handler{-1};
void CloseInHandler(int, siginfo_t*, void*) {
  int fd = g_close_in_handler.exchange(-1);
  if (fd >= 0) {
    const Backend* b = g_handler_backend.load();
    b->close(fd);
  }
}

TEST_P(Sigio, reentry__a_handler_closes_the_writers_descriptor) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  g_handler_backend = GetParam();
  struct sigaction sa {
  }, old{};
  sa.sa_sigaction = CloseInHandler;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  int sig = SIGRTMIN + 4;
  sigaction(sig, &sa, &old);
  Async(p[0], sig);
  g_close_in_handler = p[1];
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ssize_t w = WriteStr(p[1], "h");
  pthread_sigmask(SIG_BLOCK, &one, nullptr);
  sigaction(sig, &old, nullptr);
  EXPECT_EQ(w, 1);
  EXPECT_EQ(g_close_in_handler.load(), -1) << "the handler ran";
  Forget(p[1]);
  EXPECT_ERRNO(Fcntl(p[1], F_GETFD), EBADF);
  EXPECT_EQ(ReadStr(p[0], 8), "h");
}

// The owner's file closed while the other end keeps writing: signals until
// the close, none after, nothing freed under the writer.
TEST_P(Sigio, race__the_async_end_closes_while_the_other_writes) {
  for (int round = 0; round < 20; ++round) {
    int p[2];
    Pipe(p, O_NONBLOCK);
    Async(p[0], Rt());
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      // SIGPIPE (after the close) is blocked in this thread too.
      sigset_t pipe_set;
      sigemptyset(&pipe_set);
      sigaddset(&pipe_set, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
      char c = 'w';
      while (!stop) {
        if (B().write(p[1], &c, 1) < 0 && errno == EAGAIN) {
          char buf[4096];
          B().read(p[0], buf, sizeof buf);  // may race the close: EBADF
        }
      }
    });
    SpinDelay(round * 5000);
    ASSERT_EQ(Close(p[0]), 0);
    stop = true;
    writer.join();
    Drain();
    // The reader is gone: EPIPE, and nobody left to signal.
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
    EXPECT_ERRNO(WriteStr(p[1], "x"), EPIPE);
    EXPECT_TRUE(Drain().empty());
    ASSERT_EQ(Close(p[1]), 0);
  }
  struct timespec zero {};
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
  }
  pthread_sigmask(SIG_UNBLOCK, &pipe_set, nullptr);
}

UEPOLL_INSTANTIATE_BACKENDS(Sigio);

}  // namespace
}  // namespace uepoll_test
