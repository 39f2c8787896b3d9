// AF_UNIX SOCK_DGRAM and SOCK_SEQPACKET pairs, on both backends: message
// boundaries and truncation, zero-length messages, the send buffer's
// accounting and EPOLLOUT, what each type does when its peer shuts down or
// closes, and blocked receivers (net/unix/af_unix.c: unix_dgram_sendmsg,
// unix_seqpacket_sendmsg, __unix_dgram_recvmsg, unix_dgram_poll).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <string>
#include <vector>

#include "conformance/io_helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class UnixDgram : public IoTest {
 protected:
  static constexpr int kTypes[] = {SOCK_DGRAM, SOCK_SEQPACKET};
  // Fills sv[0] with nonblocking messages of n bytes; returns how many fit
  // and what the first refused send said.
  int Fill(int fd, size_t n, int* err) {
    std::vector<char> buf(n, 'x');
    int count = 0;
    for (;;) {
      errno = 0;
      ssize_t r = B().send(fd, buf.data(), n, MSG_DONTWAIT);
      if (r != static_cast<ssize_t>(n)) {
        *err = errno;
        return count;
      }
      ++count;
    }
  }
};

constexpr short kOut = POLLOUT | POLLWRNORM | POLLWRBAND;
constexpr short kIn = POLLIN | POLLRDNORM;

TEST_P(UnixDgram, messages__keep_their_boundaries_and_order) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "one"), 3);
    ASSERT_EQ(Send(sv[0], "three"), 5);
    ASSERT_EQ(Send(sv[1], "back"), 4);
    EXPECT_EQ(Recv(sv[1], 100), "one");
    EXPECT_EQ(Recv(sv[1], 100), "three");
    EXPECT_EQ(Recv(sv[0], 100), "back");
  }
}

TEST_P(UnixDgram, truncation__rest_is_dropped_and_flagged) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "hello"), 5);
    Received r = RecvFds(sv[1], 2, 0);
    EXPECT_EQ(r.r, 2);
    EXPECT_EQ(r.data, "he");
    EXPECT_EQ(r.msg_flags, MSG_TRUNC);
    // MSG_TRUNC in flags returns the message's real length.
    ASSERT_EQ(Send(sv[0], "hello"), 5);
    char buf[2];
    EXPECT_EQ(B().recv(sv[1], buf, 2, MSG_TRUNC), 5);
    // A message that fits is not flagged, even with MSG_TRUNC asked.
    ASSERT_EQ(Send(sv[0], "hi"), 2);
    r = RecvFds(sv[1], 10, 0, MSG_TRUNC);
    EXPECT_EQ(r.r, 2);
    EXPECT_EQ(r.msg_flags, 0);
    EXPECT_ERRNO(B().recv(sv[1], buf, 2, 0), EAGAIN);
  }
}

TEST_P(UnixDgram, peek__leaves_the_message_and_truncates_alike) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "hello"), 5);
    ASSERT_EQ(Send(sv[0], "next"), 4);
    Received r = RecvFds(sv[1], 3, 0, MSG_PEEK);
    EXPECT_EQ(r.data, "hel");
    EXPECT_EQ(r.msg_flags, MSG_TRUNC);
    EXPECT_EQ(Recv(sv[1], 100, MSG_PEEK), "hello");
    EXPECT_EQ(Recv(sv[1], 100), "hello");
    EXPECT_EQ(Recv(sv[1], 100), "next");
  }
}

TEST_P(UnixDgram, zero_length__messages_are_sent_and_received) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(B().send(sv[0], "", 0, 0), 0);
    EXPECT_EQ(PollMask(sv[1]) & kIn, kIn);
    char buf[4];
    EXPECT_EQ(B().recv(sv[1], buf, 4, 0), 0);
    EXPECT_ERRNO(B().recv(sv[1], buf, 4, 0), EAGAIN);
    // recv of 0 bytes takes a whole message, flagging it truncated.
    ASSERT_EQ(Send(sv[0], "abc"), 3);
    Received r = RecvFds(sv[1], 0, 0);
    EXPECT_EQ(r.r, 0);
    EXPECT_EQ(r.msg_flags, MSG_TRUNC);
    EXPECT_ERRNO(B().recv(sv[1], buf, 4, 0), EAGAIN);
  }
}

