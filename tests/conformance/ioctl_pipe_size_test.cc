// ioctl on every kind of object and fcntl F_GETPIPE_SZ / F_SETPIPE_SZ, on
// both backends: FIONREAD, SIOCINQ / SIOCOUTQ / SIOCATMARK, FIONBIO,
// FIOCLEX / FIONCLEX, EPIOCSPARAMS / EPIOCGPARAMS, ENOTTY and EINVAL where
// the kernel says so (fs/ioctl.c, fs/pipe.c, net/unix/af_unix.c,
// fs/eventpoll.c); pipe sizes with the kernel's rounding, limits and EBUSY,
// and pipes that then hold that many slots.
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "conformance/io_helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class IoctlPipeSize : public IoTest {
 protected:
  int Ioctl(int fd, unsigned long req, void* arg) {
    return B().ioctl(fd, req, arg);
  }
  int InqOf(int fd) {
    int v = -1;
    EXPECT_EQ(Ioctl(fd, FIONREAD, &v), 0) << strerror(errno);
    return v;
  }
};

struct EpollParams {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad;
};
constexpr unsigned long kEpiocSParams = 0x40088a01;
constexpr unsigned long kEpiocGParams = 0x80088a02;
constexpr unsigned long kUnknown = 0x1234;

bool HasCapSysResource() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  syscall(SYS_capget, &hdr, data);
  return (data[0].effective >> CAP_SYS_RESOURCE) & 1;
}

TEST_P(IoctlPipeSize, fionread__pipe_counts_every_slot_on_both_ends) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  EXPECT_EQ(InqOf(p[0]), 0);
  ASSERT_EQ(WriteBytes(p[1], 5000), 5000);
  ASSERT_EQ(WriteBytes(p[1], 7), 7);
  EXPECT_EQ(InqOf(p[0]), 5007);
  EXPECT_EQ(InqOf(p[1]), 5007);
  ASSERT_EQ(ReadBytes(p[0], 100), 100);
  EXPECT_EQ(InqOf(p[0]), 4907);
  EXPECT_ERRNO(Ioctl(p[0], FIONREAD, nullptr), EFAULT);
  EXPECT_ERRNO(Ioctl(p[0], kUnknown, nullptr), ENOTTY);
  EXPECT_ERRNO(Ioctl(p[0], SIOCOUTQ, nullptr), ENOTTY);
}

TEST_P(IoctlPipeSize, sockets__inq_outq_and_the_mark_per_type) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type, SOCK_NONBLOCK);
    ASSERT_EQ(Send(sv[0], "abc"), 3);
    ASSERT_EQ(Send(sv[0], "defgh"), 5);
    int inq = -1, outq = -1, mark = -1;
    ASSERT_EQ(Ioctl(sv[1], SIOCINQ, &inq), 0);
    // A datagram socket counts its next message only.
    EXPECT_EQ(inq, type == SOCK_DGRAM ? 3 : 8);
    ASSERT_EQ(Ioctl(sv[0], SIOCOUTQ, &outq), 0);
    EXPECT_EQ(outq, 2 * 768) << "two skbs' truesize";
    ASSERT_EQ(Ioctl(sv[1], SIOCOUTQ, &outq), 0);
    EXPECT_EQ(outq, 0);
    if (type == SOCK_STREAM) {
      ASSERT_EQ(Ioctl(sv[1], SIOCATMARK, &mark), 0);
      EXPECT_EQ(mark, 0);
      ASSERT_EQ(Recv(sv[1], 2), "ab");
      EXPECT_EQ(InqOf(sv[1]), 6);
    } else {
      EXPECT_ERRNO(Ioctl(sv[1], SIOCATMARK, &mark), EOPNOTSUPP);
    }
    EXPECT_ERRNO(Ioctl(sv[1], SIOCINQ, nullptr), EFAULT);
    EXPECT_ERRNO(Ioctl(sv[1], kUnknown, &inq), ENOTTY);
  }
}

