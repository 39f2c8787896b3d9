// sendmmsg and recvmmsg on socket pairs, on both backends (net/socket.c's
// __sys_sendmmsg and do_recvmmsg): one message per entry with its length
// written to msg_len, the count returned and the error only when the first
// entry fails, the stop after a message sent in part, MSG_WAITFORONE, the
// timeout that is looked at only between messages and written back, the
// pending error that an error after some messages leaves for the next
// call, and the checks before the descriptor is looked at.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <array>
#include <climits>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "conformance/io_helpers.h"
#include "support/scm.h"
#include "support/scoped_handler.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr int kMsgCmsgCompat = static_cast<int>(0x80000000u);

// n entries, each over its own buffer of `room` bytes (for receiving), or
// over the given strings (for sending).
class Batch {
 public:
  explicit Batch(const std::vector<std::string>& msgs)
      : bufs_(msgs), io_(msgs.size()), vec_(msgs.size()) {
    Wire();
  }
  Batch(size_t n, size_t room)
      : bufs_(n, std::string(room, '\0')), io_(n), vec_(n) {
    Wire();
  }
  mmsghdr* vec() { return vec_.data(); }
  unsigned int size() const { return static_cast<unsigned int>(vec_.size()); }
  unsigned int len(size_t i) const { return vec_[i].msg_len; }
  // What entry i received (its msg_len bytes).
  std::string got(size_t i) const { return bufs_[i].substr(0, len(i)); }
  iovec& io(size_t i) { return io_[i]; }

 private:
  void Wire() {
    for (size_t i = 0; i < vec_.size(); ++i) {
      io_[i] = iovec{bufs_[i].data(), bufs_[i].size()};
      vec_[i] = mmsghdr{};
      vec_[i].msg_hdr.msg_iov = &io_[i];
      vec_[i].msg_hdr.msg_iovlen = 1;
      vec_[i].msg_len = 0xdeadbeef;  // must be written
    }
  }
  std::vector<std::string> bufs_;
  std::vector<iovec> io_;
  std::vector<mmsghdr> vec_;
};

class Mmsg : public IoTest {};

TEST_P(Mmsg, sendmmsg__one_datagram_per_entry_with_its_length) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  Batch out({"one", "", "three"});
  ASSERT_EQ(B().sendmmsg(sv[0], out.vec(), out.size(), 0), 3);
  EXPECT_EQ(out.len(0), 3u);
  EXPECT_EQ(out.len(1), 0u);
  EXPECT_EQ(out.len(2), 5u);
  EXPECT_EQ(Recv(sv[1], 100), "one");
  EXPECT_EQ(Recv(sv[1], 100), "");
  EXPECT_EQ(Recv(sv[1], 100), "three");
  EXPECT_ERRNO(B().recv(sv[1], nullptr, 0, 0), EAGAIN);
}

TEST_P(Mmsg, sendmmsg__a_stream_carries_the_entries_in_order) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  Batch out({"ab", "cd", "ef"});
  ASSERT_EQ(B().sendmmsg(sv[0], out.vec(), 2, 0), 2);
  EXPECT_EQ(out.len(2), 0xdeadbeefu);  // beyond vlen: untouched
  EXPECT_EQ(Recv(sv[1], 100), "abcd");
}

TEST_P(Mmsg, sendmmsg__checks_before_and_after_the_lookup) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  Batch out({"x"});
  EXPECT_ERRNO(B().sendmmsg(sv[0], out.vec(), 1, kMsgCmsgCompat), EINVAL);
  EXPECT_ERRNO(B().sendmmsg(B().closed_fd, out.vec(), 1, 0), EBADF);
  int efd = B().eventfd(0, 0);
  ASSERT_GE(efd, 0);
  Track(efd);
  EXPECT_ERRNO(B().sendmmsg(efd, out.vec(), 1, 0), ENOTSOCK);
  // The descriptor is looked at before the array.
  EXPECT_ERRNO(B().sendmmsg(efd, nullptr, 1, 0), ENOTSOCK);
  EXPECT_ERRNO(B().sendmmsg(sv[0], nullptr, 1, 0), EFAULT);
  EXPECT_EQ(B().sendmmsg(sv[0], nullptr, 0, 0), 0);
  EXPECT_ERRNO(B().recv(sv[1], nullptr, 0, 0), EAGAIN);
}

