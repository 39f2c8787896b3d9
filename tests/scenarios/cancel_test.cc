// pthread_cancel of a thread blocked in a call. On the
// kernel every one of these calls is a cancellation point: the thread ends
// at once, and the object it was blocked on keeps working for everybody
// else, with nothing left behind. uepoll must do the same: its sleeping
// thread's wait entries live on that thread's stack, so a cancellation that
// leaves them linked makes the next wakeup walk a dead stack.
//
// Each test: block a thread in the call, cancel it once it sleeps, join it
// (bounded), then make the object fire with nobody waiting (the wakeup that
// would walk a stale entry), check that its state is exactly what the
// operations since then made it, and that a new waiter is woken. The
// fixture's leak check then catches a reference the cancelled call kept;
// ASan catches a stale entry touched.
//
// Every test here failed on uepoll while a cancelled sleep left its wait
// entry linked (SIGSEGV in the next wakeup; docs/reliability.md, section 8).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <uepoll/uepoll.h>

#include "scenarios/scenario.h"

namespace uepoll_test {
namespace {

constexpr uint64_t kData = 42;

class CancelScenario : public BackendTest {
 protected:
  // poll() through libc on the kernel: the backend table's poll is the raw
  // syscall (for ASan's sake), which is not a cancellation point.
  int PollCall(pollfd* fds, nfds_t n, int timeout) {
    return IsKernel() ? ::poll(fds, n, timeout) : uepoll_poll(fds, n, timeout);
  }
  void SetNonblock(int fd, bool on) {
    int fl = B().fcntl(fd, F_GETFL, 0);
    ASSERT_GE(fl, 0);
    ASSERT_EQ(B().fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK),
              0);
  }
  // Fills a socket or pipe end (nonblocking for the fill, left blocking);
  // returns the number of bytes written, all of them 'f'.
  size_t Fill(int fd) {
    SetNonblock(fd, true);
    std::vector<char> chunk(4096, 'f');
    size_t total = 0;
    for (;;) {
      ssize_t n = B().write(fd, chunk.data(), chunk.size());
      if (n <= 0) break;
      total += static_cast<size_t>(n);
    }
    SetNonblock(fd, false);
    return total;
  }
  void EfdWrite(int efd, uint64_t v = 1) {
    ASSERT_EQ(B().write(efd, &v, 8), 8);
  }
  // Reads exactly n bytes (blocking).
  std::string ReadExactly(int fd, size_t n) {
    std::string out;
    std::vector<char> buf(65536);
    while (out.size() < n) {
      ssize_t r =
          B().read(fd, buf.data(), std::min(buf.size(), n - out.size()));
      if (r <= 0) break;
      out.append(buf.data(), static_cast<size_t>(r));
    }
    return out;
  }
  // Everything a socket or pipe end holds now (read nonblocking).
  std::string Drain(int fd) {
    SetNonblock(fd, true);
    std::string out;
    std::vector<char> buf(65536);
    for (;;) {
      ssize_t n = B().read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      out.append(buf.data(), static_cast<size_t>(n));
    }
    SetNonblock(fd, false);
    return out;
  }

  // Cancels c once it sleeps in its call and joins it. If it does not end
  // cancelled, unblock() must make its call return, so that the test can
  // go on (and fail).
  void CancelBlocked(CancellableCall& c, const std::function<void()>& unblock) {
    ASSERT_TRUE(c.started());
    if (!c.Parked()) {
      unblock();
      c.Join();
      FAIL() << "the call never slept";
    }
    bool cancelled = c.CancelAndJoin();
    if (!cancelled && !c.returned()) {
      unblock();
      EXPECT_TRUE(c.Join()) << "the thread is stuck in its call";
    }
    EXPECT_TRUE(cancelled)
        << (c.returned() ? "the call returned " + std::to_string(c.value())
                         : std::string("the cancellation was not acted on"));
  }

  // After a waiter on ep was cancelled: ep's LT item for efd fires with
  // nobody waiting, is reported once polled, and a new waiter is woken.
  void ExpectInstanceStillWorks(int ep, int efd) {
    uint64_t one = 1;
    ASSERT_EQ(B().write(efd, &one, 8), 8);  // wakes whatever is queued
    epoll_event ev[4];
    ASSERT_EQ(B().epoll_wait(ep, ev, 4, 0), 1);
    EXPECT_EQ(ev[0].data.u64, kData);
    uint64_t v = 0;
    ASSERT_EQ(B().read(efd, &v, 8), 8);
    EXPECT_EQ(v, 1u);
    const Backend* b = &B();
    Waiter w([b, ep](epoll_event* out) {
      return b->epoll_wait(ep, out, 1, kWaitMs);
    });
    ASSERT_TRUE(w.Parked());
    ASSERT_EQ(B().write(efd, &one, 8), 8);
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 1);
    EXPECT_EQ(w.event(0).data.u64, kData);
  }

