// readv, writev, preadv, pwritev on every kind of object, on both backends:
// gathering and scattering, one write of the total (pipe atomicity up to
// PIPE_BUF, one datagram), the objects whose kernel read is a plain read
// (eventfd writes: one call per segment), and the kernel's checks of the
// array, in its order (fs/read_write.c, lib/iov_iter.c).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>

#include <cstring>
#include <string>
#include <vector>

#include "conformance/io_helpers.h"

namespace uepoll_test {
namespace {

class VectoredIo : public IoTest {};

// A user address no process can have (beyond TASK_SIZE_MAX).
void* const kKernelAddr = reinterpret_cast<void*>(uintptr_t{1} << 48);

TEST_P(VectoredIo, readv__pipe_scatters_in_order_over_empty_segments) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "hello world"), 11);
  char a[3], b[5], c[10];
  iovec v[] = {{a, 3}, {nullptr, 0}, {b, 5}, {c, 10}};
  ASSERT_EQ(B().readv(p[0], v, 4), 11);
  EXPECT_EQ(std::string(a, 3), "hel");
  EXPECT_EQ(std::string(b, 5), "lo wo");
  EXPECT_EQ(std::string(c, 3), "rld");
}

TEST_P(VectoredIo, writev__pipe_gathers_into_one_write) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  iovec v[] = {{const_cast<char*>("ab"), 2},
               {nullptr, 0},
               {const_cast<char*>("cde"), 3}};
  ASSERT_EQ(B().writev(p[1], v, 3), 5);
  EXPECT_EQ(ReadStr(p[0], 100), "abcde");
}

// PIPE_BUF: a vectored write of up to 4096 bytes is one write of its total,
// so it needs one slot whole. In a one-page pipe holding 100 bytes, 2000 +
// 2000 bytes do not fit in the slot left and nothing is written; written
// segment by segment, the first 2000 would have merged.
TEST_P(VectoredIo, writev__pipe_total_up_to_pipe_buf_is_atomic) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
  ASSERT_EQ(WriteBytes(p[1], 100), 100);
  std::vector<char> x(2000, 'x');
  iovec v[] = {{x.data(), 2000}, {x.data(), 2000}};
  EXPECT_ERRNO(B().writev(p[1], v, 2), EAGAIN);
  EXPECT_EQ(ReadBytes(p[0], 10000), 100);
}

// The same total in a two-page pipe after a 1-byte write: one new slot of
// 4096 bytes fills the pipe; two writes would have left room.
TEST_P(VectoredIo, writev__pipe_vectored_write_takes_one_slot) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 8192), 8192);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  std::vector<char> x(2048, 'x');
  iovec v[] = {{x.data(), 2048}, {x.data(), 2048}};
  ASSERT_EQ(B().writev(p[1], v, 2), 4096);
  EXPECT_ERRNO(WriteBytes(p[1], 1), EAGAIN);
}

TEST_P(VectoredIo, readv__pipe_fault_in_a_later_segment_consumes_nothing) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "0123456789"), 10);
  char a[5] = {};
  iovec v[] = {{a, 5}, {nullptr, 5}};
  EXPECT_ERRNO(B().readv(p[0], v, 2), EFAULT);
  EXPECT_EQ(std::string(a, 5), "01234");  // copied before the fault
  EXPECT_EQ(ReadStr(p[0], 100), "0123456789");
}

TEST_P(VectoredIo, writev__pipe_fault_drops_the_page_being_filled) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  std::vector<char> x(5000, 'x');
  iovec small[] = {{x.data(), 3}, {nullptr, 3}};
  EXPECT_ERRNO(B().writev(p[1], small, 2), EFAULT);
  EXPECT_ERRNO(ReadBytes(p[0], 10), EAGAIN);
  iovec big[] = {{x.data(), 5000}, {nullptr, 3}};
  EXPECT_EQ(B().writev(p[1], big, 2), 4096);
  EXPECT_EQ(ReadBytes(p[0], 10000), 4096);
  // A merge that faults merges nothing.
  ASSERT_EQ(WriteStr(p[1], "ab"), 2);
  EXPECT_ERRNO(B().writev(p[1], small, 2), EFAULT);
  EXPECT_EQ(ReadStr(p[0], 100), "ab");
}

TEST_P(VectoredIo, writev__pipe_without_reader_is_epipe_and_sigpipe) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(Close(p[0]), 0);
  iovec v[] = {{const_cast<char*>("a"), 1}};
  bool raised =
      RaisesSigpipe([&] { EXPECT_ERRNO(B().writev(p[1], v, 1), EPIPE); });
  EXPECT_TRUE(raised);
}

