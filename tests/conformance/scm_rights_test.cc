// Descriptor passing (SCM_RIGHTS) over socket pairs of each type, on both
// backends: what arrives (a new descriptor for the same object, lowest
// number first, MSG_CMSG_CLOEXEC), what a short control buffer does
// (MSG_CTRUNC, the rest closed), how a stream delivers descriptors with
// the bytes sent with them, what keeps an object alive in flight and what
// frees it (closing the pair, the garbage collector for cycles), and the
// control-message errors (net/core/scm.c, net/unix/af_unix.c).
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "conformance/io_helpers.h"

namespace uepoll_test {
namespace {

class ScmRights : public IoTest {
 protected:
  static constexpr int kTypes[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET};
  // The kernel collects garbage asynchronously, at the next release of a
  // unix socket; closing a fresh pair is such a release. Waits up to 10 s
  // for `fd` to report POLLHUP.
  bool HupAfterCollection(int fd) {
    int sv[2];
    if (B().socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return false;
    B().close(sv[0]);
    B().close(sv[1]);
    return (PollFor(fd, POLLIN, 10000) & POLLHUP) != 0;
  }
};

constexpr int kHdr = sizeof(cmsghdr);

TEST_P(ScmRights, passed_pipe_end__is_a_new_descriptor_for_the_same_pipe) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int p[2];
    Pipe(p, O_NONBLOCK);
    ASSERT_EQ(SendFds(sv[0], "x", {p[1]}), 1);
    Received r = RecvFds(sv[1], 10, CMSG_SPACE(sizeof(int)));
    ASSERT_EQ(r.r, 1);
    EXPECT_EQ(r.msg_flags, 0);
    EXPECT_EQ(r.controllen, CMSG_SPACE(sizeof(int)));
    ASSERT_EQ(r.fds.size(), 1u);
    EXPECT_NE(r.fds[0], p[1]);
    EXPECT_EQ(B().fcntl(r.fds[0], F_GETFD, 0), 0);
    EXPECT_EQ(B().fcntl(r.fds[0], F_GETFL, 0) & O_ACCMODE, O_WRONLY);
    ASSERT_EQ(WriteStr(r.fds[0], "via"), 3);
    EXPECT_EQ(ReadStr(p[0], 10), "via");
  }
}

TEST_P(ScmRights, numbers__lowest_free_first_in_order) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int a = Eventfd(), b = Eventfd();
  // A hole below the received numbers: the first one fills it.
  int hole = Eventfd();
  ASSERT_EQ(Close(hole), 0);
  ASSERT_EQ(SendFds(sv[0], "x", {a, b}), 1);
  Received r = RecvFds(sv[1], 10, 64);
  ASSERT_EQ(r.fds.size(), 2u);
  EXPECT_EQ(r.fds[0], hole);
  EXPECT_GT(r.fds[1], r.fds[0]);
  EfdWrite(r.fds[1], 5);
  EXPECT_EQ(EfdRead(b), 5u);
}

TEST_P(ScmRights, cloexec__msg_cmsg_cloexec_sets_fd_cloexec) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  int efd = Eventfd();
  ASSERT_EQ(SendFds(sv[0], "x", {efd}), 1);
  Received r = RecvFds(sv[1], 10, 64, MSG_CMSG_CLOEXEC);
  ASSERT_EQ(r.fds.size(), 1u);
  EXPECT_EQ(B().fcntl(r.fds[0], F_GETFD, 0), FD_CLOEXEC);
  EXPECT_EQ(r.msg_flags, MSG_CMSG_CLOEXEC);
}

TEST_P(ScmRights, kernel_descriptor__travels_too) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int kp[2];
  KernelPipe(kp, O_NONBLOCK);
  ASSERT_EQ(SendFds(sv[0], "k", {kp[1]}), 1);
  ASSERT_EQ(Close(kp[1]), 0);
  Received r = RecvFds(sv[1], 10, 64);
  ASSERT_EQ(r.fds.size(), 1u);
  ASSERT_EQ(::write(r.fds[0], "ker", 3), 3);
  char buf[8];
  EXPECT_EQ(::read(kp[0], buf, 8), 3);
  ASSERT_EQ(Close(r.fds[0]), 0);
  EXPECT_EQ(::read(kp[0], buf, 8), 0) << "the last write end is gone";
}

