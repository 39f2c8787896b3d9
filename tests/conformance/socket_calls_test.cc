// send, recv, sendto, recvfrom, sendmsg, recvmsg on socket pairs, on both
// backends: the flags (MSG_DONTWAIT, MSG_PEEK, MSG_WAITALL, MSG_TRUNC,
// MSG_NOSIGNAL, MSG_CMSG_CLOEXEC, MSG_OOB without out-of-band data), the
// name and control fields, ENOTSOCK on other objects, and each call's
// errors in the kernel's order (net/socket.c, net/unix/af_unix.c).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "conformance/io_helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class SocketCalls : public IoTest {};

void* const kKernelAddr = reinterpret_cast<void*>(uintptr_t{1} << 48);
constexpr int kMsgCmsgCompat = static_cast<int>(0x80000000u);

TEST_P(SocketCalls, send_recv__carry_bytes_like_write_read) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  ASSERT_EQ(Send(sv[0], "hello"), 5);
  EXPECT_EQ(Recv(sv[1], 100), "hello");
  ASSERT_EQ(Send(sv[1], "back", MSG_NOSIGNAL), 4);
  EXPECT_EQ(ReadStr(sv[0], 100), "back");
}

TEST_P(SocketCalls, dontwait__makes_one_call_nonblocking) {
  int sv[2];
  Pair(sv, SOCK_STREAM);  // blocking sockets
  char c;
  EXPECT_ERRNO(B().recv(sv[0], &c, 1, MSG_DONTWAIT), EAGAIN);
  int flags = B().fcntl(sv[0], F_GETFL, 0);
  EXPECT_EQ(flags & O_NONBLOCK, 0);
}

TEST_P(SocketCalls, peek__stream_leaves_the_bytes_and_merges_chunks) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "ab"), 2);
  ASSERT_EQ(Send(sv[0], "cd"), 2);
  EXPECT_EQ(Recv(sv[1], 3, MSG_PEEK), "abc");
  EXPECT_EQ(Recv(sv[1], 100, MSG_PEEK), "abcd");
  EXPECT_EQ(Recv(sv[1], 100), "abcd");
  EXPECT_ERRNO(B().recv(sv[1], nullptr, 0, 0), EAGAIN);
}

TEST_P(SocketCalls, trunc__is_ignored_on_a_stream) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "hello"), 5);
  char buf[2];
  EXPECT_EQ(B().recv(sv[1], buf, 2, MSG_TRUNC), 2);
  EXPECT_EQ(Recv(sv[1], 100), "llo");
}

TEST_P(SocketCalls, recv_zero__stream_returns_zero_only_with_data) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  char c;
  EXPECT_ERRNO(B().recv(sv[1], &c, 0, 0), EAGAIN);
  ASSERT_EQ(Send(sv[0], "x"), 1);
  EXPECT_EQ(B().recv(sv[1], &c, 0, 0), 0);
  EXPECT_EQ(Recv(sv[1], 10), "x");
}

TEST_P(SocketCalls, waitall__nonblocking_returns_what_is_there) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "abc"), 3);
  EXPECT_EQ(Recv(sv[1], 10, MSG_WAITALL), "abc");
  EXPECT_ERRNO(B().recv(sv[1], nullptr, 0, MSG_WAITALL), EAGAIN);
}

TEST_P(SocketCalls, waitall__blocking_waits_for_the_whole_buffer) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  ASSERT_EQ(Send(sv[0], "abc"), 3);
  char buf[6] = {};
  Waiter w([&](epoll_event*) {
    return static_cast<int>(B().recv(sv[1], buf, 6, MSG_WAITALL));
  });
  ASSERT_TRUE(w.Parked()) << "returned " << w.result();
  ASSERT_EQ(Send(sv[0], "de"), 2);
  ASSERT_TRUE(w.Parked()) << "woke with 5 of 6 bytes";
  ASSERT_EQ(Send(sv[0], "fg"), 2);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 6);
  EXPECT_EQ(std::string(buf, 6), "abcdef");
  EXPECT_EQ(Recv(sv[1], 10, MSG_DONTWAIT), "g");
}