TEST_P(Mmsg, sendmmsg__an_error_after_the_first_entry_returns_the_count) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  Batch out({"a", "b", "c"});
  out.vec()[1].msg_hdr.msg_iov = nullptr;  // EFAULT
  ASSERT_EQ(B().sendmmsg(sv[0], out.vec(), 3, 0), 1);
  EXPECT_EQ(out.len(0), 1u);
  EXPECT_EQ(out.len(1), 0xdeadbeefu);
  EXPECT_EQ(out.len(2), 0xdeadbeefu);
  EXPECT_EQ(Recv(sv[1], 100), "a");
  EXPECT_ERRNO(B().recv(sv[1], nullptr, 0, 0), EAGAIN);
  // No error is kept for later: the next send works.
  EXPECT_EQ(Send(sv[0], "d"), 1);
  // The first entry's error is the call's.
  out.vec()[0].msg_hdr.msg_iovlen = 1025;
  EXPECT_ERRNO(B().sendmmsg(sv[0], out.vec(), 3, 0), EMSGSIZE);
}

TEST_P(Mmsg, sendmmsg__a_full_queue_ends_the_batch) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  int queued = 0;
  while (Send(sv[0], "q") == 1) ++queued;
  ASSERT_EQ(errno, EAGAIN);
  ASSERT_GT(queued, 0);
  Batch out({"r", "s", "t"});
  EXPECT_ERRNO(B().sendmmsg(sv[0], out.vec(), 3, 0), EAGAIN);
  // Room for one more: the batch sends it and stops at the next.
  EXPECT_EQ(Recv(sv[1], 10), "q");
  EXPECT_EQ(B().sendmmsg(sv[0], out.vec(), 3, 0), 1);
  EXPECT_EQ(out.len(0), 1u);
  EXPECT_EQ(out.len(1), 0xdeadbeefu);
}

TEST_P(Mmsg, sendmmsg__stops_after_a_message_sent_in_part) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  // Far more than the send buffer: sent in part.
  std::string big(8 << 20, 'b');
  Batch out({big, "tail"});
  ASSERT_EQ(B().sendmmsg(sv[0], out.vec(), 2, 0), 1);
  size_t sent = out.len(0);
  EXPECT_GT(sent, 0u);
  EXPECT_LT(sent, big.size());
  EXPECT_EQ(out.len(1), 0xdeadbeefu);
  size_t got = 0;
  bool tail = false;
  for (;;) {
    std::string s = Recv(sv[1], 65536);
    if (s.empty()) break;
    got += s.size();
    if (s.find('t') != std::string::npos) tail = true;
  }
  EXPECT_EQ(got, sent);
  EXPECT_FALSE(tail);
}

TEST_P(Mmsg, sendmmsg__a_fault_midway_is_a_partial_send_that_ends_it) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  // A message whose first segment goes in pieces (each at most half the
  // send buffer) and whose last cannot be read: the pieces before the
  // fault are sent, and the batch ends there though "tail" would fit.
  // Under half the send buffer past its first piece (so that only the
  // fault can end the message early), over one piece in all.
  std::string head(150000, 'h');
  Batch out({head, "tail"});
  std::array<iovec, 2> segs{iovec{head.data(), head.size()},
                            iovec{nullptr, 100}};
  out.vec()[0].msg_hdr.msg_iov = segs.data();
  out.vec()[0].msg_hdr.msg_iovlen = 2;
  ASSERT_EQ(B().sendmmsg(sv[0], out.vec(), 2, 0), 1);
  size_t sent = out.len(0);
  EXPECT_GT(sent, 0u);
  EXPECT_LT(sent, head.size());
  EXPECT_EQ(out.len(1), 0xdeadbeefu);
  size_t got = 0;
  for (;;) {
    std::string s = Recv(sv[1], 65536);
    if (s.empty()) break;
    got += s.size();
    EXPECT_EQ(s.find('t'), std::string::npos);
  }
  EXPECT_EQ(got, sent);
}

