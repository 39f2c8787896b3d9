// The calls programs make on any descriptor, on both backends: fstat,
// fstatat(AT_EMPTY_PATH) and statx (fs/stat.c; pipefs, sockfs and the
// anonymous inode as Linux 6.18 reports them), fstatfs and fstatvfs (their
// filesystems, fs/statfs.c), and getsockopt, setsockopt,
// getsockname, getpeername on socket pairs (net/socket.c, net/core/sock.c,
// net/unix/af_unix.c).
//
// Where a field's value depends on the machine (a filesystem's device, the
// anonymous inode's number and times), the expectation is what a kernel
// object of the same kind reports in the same test: a kernel pipe, socket
// or eventfd made with libc on either backend.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/timerfd.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "conformance/io_helpers.h"

namespace uepoll_test {
namespace {

// Calls f on a fresh kernel object of the kind (S_IFIFO: a pipe's read
// end, S_IFSOCK: a unix stream socket, 0: an eventfd), then closes it.
template <class F>
void OnKernelObject(int kind, F f) {
  int fds[2] = {-1, -1};
  if (kind == S_IFIFO) {
    EXPECT_EQ(::pipe(fds), 0);
  } else if (kind == S_IFSOCK) {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  } else {
    fds[0] = ::eventfd(0, 0);
  }
  ASSERT_GE(fds[0], 0) << strerror(errno);
  f(fds[0]);
  ::close(fds[0]);
  if (fds[1] >= 0) ::close(fds[1]);
}

class DescriptorCalls : public IoTest {
 protected:
  struct stat Stat(int fd) {
    struct stat st;
    std::memset(&st, 0x5a, sizeof st);
    EXPECT_EQ(B().fstat(fd, &st), 0) << strerror(errno);
    return st;
  }
  struct statx Statx(int fd, unsigned int mask = STATX_BASIC_STATS) {
    struct statx stx;
    std::memset(&stx, 0x5a, sizeof stx);
    EXPECT_EQ(B().statx(fd, "", AT_EMPTY_PATH, mask, &stx), 0)
        << strerror(errno);
    return stx;
  }
  // What the kernel reports for a kernel object of the kind (libc on
  // either backend).
  static struct stat KernelStat(int kind) {
    struct stat st {};
    OnKernelObject(kind, [&](int fd) { EXPECT_EQ(::fstat(fd, &st), 0); });
    return st;
  }
  static int64_t Coarse() {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME_COARSE, &t);
    return t.tv_sec;
  }
  // The same getsockopt on a socket of ours and on a kernel one: result,
  // errno, length written and bytes, compared.
  void ExpectSameOption(int ours, int kernel, int level, int name, int len) {
    unsigned char a[80], b[80];
    std::memset(a, 0xaa, sizeof a);
    std::memset(b, 0xaa, sizeof b);
    socklen_t la = static_cast<socklen_t>(len), lb = la;
    errno = 0;
    int ra = B().getsockopt(ours, level, name, a, &la);
    int ea = ra ? errno : 0;
    errno = 0;
    int rb = ::getsockopt(kernel, level, name, b, &lb);
    int eb = rb ? errno : 0;
    SCOPED_TRACE(testing::Message()
                 << "level " << level << " option " << name << " len " << len);
    EXPECT_EQ(ra, rb);
    EXPECT_EQ(ea, eb) << strerrorname_np(ea) << " vs " << strerrorname_np(eb);
    EXPECT_EQ(la, lb);
    EXPECT_EQ(0, std::memcmp(a, b, sizeof a));
  }
};

TEST_P(DescriptorCalls, fstat__a_pipe_is_a_fifo_with_one_inode_for_both_ends) {
  int64_t before = Coarse();
  int p[2], q[2];
  Pipe(p, O_NONBLOCK);
  Pipe(q);
  struct stat r = Stat(p[0]);
  struct stat w = Stat(p[1]);
  struct stat k = KernelStat(S_IFIFO);
  EXPECT_EQ(r.st_mode, S_IFIFO | 0600u);
  EXPECT_EQ(w.st_mode, S_IFIFO | 0600u);
  EXPECT_EQ(r.st_nlink, 1u);
  EXPECT_EQ(r.st_uid, geteuid());
  EXPECT_EQ(r.st_gid, getegid());
  EXPECT_EQ(r.st_rdev, 0u);
  EXPECT_EQ(r.st_size, 0);
  EXPECT_EQ(r.st_blocks, 0);
  EXPECT_EQ(r.st_blksize, 4096);
  EXPECT_EQ(r.st_dev, k.st_dev) << "pipefs";
  EXPECT_EQ(r.st_ino, w.st_ino) << "both ends share the inode";
  EXPECT_NE(r.st_ino, Stat(q[0]).st_ino) << "each pipe has its own";
  EXPECT_EQ(Stat(Dup(p[0])).st_ino, r.st_ino);
  // Stamped at creation, by the coarse clock, and never again on pipefs.
  EXPECT_GE(r.st_ctim.tv_sec, before);
  EXPECT_LE(r.st_ctim.tv_sec, Coarse());
  EXPECT_EQ(r.st_atim.tv_sec, r.st_mtim.tv_sec);
  EXPECT_EQ(r.st_mtim.tv_nsec, r.st_ctim.tv_nsec);
  ASSERT_EQ(WriteStr(p[1], "abc"), 3);
  struct stat after = Stat(p[0]);
  EXPECT_EQ(after.st_size, 0) << "the size of a pipe is always 0";
  EXPECT_EQ(after.st_mtim.tv_nsec, r.st_mtim.tv_nsec);
  EXPECT_EQ(ReadStr(p[0], 3), "abc");
  EXPECT_EQ(Stat(p[0]).st_atim.tv_nsec, r.st_atim.tv_nsec);
}

TEST_P(DescriptorCalls, fstat__each_socket_has_its_own_inode) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type);
    struct stat a = Stat(sv[0]);
    struct stat b = Stat(sv[1]);
    struct stat k = KernelStat(S_IFSOCK);
    EXPECT_EQ(a.st_mode, S_IFSOCK | 0777u);
    EXPECT_EQ(a.st_nlink, 1u);
    EXPECT_EQ(a.st_uid, geteuid());
    EXPECT_EQ(a.st_gid, getegid());
    EXPECT_EQ(a.st_size, 0);
    EXPECT_EQ(a.st_blksize, 4096);
    EXPECT_EQ(a.st_dev, k.st_dev) << "sockfs";
    EXPECT_NE(a.st_ino, b.st_ino);
    EXPECT_EQ(Stat(Dup(sv[1])).st_ino, b.st_ino);
    EXPECT_EQ(a.st_mtim.tv_sec, 0);
    EXPECT_EQ(a.st_ctim.tv_nsec, 0);
  }
}