TEST_P(SocketCalls, waitall__eof_ends_it_with_the_bytes_so_far) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  char buf[6] = {};
  Waiter w([&](epoll_event*) {
    return static_cast<int>(B().recv(sv[1], buf, 6, MSG_WAITALL));
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(Send(sv[0], "ab"), 2);
  ASSERT_EQ(B().shutdown(sv[0], SHUT_WR), 0);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 2);
}

TEST_P(SocketCalls, nosignal__suppresses_sigpipe_only) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  ASSERT_EQ(Close(sv[1]), 0);
  EXPECT_FALSE(RaisesSigpipe(
      [&] { EXPECT_ERRNO(B().send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE); }));
  EXPECT_TRUE(
      RaisesSigpipe([&] { EXPECT_ERRNO(B().send(sv[0], "x", 1, 0), EPIPE); }));
}

TEST_P(SocketCalls, oob__recv_finds_no_out_of_band_data) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  char c;
  EXPECT_ERRNO(B().recv(sv[1], &c, 1, MSG_OOB), EINVAL);
  for (int type : {SOCK_DGRAM, SOCK_SEQPACKET}) {
    int dv[2];
    Pair(dv, type, SOCK_NONBLOCK);
    EXPECT_ERRNO(B().send(dv[0], "x", 1, MSG_OOB), EOPNOTSUPP);
    EXPECT_ERRNO(B().recv(dv[1], &c, 1, MSG_OOB), EOPNOTSUPP);
  }
}

TEST_P(SocketCalls, flags__unknown_bits_are_ignored) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  for (int flag : {int{MSG_EOR}, int{MSG_MORE}, int{MSG_CONFIRM}, 0x10000000,
                   0x10, kMsgCmsgCompat}) {
    SCOPED_TRACE(flag);
    ASSERT_EQ(B().send(sv[0], "q", 1, flag), 1);
    char c;
    EXPECT_EQ(B().recv(sv[1], &c, 1, flag & ~MSG_EOR), 1);
  }
}

TEST_P(SocketCalls, enotsock__on_every_other_object) {
  int p[2];
  Pipe(p);
  int efd = Eventfd();
  int ep = Epoll();
  char c = 0;
  msghdr m{};
  for (int fd : {p[0], p[1], efd, ep}) {
    SCOPED_TRACE(fd);
    EXPECT_ERRNO(B().send(fd, &c, 1, 0), ENOTSOCK);
    EXPECT_ERRNO(B().recv(fd, &c, 1, 0), ENOTSOCK);
    EXPECT_ERRNO(B().sendto(fd, &c, 1, 0, nullptr, 0), ENOTSOCK);
    EXPECT_ERRNO(B().recvfrom(fd, &c, 1, 0, nullptr, nullptr), ENOTSOCK);
    EXPECT_ERRNO(B().sendmsg(fd, &m, 0), ENOTSOCK);
    EXPECT_ERRNO(B().recvmsg(fd, &m, 0), ENOTSOCK);
    // sendmsg and recvmsg look at the descriptor before the message.
    EXPECT_ERRNO(B().sendmsg(fd, nullptr, 0), ENOTSOCK);
    // send and recv check the buffer first.
    EXPECT_ERRNO(B().send(fd, kKernelAddr, 1, 0), EFAULT);
    EXPECT_ERRNO(B().recv(fd, kKernelAddr, 1, 0), EFAULT);
  }
  EXPECT_ERRNO(B().send(B().closed_fd, &c, 1, 0), EBADF);
  EXPECT_ERRNO(B().sendmsg(B().closed_fd, &m, 0), EBADF);
  EXPECT_ERRNO(B().recvmsg(B().closed_fd, &m, 0), EBADF);
  // The 32-bit control format is refused before the descriptor.
  EXPECT_ERRNO(B().sendmsg(B().closed_fd, &m, kMsgCmsgCompat), EINVAL);
  EXPECT_ERRNO(B().recvmsg(B().closed_fd, &m, kMsgCmsgCompat), EINVAL);
}