// The descriptor in flight keeps the object: closing every other
// descriptor of the write end leaves the pipe open until the message is
// received and its descriptor closed.
TEST_P(ScmRights, in_flight__keeps_the_object_alive) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int p[2];
    Pipe(p, O_NONBLOCK);
    ASSERT_EQ(SendFds(sv[0], "x", {p[1]}), 1);
    ASSERT_EQ(Close(p[1]), 0);
    EXPECT_EQ(PollFor(p[0], POLLIN, 0), 0) << "no HUP while in flight";
    Received r = RecvFds(sv[1], 10, 64);
    ASSERT_EQ(r.fds.size(), 1u);
    EXPECT_EQ(PollFor(p[0], POLLIN, 0), 0);
    ASSERT_EQ(Close(r.fds[0]), 0);
    EXPECT_EQ(PollFor(p[0], POLLIN, 0), POLLHUP);
  }
}

TEST_P(ScmRights, pair_closed__frees_what_is_in_flight) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int p[2];
    Pipe(p, O_NONBLOCK);
    ASSERT_EQ(SendFds(sv[0], "x", {p[1]}), 1);
    ASSERT_EQ(Close(p[1]), 0);
    ASSERT_EQ(Close(sv[0]), 0);
    EXPECT_EQ(PollFor(p[0], POLLIN, 0), 0);
    ASSERT_EQ(Close(sv[1]), 0);
    EXPECT_EQ(PollFor(p[0], POLLIN, 0), POLLHUP);
  }
}

// scm_detach_fds: what fits after one header is installed; the rest is
// closed, and MSG_CTRUNC says so.
TEST_P(ScmRights, ctrunc__short_buffer_keeps_what_fits_and_closes_the_rest) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int p1[2], p2[2];
    Pipe(p1, O_NONBLOCK);
    Pipe(p2, O_NONBLOCK);
    ASSERT_EQ(SendFds(sv[0], "x", {p1[1], p2[1]}), 1);
    ASSERT_EQ(Close(p1[1]), 0);
    ASSERT_EQ(Close(p2[1]), 0);
    Received r = RecvFds(sv[1], 10, kHdr + sizeof(int));  // room for one
    ASSERT_EQ(r.r, 1);
    EXPECT_EQ(r.msg_flags, MSG_CTRUNC);
    EXPECT_EQ(r.controllen, size_t{kHdr + sizeof(int)});
    ASSERT_EQ(r.fds.size(), 1u);
    EXPECT_EQ(PollFor(p1[0], POLLIN, 0), 0) << "received";
    EXPECT_EQ(PollFor(p2[0], POLLIN, 0), POLLHUP) << "did not fit: closed";
  }
}

TEST_P(ScmRights, ctrunc__no_room_or_no_buffer_closes_them_all) {
  for (size_t room : {size_t{0}, size_t{kHdr}, size_t{kHdr + 3}}) {
    for (bool null_control : {false, true}) {
      SCOPED_TRACE(testing::Message() << room << " " << null_control);
      int sv[2];
      Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
      int p[2];
      Pipe(p, O_NONBLOCK);
      ASSERT_EQ(SendFds(sv[0], "x", {p[1]}), 1);
      ASSERT_EQ(Close(p[1]), 0);
      Received r = RecvFds(sv[1], 10, room, 0, null_control);
      ASSERT_EQ(r.r, 1);
      EXPECT_EQ(r.msg_flags, MSG_CTRUNC);
      EXPECT_EQ(r.controllen, 0u);
      EXPECT_EQ(PollFor(p[0], POLLIN, 0), POLLHUP);
      Close(sv[0]);
      Close(sv[1]);
      Close(p[0]);
    }
  }
}