TEST_P(Mmsg, sendmmsg_recvmmsg__pass_descriptors_per_entry) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  int efd = B().eventfd(5, 0);
  ASSERT_GE(efd, 0);
  Track(efd);
  char a = 'a', b = 'b';
  OneFdMsg plain(&a, 1), with_fd(&b, 1, efd);
  plain.msg()->msg_control = nullptr;
  plain.msg()->msg_controllen = 0;
  std::array<mmsghdr, 2> out{};
  out[0].msg_hdr = *plain.msg();
  out[1].msg_hdr = *with_fd.msg();
  ASSERT_EQ(B().sendmmsg(sv[0], out.data(), 2, 0), 2);
  char ra = 0, rb = 0;
  OneFdMsg in0(&ra, 1), in1(&rb, 1);
  std::array<mmsghdr, 2> in{};
  in[0].msg_hdr = *in0.msg();
  in[1].msg_hdr = *in1.msg();
  ASSERT_EQ(B().recvmmsg(sv[1], in.data(), 2, 0, nullptr), 2);
  EXPECT_EQ(ra, 'a');
  EXPECT_EQ(rb, 'b');
  // Each entry's control length was written back: none for the first.
  EXPECT_EQ(in[0].msg_hdr.msg_controllen, 0u);
  ASSERT_EQ(in[1].msg_hdr.msg_controllen, CMSG_SPACE(sizeof(int)));
  int got;
  std::memcpy(&got, CMSG_DATA(CMSG_FIRSTHDR(&in[1].msg_hdr)), sizeof got);
  ASSERT_GE(got, 0);
  Track(got);
  uint64_t v = 0;
  EXPECT_EQ(B().read(got, &v, sizeof v), 8);
  EXPECT_EQ(v, 5u);
}

TEST_P(Mmsg, recvmmsg__takes_what_is_queued_up_to_vlen) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  for (std::string s : {"a", "bb", "ccc"}) {
    ASSERT_EQ(Send(sv[0], s), static_cast<ssize_t>(s.size()));
  }
  Batch in(5, 16);
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 2, 0, nullptr), 2);
  EXPECT_EQ(in.got(0), "a");
  EXPECT_EQ(in.got(1), "bb");
  EXPECT_EQ(in.len(2), 0xdeadbeefu);
  // A nonblocking socket returns what there was: the EAGAIN after it is
  // not kept.
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 5, 0, nullptr), 1);
  EXPECT_EQ(in.got(0), "ccc");
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(B().getsockopt(sv[1], SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 5, 0, nullptr), EAGAIN);
  EXPECT_EQ(B().recvmmsg(sv[1], in.vec(), 0, 0, nullptr), 0);
}

TEST_P(Mmsg, recvmmsg__waitforone_blocks_for_the_first_only) {
  int sv[2];
  Pair(sv, SOCK_DGRAM);  // blocking
  ASSERT_EQ(Send(sv[0], "x"), 1);
  ASSERT_EQ(Send(sv[0], "y"), 1);
  Batch in(4, 8);
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 4, MSG_WAITFORONE, nullptr), 2);
  EXPECT_EQ(in.got(0), "x");
  EXPECT_EQ(in.got(1), "y");
  // MSG_DONTWAIT on a blocking socket: the same batch, or EAGAIN.
  ASSERT_EQ(Send(sv[0], "z"), 1);
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 4, MSG_DONTWAIT, nullptr), 1);
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 4, MSG_DONTWAIT, nullptr), EAGAIN);
}

TEST_P(Mmsg, recvmmsg__an_error_after_some_is_the_next_calls) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "one"), 3);
  ASSERT_EQ(Send(sv[0], "two"), 3);
  ASSERT_EQ(Send(sv[0], "three"), 5);
  Batch in(3, 16);
  in.io(1).iov_base = nullptr;  // the second datagram cannot be copied
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 3, 0, nullptr), 1);
  EXPECT_EQ(in.got(0), "one");
  // The error is the socket's now: the next call reports it, once, and
  // the datagram it could not copy is gone.
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 1, 0, nullptr), EFAULT);
  EXPECT_EQ(Recv(sv[1], 16), "three");
}

TEST_P(Mmsg, recvmmsg__a_pending_error_comes_before_a_streams_data) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "onetwothree"), 11);
  Batch in(3, 3);
  in.io(1).iov_base = nullptr;  // nothing copied: the bytes stay queued
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 3, 0, nullptr), 1);
  EXPECT_EQ(in.got(0), "one");
  // A stream's recv would return the bytes; recvmmsg looks at the pending
  // error first.
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 1, 0, nullptr), EFAULT);
  EXPECT_EQ(Recv(sv[1], 16), "twothree");
}