TEST_P(SocketCalls, sendto__address_on_a_stream_is_eisconn) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::strcpy(un.sun_path, "/nonexistent-uepoll");
  auto* sa = reinterpret_cast<sockaddr*>(&un);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, sizeof un), EISCONN);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, 3), EISCONN);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, 200), EINVAL);
  EXPECT_ERRNO(B().sendto(sv[0], "a", 1, 0, sa, static_cast<socklen_t>(-1)),
               EINVAL);
  EXPECT_EQ(B().sendto(sv[0], "a", 1, 0, sa, 0), 1);       // no address
  EXPECT_EQ(B().sendto(sv[0], "b", 1, 0, nullptr, 5), 1);  // no address
  EXPECT_EQ(Recv(sv[1], 10), "ab");
}

TEST_P(SocketCalls, recvfrom__name_length_of_an_unbound_peer_is_zero) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "hi"), 2);
    sockaddr_storage ss;
    std::memset(&ss, 0x55, sizeof ss);
    socklen_t len = sizeof ss;
    char buf[8];
    ASSERT_EQ(
        B().recvfrom(sv[1], buf, 8, 0, reinterpret_cast<sockaddr*>(&ss), &len),
        2);
    EXPECT_EQ(len, 0u);
    ASSERT_EQ(Send(sv[0], "hi"), 2);
    len = 77;
    ASSERT_EQ(B().recvfrom(sv[1], buf, 8, 0, nullptr, &len), 2);
    EXPECT_EQ(len, 77u) << "no name asked, length untouched";
    // A negative length is found only after the data was taken.
    ASSERT_EQ(Send(sv[0], "hi"), 2);
    len = static_cast<socklen_t>(-1);
    EXPECT_ERRNO(
        B().recvfrom(sv[1], buf, 8, 0, reinterpret_cast<sockaddr*>(&ss), &len),
        EINVAL);
    EXPECT_ERRNO(B().recv(sv[1], buf, 8, 0), EAGAIN);
  }
}

TEST_P(SocketCalls, sendmsg__msghdr_checks_in_the_kernel_order) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  char c = 'z';
  iovec io{&c, 1};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  EXPECT_ERRNO(B().sendmsg(sv[0], nullptr, 0), EFAULT);
  msghdr bad = m;
  bad.msg_name = &c;
  bad.msg_namelen = static_cast<socklen_t>(-1);
  EXPECT_ERRNO(B().sendmsg(sv[0], &bad, 0), EINVAL);
  bad = m;
  bad.msg_iovlen = 1025;
  EXPECT_ERRNO(B().sendmsg(sv[0], &bad, 0), EMSGSIZE);
  bad = m;
  bad.msg_iov = nullptr;
  EXPECT_ERRNO(B().sendmsg(sv[0], &bad, 0), EFAULT);
  bad = m;
  bad.msg_control = &c;
  bad.msg_controllen = size_t{INT_MAX} + 1;
  EXPECT_ERRNO(B().sendmsg(sv[0], &bad, 0), ENOBUFS);
  bad = m;
  bad.msg_controllen = 100;  // control NULL
  EXPECT_ERRNO(B().sendmsg(sv[0], &bad, 0), EFAULT);
  // A name longer than sockaddr_storage is clamped, not refused (unlike
  // sendto's): the stream then says EISCONN.
  sockaddr_storage ss{};
  bad = m;
  bad.msg_name = &ss;
  bad.msg_namelen = 200;
  EXPECT_ERRNO(B().sendmsg(sv[0], &bad, 0), EISCONN);
  // msg_flags of a sendmsg is ignored (even MSG_DONTWAIT or MSG_OOB).
  bad = m;
  bad.msg_flags = 0x7fffffff;
  EXPECT_EQ(B().sendmsg(sv[0], &bad, 0), 1);
  EXPECT_EQ(bad.msg_flags, 0x7fffffff);
  // A control buffer shorter than one header holds no message.
  std::vector<char> ctl(8, 0);
  EXPECT_EQ(SendControl(sv[0], "y", ctl), 1);
  EXPECT_EQ(Recv(sv[1], 10), "zy");
}