TEST_P(ScmRights, read__drops_the_descriptors_of_what_it_reads) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(SendFds(sv[0], "x", {p[1]}), 1);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(ReadStr(sv[1], 10), "x");
  EXPECT_EQ(PollFor(p[0], POLLIN, 0), POLLHUP);
}

// A stream read merges chunks, but stops after the chunk that carried
// descriptors, so they arrive with the bytes sent with them.
TEST_P(ScmRights, stream__descriptors_arrive_with_their_bytes) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int a = Eventfd(), b = Eventfd();
  ASSERT_EQ(Send(sv[0], "ab"), 2);
  ASSERT_EQ(SendFds(sv[0], "cd", {a}), 2);
  ASSERT_EQ(Send(sv[0], "ef"), 2);
  ASSERT_EQ(SendFds(sv[0], "gh", {b}), 2);
  Received r = RecvFds(sv[1], 100, 64);
  EXPECT_EQ(r.data, "abcd");
  EXPECT_EQ(r.fds.size(), 1u);
  r = RecvFds(sv[1], 100, 64);
  EXPECT_EQ(r.data, "efgh");
  EXPECT_EQ(r.fds.size(), 1u);
  // A partial read of the chunk takes its descriptors at once.
  ASSERT_EQ(SendFds(sv[0], "xy", {a}), 2);
  r = RecvFds(sv[1], 1, 64);
  EXPECT_EQ(r.data, "x");
  EXPECT_EQ(r.fds.size(), 1u);
  r = RecvFds(sv[1], 10, 64);
  EXPECT_EQ(r.data, "y");
  EXPECT_EQ(r.fds.size(), 0u);
  // A send of 0 bytes passes nothing on a stream.
  ASSERT_EQ(SendFds(sv[0], "", {a}), 0);
  r = RecvFds(sv[1], 10, 64);
  EXPECT_EQ(r.err, EAGAIN);
}

TEST_P(ScmRights, dgram__empty_message_carries_descriptors) {
  for (int type : {SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int efd = Eventfd();
    ASSERT_EQ(SendFds(sv[0], "", {efd}), 0);
    Received r = RecvFds(sv[1], 10, 64);
    EXPECT_EQ(r.r, 0);
    EXPECT_EQ(r.fds.size(), 1u);
  }
}

// MSG_PEEK clones the descriptors: each peek, and the receive after it,
// installs new ones.
TEST_P(ScmRights, peek__installs_copies_each_time) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    int efd = Eventfd();
    ASSERT_EQ(SendFds(sv[0], "xy", {efd}), 2);
    Received p1 = RecvFds(sv[1], 10, 64, MSG_PEEK);
    Received p2 = RecvFds(sv[1], 10, 64, MSG_PEEK);
    Received r = RecvFds(sv[1], 10, 64);
    ASSERT_EQ(p1.fds.size(), 1u);
    ASSERT_EQ(p2.fds.size(), 1u);
    ASSERT_EQ(r.fds.size(), 1u);
    EXPECT_NE(p1.fds[0], p2.fds[0]);
    EXPECT_EQ(r.data, "xy");
    EfdWrite(p1.fds[0], 1);
    EfdWrite(p2.fds[0], 2);
    EXPECT_EQ(EfdRead(r.fds[0]), 3u);
  }
}

// A stream peek that fills its buffer moves on to the next chunk and so
// brings that chunk's descriptors along (the kernel's loop, reproduced).
TEST_P(ScmRights, peek__stream_full_buffer_takes_the_next_chunks_descriptors) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int efd = Eventfd();
  ASSERT_EQ(Send(sv[0], "ab"), 2);
  ASSERT_EQ(SendFds(sv[0], "cd", {efd}), 2);
  Received p = RecvFds(sv[1], 2, 64, MSG_PEEK);
  EXPECT_EQ(p.data, "ab");
  EXPECT_EQ(p.fds.size(), 1u);
  Received r = RecvFds(sv[1], 2, 64);
  EXPECT_EQ(r.data, "ab");
  EXPECT_EQ(r.fds.size(), 0u);
}

