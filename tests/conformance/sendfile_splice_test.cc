// sendfile and splice with the backend's pipes and sockets at one end or
// both, a kernel file or pipe at the other (fs/read_write.c do_sendfile,
// fs/splice.c), on both backends: what pairs, the counts and offsets, the
// errno in the kernel's order, and every byte arriving once and in order.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conformance/io_helpers.h"

namespace uepoll_test {
namespace {

class SendfileSplice : public IoTest {
 protected:
  // A kernel regular file holding `content`, its position at 0.
  int File(const std::string& content) {
    char path[] = "/tmp/uepoll-sendfile-XXXXXX";
    int fd = ::mkstemp(path);
    EXPECT_GE(fd, 0);
    ::unlink(path);
    EXPECT_EQ(::write(fd, content.data(), content.size()),
              static_cast<ssize_t>(content.size()));
    ::lseek(fd, 0, SEEK_SET);
    files_.push_back(fd);
    return fd;
  }
  std::string FileContent(int fd) {
    std::string s(4096, '\0');
    ssize_t n = ::pread(fd, s.data(), s.size(), 0);
    s.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return s;
  }
  off_t Pos(int fd) { return ::lseek(fd, 0, SEEK_CUR); }
  void TearDown() override {
    for (int fd : files_) ::close(fd);
    IoTest::TearDown();
  }