TEST_P(Mmsg, recvmmsg__a_pending_error_is_also_so_error) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "one"), 3);
  ASSERT_EQ(Send(sv[0], "two"), 3);
  Batch in(2, 16);
  in.io(1).iov_base = nullptr;
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 2, 0, nullptr), 1);
  int err = 0;
  socklen_t len = sizeof err;
  ASSERT_EQ(B().getsockopt(sv[1], SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, EFAULT);
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 1, 0, nullptr), EAGAIN);
}

void OnUsr1(int) {}

// The wait for a later message ends at a handled signal even under
// SA_RESTART (the kernel's -ERESTARTSYS ends the batch instead of
// restarting it): the messages so far come back, and the socket keeps that
// internal code as its pending error, which SO_ERROR reports as 512.
TEST_P(Mmsg, recvmmsg__a_signal_ends_the_wait_for_a_later_message) {
  if (kTsan) GTEST_SKIP() << "a handler of a call that sleeps on (waiter.h)";
  ScopedHandler usr1(SIGUSR1, OnUsr1, SA_RESTART);
  int sv[2];
  Pair(sv, SOCK_DGRAM);  // blocking
  ASSERT_EQ(Send(sv[0], "a"), 1);
  Batch in(2, 8);
  Waiter w([&](epoll_event*) {
    return B().recvmmsg(sv[1], in.vec(), 2, 0, nullptr);
  });
  EXPECT_TRUE(w.Parked());
  pthread_kill(w.handle(), SIGUSR1);
  bool done = w.WaitDone();
  if (!done) {
    ASSERT_EQ(Send(sv[0], "z"), 1);  // let it go, then fail
  }
  EXPECT_TRUE(done) << "the signal did not end the batch";
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(in.got(0), "a");
  int err = 0;
  socklen_t len = sizeof err;
  ASSERT_EQ(B().getsockopt(sv[1], SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, done ? 512 : 0);
}

// The same rule for sendmmsg: a later entry waiting for room ends at a
// handled signal, SA_RESTART or not, and the count comes back (nothing is
// kept as an error: __sys_sendmmsg keeps none).
TEST_P(Mmsg, sendmmsg__a_signal_ends_the_wait_for_room_for_a_later_message) {
  if (kTsan) GTEST_SKIP() << "a handler of a call that sleeps on (waiter.h)";
  ScopedHandler usr1(SIGUSR1, OnUsr1, SA_RESTART);
  int sv[2];
  Pair(sv, SOCK_DGRAM);  // blocking
  while (B().send(sv[0], "q", 1, MSG_DONTWAIT) == 1) {
  }
  ASSERT_EQ(errno, EAGAIN);
  EXPECT_EQ(Recv(sv[1], 8), "q");  // room for one
  Batch out({"r", "s"});
  Waiter w([&](epoll_event*) { return B().sendmmsg(sv[0], out.vec(), 2, 0); });
  EXPECT_TRUE(w.Parked());
  pthread_kill(w.handle(), SIGUSR1);
  bool done = w.WaitDone();
  if (!done) {
    // Let it go, then fail: a sender waiting for room is woken once the
    // charge is down to a quarter of the buffer, so drain the queue.
    while (!Recv(sv[1], 8, MSG_DONTWAIT).empty()) {
    }
  }
  EXPECT_TRUE(done) << "the signal did not end the batch";
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), done ? 1 : 2);
  EXPECT_EQ(out.len(0), 1u);
  int err = -1;
  socklen_t len = sizeof err;
  ASSERT_EQ(B().getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
}

// Only sendmmsg stops at UIO_MAXIOV messages; recvmmsg takes as many as
// it is given.
TEST_P(Mmsg, recvmmsg__more_entries_than_uio_maxiov) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  constexpr unsigned kN = 2000;
  ASSERT_EQ(Send(sv[0], std::string(kN, 'x')), static_cast<ssize_t>(kN));
  Batch in(kN, 1);
  EXPECT_EQ(B().recvmmsg(sv[1], in.vec(), kN, 0, nullptr),
            static_cast<int>(kN));
  EXPECT_EQ(in.got(kN - 1), "x");
  // Empty messages on a stream take no room: the cap is what ends these.
  Batch out(std::vector<std::string>(kN, ""));
  EXPECT_EQ(B().sendmmsg(sv[0], out.vec(), kN, 0), 1024);
  EXPECT_EQ(out.len(1024), 0xdeadbeefu);
}