TEST_P(SocketCalls, recvmsg__fields_written_back) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "abc"), 3);
  Received r = RecvFds(sv[1], 10, 64);
  EXPECT_EQ(r.r, 3);
  EXPECT_EQ(r.msg_flags, 0);
  EXPECT_EQ(r.controllen, 0u);
  // MSG_CMSG_CLOEXEC comes back in msg_flags.
  ASSERT_EQ(Send(sv[0], "abc"), 3);
  r = RecvFds(sv[1], 10, 64, MSG_CMSG_CLOEXEC);
  EXPECT_EQ(r.msg_flags, MSG_CMSG_CLOEXEC);
  // An error writes nothing back.
  char c;
  iovec io{&c, 1};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_flags = 1234;
  m.msg_controllen = 99;
  EXPECT_ERRNO(B().recvmsg(sv[1], &m, 0), EAGAIN);
  EXPECT_EQ(m.msg_flags, 1234);
  EXPECT_EQ(m.msg_controllen, 99u);
  // The name: length 0 with a buffer, untouched without one.
  ASSERT_EQ(Send(sv[0], "n"), 1);
  sockaddr_storage ss;
  m.msg_name = &ss;
  m.msg_namelen = sizeof ss;
  m.msg_controllen = 0;
  ASSERT_EQ(B().recvmsg(sv[1], &m, 0), 1);
  EXPECT_EQ(m.msg_namelen, 0u);
  ASSERT_EQ(Send(sv[0], "n"), 1);
  m.msg_name = nullptr;
  m.msg_namelen = 50;
  ASSERT_EQ(B().recvmsg(sv[1], &m, 0), 1);
  EXPECT_EQ(m.msg_namelen, 50u);
  // A negative name length is refused before anything is taken.
  ASSERT_EQ(Send(sv[0], "k"), 1);
  m.msg_name = &ss;
  m.msg_namelen = static_cast<socklen_t>(-1);
  EXPECT_ERRNO(B().recvmsg(sv[1], &m, 0), EINVAL);
  EXPECT_EQ(Recv(sv[1], 10), "k");
  m.msg_iovlen = 1025;
  m.msg_namelen = 0;
  EXPECT_ERRNO(B().recvmsg(sv[1], &m, 0), EMSGSIZE);
  EXPECT_ERRNO(B().recvmsg(sv[1], nullptr, 0), EFAULT);
  // No iovec at all: a stream reads nothing and returns 0 when data waits.
  ASSERT_EQ(Send(sv[0], "zz"), 2);
  msghdr none{};
  EXPECT_EQ(B().recvmsg(sv[1], &none, 0), 0);
  EXPECT_EQ(Recv(sv[1], 10), "zz");
}

// Every way a recvmsg returns a count, on each type: what it writes back
// into msg_controllen (the control bytes written, so 0 without
// descriptors), msg_flags (MSG_CMSG_CLOEXEC as passed, MSG_TRUNC,
// MSG_CTRUNC) and msg_namelen (0: a socketpair's peer has no name),
// whatever the caller left there.
struct RecvmsgOut {
  ssize_t r;
  size_t controllen;
  int msg_flags;
  socklen_t namelen;
};