TEST_P(UnixDgram, recv_fault__loses_the_message_but_peek_keeps_it) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "abc"), 3);
    ASSERT_EQ(Send(sv[0], "def"), 3);
    EXPECT_ERRNO(B().recv(sv[1], nullptr, 3, MSG_PEEK), EFAULT);
    EXPECT_ERRNO(B().recv(sv[1], nullptr, 3, 0), EFAULT);
    EXPECT_EQ(Recv(sv[1], 10), "def");
  }
}

// The send buffer (sk_sndbuf 212992) is charged each message's truesize
// before it is filled; a message may be charged while the charge is below
// the buffer. These counts are the kernel's, size by size.
TEST_P(UnixDgram, accounting__messages_that_fit_by_size) {
  for (int type : kTypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{500}, size_t{3776},
                     size_t{3777}, size_t{16064}, size_t{16065}, size_t{36544},
                     size_t{65536}, size_t{200000}, size_t{212960}}) {
      SCOPED_TRACE(testing::Message() << "type " << type << " size " << n);
      int sv[2];
      Pair(sv, type);
      int err = 0;
      int count = Fill(sv[0], n, &err);
      EXPECT_EQ(err, EAGAIN);
      // A record of the kernel's answers (Linux 6.18, this machine).
      std::vector<std::pair<size_t, int>> expected = {
          {0, 278},   {1, 278},    {500, 167},  {3776, 49},
          {3777, 26}, {16064, 13}, {16065, 11}, {36544, 6},
          {65536, 4}, {200000, 2}, {212960, 1}};
      for (auto [size, want] : expected) {
        if (size == n) {
          EXPECT_EQ(count, want);
        }
      }
      EXPECT_EQ(PollMask(sv[0]) & kOut, 0) << "full: not writable";
      ASSERT_EQ(Close(sv[0]), 0);
      ASSERT_EQ(Close(sv[1]), 0);
    }
  }
}

TEST_P(UnixDgram, accounting__too_large_is_emsgsize) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    std::vector<char> big(212961);
    EXPECT_ERRNO(B().send(sv[0], big.data(), big.size(), 0), EMSGSIZE);
    EXPECT_EQ(B().send(sv[0], big.data(), big.size() - 1, 0), 212960);
  }
}

// OUT comes back once the charge is down to a quarter of the buffer:
// reading the 278 one-byte messages one by one, the count at which the
// writer becomes writable again (and is woken: an edge) is the kernel's.
TEST_P(UnixDgram, accounting__out_returns_at_a_quarter) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int err = 0;
    int count = Fill(sv[0], 1, &err);
    int ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[0], EPOLLOUT | EPOLLET, 1), 0);
    EXPECT_TRUE(Wait(ep).empty());
    int reads = 0;
    char c;
    while (!(PollMask(sv[0]) & POLLOUT) && reads < count) {
      ASSERT_EQ(B().recv(sv[1], &c, 1, 0), 1);
      ++reads;
    }
    // (278 - reads + 1) * 768 * 4 <= 212992 first at 209 reads.
    EXPECT_EQ(reads, 209);
    EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 1}}));
    Close(ep);
  }
}