TEST_P(DescriptorCalls, fstat__other_objects_are_the_one_anonymous_inode) {
  struct stat k = KernelStat(0);
  int e = Eventfd();
  int ep = Epoll();
  int t = Track(B().timerfd_create(CLOCK_MONOTONIC, 0));
  ASSERT_GE(t, 0);
  for (int fd : {e, ep, t}) {
    struct stat st = Stat(fd);
    EXPECT_EQ(st.st_mode, 0600u);
    EXPECT_EQ(st.st_dev, k.st_dev);
    EXPECT_EQ(st.st_ino, k.st_ino);
    EXPECT_EQ(st.st_uid, k.st_uid);
    EXPECT_EQ(st.st_gid, k.st_gid);
    EXPECT_EQ(st.st_nlink, 1u);
    EXPECT_EQ(st.st_ctim.tv_sec, k.st_ctim.tv_sec);
    EXPECT_EQ(st.st_ctim.tv_nsec, k.st_ctim.tv_nsec);
    EXPECT_EQ(st.st_blksize, 4096);
  }
}

// What fstatfs reports for a kernel object of the kind.
struct statfs KernelStatfs(int kind) {
  struct statfs sfs {};
  OnKernelObject(kind, [&](int fd) { EXPECT_EQ(::fstatfs(fd, &sfs), 0); });
  return sfs;
}