// A timeout too long for the clock ends at its last instant, and the time
// left written back is counted from there: no overflow.
TEST_P(Mmsg, recvmmsg__a_timeout_beyond_the_clock_saturates) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  Batch in(2, 8);
  constexpr time_t kMax = std::numeric_limits<time_t>::max();
  ASSERT_EQ(Send(sv[0], "a"), 1);
  ASSERT_EQ(Send(sv[0], "b"), 1);
  timespec t{kMax, 0};
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 2, 0, &t), 2);
  EXPECT_LT(t.tv_sec, kMax);
  EXPECT_GT(t.tv_sec, kMax / 2);
  EXPECT_GE(t.tv_nsec, 0);
  EXPECT_LT(t.tv_nsec, 1000000000L);
  // Long, not saturated: counted down from it, by less than 100 s.
  ASSERT_EQ(Send(sv[0], "a"), 1);
  ASSERT_EQ(Send(sv[0], "b"), 1);
  t = timespec{1000000000000L, 5};
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 2, 0, &t), 2);
  EXPECT_LT(t.tv_sec, 1000000000000L);
  EXPECT_GT(t.tv_sec, 1000000000000L - 100);
}

TEST_P(Mmsg, recvmmsg__a_streams_end_fills_every_entry_with_zero) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "last"), 4);
  Close(sv[0]);
  Batch in(3, 16);
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 3, 0, nullptr), 3);
  EXPECT_EQ(in.got(0), "last");
  EXPECT_EQ(in.len(1), 0u);
  EXPECT_EQ(in.len(2), 0u);
}

TEST_P(Mmsg, recvmmsg__a_zero_timeout_ends_after_the_first_message) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "a"), 1);
  ASSERT_EQ(Send(sv[0], "b"), 1);
  Batch in(4, 8);
  timespec t{0, 0};
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 4, 0, &t), 1);
  EXPECT_EQ(in.got(0), "a");
  EXPECT_EQ(t.tv_sec, 0);
  EXPECT_EQ(t.tv_nsec, 0);
}

TEST_P(Mmsg, recvmmsg__the_time_left_is_written_back) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "a"), 1);
  ASSERT_EQ(Send(sv[0], "b"), 1);
  Batch in(4, 8);
  timespec t{1000, 0};
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 4, 0, &t), 2);
  // Less than it was, by far less than the 100 s this bound allows.
  EXPECT_LT(t.tv_sec, 1000);
  EXPECT_GE(t.tv_sec, 900);
  EXPECT_GE(t.tv_nsec, 0);
  EXPECT_LT(t.tv_nsec, 1000000000L);
  // A call that gets nothing leaves it alone.
  t = timespec{7, 7};
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 4, 0, &t), EAGAIN);
  EXPECT_EQ(t.tv_sec, 7);
  EXPECT_EQ(t.tv_nsec, 7);
}

TEST_P(Mmsg, recvmmsg__checks_before_the_lookup) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "a"), 1);
  Batch in(1, 8);
  int efd = B().eventfd(0, 0);
  ASSERT_GE(efd, 0);
  Track(efd);
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 1, kMsgCmsgCompat, nullptr),
               EINVAL);
  // The timeout is read, then checked, before the descriptor is looked at.
  // In the page at 0, never mapped: the sanitizers' interceptors read the
  // timeout before the call, and take an address beyond the user space
  // for a bug of the test's.
  auto* unreadable = reinterpret_cast<timespec*>(uintptr_t{16});
  EXPECT_ERRNO(B().recvmmsg(efd, in.vec(), 1, 0, unreadable), EFAULT);
  timespec bad{0, 1000000000L};
  EXPECT_ERRNO(B().recvmmsg(efd, in.vec(), 1, 0, &bad), EINVAL);
  bad = timespec{-1, 0};
  EXPECT_ERRNO(B().recvmmsg(sv[1], in.vec(), 1, 0, &bad), EINVAL);
  EXPECT_ERRNO(B().recvmmsg(efd, in.vec(), 1, 0, nullptr), ENOTSOCK);
  EXPECT_ERRNO(B().recvmmsg(B().closed_fd, in.vec(), 1, 0, nullptr), EBADF);
  EXPECT_ERRNO(B().recvmmsg(sv[1], nullptr, 1, 0, nullptr), EFAULT);
  // None of these took the datagram.
  ASSERT_EQ(B().recvmmsg(sv[1], in.vec(), 1, 0, nullptr), 1);
  EXPECT_EQ(in.got(0), "a");
}

UEPOLL_INSTANTIATE_BACKENDS(Mmsg);

}  // namespace
}  // namespace uepoll_test