TEST_P(UnixDgram, peer_close__dgram_learns_at_its_next_send) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[1], "m1"), 2);
  ASSERT_EQ(Send(sv[1], "m2"), 2);
  ASSERT_EQ(Send(sv[0], "unread"), 6);
  ASSERT_EQ(Close(sv[1]), 0);
  // No HUP, no error: a datagram socket has no connection to lose.
  EXPECT_EQ(PollMask(sv[0]), kIn | kOut);
  EXPECT_EQ(Recv(sv[0], 10), "m1");
  bool raised = RaisesSigpipe(
      [&] { EXPECT_ERRNO(B().send(sv[0], "x", 1, 0), ECONNREFUSED); });
  EXPECT_FALSE(raised);
  // The refused send disconnected the socket and dropped its queue.
  EXPECT_ERRNO(B().recv(sv[0], nullptr, 0, 0), EAGAIN);
  EXPECT_ERRNO(B().send(sv[0], "x", 1, 0), ENOTCONN);
  EXPECT_EQ(PollMask(sv[0]), kOut);
}

TEST_P(UnixDgram, peer_close__seqpacket_is_reset_then_eof) {
  int sv[2];
  Pair(sv, SOCK_SEQPACKET, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[1], "m1"), 2);
  ASSERT_EQ(Send(sv[0], "unread"), 6);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_EQ(PollMask(sv[0]), kIn | kOut | POLLHUP | POLLRDHUP | POLLERR);
  // The pending error comes before the queued message.
  char buf[8];
  EXPECT_ERRNO(B().recv(sv[0], buf, 8, 0), ECONNRESET);
  EXPECT_EQ(PollMask(sv[0]), kIn | kOut | POLLHUP | POLLRDHUP);
  EXPECT_EQ(Recv(sv[0], 10), "m1");
  EXPECT_EQ(B().recv(sv[0], buf, 8, 0), 0);
  bool raised =
      RaisesSigpipe([&] { EXPECT_ERRNO(B().send(sv[0], "x", 1, 0), EPIPE); });
  EXPECT_FALSE(raised) << "seqpacket sends raise no SIGPIPE";
}

TEST_P(UnixDgram, peer_close__seqpacket_pending_error_beats_send) {
  int sv[2];
  Pair(sv, SOCK_SEQPACKET, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "unread"), 6);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_ERRNO(B().send(sv[0], "x", 1, 0), ECONNRESET);
  EXPECT_ERRNO(B().send(sv[0], "x", 1, 0), EPIPE);
}

// unix_release_sock skips an empty first message: a lone zero-length
// message left unread is no reset, one behind it (empty or not) is. Found
// by the differential fuzzer (a seqpacket write of 0 bytes, then close).
TEST_P(UnixDgram, peer_close__lone_empty_message_is_no_reset) {
  struct Case {
    const char* first;
    const char* second;  // nullptr: one message only
    bool reset;
  };
  for (const Case& c : {Case{"", nullptr, false}, Case{"", "", true},
                        Case{"", "a", true}, Case{"a", "", true}}) {
    SCOPED_TRACE(std::string("[") + c.first + "]" +
                 (c.second ? std::string("[") + c.second + "]" : ""));
    int sv[2];
    Pair(sv, SOCK_SEQPACKET, SOCK_NONBLOCK);
    ASSERT_EQ(B().send(sv[1], c.first, std::strlen(c.first), 0),
              static_cast<ssize_t>(std::strlen(c.first)));
    if (c.second) {
      ASSERT_EQ(B().send(sv[1], c.second, std::strlen(c.second), 0),
                static_cast<ssize_t>(std::strlen(c.second)));
    }
    ASSERT_EQ(Close(sv[0]), 0);
    uint32_t err = c.reset ? POLLERR : 0;
    EXPECT_EQ(PollMask(sv[1]),
              kOut | POLLHUP | POLLIN | POLLRDNORM | POLLRDHUP | err);
    char buf[4];
    if (c.reset) {
      EXPECT_ERRNO(B().recv(sv[1], buf, sizeof buf, 0), ECONNRESET);
    } else {
      EXPECT_EQ(B().recv(sv[1], buf, sizeof buf, 0), 0);  // EOF
    }
    ASSERT_EQ(Close(sv[1]), 0);
  }
}