TEST_P(DescriptorCalls, fstatfs__each_kind_is_on_its_pseudo_filesystem) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  int e = Eventfd();
  int ep = Epoll();
  int t = Track(B().timerfd_create(CLOCK_MONOTONIC, 0));
  ASSERT_GE(t, 0);
  struct Case {
    int fd;
    int kind;
    long magic;
  } cases[] = {{p[0], S_IFIFO, 0x50495045},   {p[1], S_IFIFO, 0x50495045},
               {sv[0], S_IFSOCK, 0x534F434B}, {e, 0, 0x09041934},
               {ep, 0, 0x09041934},           {t, 0, 0x09041934}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fd);
    struct statfs k = KernelStatfs(c.kind);
    struct statfs sfs;
    std::memset(&sfs, 0x5a, sizeof sfs);
    ASSERT_EQ(B().fstatfs(c.fd, &sfs), 0) << strerror(errno);
    EXPECT_EQ(sfs.f_type, c.magic);
    EXPECT_EQ(sfs.f_type, k.f_type);
    EXPECT_EQ(sfs.f_bsize, 4096);
    EXPECT_EQ(sfs.f_frsize, 4096);
    EXPECT_EQ(sfs.f_blocks, 0u);
    EXPECT_EQ(sfs.f_bfree, 0u);
    EXPECT_EQ(sfs.f_files, 0u);
    EXPECT_EQ(sfs.f_namelen, 255);
    EXPECT_EQ(sfs.f_flags, k.f_flags);
    EXPECT_EQ(std::memcmp(&sfs.f_fsid, &k.f_fsid, sizeof k.f_fsid), 0);
    struct statvfs v;
    std::memset(&v, 0x5a, sizeof v);
    ASSERT_EQ(B().fstatvfs(c.fd, &v), 0) << strerror(errno);
    EXPECT_EQ(v.f_bsize, 4096u);
    EXPECT_EQ(v.f_frsize, 4096u);
    EXPECT_EQ(v.f_blocks, 0u);
    EXPECT_EQ(v.f_namemax, 255u);
    EXPECT_EQ(v.f_flag, 0u);
    unsigned long fsid = 0;
    std::memcpy(&fsid, &k.f_fsid, sizeof(int));
    EXPECT_EQ(v.f_fsid, fsid);
  }
}

TEST_P(DescriptorCalls, fstatfs__errors_in_the_kernel_order) {
  int p[2];
  Pipe(p);
  struct statfs sfs;
  struct statvfs v;
  EXPECT_ERRNO(B().fstatfs(p[0], nullptr), EFAULT);
  // (glibc's fstatvfs writes a NULL buffer itself: no errno to compare.)
  EXPECT_ERRNO(B().fstatfs(B().closed_fd, &sfs), EBADF);
  EXPECT_ERRNO(B().fstatvfs(B().closed_fd, &v), EBADF);
  EXPECT_ERRNO(B().fstatfs(-1, &sfs), EBADF);
}