// eventfd_read is a read_iter: the 8 bytes may be split.
TEST_P(VectoredIo, readv__eventfd_value_spans_segments) {
  int efd = Eventfd();
  EfdWrite(efd, 0x0102030405060708ull);
  uint32_t lo = 0, hi = 0;
  iovec v[] = {{&lo, 4}, {&hi, 4}};
  ASSERT_EQ(B().readv(efd, v, 2), 8);
  EXPECT_EQ((uint64_t{hi} << 32) | lo, 0x0102030405060708ull);
  uint32_t one;
  iovec short_v[] = {{&one, 4}};
  EXPECT_ERRNO(B().readv(efd, short_v, 1), EINVAL);
}

// eventfd_write is a plain write: one call per segment, each 8 bytes.
TEST_P(VectoredIo, writev__eventfd_is_one_write_per_segment) {
  int efd = Eventfd();
  uint64_t v1 = 3, v2 = 4;
  iovec split[] = {{&v1, 4}, {reinterpret_cast<char*>(&v1) + 4, 4}};
  EXPECT_ERRNO(B().writev(efd, split, 2), EINVAL);
  iovec two[] = {{&v1, 8}, {&v2, 8}};
  ASSERT_EQ(B().writev(efd, two, 2), 16);
  EXPECT_EQ(EfdRead(efd), 7u);
  iovec trailing_empty[] = {{&v1, 8}, {&v2, 0}};
  EXPECT_EQ(B().writev(efd, trailing_empty, 2), 8);
  iovec leading_empty[] = {{&v2, 0}, {&v1, 8}};
  EXPECT_ERRNO(B().writev(efd, leading_empty, 2), EINVAL);
  EXPECT_EQ(EfdRead(efd), 3u);
}

TEST_P(VectoredIo, readv__timerfd_value_spans_segments) {
  int tfd = Track(B().timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK));
  ASSERT_GE(tfd, 0);
  uint32_t lo, hi;
  iovec v[] = {{&lo, 4}, {&hi, 4}};
  EXPECT_ERRNO(B().readv(tfd, v, 2), EAGAIN);  // accepted, nothing expired
  iovec short_v[] = {{&lo, 4}};
  EXPECT_ERRNO(B().readv(tfd, short_v, 1), EINVAL);
  itimerspec its{};
  its.it_value.tv_nsec = 1;
  ASSERT_EQ(B().timerfd_settime(tfd, 0, &its, nullptr), 0);
  ASSERT_TRUE(PollFor(tfd, POLLIN, 5000) & POLLIN);
  ASSERT_EQ(B().readv(tfd, v, 2), 8);
  EXPECT_EQ((uint64_t{hi} << 32) | lo, 1u);
}

TEST_P(VectoredIo, readv__stream_merges_and_dgram_keeps_boundaries) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "ab"), 2);
    ASSERT_EQ(Send(sv[0], "cde"), 3);
    char a[1], b[10];
    iovec v[] = {{a, 1}, {b, 10}};
    ssize_t want = type == SOCK_STREAM ? 5 : 2;
    ASSERT_EQ(B().readv(sv[1], v, 2), want);
    EXPECT_EQ(a[0], 'a');
    EXPECT_EQ(std::string(b, static_cast<size_t>(want - 1)),
              type == SOCK_STREAM ? "bcde" : "b");
  }
}

TEST_P(VectoredIo, writev__datagram_is_one_message) {
  for (int type : {SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    iovec v[] = {{const_cast<char*>("ab"), 2}, {const_cast<char*>("cd"), 2}};
    ASSERT_EQ(B().writev(sv[0], v, 2), 4);
    EXPECT_EQ(Recv(sv[1], 100), "abcd");
    EXPECT_ERRNO(B().recv(sv[1], nullptr, 0, 0), EAGAIN);
  }
}

// vfs_writev returns 0 for an empty total without calling the file; write
// does call it, and a datagram socket sends an empty message.
TEST_P(VectoredIo, zero_total__is_no_call_but_zero_write_is_a_datagram) {
  int sv[2];
  Pair(sv, SOCK_DGRAM, SOCK_NONBLOCK);
  char x;
  iovec empty[] = {{&x, 0}};
  EXPECT_EQ(B().writev(sv[0], empty, 1), 0);
  EXPECT_EQ(B().writev(sv[0], nullptr, 0), 0);
  EXPECT_ERRNO(B().recv(sv[1], &x, 1, 0), EAGAIN);
  EXPECT_EQ(B().write(sv[0], &x, 0), 0);
  ASSERT_EQ(Send(sv[0], "after"), 5);
  EXPECT_EQ(B().readv(sv[1], empty, 1), 0);  // consumes nothing
  EXPECT_EQ(B().read(sv[1], &x, 0), 0);      // nor does read of 0
  EXPECT_EQ(B().recv(sv[1], &x, 1, 0), 0);   // the empty message
  EXPECT_EQ(Recv(sv[1], 10), "after");
}

TEST_P(VectoredIo, errors__direction_kind_then_array) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  int ep = Epoll();
  char c;
  iovec one[] = {{&c, 1}};
  // Not open for that direction beats a bad array.
  EXPECT_ERRNO(B().readv(p[1], nullptr, -1), EBADF);
  EXPECT_ERRNO(B().writev(p[0], nullptr, -1), EBADF);
  // An instance has no read: EINVAL even for no segment at all.
  EXPECT_ERRNO(B().readv(ep, one, 1), EINVAL);
  EXPECT_ERRNO(B().readv(ep, nullptr, 0), EINVAL);
  EXPECT_ERRNO(B().writev(ep, nullptr, 0), EINVAL);
  EXPECT_ERRNO(B().readv(B().closed_fd, one, 1), EBADF);
}