  // After a writer on `to` was cancelled: fill it again, block a new
  // writer, and make room: the new writer is woken and its bytes arrive
  // whole, after the filler.
  void ExpectBlockedWriterIsWoken(int to, int from) {
    const size_t full = Fill(to);
    const Backend* b = &B();
    Waiter w([b, to](epoll_event*) {
      std::string z(100, 'w');
      return static_cast<int>(b->write(to, z.data(), z.size()));
    });
    ASSERT_TRUE(w.Parked());
    EXPECT_EQ(ReadExactly(from, full), std::string(full, 'f'));
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 100);
    EXPECT_EQ(ReadExactly(from, 100), std::string(100, 'w'));
  }

  // An instance with one idle LT eventfd item (data kData).
  void Instance(int* ep, int* efd) {
    *ep = Epoll();
    *efd = Eventfd();
    ASSERT_EQ(Ctl(*ep, EPOLL_CTL_ADD, *efd, EPOLLIN, kData), 0);
  }
};

TEST_P(CancelScenario, EpollWait) {
  int ep, efd;
  Instance(&ep, &efd);
  const Backend* b = &B();
  CancellableCall c([b, ep] {
    epoll_event ev[2];
    return long{b->epoll_wait(ep, ev, 2, -1)};
  });
  CancelBlocked(c, [&] { EfdWrite(efd); });
  ExpectInstanceStillWorks(ep, efd);
}

TEST_P(CancelScenario, EpollPwaitWithAMask) {
  int ep, efd;
  Instance(&ep, &efd);
  const Backend* b = &B();
  CancellableCall c([b, ep] {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR1);
    epoll_event ev[2];
    return long{b->epoll_pwait(ep, ev, 2, -1, &mask)};
  });
  CancelBlocked(c, [&] { EfdWrite(efd); });
  ExpectInstanceStillWorks(ep, efd);
}

TEST_P(CancelScenario, EpollPwait2) {
  int ep, efd;
  Instance(&ep, &efd);
  const Backend* b = &B();
  CancellableCall c([b, ep] {
    epoll_event ev[2];
    return long{b->epoll_pwait2(ep, ev, 2, nullptr, nullptr)};
  });
  CancelBlocked(c, [&] { EfdWrite(efd); });
  ExpectInstanceStillWorks(ep, efd);
}

// uepoll only: the kernel has no pwait3. The waiter sits in its min_wait
// phase (2 of 2 events wanted, none ready); afterwards two items fire, which
// makes a wakeup pick a min_wait waiter.
TEST_P(CancelScenario, Pwait3InItsMinWait) {
  if (IsKernel()) GTEST_SKIP() << "pwait3 and min_wait are uepoll's";
  int ep, efd;
  Instance(&ep, &efd);
  int efd2 = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd2, EPOLLIN, kData + 1), 0);
  CancellableCall c([ep] {
    epoll_event ev[2];
    uepoll_wait_args a{};
    a.min_wait_ns = 3600ull * 1000000000ull;
    return long{uepoll_epoll_pwait3(ep, ev, 2, &a)};
  });
  CancelBlocked(c, [&] {
    EfdWrite(efd);
    EfdWrite(efd2);
  });
  // Two ready items: a wakeup now picks a waiter that wants two.
  EfdWrite(efd2);
  EfdWrite(efd);
  epoll_event ev[4];
  ASSERT_EQ(B().epoll_wait(ep, ev, 4, 0), 2);
  uint64_t v;
  ASSERT_EQ(B().read(efd, &v, 8), 8);
  ASSERT_EQ(B().read(efd2, &v, 8), 8);
  ASSERT_EQ(B().epoll_wait(ep, ev, 4, 0), 0);
  ExpectInstanceStillWorks(ep, efd);
}

TEST_P(CancelScenario, BlockingReadOfAnEmptyPipe) {
  int p[2];
  Pipe(p);
  const Backend* b = &B();
  CancellableCall c([b, &p] {
    char buf[16];
    return long{b->read(p[0], buf, sizeof buf)};
  });
  CancelBlocked(c, [&] { ASSERT_EQ(B().write(p[1], "u", 1), 1); });
  ASSERT_EQ(B().write(p[1], "abcde", 5), 5);  // wakes the read queue
  EXPECT_EQ(Drain(p[0]), "abcde");
  Waiter w([b, &p](epoll_event*) {
    char buf[16];
    return static_cast<int>(b->read(p[0], buf, sizeof buf));
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(p[1], "xyz", 3), 3);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 3);
}

TEST_P(CancelScenario, BlockingWriteToAFullPipe) {
  int p[2];
  Pipe(p);
  const size_t full = Fill(p[1]);
  const Backend* b = &B();
  CancellableCall c([b, &p] {
    std::string z(100, 'Z');
    return long{b->write(p[1], z.data(), z.size())};
  });
  CancelBlocked(c, [&] { Drain(p[0]); });
  // Nothing of the cancelled write went in; the read wakes the write queue.
  EXPECT_EQ(Drain(p[0]), std::string(full, 'f'));
  ExpectBlockedWriterIsWoken(p[1], p[0]);
}