// posix_fadvise, posix_fallocate, fallocate, readahead, sync_file_range
// and syncfs: each kind's answer (Linux 6.18), in the kernel's order of
// checks: the mode before the access, the access before the kind.
TEST_P(DescriptorCalls, file_hints__each_kind_answers_as_the_kernel) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  int e = Eventfd();
  int ep = Epoll();
  int t = Track(B().timerfd_create(CLOCK_MONOTONIC, 0));
  ASSERT_GE(t, 0);
  // A pipe: ESPIPE for advice and ranges; fallocate needs the write end.
  for (int fd : {p[0], p[1]}) {
    SCOPED_TRACE(fd);
    EXPECT_EQ(B().posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL), ESPIPE);
    EXPECT_EQ(B().posix_fadvise(fd, 0, 0, 99), ESPIPE);
    EXPECT_ERRNO(B().sync_file_range(fd, 0, 10, 0), ESPIPE);
    EXPECT_ERRNO(B().sync_file_range(fd, 0, 10, 0x100), EINVAL);
    EXPECT_ERRNO(B().sync_file_range(fd, -1, 10, 0), EINVAL);
    EXPECT_ERRNO(B().fallocate(fd, 0, -1, 10), EINVAL);
    EXPECT_ERRNO(B().fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 10), EOPNOTSUPP);
    EXPECT_EQ(B().syncfs(fd), 0);
  }
  EXPECT_EQ(B().posix_fallocate(p[0], 0, 10), EBADF);
  EXPECT_ERRNO(B().fallocate(p[0], 0, 0, 10), EBADF);
  EXPECT_ERRNO(B().readahead(p[0], 0, 10), EINVAL);
  EXPECT_EQ(B().posix_fallocate(p[1], 0, 10), ESPIPE);
  EXPECT_ERRNO(B().fallocate(p[1], 0, 0, 10), ESPIPE);
  EXPECT_ERRNO(B().readahead(p[1], 0, 10), EBADF);
  // A socket and the anonymous-inode kinds: advice is taken (and ignored),
  // space cannot be allocated, no range can be synced.
  for (int fd : {sv[0], e, ep, t}) {
    SCOPED_TRACE(fd);
    EXPECT_EQ(B().posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL), 0);
    EXPECT_EQ(B().posix_fadvise(fd, 0, 0, 99), EINVAL);
    EXPECT_EQ(B().posix_fadvise(fd, 0, -1, POSIX_FADV_NORMAL), EINVAL);
    EXPECT_EQ(B().posix_fallocate(fd, 0, 10), ENODEV);
    EXPECT_ERRNO(B().fallocate(fd, 0, 0, 10), ENODEV);
    EXPECT_ERRNO(B().readahead(fd, 0, 10), EINVAL);
    EXPECT_ERRNO(B().sync_file_range(fd, 0, 10, 0), ESPIPE);
    EXPECT_EQ(B().syncfs(fd), 0);
  }
  EXPECT_EQ(B().posix_fadvise(B().closed_fd, 0, 0, 0), EBADF);
  EXPECT_ERRNO(B().fallocate(B().closed_fd, 0, 0, 10), EBADF);
  EXPECT_ERRNO(B().syncfs(B().closed_fd), EBADF);
  // None of them changed the objects.
  EXPECT_EQ(WriteStr(p[1], "x"), 1);
  EXPECT_EQ(ReadStr(p[0], 4), "x");
}

// fcntl's leases, directory notifications and seals: on these kinds they
// answer and never take (F_UNLCK; EINVAL for a lease, which needs a
// regular file; ENOTDIR; EINVAL for the seals of a file that is not a
// memfd, EPERM for sealing a pipe's read end).
TEST_P(DescriptorCalls, fcntl__leases_notify_and_seals_as_the_kernel) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  int e = Eventfd();
  int ep = Epoll();
  for (int fd : {p[0], p[1], sv[0], e, ep}) {
    SCOPED_TRACE(fd);
    EXPECT_EQ(B().fcntl(fd, F_GETLEASE, 0), F_UNLCK);
    EXPECT_ERRNO(B().fcntl(fd, F_SETLEASE, F_RDLCK), EINVAL);
    EXPECT_ERRNO(B().fcntl(fd, F_SETLEASE, F_UNLCK), EINVAL);
    EXPECT_ERRNO(B().fcntl(fd, F_NOTIFY, DN_MODIFY), ENOTDIR);
    EXPECT_ERRNO(B().fcntl(fd, F_GET_SEALS, 0), EINVAL);
    EXPECT_ERRNO(B().fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE),
                 fd == p[0] ? EPERM : EINVAL);
    EXPECT_EQ(B().fcntl(fd, F_GETLEASE, 0), F_UNLCK) << "nothing was taken";
  }
}