RecvmsgOut RecvmsgWithEveryField(const Backend& b, int fd, size_t n,
                                 int flags) {
  char buf[16];
  iovec io{buf, n};
  sockaddr_storage ss;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_name = &ss;
  m.msg_namelen = sizeof ss;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  m.msg_flags = 0x7fff0000;
  ssize_t r = b.recvmsg(fd, &m, flags);
  if (r >= 0 && m.msg_controllen >= sizeof(cmsghdr)) {
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    int got;
    std::memcpy(&got, CMSG_DATA(c), sizeof got);
    b.close(got);
  }
  return {r, m.msg_controllen, m.msg_flags, m.msg_namelen};
}

TEST_P(SocketCalls, recvmsg__every_return_writes_back_each_field) {
  for (int type : {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM}) {
    for (int flags : {0, int{MSG_CMSG_CLOEXEC}, int{MSG_PEEK}}) {
      SCOPED_TRACE("type " + std::to_string(type) + " flags " +
                   std::to_string(flags));
      int sv[2];
      Pair(sv, type, SOCK_NONBLOCK);
      int echo = flags & MSG_CMSG_CLOEXEC;
      // Data without descriptors.
      ASSERT_EQ(Send(sv[0], "ab"), 2);
      RecvmsgOut o = RecvmsgWithEveryField(B(), sv[1], 8, flags);
      EXPECT_EQ(o.r, 2);
      EXPECT_EQ(o.controllen, 0u);
      EXPECT_EQ(o.msg_flags, echo);
      EXPECT_EQ(o.namelen, 0u);
      if (flags & MSG_PEEK) {
        EXPECT_EQ(Recv(sv[1], 8), "ab");
      }
      // Data with a descriptor, into a buffer too short for the data.
      int p[2];
      Pipe(p, O_NONBLOCK);
      ASSERT_EQ(SendFds(sv[0], "cd", {p[1]}), 2);
      o = RecvmsgWithEveryField(B(), sv[1], 1, flags);
      EXPECT_EQ(o.r, 1);
      EXPECT_EQ(o.controllen, CMSG_SPACE(sizeof(int)));
      EXPECT_EQ(o.msg_flags, echo | (type == SOCK_STREAM ? 0 : MSG_TRUNC));
      EXPECT_EQ(o.namelen, 0u);
      if ((flags & MSG_PEEK) || type == SOCK_STREAM) {
        Recv(sv[1], 8);  // what is left, and the descriptor with it
      }
      // End of stream: 0, written back as data without descriptors (a
      // datagram socket's end is SHUT_RD, and only a blocking receive
      // reports it).
      if (type == SOCK_DGRAM) {
        ASSERT_EQ(B().shutdown(sv[1], SHUT_RD), 0);
        int fl = B().fcntl(sv[1], F_GETFL, 0);
        ASSERT_EQ(B().fcntl(sv[1], F_SETFL, fl & ~O_NONBLOCK), 0);
      } else {
        ASSERT_EQ(Close(sv[0]), 0);
      }
      o = RecvmsgWithEveryField(B(), sv[1], 8, flags);
      EXPECT_EQ(o.r, 0);
      EXPECT_EQ(o.controllen, 0u);
      EXPECT_EQ(o.msg_flags, echo);
      EXPECT_EQ(o.namelen, 0u);
      // A seqpacket end seen by a blocking receive, too.
      if (type == SOCK_SEQPACKET) {
        int fl = B().fcntl(sv[1], F_GETFL, 0);
        ASSERT_EQ(B().fcntl(sv[1], F_SETFL, fl & ~O_NONBLOCK), 0);
        o = RecvmsgWithEveryField(B(), sv[1], 8, flags);
        EXPECT_EQ(o.r, 0);
        EXPECT_EQ(o.controllen, 0u);
        EXPECT_EQ(o.msg_flags, echo);
      }
      Close(sv[1]);
      if (type == SOCK_DGRAM) Close(sv[0]);
      Close(p[0]);
      Close(p[1]);
    }
  }
}

UEPOLL_INSTANTIATE_BACKENDS(SocketCalls);

}  // namespace
}  // namespace uepoll_test