// shutdown(sv[0], how): seqpacket mirrors it on the peer like a stream,
// a datagram pair does not. Each row: sv[0]'s mask, sv[1]'s mask, whether
// each side may still send, what a nonblocking receive on each gives.
TEST_P(UnixDgram, shutdown__matrix_per_type) {
  struct Row {
    int type, how;
    short mask0, mask1;
    bool send0, send1;
    int recv0, recv1;  // >= 0: that count; < 0: -errno
  };
  constexpr short kEof = POLLRDHUP | kIn;
  const Row rows[] = {
      {SOCK_DGRAM, SHUT_RD, kEof | kOut, kOut, true, false, -EAGAIN, 1},
      {SOCK_DGRAM, SHUT_WR, kOut, kOut, false, true, 1, -EAGAIN},
      {SOCK_DGRAM, SHUT_RDWR, kEof | kOut | POLLHUP, kOut, false, false,
       -EAGAIN, -EAGAIN},
      {SOCK_SEQPACKET, SHUT_RD, kEof | kOut, kOut, true, false, 0, 1},
      {SOCK_SEQPACKET, SHUT_WR, kOut, kEof | kOut, false, true, 1, 0},
      {SOCK_SEQPACKET, SHUT_RDWR, kEof | kOut | POLLHUP, kEof | kOut | POLLHUP,
       false, false, 0, 0},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(testing::Message() << row.type << " " << row.how);
    int sv[2];
    Pair(sv, row.type, SOCK_NONBLOCK);
    ASSERT_EQ(B().shutdown(sv[0], row.how), 0);
    EXPECT_EQ(PollMask(sv[0]), row.mask0);
    EXPECT_EQ(PollMask(sv[1]), row.mask1);
    bool raised = RaisesSigpipe([&] {
      EXPECT_EQ(B().send(sv[0], "a", 1, 0), row.send0 ? 1 : -1);
      if (!row.send0) {
        EXPECT_EQ(errno, EPIPE);
      }
      EXPECT_EQ(B().send(sv[1], "b", 1, 0), row.send1 ? 1 : -1);
      if (!row.send1) {
        EXPECT_EQ(errno, EPIPE);
      }
    });
    EXPECT_FALSE(raised);
    char c;
    errno = 0;
    ssize_t r0 = B().recv(sv[0], &c, 1, 0);
    EXPECT_EQ(r0 < 0 ? -errno : r0, row.recv0);
    errno = 0;
    ssize_t r1 = B().recv(sv[1], &c, 1, 0);
    EXPECT_EQ(r1 < 0 ? -errno : r1, row.recv1);
    ASSERT_EQ(Close(sv[0]), 0);
    ASSERT_EQ(Close(sv[1]), 0);
  }
}

TEST_P(UnixDgram, shutdown_rd__queued_messages_stay_readable) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[1], "data"), 4);
    ASSERT_EQ(B().shutdown(sv[0], SHUT_RD), 0);
    EXPECT_EQ(Recv(sv[0], 10), "data");
  }
}

TEST_P(UnixDgram, blocking_recv__eof_after_shut_rd_for_both_types) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type);
    char c;
    Waiter w([&](epoll_event*) {
      return static_cast<int>(B().recv(sv[0], &c, 1, 0));
    });
    ASSERT_TRUE(w.Parked());
    ASSERT_EQ(B().shutdown(sv[0], SHUT_RD), 0);
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 0);
  }
}