TEST_P(DescriptorCalls, fstatat__only_an_empty_path_names_the_object) {
  int p[2];
  Pipe(p);
  struct stat a = Stat(p[0]);
  struct stat b;
  ASSERT_EQ(B().fstatat(p[0], "", &b, AT_EMPTY_PATH), 0);
  EXPECT_EQ(b.st_ino, a.st_ino);
  EXPECT_EQ(b.st_mode, a.st_mode);
  EXPECT_ERRNO(B().fstatat(p[0], "", &b, 0), ENOENT);
  EXPECT_ERRNO(B().fstatat(p[0], "x", &b, 0), ENOTDIR);
  EXPECT_ERRNO(B().fstatat(p[0], "", &b, 0x40000), EINVAL);
  EXPECT_ERRNO(B().fstatat(p[0], "", nullptr, AT_EMPTY_PATH), EFAULT);
  // An absolute path ignores the descriptor.
  ASSERT_EQ(B().fstatat(p[0], "/", &b, 0), 0);
  EXPECT_TRUE(S_ISDIR(b.st_mode));
  EXPECT_ERRNO(B().fstat(p[0], nullptr), EFAULT);
  EXPECT_ERRNO(B().fstat(B().closed_fd, &b), EBADF);
}

TEST_P(DescriptorCalls, statx__the_fields_and_mask_of_the_kernel) {
  int p[2], sv[2];
  Pipe(p);
  Pair(sv, SOCK_STREAM);
  int e = Eventfd();
  int kp[2];
  KernelPipe(kp);
  struct statx ref;
  ASSERT_EQ(::statx(kp[0], "", AT_EMPTY_PATH, STATX_BASIC_STATS, &ref), 0);
  struct statx x = Statx(p[0]);
  EXPECT_EQ(x.stx_mask, ref.stx_mask);
  EXPECT_EQ(x.stx_mode, S_IFIFO | 0600u);
  EXPECT_EQ(x.stx_dev_major, ref.stx_dev_major);
  EXPECT_EQ(x.stx_dev_minor, ref.stx_dev_minor);
  EXPECT_EQ(x.stx_mnt_id, ref.stx_mnt_id);
  EXPECT_EQ(x.stx_attributes_mask, ref.stx_attributes_mask);
  EXPECT_EQ(x.stx_ino, Stat(p[1]).st_ino);
  EXPECT_EQ(x.stx_blksize, 4096u);
  EXPECT_EQ(Statx(sv[0]).stx_mode, S_IFSOCK | 0777u);
  EXPECT_EQ(Statx(sv[0]).stx_ino, Stat(sv[0]).st_ino);
  EXPECT_EQ(Statx(e).stx_ino, Stat(e).st_ino);
  struct statx tmp;
  EXPECT_ERRNO(B().statx(p[0], "", AT_EMPTY_PATH, 0x80000000u, &tmp), EINVAL);
  EXPECT_ERRNO(B().statx(p[0], "", AT_EMPTY_PATH | AT_STATX_SYNC_TYPE,
                         STATX_BASIC_STATS, &tmp),
               EINVAL);
  EXPECT_ERRNO(B().statx(p[0], "", 0, STATX_BASIC_STATS, &tmp), ENOENT);
}