TEST_P(IoctlPipeSize, fionbio__sets_and_clears_o_nonblock_on_any_object) {
  int p[2];
  Pipe(p);
  int sv[2];
  Pair(sv, SOCK_STREAM);
  int efd = Eventfd(0, 0);
  int ep = Epoll();
  for (int fd : {p[0], sv[0], efd, ep}) {
    SCOPED_TRACE(fd);
    int on = 256;  // any nonzero value
    ASSERT_EQ(Ioctl(fd, FIONBIO, &on), 0);
    EXPECT_NE(B().fcntl(fd, F_GETFL, 0) & O_NONBLOCK, 0);
    int off = 0;
    ASSERT_EQ(Ioctl(fd, FIONBIO, &off), 0);
    EXPECT_EQ(B().fcntl(fd, F_GETFL, 0) & O_NONBLOCK, 0);
    EXPECT_ERRNO(Ioctl(fd, FIONBIO, nullptr), EFAULT);
    ASSERT_EQ(Ioctl(fd, FIOCLEX, nullptr), 0);
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), FD_CLOEXEC);
    ASSERT_EQ(Ioctl(fd, FIONCLEX, nullptr), 0);
    EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), 0);
    EXPECT_ERRNO(Ioctl(fd, FIOQSIZE, nullptr), ENOTTY);
    int zero = 0;
    EXPECT_EQ(Ioctl(fd, FIOASYNC, &zero), 0);  // nothing to turn off
  }
  EXPECT_ERRNO(Ioctl(B().closed_fd, FIONBIO, nullptr), EBADF);
}

TEST_P(IoctlPipeSize, eventfd_and_instance__answer_what_they_lack) {
  int efd = Eventfd();
  int ep = Epoll();
  int v;
  EXPECT_ERRNO(Ioctl(efd, FIONREAD, &v), ENOTTY);
  EXPECT_ERRNO(Ioctl(efd, FIONREAD, nullptr), ENOTTY);  // never reads arg
  EXPECT_ERRNO(Ioctl(efd, kUnknown, &v), ENOTTY);
  EXPECT_ERRNO(Ioctl(ep, FIONREAD, &v), EINVAL);  // ep_eventpoll_ioctl
  EXPECT_ERRNO(Ioctl(ep, kUnknown, &v), EINVAL);
  int on = 1;
  EXPECT_ERRNO(Ioctl(efd, FIOASYNC, &on), ENOTTY);  // no fasync
  EXPECT_ERRNO(Ioctl(ep, FIOASYNC, &on), ENOTTY);
}

TEST_P(IoctlPipeSize, epiocparams__set_and_get_on_an_instance) {
  int ep = Epoll();
  EpollParams set{100, 8, 1, 0};
  ASSERT_EQ(Ioctl(ep, kEpiocSParams, &set), 0) << strerror(errno);
  EpollParams got{};
  ASSERT_EQ(Ioctl(ep, kEpiocGParams, &got), 0);
  EXPECT_EQ(got.busy_poll_usecs, 100u);
  EXPECT_EQ(got.busy_poll_budget, 8);
  EXPECT_EQ(got.prefer_busy_poll, 1);
  EpollParams bad = set;
  bad.pad = 1;
  EXPECT_ERRNO(Ioctl(ep, kEpiocSParams, &bad), EINVAL);
  bad = set;
  bad.prefer_busy_poll = 2;
  EXPECT_ERRNO(Ioctl(ep, kEpiocSParams, &bad), EINVAL);
  EXPECT_ERRNO(Ioctl(ep, kEpiocGParams, nullptr), EFAULT);
  int p[2];
  Pipe(p);
  EXPECT_ERRNO(Ioctl(p[0], kEpiocGParams, &got), ENOTTY);
}

TEST_P(IoctlPipeSize, pipe_size__rounding_to_powers_of_two_pages) {
  int p[2];
  Pipe(p);
  EXPECT_EQ(B().fcntl(p[0], F_GETPIPE_SZ, 0), 65536);
  struct Row {
    long arg, size;
  };
  const Row rows[] = {{0, 4096},
                      {1, 4096},
                      {4096, 4096},
                      {4097, 8192},
                      {12288, 16384},
                      {20480, 32768},
                      {65537, 131072},
                      {1048576, 1048576},
                      {(1L << 32) + 4096, 4096}};  // taken as unsigned int
  for (const Row& row : rows) {
    SCOPED_TRACE(row.arg);
    EXPECT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, row.arg), row.size);
    EXPECT_EQ(B().fcntl(p[0], F_GETPIPE_SZ, 0), row.size);
  }
  EXPECT_ERRNO(B().fcntl(p[0], F_SETPIPE_SZ, -1), EINVAL);  // > 2^31
}