TEST_P(ScmRights, errors__control_messages_in_the_kernel_order) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int efd = Eventfd();
  int closed = Eventfd();
  ASSERT_EQ(Close(closed), 0);
  EXPECT_ERRNO(SendFds(sv[0], "q", {efd, closed}), EBADF);
  std::vector<int> many(253, efd);
  EXPECT_EQ(SendFds(sv[0], "q", many), 1);
  Received r = RecvFds(sv[1], 10, 16);  // no room: all closed again
  EXPECT_EQ(r.msg_flags, MSG_CTRUNC);
  many.push_back(efd);
  EXPECT_ERRNO(SendFds(sv[0], "q", many), EINVAL);  // SCM_MAX_FD
  int fd = efd;
  EXPECT_ERRNO(
      SendControl(sv[0], "q", Cmsg(SOL_SOCKET, SCM_RIGHTS, &fd, 4, 15)),
      EINVAL);  // shorter than a header
  EXPECT_ERRNO(
      SendControl(sv[0], "q", Cmsg(SOL_SOCKET, SCM_RIGHTS, &fd, 4, 100)),
      EINVAL);  // longer than the buffer
  EXPECT_ERRNO(SendControl(sv[0], "q", Cmsg(SOL_SOCKET, 99, &fd, 4, 20)),
               EINVAL);  // no such SOL_SOCKET message
  // Another level is ignored; a partial int holds no descriptor.
  EXPECT_EQ(SendControl(sv[0], "a", Cmsg(SOL_IP, 99, &fd, 4, 20)), 1);
  EXPECT_EQ(SendControl(sv[0], "b", Cmsg(SOL_SOCKET, SCM_RIGHTS, &fd, 4, 19)),
            1);
  EXPECT_EQ(
      SendControl(sv[0], "c", Cmsg(SOL_SOCKET, SCM_RIGHTS, nullptr, 0, 16)), 1);
  r = RecvFds(sv[1], 10, 64);
  EXPECT_EQ(r.data, "abc");
  EXPECT_EQ(r.fds.size(), 0u);
  // Two SCM_RIGHTS messages make one list, received as one message.
  std::vector<char> two = Cmsg(SOL_SOCKET, SCM_RIGHTS, &fd, 4, 20);
  std::vector<char> second = two;
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_EQ(SendControl(sv[0], "d", two), 1);
  r = RecvFds(sv[1], 10, 64);
  EXPECT_EQ(r.fds.size(), 2u);
  EXPECT_EQ(r.controllen, CMSG_SPACE(2 * sizeof(int)));
  // A bad descriptor beats a closed peer.
  int dv[2];
  Pair(dv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Close(dv[1]), 0);
  EXPECT_ERRNO(SendFds(dv[0], "q", {B().closed_fd}, MSG_NOSIGNAL), EBADF);
  EXPECT_ERRNO(SendFds(dv[0], "q", {efd}, MSG_NOSIGNAL), EPIPE);
}

TEST_P(ScmRights, credentials__checked_then_not_delivered) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ucred own{getpid(), getuid(), getgid()};
  EXPECT_EQ(SendControl(sv[0], "c",
                        Cmsg(SOL_SOCKET, SCM_CREDENTIALS, &own, sizeof own,
                             CMSG_LEN(sizeof own))),
            1);
  Received r = RecvFds(sv[1], 10, 64);
  EXPECT_EQ(r.r, 1);
  EXPECT_EQ(r.controllen, 0u) << "no SO_PASSCRED: nothing comes back";
  EXPECT_ERRNO(
      SendControl(sv[0], "c",
                  Cmsg(SOL_SOCKET, SCM_CREDENTIALS, &own, 8, CMSG_LEN(8))),
      EINVAL);
  ucred bad_pid{0x7ffffff0, getuid(), getgid()};
  EXPECT_ERRNO(SendControl(sv[0], "c",
                           Cmsg(SOL_SOCKET, SCM_CREDENTIALS, &bad_pid,
                                sizeof bad_pid, CMSG_LEN(sizeof bad_pid))),
               ESRCH);
  ucred bad_uid{getpid(), static_cast<uid_t>(-1), getgid()};
  EXPECT_ERRNO(SendControl(sv[0], "c",
                           Cmsg(SOL_SOCKET, SCM_CREDENTIALS, &bad_uid,
                                sizeof bad_uid, CMSG_LEN(sizeof bad_uid))),
               EINVAL);
}