TEST_P(VectoredIo, errors__array_checks_in_the_kernel_order) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  char c;
  std::vector<iovec> many(1025, iovec{&c, 1});
  EXPECT_ERRNO(B().readv(p[0], many.data(), 1025), EINVAL);  // UIO_MAXIOV
  EXPECT_ERRNO(B().readv(p[0], many.data(), 1024), EAGAIN);  // accepted
  EXPECT_ERRNO(B().readv(p[0], many.data(), -1), EINVAL);
  EXPECT_ERRNO(B().readv(p[0], nullptr, 1), EFAULT);
  EXPECT_EQ(B().readv(p[0], nullptr, 0), 0);
  // Every length is read before any range is checked.
  iovec neg[] = {{kKernelAddr, 1}, {&c, static_cast<size_t>(-1)}};
  EXPECT_ERRNO(B().readv(p[0], neg, 2), EINVAL);
  iovec bad_addr[] = {{&c, 1}, {kKernelAddr, 1}};
  EXPECT_ERRNO(B().readv(p[0], bad_addr, 2), EFAULT);
  iovec bad_empty[] = {{&c, 0}, {kKernelAddr, 0}};
  EXPECT_ERRNO(B().readv(p[0], bad_empty, 2), EFAULT);
  // One segment is clamped to MAX_RW_COUNT before its range is checked;
  // several are checked whole. The buffer is static: the program's data
  // lies far below the top of the address space, where a stack address
  // (randomised within the top 16 GiB) may lie within MAX_RW_COUNT of it
  // and fail EFAULT about one run in eight.
  static char low;
  iovec huge1[] = {{&low, size_t{1} << 62}};
  EXPECT_ERRNO(B().readv(p[0], huge1, 1), EAGAIN);
  iovec huge2[] = {{&low, size_t{1} << 62}, {&low, 0}};
  EXPECT_ERRNO(B().readv(p[0], huge2, 2), EFAULT);
  // A NULL segment faults only when something is copied into it.
  iovec null_seg[] = {{nullptr, 10}};
  EXPECT_ERRNO(B().readv(p[0], null_seg, 1), EAGAIN);
}

TEST_P(VectoredIo, preadv__espipe_on_every_object_after_the_offset) {
  int p[2];
  Pipe(p);
  int sv[2];
  Pair(sv, SOCK_STREAM);
  int efd = Eventfd();
  int ep = Epoll();
  char c;
  iovec one[] = {{&c, 1}};
  for (int fd : {p[0], p[1], sv[0], efd, ep}) {
    SCOPED_TRACE(fd);
    EXPECT_ERRNO(B().preadv(fd, one, 1, 0), ESPIPE);
    EXPECT_ERRNO(B().pwritev(fd, one, 1, 0), ESPIPE);
    EXPECT_ERRNO(B().preadv(fd, nullptr, -1, 0), ESPIPE);
    EXPECT_ERRNO(B().preadv(fd, one, 1, -1), EINVAL);
    EXPECT_ERRNO(B().pwritev(fd, one, 1, -1), EINVAL);
  }
  EXPECT_ERRNO(B().preadv(B().closed_fd, one, 1, -1), EINVAL);
  EXPECT_ERRNO(B().preadv(B().closed_fd, one, 1, 0), EBADF);
}

UEPOLL_INSTANTIATE_BACKENDS(VectoredIo);

}  // namespace
}  // namespace uepoll_test