TEST_P(CancelScenario, BlockingReadOfASocket) {
  int sv[2];
  SocketPair(sv);
  const Backend* b = &B();
  CancellableCall c([b, &sv] {
    char buf[16];
    return long{b->read(sv[0], buf, sizeof buf)};
  });
  CancelBlocked(c, [&] { ASSERT_EQ(B().write(sv[1], "u", 1), 1); });
  ASSERT_EQ(B().write(sv[1], "abcde", 5), 5);
  EXPECT_EQ(Drain(sv[0]), "abcde");
  Waiter w([b, &sv](epoll_event*) {
    char buf[16];
    return static_cast<int>(b->read(sv[0], buf, sizeof buf));
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(sv[1], "xyz", 3), 3);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 3);
}

TEST_P(CancelScenario, BlockingWriteToAFullSocket) {
  int sv[2];
  SocketPair(sv);
  const size_t full = Fill(sv[0]);
  const Backend* b = &B();
  CancellableCall c([b, &sv] {
    std::string z(100, 'Z');
    return long{b->write(sv[0], z.data(), z.size())};
  });
  CancelBlocked(c, [&] { Drain(sv[1]); });
  EXPECT_EQ(Drain(sv[1]), std::string(full, 'f'));
  ExpectBlockedWriterIsWoken(sv[0], sv[1]);
}

// recvmmsg's wait for its first message, and sendmmsg's wait for room,
// are cancellation points as read and write are (each a batch of one).
TEST_P(CancelScenario, BlockingRecvmmsgOfASocket) {
  int sv[2];
  SocketPair(sv);
  const Backend* b = &B();
  auto recv_one = [b, &sv] {
    char buf[16];
    iovec iov{buf, sizeof buf};
    mmsghdr m{};
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
    int n = b->recvmmsg(sv[0], &m, 1, 0, nullptr);
    return n == 1 ? static_cast<int>(m.msg_len) : -1;
  };
  CancellableCall c([&recv_one] { return long{recv_one()}; });
  CancelBlocked(c, [&] { ASSERT_EQ(B().write(sv[1], "u", 1), 1); });
  ASSERT_EQ(B().write(sv[1], "abcde", 5), 5);
  EXPECT_EQ(Drain(sv[0]), "abcde");
  Waiter w([&recv_one](epoll_event*) { return recv_one(); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(sv[1], "xyz", 3), 3);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 3);
}

TEST_P(CancelScenario, BlockingSendmmsgToAFullSocket) {
  int sv[2];
  SocketPair(sv);
  const size_t full = Fill(sv[0]);
  const Backend* b = &B();
  CancellableCall c([b, &sv] {
    std::string z(100, 'Z');
    iovec iov{z.data(), z.size()};
    mmsghdr m{};
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
    return long{b->sendmmsg(sv[0], &m, 1, 0)};
  });
  CancelBlocked(c, [&] { Drain(sv[1]); });
  EXPECT_EQ(Drain(sv[1]), std::string(full, 'f'));
  ExpectBlockedWriterIsWoken(sv[0], sv[1]);
}

TEST_P(CancelScenario, BlockingEventfdRead) {
  int efd = Eventfd(0, 0);  // blocking
  const Backend* b = &B();
  CancellableCall c([b, efd] {
    uint64_t v;
    return long{b->read(efd, &v, 8)};
  });
  CancelBlocked(c, [&] { EfdWrite(efd); });
  uint64_t five = 5;
  ASSERT_EQ(B().write(efd, &five, 8), 8);  // wakes the read queue
  SetNonblock(efd, true);
  uint64_t v = 0;
  ASSERT_EQ(B().read(efd, &v, 8), 8);
  EXPECT_EQ(v, 5u);
  SetNonblock(efd, false);
  Waiter w([b, efd](epoll_event*) {
    uint64_t got = 0;
    return b->read(efd, &got, 8) == 8 ? static_cast<int>(got) : -1;
  });
  ASSERT_TRUE(w.Parked());
  uint64_t three = 3;
  ASSERT_EQ(B().write(efd, &three, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 3);
}

TEST_P(CancelScenario, Poll) {
  int p[2];
  Pipe(p);
  CancellableCall c([this, &p] {
    pollfd f{p[0], POLLIN, 0};
    return long{PollCall(&f, 1, -1)};
  });
  CancelBlocked(c, [&] { ASSERT_EQ(B().write(p[1], "u", 1), 1); });
  ASSERT_EQ(B().write(p[1], "a", 1), 1);  // wakes the poll entries
  pollfd f{p[0], POLLIN, 0};
  ASSERT_EQ(PollCall(&f, 1, 0), 1);
  EXPECT_EQ(f.revents, POLLIN);
  EXPECT_EQ(Drain(p[0]), "a");
  Waiter w([this, &p](epoll_event*) {
    pollfd g{p[0], POLLIN, 0};
    return PollCall(&g, 1, kWaitMs);
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(p[1], "b", 1), 1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

UEPOLL_INSTANTIATE_BACKENDS(CancelScenario);

}  // namespace
}  // namespace uepoll_test