// Growing a pipe asks for fs.pipe-max-size; with no descriptor free that
// cannot be read, and the call still succeeds without touching errno
// (found by difffuzz.rotating_seed, seed 7769605750011129708).
TEST_P(IoctlPipeSize, pipe_size__a_full_descriptor_table_leaves_errno_alone) {
  int p[2];
  Pipe(p);
  // The lowest free number; a limit there leaves none free.
  int lowest = ::fcntl(0, F_DUPFD_CLOEXEC, 0);
  ASSERT_GE(lowest, 0);
  ::close(lowest);
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit full = old;
  full.rlim_cur = static_cast<rlim_t>(lowest);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &full), 0);
  errno = 1234;
  long r = B().fcntl(p[1], F_SETPIPE_SZ, 1048576);
  int err = errno;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_EQ(r, 1048576);
  EXPECT_EQ(err, 1234);
}

TEST_P(IoctlPipeSize, pipe_size__beyond_the_limit_needs_cap_sys_resource) {
  int p[2];
  Pipe(p);
  long r = B().fcntl(p[0], F_SETPIPE_SZ, 1048577);
  if (HasCapSysResource()) {
    EXPECT_EQ(r, 2097152);
    // Shrinking back is always allowed.
    EXPECT_EQ(B().fcntl(p[0], F_SETPIPE_SZ, 4096), 4096);
  } else {
    EXPECT_EQ(r, -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_ERRNO(B().fcntl(p[0], F_SETPIPE_SZ, 1L << 31), EPERM);
  }
}

TEST_P(IoctlPipeSize, pipe_size__shrinking_below_the_slots_in_use_is_ebusy) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteBytes(p[1], 10000), 10000);  // three slots
  EXPECT_ERRNO(B().fcntl(p[1], F_SETPIPE_SZ, 4096), EBUSY);
  EXPECT_ERRNO(B().fcntl(p[1], F_SETPIPE_SZ, 8192), EBUSY);
  EXPECT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 12288), 16384);
  EXPECT_EQ(ReadBytes(p[0], 20000), 10000) << "contents kept";
  // A partly read slot still counts as one.
  ASSERT_EQ(WriteBytes(p[1], 100), 100);
  ASSERT_EQ(ReadBytes(p[0], 50), 50);
  EXPECT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
}

TEST_P(IoctlPipeSize, pipe_size__non_pipes_are_ebadf) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  int efd = Eventfd();
  int ep = Epoll();
  for (int fd : {sv[0], efd, ep}) {
    EXPECT_ERRNO(B().fcntl(fd, F_GETPIPE_SZ, 0), EBADF);
    EXPECT_ERRNO(B().fcntl(fd, F_SETPIPE_SZ, 4096), EBADF);
  }
}

// A pipe of n slots holds n writes that do not merge.
TEST_P(IoctlPipeSize, pipe_size__capacity_follows_the_slot_count) {
  for (long size : {4096L, 8192L, 32768L, 262144L}) {
    SCOPED_TRACE(size);
    int p[2];
    Pipe(p, O_NONBLOCK);
    ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, size), size);
    int writes = 0;
    while (WriteBytes(p[1], 4095) == 4095) ++writes;
    EXPECT_EQ(writes, size / 4096);
    EXPECT_EQ(PollMask(p[1]) & POLLOUT, 0);
    // Growing a full pipe makes it writable again.
    ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, size * 2), size * 2);
    EXPECT_NE(PollMask(p[1]) & POLLOUT, 0);
    EXPECT_EQ(WriteBytes(p[1], 4096), 4096);
    Close(p[0]);
    Close(p[1]);
  }
}

TEST_P(IoctlPipeSize, pipe_size__growing_wakes_a_blocked_writer) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
  ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  Waiter w([&](epoll_event*) { return static_cast<int>(WriteBytes(p[1], 1)); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 8192), 8192);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

TEST_P(IoctlPipeSize, pipe_size__every_resize_is_an_edge_for_writers) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  int ep = Epoll();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], EPOLLOUT | EPOLLET, 9), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 9}}));
  EXPECT_TRUE(Wait(ep).empty());
  ASSERT_EQ(B().fcntl(p[1], F_SETPIPE_SZ, 8192), 8192);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 9}}));
  EXPECT_ERRNO(B().fcntl(p[1], F_SETPIPE_SZ, -1), EINVAL);
  EXPECT_TRUE(Wait(ep).empty()) << "a failed resize wakes nobody";
}

UEPOLL_INSTANTIATE_BACKENDS(IoctlPipeSize);

}  // namespace
}  // namespace uepoll_test