TEST_P(DescriptorCalls, getsockopt__every_socket_option_as_the_kernel) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2], kv[2];
    Pair(sv, type);
    ASSERT_EQ(::socketpair(AF_UNIX, type, 0, kv), 0);
    for (int name = 0; name < 100; ++name) {
      // Values of the socket's own that differ by design: its cookie and a
      // new pidfd (tested below).
      if (name == 57 || name == 77) continue;
      for (int len : {0, 1, 4, 8, 16, 64}) {
        ExpectSameOption(sv[0], kv[0], SOL_SOCKET, name, len);
      }
    }
    for (int level : {0, 6, 41, 263, -1}) {
      ExpectSameOption(sv[0], kv[0], level, 1, 4);
    }
    // What a send charges (SO_MEMINFO's wmem, D9's truesize).
    ASSERT_EQ(Send(sv[0], std::string(100, 'x')), 100);
    ASSERT_EQ(::send(kv[0], std::string(100, 'x').data(), 100, 0), 100);
    ExpectSameOption(sv[0], kv[0], SOL_SOCKET, 55, 64);
    ::close(kv[0]);
    ::close(kv[1]);
  }
}

TEST_P(DescriptorCalls, getsockopt__what_the_pair_itself_answers) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  ucred c{};
  socklen_t len = sizeof c;
  ASSERT_EQ(B().getsockopt(sv[1], SOL_SOCKET, SO_PEERCRED, &c, &len), 0);
  EXPECT_EQ(len, sizeof c);
  EXPECT_EQ(c.pid, getpid());
  EXPECT_EQ(c.uid, geteuid());
  EXPECT_EQ(c.gid, getegid());
  uint64_t cookie[2] = {0, 0};
  len = sizeof cookie[0];
  ASSERT_EQ(B().getsockopt(sv[0], SOL_SOCKET, 57, &cookie[0], &len), 0);
  ASSERT_EQ(B().getsockopt(sv[1], SOL_SOCKET, 57, &cookie[1], &len), 0);
  EXPECT_NE(cookie[0], 0u);
  EXPECT_NE(cookie[0], cookie[1]);
  len = 4;
  EXPECT_ERRNO(B().getsockopt(sv[0], SOL_SOCKET, 57, &cookie[0], &len), EINVAL);
  int pidfd = -1;
  len = sizeof pidfd;
  ASSERT_EQ(B().getsockopt(sv[0], SOL_SOCKET, 77, &pidfd, &len), 0);
  ASSERT_GE(pidfd, 0);
  EXPECT_EQ(fcntl(pidfd, F_GETFD), FD_CLOEXEC);
  ::close(pidfd);
  // Bad pointers and lengths, in the kernel's order.
  int v;
  EXPECT_ERRNO(B().getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, nullptr), EFAULT);
  len = static_cast<socklen_t>(-1);
  EXPECT_ERRNO(B().getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &len), EINVAL);
  len = 4;
  EXPECT_ERRNO(B().getsockopt(sv[0], SOL_SOCKET, SO_TYPE, nullptr, &len),
               EFAULT);
  len = 0;
  EXPECT_EQ(B().getsockopt(sv[0], SOL_SOCKET, SO_TYPE, nullptr, &len), 0);
  EXPECT_EQ(B().getsockopt(sv[0], 0, 1, &v, nullptr), -1) << "level first";
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_P(DescriptorCalls, so_error__reports_a_reset_once) {
  int sv[2];
  Pair(sv, SOCK_STREAM);
  ASSERT_EQ(Send(sv[0], "unread"), 6);
  ASSERT_EQ(Close(sv[1]), 0);
  int v = -1;
  socklen_t len = sizeof v;
  ASSERT_EQ(B().getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &v, &len), 0);
  EXPECT_EQ(v, ECONNRESET);
  ASSERT_EQ(B().getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &v, &len), 0);
  EXPECT_EQ(v, 0);
}