 private:
  std::vector<int> files_;
};

TEST_P(SendfileSplice, sendfile__a_file_into_a_pipe_and_a_socket) {
  int f = File("hello world");
  int p[2], sv[2];
  Pipe(p, O_NONBLOCK);
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  off_t off = 0;
  EXPECT_EQ(B().sendfile(p[1], f, &off, 5), 5);
  EXPECT_EQ(off, 5);
  EXPECT_EQ(Pos(f), 0);  // an offset leaves the file position alone
  EXPECT_EQ(B().sendfile(p[1], f, nullptr, 3), 3);
  EXPECT_EQ(Pos(f), 3);
  EXPECT_EQ(ReadStr(p[0], 64), "hellohel");
  EXPECT_EQ(B().sendfile(sv[0], f, nullptr, 100), 8);
  EXPECT_EQ(Pos(f), 11);
  EXPECT_EQ(Recv(sv[1], 64), "lo world");
  EXPECT_EQ(B().sendfile(sv[0], f, nullptr, 100), 0);  // end of file
  EXPECT_EQ(B().sendfile(p[1], f, &off, 0), 0);
  int d[2];
  Pair(d, SOCK_DGRAM);
  off = 6;
  EXPECT_EQ(B().sendfile(d[0], f, &off, 4), 4);
  EXPECT_EQ(Recv(d[1], 64), "worl");
}

TEST_P(SendfileSplice, sendfile__a_socket_into_a_kernel_pipe) {
  int sv[2], kp[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  KernelPipe(kp, O_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "abcdef"), 6);
  EXPECT_EQ(B().sendfile(kp[1], sv[1], nullptr, 4), 4);
  char buf[8];
  EXPECT_EQ(::read(kp[0], buf, sizeof buf), 4);
  EXPECT_EQ(Recv(sv[1], 8), "ef");  // only what was moved is taken
}

TEST_P(SendfileSplice, sendfile__errors_in_the_kernels_order) {
  int f = File("0123456789");
  int p[2], sv[2], kp[2];
  Pipe(p, O_NONBLOCK);
  Pair(sv, SOCK_STREAM);
  KernelPipe(kp);
  int e = Eventfd();
  off_t off = 0, neg = -1;
  EXPECT_ERRNO(B().sendfile(kp[1], p[0], nullptr, 4), EINVAL);  // a pipe
  EXPECT_ERRNO(B().sendfile(p[1], p[0], nullptr, 4), EINVAL);
  EXPECT_ERRNO(B().sendfile(p[0], f, &off, 4), EBADF);  // the read end
  EXPECT_ERRNO(B().sendfile(e, f, &off, 4), EINVAL);
  EXPECT_ERRNO(B().sendfile(f, e, nullptr, 4), EINVAL);
  EXPECT_ERRNO(B().sendfile(p[1], f, &neg, 4), EINVAL);
  EXPECT_ERRNO(B().sendfile(p[1], f, reinterpret_cast<off_t*>(8), 4), EFAULT);
  EXPECT_ERRNO(B().sendfile(kp[1], sv[0], &off, 4), ESPIPE);
  EXPECT_ERRNO(B().sendfile(B().closed_fd, f, &off, 4), EBADF);
  EXPECT_ERRNO(B().sendfile(p[1], B().closed_fd, &off, 4), EBADF);
  EXPECT_ERRNO(B().sendfile(p[1], p[1], nullptr, 4),
               EBADF);  // a write end is not read
}

TEST_P(SendfileSplice, sendfile__a_full_nonblocking_pipe_takes_what_fits) {
  int f = File(std::string(3 * 4096, 'z'));
  int p[2];
  Pipe(p, O_NONBLOCK);
  for (int i = 0; i < 15; ++i) ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  off_t off = 0;
  EXPECT_EQ(B().sendfile(p[1], f, &off, 10000), 4096);  // one slot left
  EXPECT_EQ(off, 4096);
  EXPECT_ERRNO(B().sendfile(p[1], f, &off, 10000), EAGAIN);
  EXPECT_EQ(off, 4096);  // unchanged by a failure
}

TEST_P(SendfileSplice, splice__each_pairing_the_kernel_allows) {
  int f = File("hello world");
  int p[2], sv[2], kp[2];
  Pipe(p, O_NONBLOCK);
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  KernelPipe(kp, O_NONBLOCK);
  EXPECT_EQ(B().splice(f, nullptr, p[1], nullptr, 4, 0), 4);
  EXPECT_EQ(Pos(f), 4);
  EXPECT_EQ(B().splice(p[0], nullptr, kp[1], nullptr, 100, 0), 4);
  EXPECT_EQ(B().splice(kp[0], nullptr, sv[0], nullptr, 100, 0), 4);
  EXPECT_EQ(B().splice(sv[1], nullptr, p[1], nullptr, 100, 0), 4);
  off_t o = 20;
  EXPECT_EQ(B().splice(p[0], nullptr, f, &o, 100, 0), 4);
  EXPECT_EQ(o, 24);
  EXPECT_EQ(FileContent(f).substr(20), "hell");
  EXPECT_ERRNO(B().splice(p[0], nullptr, f, nullptr, 100, 0),
               EAGAIN);  // an empty nonblocking pipe
  o = 6;
  EXPECT_EQ(B().splice(f, &o, p[1], nullptr, 5, 0), 5);
  EXPECT_EQ(o, 11);
  EXPECT_EQ(ReadStr(p[0], 64), "world");
  int q[2];
  Pipe(q);
  EXPECT_EQ(WriteStr(q[1], "xy"), 2);
  EXPECT_EQ(B().splice(q[0], nullptr, p[1], nullptr, 100, 0),
            2);  // pipe to pipe
  EXPECT_EQ(ReadStr(p[0], 64), "xy");
  EXPECT_ERRNO(B().splice(q[0], nullptr, p[1], nullptr, 100, SPLICE_F_NONBLOCK),
               EAGAIN);
  EXPECT_EQ(B().splice(q[0], nullptr, p[1], nullptr, 0, 0), 0);
}

TEST_P(SendfileSplice, splice__errors_in_the_kernels_order) {
  int f = File("abcdef");
  int p[2], sv[2], q[2];
  Pipe(p, O_NONBLOCK);
  Pipe(q);
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  int e = Eventfd();
  off_t o = 0;
  EXPECT_ERRNO(B().splice(f, nullptr, sv[0], nullptr, 8, 0),
               EINVAL);  // no pipe
  EXPECT_ERRNO(B().splice(sv[0], nullptr, f, nullptr, 8, 0), EINVAL);
  EXPECT_ERRNO(B().splice(p[0], &o, f, nullptr, 8, 0), ESPIPE);
  EXPECT_ERRNO(B().splice(f, nullptr, p[1], &o, 8, 0), ESPIPE);
  EXPECT_ERRNO(B().splice(p[0], nullptr, f, nullptr, 8, 0x100), EINVAL);
  EXPECT_ERRNO(B().splice(e, nullptr, p[1], nullptr, 8, 0), EINVAL);
  EXPECT_ERRNO(B().splice(p[0], nullptr, e, nullptr, 8, 0), EINVAL);
  EXPECT_ERRNO(B().splice(p[0], nullptr, p[1], nullptr, 8, 0),
               EINVAL);  // one pipe
  EXPECT_ERRNO(B().splice(p[1], nullptr, q[1], nullptr, 8, 0), EBADF);
  EXPECT_ERRNO(B().splice(q[0], nullptr, p[0], nullptr, 8, 0), EBADF);
  EXPECT_ERRNO(B().splice(B().closed_fd, nullptr, p[1], nullptr, 8, 0), EBADF);
  EXPECT_ERRNO(B().splice(f, reinterpret_cast<off_t*>(8), p[1], nullptr, 8, 0),
               EFAULT);
  off_t neg = -1;
  EXPECT_ERRNO(B().splice(p[0], nullptr, sv[0], &neg, 8, 0),
               EINVAL);  // a socket has no offset
}

TEST_P(SendfileSplice, splice__a_stream_arrives_whole_and_in_order) {
  // 1 MiB from a writer thread through a blocking pipe of the backend into
  // a kernel pipe read by another thread: every byte once, in order.
  int p[2], kp[2];
  Pipe(p);
  KernelPipe(kp);
  constexpr size_t kTotal = 1 << 20;
  std::thread writer([&] {
    std::vector<unsigned char> buf(10007);
    size_t sent = 0;
    while (sent < kTotal) {
      size_t n = std::min(buf.size(), kTotal - sent);
      for (size_t i = 0; i < n; ++i)
        buf[i] = static_cast<unsigned char>((sent + i) % 251);
      ssize_t w = B().write(p[1], buf.data(), n);
      if (w <= 0) break;
      sent += static_cast<size_t>(w);
    }
  });
  size_t bad = 0, got = 0;
  std::thread reader([&] {
    unsigned char buf[8192];
    while (got < kTotal) {
      ssize_t n = ::read(kp[0], buf, sizeof buf);
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != (got + static_cast<size_t>(i)) % 251) ++bad;
      }
      got += static_cast<size_t>(n);
    }
  });
  size_t moved = 0;
  while (moved < kTotal) {
    ssize_t n = B().splice(p[0], nullptr, kp[1], nullptr, kTotal - moved, 0);
    ASSERT_GT(n, 0) << strerror(errno);
    moved += static_cast<size_t>(n);
  }
  writer.join();
  reader.join();
  EXPECT_EQ(moved, kTotal);
  EXPECT_EQ(got, kTotal);
  EXPECT_EQ(bad, 0u);
}

TEST_P(SendfileSplice, pread__espipe_on_pipes_and_sockets) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  char c;
  EXPECT_ERRNO(B().pread(p[0], &c, 1, 0), ESPIPE);
  EXPECT_ERRNO(B().pread(sv[0], &c, 1, 0), ESPIPE);
  EXPECT_ERRNO(B().pread(p[0], &c, 1, -1), EINVAL);
}

UEPOLL_INSTANTIATE_BACKENDS(SendfileSplice);

}  // namespace
}  // namespace uepoll_test