// Blocked receivers wait exclusively: each message wakes one of them.
TEST_P(UnixDgram, blocking_recv__one_message_wakes_one_receiver) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type);
    char a = 0, b = 0;
    Waiter w1([&](epoll_event*) {
      return static_cast<int>(B().recv(sv[1], &a, 1, 0));
    });
    Waiter w2([&](epoll_event*) {
      return static_cast<int>(B().recv(sv[1], &b, 1, 0));
    });
    ASSERT_TRUE(w1.Parked());
    ASSERT_TRUE(w2.Parked());
    ASSERT_EQ(Send(sv[0], "x"), 1);
    ASSERT_TRUE(Eventually([&] { return w1.Done() || w2.Done(); }));
    EXPECT_FALSE(w1.Done() && w2.Done());
    ASSERT_EQ(Send(sv[0], "y"), 1);
    ASSERT_TRUE(w1.WaitDone());
    ASSERT_TRUE(w2.WaitDone());
    EXPECT_EQ(w1.result(), 1);
    EXPECT_EQ(w2.result(), 1);
    EXPECT_EQ(std::string() + a + b == "xy" || std::string() + a + b == "yx",
              true);
  }
}

TEST_P(UnixDgram, blocking_send__waits_for_room) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type);
    int err = 0;
    int count = Fill(sv[0], 1, &err);
    ASSERT_EQ(err, EAGAIN);
    Waiter w([&](epoll_event*) {
      return static_cast<int>(B().send(sv[0], "z", 1, 0));
    });
    ASSERT_TRUE(w.Parked());
    char c;
    // Room comes back at a quarter of the buffer (see above).
    for (int i = 0; i < count && !w.Done(); ++i) {
      ASSERT_EQ(B().recv(sv[1], &c, 1, 0), 1);
    }
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 1);
  }
}

TEST_P(UnixDgram, edges__each_message_is_an_edge_for_et_readers) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, sv[1], EPOLLIN | EPOLLET, 3), 0);
    ASSERT_EQ(Send(sv[0], "a"), 1);
    EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 3}}));
    ASSERT_EQ(Send(sv[0], "b"), 1);
    EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 3}}));
    EXPECT_EQ(Recv(sv[1], 10), "a");
    EXPECT_TRUE(Wait(ep).empty()) << "a read is no edge";
    Close(ep);
  }
}

// A datagram send may name a destination; a socket pair's sockets have no
// name, so only the address checks and "nothing bound there" are common to
// both backends (docs/semantics.md D26). Seqpacket ignores the address.
TEST_P(UnixDgram, sendto__destination_checks) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::strcpy(un.sun_path, "/nonexistent-uepoll-test-path");
  auto* sa = reinterpret_cast<sockaddr*>(&un);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, sizeof un), ENOENT);
  sockaddr_un abs{};
  abs.sun_family = AF_UNIX;
  std::memcpy(abs.sun_path, "\0uepoll-nobody-here", 19);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, reinterpret_cast<sockaddr*>(&abs),
                          offsetof(sockaddr_un, sun_path) + 19),
               ECONNREFUSED);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, 2), EINVAL);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, 200), EINVAL);
  sockaddr_un inet = un;
  inet.sun_family = AF_INET;
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, reinterpret_cast<sockaddr*>(&inet),
                          sizeof inet),
               EINVAL);
  EXPECT_EQ(B().sendto(sv[0], "a", 1, 0, sa, 0), 1);
  EXPECT_EQ(Recv(sv[1], 10), "a");
  int qv[2];
  Pair(qv, SOCK_SEQPACKET, SOCK_NONBLOCK);
  EXPECT_EQ(B().sendto(qv[0], "q", 1, 0, reinterpret_cast<sockaddr*>(&inet),
                       sizeof inet),
            1);
  EXPECT_EQ(Recv(qv[1], 10), "q");
}

TEST_P(UnixDgram, errors__oversized_beats_nothing_but_the_control_checks) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_WR), 0);
  std::vector<char> big(300000);
  // EMSGSIZE is checked before the send buffer (and its shutdown).
  EXPECT_ERRNO(B().send(sv[0], big.data(), big.size(), 0), EMSGSIZE);
  EXPECT_ERRNO(B().send(sv[0], big.data(), 1, 0), EPIPE);
}

UEPOLL_INSTANTIATE_BACKENDS(UnixDgram);

}  // namespace
}  // namespace uepoll_test