TEST_P(DescriptorCalls, setsockopt__the_kernel_checks_and_reads_back) {
  struct Set {
    int name;
    std::vector<char> value;
    int len;
  };
  auto Int = [](int v) {
    std::vector<char> b(sizeof v);
    std::memcpy(b.data(), &v, sizeof v);
    return b;
  };
  linger lg{1, 5};
  timeval tv{1, 500000};
  std::vector<char> lgb(sizeof lg), tvb(sizeof tv);
  std::memcpy(lgb.data(), &lg, sizeof lg);
  std::memcpy(tvb.data(), &tv, sizeof tv);
  const std::vector<Set> sets = {
      {SO_SNDBUF, Int(1000), 4},     {SO_RCVBUF, Int(5000), 4},
      {SO_RCVLOWAT, Int(0), 4},      {SO_RCVLOWAT, Int(7), 4},
      {SO_PASSCRED, Int(5), 4},      {SO_KEEPALIVE, Int(1), 4},
      {SO_PRIORITY, Int(3), 4},      {SO_LINGER, lgb, sizeof lg},
      {SO_RCVTIMEO, tvb, sizeof tv}, {SO_TYPE, Int(1), 4},
      {SO_SNDBUF, Int(1), 2},        {SO_SNDBUF, Int(1), -1},
      {SO_PEEK_OFF, Int(5), 4},      {999, Int(1), 4},
  };
  for (int type : {SOCK_STREAM, SOCK_DGRAM}) {
    SCOPED_TRACE(type);
    int sv[2], kv[2];
    Pair(sv, type);
    ASSERT_EQ(::socketpair(AF_UNIX, type, 0, kv), 0);
    for (const Set& s : sets) {
      SCOPED_TRACE(s.name);
      errno = 0;
      int ra = B().setsockopt(sv[0], SOL_SOCKET, s.name, s.value.data(),
                              static_cast<socklen_t>(s.len));
      int ea = ra ? errno : 0;
      errno = 0;
      int rb = ::setsockopt(kv[0], SOL_SOCKET, s.name, s.value.data(),
                            static_cast<socklen_t>(s.len));
      int eb = rb ? errno : 0;
      EXPECT_EQ(ra, rb);
      EXPECT_EQ(ea, eb);
      for (int name : {s.name, SO_SNDBUF, SO_RCVBUF, SO_PASSCRED, SO_RCVLOWAT,
                       55 /* SO_MEMINFO */}) {
        ExpectSameOption(sv[0], kv[0], SOL_SOCKET, name, 64);
      }
      ExpectSameOption(sv[1], kv[1], SOL_SOCKET, SO_SNDBUF, 4);
    }
    EXPECT_ERRNO(B().setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, nullptr, 4),
                 EFAULT);
    EXPECT_ERRNO(B().setsockopt(sv[0], 0, 1, Int(1).data(), 4), EOPNOTSUPP);
    ::close(kv[0]);
    ::close(kv[1]);
  }
}

TEST_P(DescriptorCalls, socket_calls__not_a_socket) {
  int p[2];
  Pipe(p);
  int e = Eventfd();
  for (int fd : {p[0], e}) {
    int v;
    socklen_t len = sizeof v;
    sockaddr_storage ss;
    EXPECT_ERRNO(B().getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len), ENOTSOCK);
    EXPECT_ERRNO(B().setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, 4), ENOTSOCK);
    len = sizeof ss;
    EXPECT_ERRNO(B().getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len),
                 ENOTSOCK);
    EXPECT_ERRNO(B().getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len),
                 ENOTSOCK);
  }
}

