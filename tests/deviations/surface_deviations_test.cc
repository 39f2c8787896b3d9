// Deviations of the descriptor surface (docs/semantics.md D4, D27, D29,
// D30) that the document listed as untested: each test asserts uepoll's
// documented behaviour and, where the two differ on the same calls, the
// kernel's beside it, so that the test also shows the difference is real.
#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "support/full_table.h"
#include "support/scm.h"
#include "support/scoped_handler.h"
#include "threads/waiter.h"

extern char** environ;

namespace uepoll_test {
namespace {

class SurfaceDeviations : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};

// The kernel descriptors of the process that are `fd`'s file (fd itself
// included), from /proc/self/fd.
std::vector<int> SameFile(int fd) {
  std::vector<int> out;
  struct stat want {};
  if (::fstat(fd, &want) != 0) return out;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return out;
  int skip = ::dirfd(d);
  while (dirent* e = ::readdir(d)) {
    int n = std::atoi(e->d_name);
    struct stat st {};
    if (e->d_name[0] == '.' || n == skip || ::fstat(n, &st) != 0) continue;
    if (st.st_dev == want.st_dev && st.st_ino == want.st_ino) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// One byte with one descriptor in SCM_RIGHTS.
ssize_t SendOneFd(int sock, int fd) {
  char byte = 'x';
  OneFdMsg m(&byte, 1, fd);
  return uepoll_sendmsg(sock, m.msg(), MSG_DONTWAIT);
}

// The descriptor of one SCM_RIGHTS message, or -1.
int RecvOneFd(int sock) {
  char byte = 0;
  OneFdMsg m(&byte, 1);
  if (uepoll_recvmsg(sock, m.msg(), MSG_DONTWAIT) != 1) return -1;
  return m.ReceivedFd();
}

// D29 (a): a uepoll pipe's or socket's inode number comes from uepoll's own
// counter, at or above 2^32, where the kernel's 32-bit numbers for pipefs
// and sockfs never reach; the device is the kernel's for the kind.
TEST_F(SurfaceDeviations, PipeAndSocketInodesLieAboveTheKernelsRange) {
  int p[2], s[2], kp[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
  ASSERT_EQ(::pipe(kp), 0);
  struct stat up {
  }, us{}, kst{};
  ASSERT_EQ(uepoll_fstat(p[0], &up), 0);
  ASSERT_EQ(uepoll_fstat(s[1], &us), 0);
  ASSERT_EQ(::fstat(kp[0], &kst), 0);
  constexpr uint64_t k2To32 = uint64_t{1} << 32;
  EXPECT_GE(static_cast<uint64_t>(up.st_ino), k2To32);
  EXPECT_GE(static_cast<uint64_t>(us.st_ino), k2To32);
  EXPECT_LT(static_cast<uint64_t>(kst.st_ino), k2To32);
  EXPECT_EQ(up.st_dev, kst.st_dev) << "pipefs's device";
  for (int fd : {p[0], p[1], s[0], s[1]}) EXPECT_EQ(uepoll_close(fd), 0);
  ::close(kp[0]);
  ::close(kp[1]);
}

// D29 (c), (e): fchmod, fchown and utimensat are not uepoll calls, so on a
// uepoll pipe or socket they reach the number's placeholder (an O_PATH
// /dev/null) and fail EBADF, where the kernel changes the inode; the
// number's /proc/self/fd link names /dev/null, not pipe:[N].
TEST_F(SurfaceDeviations, InodeChangesAndProcLinksReachThePlaceholder) {
  int p[2], s[2], kp[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, s), 0);
  ASSERT_EQ(::pipe(kp), 0);
  for (int fd : {p[0], s[0]}) {
    SCOPED_TRACE(fd);
    errno = 0;
    EXPECT_EQ(::fchmod(fd, 0644), -1);
    EXPECT_EQ(errno, EBADF);
    errno = 0;
    EXPECT_EQ(::fchown(fd, ::geteuid(), ::getegid()), -1);
    EXPECT_EQ(errno, EBADF);
    errno = 0;
    EXPECT_EQ(::futimens(fd, nullptr), -1);
    EXPECT_EQ(errno, EBADF);
  }
  struct stat st {};
  ASSERT_EQ(uepoll_fstat(p[0], &st), 0);
  EXPECT_EQ(st.st_mode, S_IFIFO | 0600) << "unchanged";
  EXPECT_EQ(::fchmod(kp[0], 0640), 0) << "the kernel's pipe inode changes";
  ASSERT_EQ(::fstat(kp[0], &st), 0);
  EXPECT_EQ(st.st_mode, S_IFIFO | 0640);

  auto link_of = [](int fd) {
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    char buf[256];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
    return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  };
  EXPECT_EQ(link_of(p[0]), "/dev/null");
  EXPECT_EQ(link_of(s[0]), "/dev/null");
  EXPECT_EQ(link_of(kp[0]).rfind("pipe:[", 0), 0u) << link_of(kp[0]);
  for (int fd : {p[0], p[1], s[0], s[1]}) EXPECT_EQ(uepoll_close(fd), 0);
  ::close(kp[0]);
  ::close(kp[1]);
}

// D29 (d): the kernel's device and mount ids for a kind are read from a
// kernel object of that kind at the first stat in the process; while no
// descriptor can be made they are 0, and the next stat that can make one
// reports them. Runs in a fresh process (spawned below), where no stat has
// read them yet.
constexpr char kStatChildEnv[] = "UEPOLL_TEST_FIRST_STAT_CHILD";

TEST_F(SurfaceDeviations, FirstStatWithAFullTableChild) {
  if (!std::getenv(kStatChildEnv)) {
    GTEST_SKIP() << "run by FirstStatWithAFullTableReportsNoDevice";
  }
  int p[2], kp[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(::pipe(kp), 0);
  struct stat kst {
  }, st{};
  ASSERT_EQ(::fstat(kp[0], &kst), 0);
  ASSERT_NE(kst.st_dev, 0u);
  {
    FullTable table;
    ASSERT_TRUE(table.full());
    ASSERT_EQ(uepoll_fstat(p[0], &st), 0);
    EXPECT_EQ(st.st_dev, 0u);
    EXPECT_EQ(st.st_mode, S_IFIFO | 0600) << "the rest is answered";
    struct statx stx {};
    ASSERT_EQ(uepoll_statx(p[0], "", AT_EMPTY_PATH, STATX_MNT_ID, &stx), 0);
    EXPECT_EQ(stx.stx_dev_major, 0u);
    EXPECT_EQ(stx.stx_dev_minor, 0u);
    EXPECT_EQ(stx.stx_mnt_id, 0u);
    // fstatfs: pipefs's answer, with no filesystem id.
    struct statfs sfs;
    std::memset(&sfs, 0x5a, sizeof sfs);
    ASSERT_EQ(uepoll_fstatfs(p[0], &sfs), 0);
    EXPECT_EQ(sfs.f_type, 0x50495045);
    EXPECT_EQ(sfs.f_bsize, 4096);
    EXPECT_EQ(sfs.f_namelen, 255);
    EXPECT_EQ(sfs.f_fsid.__val[0], 0);
    EXPECT_EQ(sfs.f_blocks, 0u);
  }
  ASSERT_EQ(uepoll_fstat(p[0], &st), 0);
  EXPECT_EQ(st.st_dev, kst.st_dev) << "read once a kernel pipe can be made";
  struct statfs sfs {
  }, ksfs{};
  ASSERT_EQ(uepoll_fstatfs(p[0], &sfs), 0);
  ASSERT_EQ(::fstatfs(kp[0], &ksfs), 0);
  EXPECT_EQ(std::memcmp(&sfs, &ksfs, sizeof sfs), 0);
  EXPECT_EQ(uepoll_close(p[0]), 0);
  EXPECT_EQ(uepoll_close(p[1]), 0);
  ::close(kp[0]);
  ::close(kp[1]);
}

TEST_F(SurfaceDeviations, FirstStatWithAFullTableReportsNoDevice) {
  if (std::getenv(kStatChildEnv)) GTEST_SKIP() << "in the child";
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  std::string filter =
      "--gtest_filter=SurfaceDeviations.FirstStatWithAFullTableChild";
  std::string exe = "/proc/self/exe";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.push_back(std::string(kStatChildEnv) + "=1");
  std::vector<char*> env;
  for (std::string& e : env_s) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  int r = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(out[1]);
  ASSERT_EQ(r, 0);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  EXPECT_NE(text.find("[  PASSED  ] 1 test."), std::string::npos) << text;
}

// D30 (b): a splice from a uepoll pipe takes a piece before it writes it;
// when the destination then fails EPIPE, the piece is lost, where the
// kernel's splice leaves the bytes in the source pipe.
TEST_F(SurfaceDeviations, SpliceIntoAPipeWithNoReaderLosesWhatItTook) {
  ScopedHandler no_sigpipe(SIGPIPE, SIG_IGN, 0);
  int p[2], q[2], kp[2], kq[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(uepoll_pipe(q), 0);
  ASSERT_EQ(::pipe(kp), 0);
  ASSERT_EQ(::pipe(kq), 0);
  ASSERT_EQ(uepoll_write(p[1], "hello", 5), 5);
  ASSERT_EQ(::write(kp[1], "hello", 5), 5);
  ASSERT_EQ(uepoll_close(q[0]), 0);
  ASSERT_EQ(::close(kq[0]), 0);

  errno = 0;
  EXPECT_EQ(uepoll_splice(p[0], nullptr, q[1], nullptr, 5, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  int left = -1;
  ASSERT_EQ(uepoll_ioctl(p[0], FIONREAD, &left), 0);
  EXPECT_EQ(left, 0) << "uepoll: the piece it took is gone";

  errno = 0;
  EXPECT_EQ(::splice(kp[0], nullptr, kq[1], nullptr, 5, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  ASSERT_EQ(::ioctl(kp[0], FIONREAD, &left), 0);
  EXPECT_EQ(left, 5) << "the kernel: still in the pipe";

  for (int fd : {p[0], p[1], q[1]}) EXPECT_EQ(uepoll_close(fd), 0);
  for (int fd : {kp[0], kp[1], kq[1]}) ::close(fd);
}

std::atomic<int> g_handled{0};
void CountSignal(int) { g_handled.fetch_add(1); }

// Once the thread sleeps in the call (the kernel's: in splice itself;
// uepoll's: in one of its sleeps), signals it once (SIGUSR1, handled
// under SA_RESTART) and waits for the handler. Returns whether the call
// was still in progress after the handler ran: restarted. (A signal that
// landed just before the sleep would leave it in progress too: this can
// show a restart only where one is expected.)
bool SleepingCallGoesOnAfterAHandler(std::thread& t, std::atomic<pid_t>& tid,
                                     std::atomic<bool>& done, bool uepoll) {
  g_handled = 0;
  if (!Eventually([&] { return tid.load() != 0; })) return false;
  bool asleep = Eventually([&] {
    if (uepoll) return SleepsInSyscall(tid.load());
    TaskSnapshot s = Snapshot(tid.load());
    return s.state == 'S' && s.nr == SYS_splice;
  });
  if (!asleep) return false;
  pthread_kill(t.native_handle(), SIGUSR1);
  if (!Eventually([] { return g_handled.load() > 0; })) return false;
  return !done.load();
}

// D30 (c): a blocking splice from a pipe restarts after a handler under
// SA_RESTART, on both sides, while it waits for the source; while it
// waits for room in a uepoll destination it waits in a poll, which a
// handled signal ends with EINTR whatever SA_RESTART says, where the
// kernel's splice is restarted. Nothing was taken from the source.
TEST_F(SurfaceDeviations, SpliceWaitingForRoomIsEintrUnderSaRestart) {
  if (kTsan) GTEST_SKIP() << "no handler runs while a splice sleeps on";
  ScopedHandler handler(SIGUSR1, CountSignal, SA_RESTART);
  for (bool uepoll : {false, true}) {
    SCOPED_TRACE(uepoll ? "uepoll" : "kernel");
    int p[2], q[2];
    auto make_pipe = uepoll ? uepoll_pipe : ::pipe;
    auto write_to = uepoll ? uepoll_write : ::write;
    auto read_from = uepoll ? uepoll_read : ::read;
    auto splice_of = uepoll ? uepoll_splice : ::splice;
    auto close_of = uepoll ? uepoll_close : ::close;
    auto fcntl_of = [uepoll](int fd, int cmd, int arg) {
      return uepoll ? uepoll_fcntl(fd, cmd, arg) : ::fcntl(fd, cmd, arg);
    };
    ASSERT_EQ(make_pipe(p), 0);
    ASSERT_EQ(make_pipe(q), 0);

    // Waiting for the source: restarted on both sides.
    std::atomic<pid_t> tid{0};
    std::atomic<bool> done{false};
    ssize_t res = 0;
    int err = 0;
    std::thread t([&] {
      tid = static_cast<pid_t>(::gettid());
      res = splice_of(p[0], nullptr, q[1], nullptr, 5, 0);
      err = errno;
      done = true;
    });
    EXPECT_TRUE(SleepingCallGoesOnAfterAHandler(t, tid, done, uepoll));
    ASSERT_EQ(write_to(p[1], "hello", 5), 5);
    t.join();
    EXPECT_EQ(res, 5);
    char buf[65536];
    ASSERT_EQ(read_from(q[0], buf, sizeof buf), 5);

    // Waiting for room: a full destination, blocking.
    ASSERT_EQ(fcntl_of(q[1], F_SETFL, O_NONBLOCK), 0);
    std::memset(buf, 'f', sizeof buf);
    long filled = 0;
    for (ssize_t n; (n = write_to(q[1], buf, sizeof buf)) > 0;) filled += n;
    ASSERT_GT(filled, 0);
    ASSERT_EQ(fcntl_of(q[1], F_SETFL, 0), 0);
    ASSERT_EQ(write_to(p[1], "hello", 5), 5);
    tid = 0;
    done = false;
    std::thread w([&] {
      tid = static_cast<pid_t>(::gettid());
      res = splice_of(p[0], nullptr, q[1], nullptr, 5, 0);
      err = errno;
      done = true;
    });
    if (uepoll) {
      // Signalled until the splice returns: one that lands before the
      // sleep only runs the handler, the next finds it asleep.
      EXPECT_TRUE(Eventually([&] {
        if (done.load()) return true;
        pthread_kill(w.native_handle(), SIGUSR1);
        return done.load();
      }));
    } else {
      EXPECT_TRUE(SleepingCallGoesOnAfterAHandler(w, tid, done, uepoll))
          << "the kernel restarted the splice";
    }
    // Room for the splice, whichever way it went.
    ASSERT_EQ(read_from(q[0], buf, sizeof buf),
              static_cast<ssize_t>(std::min<long>(filled, sizeof buf)));
    w.join();
    if (uepoll) {
      EXPECT_EQ(res, -1);
      EXPECT_EQ(err, EINTR);
      int left = -1;
      ASSERT_EQ(uepoll_ioctl(p[0], FIONREAD, &left), 0);
      EXPECT_EQ(left, 5) << "nothing was taken";
    } else {
      EXPECT_EQ(res, 5);
    }
    for (int fd : {p[0], p[1], q[0], q[1]}) EXPECT_EQ(close_of(fd), 0);
  }
}

// D30 (d): tee and vmsplice are not uepoll calls: on uepoll pipes they
// reach the placeholders and fail EBADF, where the kernel's pipes serve
// them.
TEST_F(SurfaceDeviations, TeeAndVmspliceOnUepollPipesAreEbadf) {
  int p[2], q[2], kp[2], kq[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(uepoll_pipe(q), 0);
  ASSERT_EQ(::pipe(kp), 0);
  ASSERT_EQ(::pipe(kq), 0);
  char data[] = "abcd";
  iovec iov{data, 4};
  errno = 0;
  EXPECT_EQ(::vmsplice(p[1], &iov, 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
  ASSERT_EQ(uepoll_write(p[1], data, 4), 4);
  errno = 0;
  EXPECT_EQ(::tee(p[0], q[1], 4, 0), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(::vmsplice(kp[1], &iov, 1, 0), 4);
  EXPECT_EQ(::tee(kp[0], kq[1], 4, 0), 4);
  for (int fd : {p[0], p[1], q[0], q[1]}) EXPECT_EQ(uepoll_close(fd), 0);
  for (int fd : {kp[0], kp[1], kq[0], kq[1]}) ::close(fd);
}

// D36: posix_fadvise and the other calls about a file's pages ask the
// kernel with an object of the kind made for the question; with a full
// table none can be made and the call fails EMFILE, where a kernel pipe
// answers. Once a number is free they answer again.
TEST_F(SurfaceDeviations, FileHintsWithAFullTableFailEmfile) {
  int p[2], kp[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  ASSERT_EQ(::pipe(kp), 0);
  {
    FullTable table;
    ASSERT_TRUE(table.full());
    EXPECT_EQ(::posix_fadvise(kp[0], 0, 0, POSIX_FADV_SEQUENTIAL), ESPIPE);
    errno = 0;
    EXPECT_EQ(uepoll_posix_fadvise(p[0], 0, 0, POSIX_FADV_SEQUENTIAL), EMFILE);
    EXPECT_EQ(errno, 0) << "reported by the return value only";
    EXPECT_EQ(uepoll_posix_fallocate(p[1], 0, 1), EMFILE);
    errno = 0;
    EXPECT_EQ(uepoll_fallocate(p[1], 0, 0, 1), -1);
    EXPECT_EQ(errno, EMFILE);
    errno = 0;
    EXPECT_EQ(uepoll_syncfs(p[0]), -1);
    EXPECT_EQ(errno, EMFILE);
  }
  EXPECT_EQ(uepoll_posix_fadvise(p[0], 0, 0, POSIX_FADV_SEQUENTIAL), ESPIPE);
  EXPECT_EQ(uepoll_syncfs(p[0]), 0);
  for (int fd : {p[0], p[1]}) EXPECT_EQ(uepoll_close(fd), 0);
  ::close(kp[0]);
  ::close(kp[1]);
}

// D27 (a): a kernel descriptor in flight over a uepoll pair is a
// close-on-exec duplicate uepoll holds until the message is received or
// purged (a descriptor of the process, which counts against
// RLIMIT_NOFILE); when none can be made the sendmsg fails EMFILE and sends
// nothing (the kernel holds a file, not a number, and would send it).
TEST_F(SurfaceDeviations, KernelDescriptorInFlightIsADuplicateThatCanFail) {
  int sv[2], kp[2];  // kp: a kernel socket pair (an inode each)
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, kp), 0);
  ASSERT_EQ(SameFile(kp[1]), std::vector<int>{kp[1]});

  ASSERT_EQ(SendOneFd(sv[0], kp[1]), 1);
  std::vector<int> held = SameFile(kp[1]);
  ASSERT_EQ(held.size(), 2u) << "the duplicate in flight";
  int dup = held[0] == kp[1] ? held[1] : held[0];
  EXPECT_EQ(::fcntl(dup, F_GETFD), FD_CLOEXEC);
  int got = RecvOneFd(sv[1]);
  ASSERT_GE(got, 0);
  EXPECT_EQ(SameFile(kp[1]),
            (std::vector<int>{std::min(kp[1], got), std::max(kp[1], got)}))
      << "the duplicate is gone once received";
  ASSERT_EQ(::close(got), 0);

  // Purged with the pair: the duplicate goes too.
  int sv2[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
  ASSERT_EQ(SendOneFd(sv2[0], kp[1]), 1);
  EXPECT_EQ(SameFile(kp[1]).size(), 2u);
  EXPECT_EQ(uepoll_close(sv2[0]), 0);
  EXPECT_EQ(uepoll_close(sv2[1]), 0);
  EXPECT_EQ(SameFile(kp[1]), std::vector<int>{kp[1]}) << "gone with the purge";

  {
    FullTable table;
    ASSERT_TRUE(table.full());
    errno = 0;
    EXPECT_EQ(SendOneFd(sv[0], kp[1]), -1);
    EXPECT_EQ(errno, EMFILE);
  }
  EXPECT_EQ(SameFile(kp[1]), std::vector<int>{kp[1]});
  char byte;
  errno = 0;
  EXPECT_EQ(uepoll_recv(sv[1], &byte, 1, MSG_DONTWAIT), -1) << "nothing sent";
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(uepoll_close(sv[0]), 0);
  EXPECT_EQ(uepoll_close(sv[1]), 0);
  ::close(kp[0]);
  ::close(kp[1]);
}

// Bytes a nonblocking stream socket takes before EAGAIN.
long FillCount(int fd, bool uepoll) {
  char buf[4096] = {};
  long total = 0;
  for (;;) {
    ssize_t n = uepoll ? uepoll_send(fd, buf, sizeof buf, MSG_DONTWAIT)
                       : ::send(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return n < 0 && errno == EAGAIN ? total : -1;
    total += n;
  }
}

// D4 (a): an option set on a uepoll socket changes what getsockopt
// reports, which is the kernel's, and not the data path: a smaller
// SO_SNDBUF leaves the pair's capacity as it was (the kernel's pair takes
// less); a socket filter is checked and forgotten, so detaching it fails
// ENOENT (the kernel's detaches it).
TEST_F(SurfaceDeviations, SocketOptionsChangeWhatIsReportedNotTheDataPath) {
  int reported[2] = {-1, -1};
  for (bool uepoll : {false, true}) {
    SCOPED_TRACE(uepoll ? "uepoll" : "kernel");
    auto pair = [uepoll](int sv[2]) {
      return uepoll ? uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
                                        sv)
                    : ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    };
    auto setopt = uepoll ? uepoll_setsockopt : ::setsockopt;
    auto getopt = uepoll ? uepoll_getsockopt : ::getsockopt;
    auto close_of = uepoll ? uepoll_close : ::close;
    int a[2], b[2];
    ASSERT_EQ(pair(a), 0);
    ASSERT_EQ(pair(b), 0);
    long full = FillCount(a[0], uepoll);
    int small = 4096;
    ASSERT_EQ(setopt(b[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    socklen_t len = sizeof reported[uepoll];
    ASSERT_EQ(getopt(b[0], SOL_SOCKET, SO_SNDBUF, &reported[uepoll], &len), 0);
    long with_small = FillCount(b[0], uepoll);
    ASSERT_GT(full, 0);
    ASSERT_GT(with_small, 0);
    if (uepoll) {
      EXPECT_EQ(with_small, full) << "the capacity stays the default";
    } else {
      EXPECT_LT(with_small, full);
    }

    sock_filter accept_all = BPF_STMT(BPF_RET | BPF_K, 0xffffffffU);
    sock_fprog prog{1, &accept_all};
    EXPECT_EQ(setopt(a[1], SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog),
              0);
    int unused = 0;
    errno = 0;
    int detached =
        setopt(a[1], SOL_SOCKET, SO_DETACH_FILTER, &unused, sizeof unused);
    if (uepoll) {
      EXPECT_EQ(detached, -1);
      EXPECT_EQ(errno, ENOENT);
    } else {
      EXPECT_EQ(detached, 0);
    }
    for (int fd : {a[0], a[1], b[0], b[1]}) EXPECT_EQ(close_of(fd), 0);
  }
  EXPECT_EQ(reported[1], reported[0]) << "SO_SNDBUF as the kernel reports it";
}

// D4 (d): a socket option the pair does not answer itself is asked of a
// transient kernel socket, so with the descriptor table full the call
// fails EMFILE (the kernel's own socket answers from its state).
TEST_F(SurfaceDeviations, KernelAnsweredSocketOptionNeedsADescriptor) {
  int sv[2], ks[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, ks), 0);
  int one = 1;
  int v = -1;
  socklen_t len = sizeof v;
  {
    FullTable table;
    ASSERT_TRUE(table.full());
    errno = 0;
    EXPECT_EQ(uepoll_getsockopt(sv[0], SOL_SOCKET, SO_KEEPALIVE, &v, &len), -1);
    EXPECT_EQ(errno, EMFILE);
    errno = 0;
    EXPECT_EQ(
        uepoll_setsockopt(sv[0], SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one),
        -1);
    EXPECT_EQ(errno, EMFILE);
    len = sizeof v;
    EXPECT_EQ(::getsockopt(ks[0], SOL_SOCKET, SO_KEEPALIVE, &v, &len), 0);
    // What the pair answers itself needs no descriptor.
    len = sizeof v;
    EXPECT_EQ(uepoll_getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &len), 0);
    EXPECT_EQ(v, SOCK_STREAM);
  }
  len = sizeof v;
  v = -1;
  EXPECT_EQ(uepoll_getsockopt(sv[0], SOL_SOCKET, SO_KEEPALIVE, &v, &len), 0);
  EXPECT_EQ(v, 0) << "the failed set changed nothing";
  EXPECT_EQ(uepoll_close(sv[0]), 0);
  EXPECT_EQ(uepoll_close(sv[1]), 0);
  ::close(ks[0]);
  ::close(ks[1]);
}

}  // namespace
}  // namespace uepoll_test