// unix_gc: a socket sent into its own receive queue and then closed is
// held by nothing but that message; the collector frees it (and what it
// holds) at the next socket release. Here the close order lets the
// kernel's collector find the cycle (the last release is of the other
// end, after the cycle is closed).
TEST_P(ScmRights, gc__socket_in_its_own_queue_is_collected) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int p[2];
  Pipe(p, O_NONBLOCK);
  // sv[0] sends sv[1] (and the pipe's write end) into sv[1]'s queue.
  ASSERT_EQ(SendFds(sv[0], "x", {sv[1], p[1]}), 1);
  ASSERT_EQ(Close(p[1]), 0);
  ASSERT_EQ(Close(sv[1]), 0);
  ASSERT_EQ(Close(sv[0]), 0);
  EXPECT_TRUE(HupAfterCollection(p[0]));
}

// Two pairs, each one's second socket sent into the other's queue: a
// cycle of two.
TEST_P(ScmRights, gc__two_sockets_in_each_others_queues_are_collected) {
  for (int type : kTypes) {
    SCOPED_TRACE(type);
    int a[2], b[2];
    Pair(a, type, SOCK_NONBLOCK);
    Pair(b, type, SOCK_NONBLOCK);
    int p[2];
    Pipe(p, O_NONBLOCK);
    ASSERT_EQ(SendFds(a[0], "x", {b[1], p[1]}), 1);  // into a[1]'s queue
    ASSERT_EQ(SendFds(b[0], "y", {a[1]}), 1);        // into b[1]'s queue
    ASSERT_EQ(Close(p[1]), 0);
    ASSERT_EQ(Close(a[0]), 0);
    ASSERT_EQ(Close(b[0]), 0);
    ASSERT_EQ(Close(a[1]), 0);
    ASSERT_EQ(Close(b[1]), 0);
    EXPECT_TRUE(HupAfterCollection(p[0]));
    Close(p[0]);
  }
}

// Not garbage: a socket in flight in the queue of a socket someone still
// holds can be received, with what its own queue held.
TEST_P(ScmRights, gc__reachable_in_flight_sockets_survive_collection) {
  int a[2], b[2];
  Pair(a, SOCK_STREAM, SOCK_NONBLOCK);
  Pair(b, SOCK_STREAM, SOCK_NONBLOCK);
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(SendFds(b[0], "alive", {p[1]}), 5);  // into b[1]'s queue
  ASSERT_EQ(Close(p[1]), 0);
  ASSERT_EQ(SendFds(a[0], "x", {b[1]}), 1);  // b[1] into a[1]'s queue
  ASSERT_EQ(Close(b[1]), 0);
  // A release runs the collector (uepoll: now; the kernel: soon after).
  int c[2];
  ASSERT_EQ(B().socketpair(AF_UNIX, SOCK_STREAM, 0, c), 0);
  B().close(c[0]);
  B().close(c[1]);
  EXPECT_EQ(PollFor(p[0], POLLIN, 0), 0) << "b[1]'s queue was purged";
  Received r = RecvFds(a[1], 10, 64);
  ASSERT_EQ(r.fds.size(), 1u);
  Received inner = RecvFds(r.fds[0], 10, 64);
  EXPECT_EQ(inner.data, "alive");
  EXPECT_EQ(inner.fds.size(), 1u);
}

UEPOLL_INSTANTIATE_BACKENDS(ScmRights);

}  // namespace
}  // namespace uepoll_test