TEST_P(DescriptorCalls, names__an_unnamed_family_and_the_kernels_lengths) {
  for (int type : {SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    int sv[2];
    Pair(sv, type);
    for (auto* call : {B().getsockname, B().getpeername}) {
      unsigned char buf[128];
      for (int len : {128, 1, 0}) {
        std::memset(buf, 0xaa, sizeof buf);
        socklen_t l = static_cast<socklen_t>(len);
        ASSERT_EQ(call(sv[0], reinterpret_cast<sockaddr*>(buf), &l), 0);
        EXPECT_EQ(l, sizeof(sa_family_t));
        if (len >= 1) {
          EXPECT_EQ(buf[0], AF_UNIX);
        }
        EXPECT_EQ(buf[len >= 2 ? 1 : len], len >= 2 ? 0 : 0xaa);
        EXPECT_EQ(buf[2], 0xaa);
      }
      socklen_t l = static_cast<socklen_t>(-1);
      EXPECT_ERRNO(call(sv[0], reinterpret_cast<sockaddr*>(buf), &l), EINVAL);
      l = 16;
      EXPECT_ERRNO(call(sv[0], nullptr, &l), EFAULT);
      EXPECT_EQ(l, sizeof(sa_family_t)) << "written before the copy";
      EXPECT_ERRNO(call(sv[0], reinterpret_cast<sockaddr*>(buf), nullptr),
                   EFAULT);
    }
    ASSERT_EQ(Close(sv[1]), 0);
    sockaddr_storage ss;
    socklen_t l = sizeof ss;
    EXPECT_EQ(B().getpeername(sv[0], reinterpret_cast<sockaddr*>(&ss), &l), 0)
        << "the peer is still known";
    if (type == SOCK_DGRAM) {
      // A send finds the peer gone and disconnects the socket.
      EXPECT_ERRNO(Send(sv[0], "x"), ECONNREFUSED);
      EXPECT_ERRNO(B().getpeername(sv[0], reinterpret_cast<sockaddr*>(&ss), &l),
                   ENOTCONN);
    }
  }
}

// lseek, fsync and fdatasync as the kernel answers them for each kind:
// pipes and sockets cannot seek, the anonymous-inode files stay at 0
// whatever is asked, nothing syncs; an unknown whence is EINVAL first.
TEST_P(DescriptorCalls, lseek_fsync__as_the_kernel_for_each_kind) {
  int p[2], sv[2];
  Pipe(p, O_NONBLOCK);
  SocketPair(sv);
  int e = Eventfd();
  int ep = Epoll();
  int t = Track(B().timerfd_create(CLOCK_MONOTONIC, 0));
  ASSERT_GE(t, 0);
  for (int fd : {p[0], p[1], sv[0]}) {
    SCOPED_TRACE(fd);
    EXPECT_ERRNO(B().lseek(fd, 0, SEEK_CUR), ESPIPE);
    EXPECT_ERRNO(B().lseek(fd, 5, SEEK_SET), ESPIPE);
    EXPECT_ERRNO(B().lseek(fd, 0, 5), EINVAL);
    EXPECT_ERRNO(B().lseek(fd, 0, -1), EINVAL);
  }
  for (int fd : {e, ep, t}) {
    SCOPED_TRACE(fd);
    EXPECT_EQ(B().lseek(fd, 0, SEEK_CUR), 0);
    EXPECT_EQ(B().lseek(fd, 100, SEEK_SET), 0);
    EXPECT_EQ(B().lseek(fd, -7, SEEK_END), 0);
    EXPECT_EQ(B().lseek(fd, 0, SEEK_CUR), 0) << "it never moved";
    EXPECT_ERRNO(B().lseek(fd, 0, 5), EINVAL);
  }
  for (int fd : {p[0], p[1], sv[0], e, t}) {
    SCOPED_TRACE(fd);
    EXPECT_ERRNO(B().fsync(fd), EINVAL);
    EXPECT_ERRNO(B().fdatasync(fd), EINVAL);
  }
  ASSERT_EQ(B().write(p[1], "ab", 2), 2);
  char c;
  EXPECT_EQ(B().read(p[0], &c, 1), 1);
  EXPECT_EQ(c, 'a') << "nothing was consumed or moved";
  int closed = Track(B().dup(p[0]));
  ASSERT_EQ(Close(closed), 0);
  EXPECT_ERRNO(B().lseek(closed, 0, SEEK_CUR), EBADF);
  EXPECT_ERRNO(B().fsync(closed), EBADF);
  EXPECT_ERRNO(B().fdatasync(closed), EBADF);
}

UEPOLL_INSTANTIATE_BACKENDS(DescriptorCalls);

}  // namespace
}  // namespace uepoll_test
