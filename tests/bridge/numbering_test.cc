// Descriptor numbers in the default (kernel-reserved) mode, and uepoll
// calls on kernel descriptors:
// - numbers are the kernel's lowest free, interleaved with kernel
//   descriptors both ways; RLIMIT_NOFILE gives EMFILE at the same point for
//   uepoll as for the kernel; numbers fit FD_SETSIZE;
// - a placeholder handed to libc fails loudly or reports POLLNVAL, is
//   close-on-exec, and no uepoll number survives execve();
// - every uepoll_* call on a kernel descriptor gives libc's result and
//   errno, dup2/dup3 across kinds replace the number as the kernel does;
// - pipe2/socketpair with one free number take both or neither;
// - the numbering mode cannot change once a descriptor exists.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

// The lowest number the kernel would hand out now.
int LowestFree() {
  int fd = ::fcntl(0, F_DUPFD, 0);
  if (fd < 0) fd = ::open("/dev/null", O_RDONLY);
  ::close(fd);
  return fd;
}

bool KernelOpen(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

ino_t Inode(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
}

long Files() {
  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  return c.files;
}
long Descriptors() {
  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  return c.descriptors;
}

// Sets the soft RLIMIT_NOFILE for a scope.
class SoftLimit {
 public:
  explicit SoftLimit(rlim_t limit) {
    getrlimit(RLIMIT_NOFILE, &old_);
    rlimit rl = old_;
    rl.rlim_cur = limit;
    ok_ = setrlimit(RLIMIT_NOFILE, &rl) == 0;
  }
  ~SoftLimit() { setrlimit(RLIMIT_NOFILE, &old_); }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  bool ok_ = false;
};

class BridgeNumbering : public ::testing::Test {
 protected:
  // Closed through uepoll_close at TearDown, whichever kind they are.
  int Keep(int fd) {
    EXPECT_GE(fd, 0) << strerror(errno);
    if (fd >= 0) fds_.insert(fd);
    return fd;
  }
  void Drop(int fd) { fds_.erase(fd); }
  void TearDown() override {
    for (int fd : fds_) uepoll_close(fd);
    fds_.clear();
    ExpectNoUepollLeaks();
  }

  std::set<int> fds_;
};

TEST_F(BridgeNumbering, ModeIsKernelByDefault) {
  EXPECT_EQ(uepoll_get_fd_mode(), UEPOLL_FD_MODE_KERNEL);
  int u = Keep(uepoll_eventfd(0, 0));
  EXPECT_LT(u, FD_SETSIZE);
  EXPECT_TRUE(uepoll_is_uepoll_fd(u));
  EXPECT_TRUE(KernelOpen(u)) << "the kernel reserved the number";
}

TEST_F(BridgeNumbering, NumbersAreTheLowestFreeInterleavedWithKernelOnes) {
  std::vector<int> all;
  for (int i = 0; i < 4; ++i) {
    int want = LowestFree();
    int u = Keep(uepoll_eventfd(0, 0));
    EXPECT_EQ(u, want) << "uepoll create " << i;
    want = LowestFree();
    int k = Keep(::eventfd(0, 0));
    EXPECT_EQ(k, want) << "kernel create " << i;
    all.push_back(u);
    all.push_back(k);
  }
  // A kernel number closed: the next uepoll descriptor takes it.
  int k0 = all[1];
  ASSERT_EQ(::close(k0), 0);
  Drop(k0);
  EXPECT_EQ(Keep(uepoll_epoll_create1(0)), k0);
  // A uepoll number closed: the next kernel descriptor takes it.
  int u1 = all[2];
  ASSERT_EQ(uepoll_close(u1), 0);
  Drop(u1);
  EXPECT_FALSE(KernelOpen(u1));
  EXPECT_EQ(Keep(::eventfd(0, 0)), u1);
  // Pairs take the two lowest free numbers, in order.
  int a = all[3], b = all[5];
  ASSERT_EQ(uepoll_close(a), 0);
  ASSERT_EQ(uepoll_close(b), 0);
  Drop(a);
  Drop(b);
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, 0), 0);
  Keep(p[0]);
  Keep(p[1]);
  EXPECT_EQ(p[0], std::min(a, b));
  EXPECT_EQ(p[1], std::max(a, b));
  // dup and F_DUPFD: the lowest free (at or above the minimum).
  int want = LowestFree();
  EXPECT_EQ(Keep(uepoll_dup(p[0])), want);
  int floor = want + 100;
  EXPECT_EQ(Keep(uepoll_fcntl(p[0], F_DUPFD_CLOEXEC, floor)), floor);
  EXPECT_EQ(Keep(uepoll_fcntl(p[0], F_DUPFD, floor)), floor + 1);
}

// The same soft limit, the same process: uepoll descriptors run out at the
// number where kernel descriptors do.
TEST_F(BridgeNumbering, RlimitNofileGivesEmfileAtTheSamePoint) {
  SoftLimit lim(static_cast<rlim_t>(LowestFree() + 40));
  ASSERT_TRUE(lim.ok());
  std::map<std::string, int> counts, last;
  struct Maker {
    const char* what;
    int (*kernel)();
    int (*uepoll)();
  };
  const Maker makers[] = {
      {"eventfd", [] { return ::eventfd(0, 0); },
       [] { return uepoll_eventfd(0, 0); }},
      {"epoll_create1", [] { return ::epoll_create1(0); },
       [] { return uepoll_epoll_create1(0); }},
  };
  for (const Maker& m : makers) {
    SCOPED_TRACE(m.what);
    for (bool use_uepoll : {false, true}) {
      std::vector<int> got;
      int fd;
      errno = 0;
      while ((fd = use_uepoll ? m.uepoll() : m.kernel()) >= 0) {
        got.push_back(fd);
        ASSERT_LT(got.size(), 1000u);
      }
      EXPECT_EQ(errno, EMFILE);
      if (use_uepoll) {
        EXPECT_EQ(static_cast<int>(got.size()), counts[m.what]);
        EXPECT_EQ(got.back(), last[m.what]);
        // dup runs out there too.
        EXPECT_ERRNO(uepoll_dup(got.front()), EMFILE);
      } else {
        counts[m.what] = static_cast<int>(got.size());
        last[m.what] = got.back();
      }
      for (int x : got) EXPECT_EQ(uepoll_close(x), 0);
    }
  }
  // Pairs: as many as the kernel's.
  for (bool use_uepoll : {false, true}) {
    std::vector<int> got;
    int p[2];
    while ((use_uepoll ? uepoll_pipe2(p, 0) : ::pipe2(p, 0)) == 0) {
      got.push_back(p[0]);
      got.push_back(p[1]);
      ASSERT_LT(got.size(), 1000u);
    }
    EXPECT_EQ(errno, EMFILE);
    if (use_uepoll) {
      EXPECT_EQ(static_cast<int>(got.size()), counts["pipe2"]);
    } else {
      counts["pipe2"] = static_cast<int>(got.size());
    }
    for (int x : got) EXPECT_EQ(uepoll_close(x), 0);
  }
}

// Exactly one number free: a pair takes both or neither, on both kinds.
TEST_F(BridgeNumbering, PairsWithOneFreeNumberTakeNeither) {
  SoftLimit lim(static_cast<rlim_t>(LowestFree() + 8));
  ASSERT_TRUE(lim.ok());
  std::vector<int> filler;
  int fd;
  while ((fd = ::eventfd(0, 0)) >= 0) filler.push_back(fd);
  ASSERT_GE(filler.size(), 2u);
  int hole = filler[filler.size() / 2];
  ASSERT_EQ(::close(hole), 0);
  int p[2] = {-5, -6};
  EXPECT_ERRNO(::pipe2(p, 0), EMFILE);
  EXPECT_ERRNO(uepoll_pipe2(p, 0), EMFILE);
  EXPECT_ERRNO(::socketpair(AF_UNIX, SOCK_STREAM, 0, p), EMFILE);
  EXPECT_ERRNO(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, p), EMFILE);
  EXPECT_EQ(p[0], -5);
  EXPECT_EQ(p[1], -6);
  EXPECT_EQ(Descriptors(), 0);
  EXPECT_EQ(Files(), 0) << "no object was left behind";
  // The hole is still free; with a second one, both kinds succeed.
  EXPECT_EQ(LowestFree(), hole);
  int hole2 = filler.back();
  ASSERT_EQ(::close(hole2), 0);
  filler.pop_back();
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
  EXPECT_EQ(p[0], hole);
  EXPECT_EQ(p[1], hole2);
  EXPECT_EQ(uepoll_close(p[0]), 0);
  EXPECT_EQ(uepoll_close(p[1]), 0);
  ASSERT_EQ(::pipe2(p, 0), 0);
  EXPECT_EQ(p[0], hole);
  EXPECT_EQ(p[1], hole2);
  ::close(p[0]);
  ::close(p[1]);
  for (int x : filler) {
    if (x != hole) ::close(x);
  }
}

// A placeholder handed to libc: every call fails loudly (EBADF) or reports
// POLLNVAL; none succeeds as if the number were an ordinary file, and none
// blocks.
TEST_F(BridgeNumbering, LibcCallsOnAUepollNumberFailLoudly) {
  int efd = Keep(uepoll_eventfd(1, EFD_NONBLOCK));
  int p[2], sv[2];
  ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  for (int fd : {p[0], p[1], sv[0], sv[1]}) Keep(fd);
  uint64_t one = 1;
  ASSERT_EQ(uepoll_write(p[1], "x", 1), 1);
  ASSERT_EQ(uepoll_write(sv[1], "x", 1), 1);
  int kep = ::epoll_create1(0);
  ASSERT_GE(kep, 0);
  for (int fd : {efd, p[0], p[1], sv[0], sv[1]}) {
    SCOPED_TRACE(fd);
    char buf[8];
    EXPECT_ERRNO(::read(fd, buf, sizeof buf), EBADF);
    EXPECT_ERRNO(::write(fd, &one, sizeof one), EBADF);
    EXPECT_ERRNO(::send(fd, buf, 1, 0), EBADF);
    EXPECT_ERRNO(::recv(fd, buf, 1, MSG_DONTWAIT), EBADF);
    EXPECT_ERRNO(::shutdown(fd, SHUT_RDWR), EBADF);
    int n = 0;
    EXPECT_ERRNO(::ioctl(fd, FIONREAD, &n), EBADF);
    EXPECT_ERRNO(::fcntl(fd, F_SETFL, O_NONBLOCK), EBADF);
    epoll_event ev{};
    ev.events = EPOLLIN;
    EXPECT_ERRNO(::epoll_ctl(kep, EPOLL_CTL_ADD, fd, &ev), EBADF);
    EXPECT_ERRNO(::epoll_wait(fd, &ev, 1, 0), EBADF);
    EXPECT_ERRNO(::epoll_ctl(fd, EPOLL_CTL_ADD, kep, &ev), EBADF);
    pollfd pf{fd, POLLIN | POLLOUT, 0};
    EXPECT_EQ(::poll(&pf, 1, -1), 1) << "poll() must not block";
    EXPECT_EQ(pf.revents, POLLNVAL);
    // select() has no POLLNVAL: it reports an O_PATH file readable and
    // writable (the kernel's default mask for a file without poll). It
    // returns at once, and the I/O that follows fails EBADF (above).
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(fd, &r);
    FD_SET(fd, &w);
    EXPECT_EQ(::select(fd + 1, &r, &w, nullptr, nullptr), 2)
        << "select() must not block";
  }
  // The uepoll objects are untouched by all of it.
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(efd, &v, 8), 8);
  EXPECT_EQ(v, 1u);
  char c = 0;
  EXPECT_EQ(uepoll_read(p[0], &c, 1), 1);
  EXPECT_EQ(uepoll_read(sv[0], &c, 1), 1);
  ::close(kep);
}

// An instance's number is its kernel half, a kernel epoll (docs/
// semantics.md D1, D18): libc calls on it get what they get from an epoll
// that holds the instance's kernel descriptors and nothing else. Nothing
// blocks, nothing reports the instance's uepoll events, and the instance
// is untouched.
TEST_F(BridgeNumbering, LibcCallsOnAnInstanceNumberSeeItsKernelHalf) {
  int ep = Keep(uepoll_epoll_create1(0));
  int u = Keep(uepoll_eventfd(1, EFD_NONBLOCK));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 5;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
  uint64_t one = 1;
  char buf[8];
  EXPECT_ERRNO(::read(ep, buf, sizeof buf), EINVAL);
  EXPECT_ERRNO(::write(ep, &one, sizeof one), EINVAL);
  EXPECT_ERRNO(::send(ep, buf, 1, 0), ENOTSOCK);
  epoll_event out{};
  EXPECT_EQ(::epoll_wait(ep, &out, 1, 0), 0) << "the uepoll half is not seen";
  pollfd pf{ep, POLLIN, 0};
  EXPECT_EQ(::poll(&pf, 1, 0), 0) << "not readable: not made watchable";
  int kep = ::epoll_create1(0);
  ASSERT_GE(kep, 0);
  // A kernel epoll can hold it (D1: it reports only the kernel half); the
  // instance still reports its own event, once.
  EXPECT_EQ(::epoll_ctl(kep, EPOLL_CTL_ADD, ep, &ev), 0);
  EXPECT_EQ(::epoll_wait(kep, &out, 1, 0), 0);
  EXPECT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 1);
  EXPECT_EQ(out.data.u64, 5u);
  ::close(kep);
}

// FD_SET and select() on the kernel descriptors of a program that also
// holds uepoll descriptors: every number is below FD_SETSIZE.
TEST_F(BridgeNumbering, NumbersFitFdSetBesideKernelDescriptors) {
  std::vector<int> us;
  for (int i = 0; i < 50; ++i) us.push_back(Keep(uepoll_eventfd(0, 0)));
  int kp[2];
  ASSERT_EQ(::pipe(kp), 0);
  Keep(kp[0]);
  Keep(kp[1]);
  for (int u : us) EXPECT_LT(u, FD_SETSIZE);
  ASSERT_LT(kp[0], FD_SETSIZE);
  ASSERT_EQ(::write(kp[1], "x", 1), 1);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(kp[0], &r);
  timeval tv{0, 0};
  EXPECT_EQ(::select(kp[0] + 1, &r, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(kp[0], &r));
}

TEST_F(BridgeNumbering, PlaceholdersAreCloseOnExecWhateverUepollSays) {
  int u = Keep(uepoll_eventfd(0, 0));
  int c = Keep(uepoll_eventfd(0, EFD_CLOEXEC));
  EXPECT_EQ(uepoll_fcntl(u, F_GETFD), 0);
  EXPECT_EQ(uepoll_fcntl(c, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(::fcntl(u, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(::fcntl(c, F_GETFD), FD_CLOEXEC);
  // uepoll's flag changes; the kernel's stays.
  ASSERT_EQ(uepoll_fcntl(c, F_SETFD, 0), 0);
  EXPECT_EQ(uepoll_fcntl(c, F_GETFD), 0);
  EXPECT_EQ(::fcntl(c, F_GETFD), FD_CLOEXEC);
  // An instance holding a kernel descriptor, and its dups.
  int ep = Keep(uepoll_epoll_create1(0));
  int d = Keep(uepoll_dup(ep));
  int k = Keep(::eventfd(0, 0));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev), 0);
  int d2 = Keep(uepoll_dup(ep));
  for (int fd : {ep, d, d2}) EXPECT_EQ(::fcntl(fd, F_GETFD), FD_CLOEXEC) << fd;
}

// After execve() of /bin/sh, the shell lists its own descriptors: a kernel
// descriptor without CLOEXEC is there; no uepoll number is.
TEST_F(BridgeNumbering, NoUepollNumberSurvivesExec) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  std::vector<int> uepoll_fds;
  uepoll_fds.push_back(Keep(uepoll_eventfd(0, 0)));  // FD_CLOEXEC clear
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, 0), 0);
  uepoll_fds.push_back(Keep(p[0]));
  uepoll_fds.push_back(Keep(p[1]));
  int ep = Keep(uepoll_epoll_create1(0));
  uepoll_fds.push_back(ep);
  int k_inherited = Keep(::eventfd(0, 0));
  int k_cloexec = Keep(::eventfd(0, EFD_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k_inherited, &ev), 0);
  uepoll_fds.push_back(Keep(uepoll_dup(ep)));  // a dup of a mixed instance

  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);  // dup2 clears CLOEXEC on stdout
    execl("/bin/sh", "sh", "-c", "ls /proc/$$/fd", static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[512];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, n);
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::set<int> listed;
  std::istringstream in(text);
  int fd;
  while (in >> fd) listed.insert(fd);
  ASSERT_FALSE(listed.empty()) << text;
  EXPECT_TRUE(listed.count(k_inherited)) << text;
  EXPECT_FALSE(listed.count(k_cloexec)) << text;
  for (int u : uepoll_fds) EXPECT_FALSE(listed.count(u)) << u << ": " << text;
}

// --- uepoll calls on kernel descriptors: exactly libc's answer ---

// The outcome of one call: its result and, on failure, errno.
struct Outcome {
  long r;
  int err;
  bool operator==(const Outcome& o) const {
    return r == o.r && (r != -1 || err == o.err);
  }
};
std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << o.r;
  if (o.r == -1) os << " " << strerrorname_np(o.err);
  return os;
}
template <class F>
Outcome Capture(F f) {
  errno = 0;
  long r = static_cast<long>(f());
  return {r, errno};
}

// Twin kernel objects: a call made with libc on one and with uepoll on the
// other must give the same outcome.
struct Twins {
  int efd[2], rd[2], wr[2], sa[2], sb[2], kep[2], file[2];
  void Make() {
    for (int i = 0; i < 2; ++i) {
      efd[i] = ::eventfd(2, EFD_NONBLOCK);
      int p[2];
      ASSERT_EQ(::pipe2(p, O_NONBLOCK), 0);
      rd[i] = p[0];
      wr[i] = p[1];
      int s[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, s), 0);
      sa[i] = s[0];
      sb[i] = s[1];
      kep[i] = ::epoll_create1(0);
      file[i] = ::open("/dev/null", O_RDWR);
    }
  }
  void Close() {
    for (int i = 0; i < 2; ++i) {
      for (int fd : {efd[i], rd[i], wr[i], sa[i], sb[i], kep[i], file[i]}) {
        ::close(fd);
      }
    }
  }
};

TEST_F(BridgeNumbering, UepollCallsOnKernelDescriptorsGiveLibcsOutcome) {
  Keep(uepoll_eventfd(0, 0));  // uepoll is in use meanwhile
  Twins t;
  t.Make();
  char buf[16] = {};
  uint64_t v = 0;
  // NULL, hidden from the compiler's nonnull check.
  char* volatile null_buf = nullptr;
  // Each row runs with i = 0 through libc and i = 1 through uepoll.
  struct Row {
    const char* what;
    std::function<long(Twins&, int, bool)> call;
  };
  auto R = [](auto libc, auto uep) {
    return [libc, uep](Twins& tw, int i, bool u) {
      return u ? uep(tw, i) : libc(tw, i);
    };
  };
  std::vector<Row> rows = {
      {"read eventfd",
       R([&](Twins& tw, int i) { return ::read(tw.efd[i], &v, 8); },
         [&](Twins& tw, int i) { return uepoll_read(tw.efd[i], &v, 8); })},
      {"read empty eventfd",
       R([&](Twins& tw, int i) { return ::read(tw.efd[i], &v, 8); },
         [&](Twins& tw, int i) { return uepoll_read(tw.efd[i], &v, 8); })},
      {"read eventfd short buffer",
       R([&](Twins& tw, int i) { return ::read(tw.efd[i], &v, 4); },
         [&](Twins& tw, int i) { return uepoll_read(tw.efd[i], &v, 4); })},
      {"write eventfd",
       R([&](Twins& tw, int i) { return ::write(tw.efd[i], &v, 8); },
         [&](Twins& tw, int i) { return uepoll_write(tw.efd[i], &v, 8); })},
      {"write pipe",
       R([&](Twins& tw, int i) { return ::write(tw.wr[i], "abc", 3); },
         [&](Twins& tw, int i) { return uepoll_write(tw.wr[i], "abc", 3); })},
      {"read pipe",
       R([&](Twins& tw, int i) { return ::read(tw.rd[i], buf, 16); },
         [&](Twins& tw, int i) { return uepoll_read(tw.rd[i], buf, 16); })},
      {"read empty pipe",
       R([&](Twins& tw, int i) { return ::read(tw.rd[i], buf, 16); },
         [&](Twins& tw, int i) { return uepoll_read(tw.rd[i], buf, 16); })},
      {"read write end",
       R([&](Twins& tw, int i) { return ::read(tw.wr[i], buf, 1); },
         [&](Twins& tw, int i) { return uepoll_read(tw.wr[i], buf, 1); })},
      {"write read end",
       R([&](Twins& tw, int i) { return ::write(tw.rd[i], buf, 1); },
         [&](Twins& tw, int i) { return uepoll_write(tw.rd[i], buf, 1); })},
      {"read NULL",
       R([&](Twins& tw, int i) { return ::read(tw.sa[i], null_buf, 1); },
         [&](Twins& tw, int i) { return uepoll_read(tw.sa[i], null_buf, 1); })},
      {"read epoll",
       R([&](Twins& tw, int i) { return ::read(tw.kep[i], buf, 1); },
         [&](Twins& tw, int i) { return uepoll_read(tw.kep[i], buf, 1); })},
      {"write file",
       R([&](Twins& tw, int i) { return ::write(tw.file[i], "x", 1); },
         [&](Twins& tw, int i) { return uepoll_write(tw.file[i], "x", 1); })},
      {"lseek file",
       R([](Twins& tw, int i) { return ::lseek(tw.file[i], 0, SEEK_CUR); },
         [](Twins& tw, int i) {
           return uepoll_lseek(tw.file[i], 0, SEEK_CUR);
         })},
      {"fsync file",
       R([](Twins& tw, int i) { return ::fsync(tw.file[i]); },
         [](Twins& tw, int i) { return uepoll_fsync(tw.file[i]); })},
      {"lseek pipe",
       R([](Twins& tw, int i) { return ::lseek(tw.rd[i], 0, SEEK_CUR); },
         [](Twins& tw, int i) { return uepoll_lseek(tw.rd[i], 0, SEEK_CUR); })},
      {"fdatasync epoll",
       R([](Twins& tw, int i) { return ::fdatasync(tw.kep[i]); },
         [](Twins& tw, int i) { return uepoll_fdatasync(tw.kep[i]); })},
      {"shutdown",
       R([](Twins& tw, int i) { return ::shutdown(tw.sa[i], SHUT_WR); },
         [](Twins& tw, int i) { return uepoll_shutdown(tw.sa[i], SHUT_WR); })},
      {"read after peer shutdown",
       R([&](Twins& tw, int i) { return ::read(tw.sb[i], buf, 1); },
         [&](Twins& tw, int i) { return uepoll_read(tw.sb[i], buf, 1); })},
      {"shutdown bad how",
       R([](Twins& tw, int i) { return ::shutdown(tw.sa[i], 7); },
         [](Twins& tw, int i) { return uepoll_shutdown(tw.sa[i], 7); })},
      {"shutdown non-socket",
       R([](Twins& tw, int i) { return ::shutdown(tw.efd[i], SHUT_RD); },
         [](Twins& tw, int i) { return uepoll_shutdown(tw.efd[i], SHUT_RD); })},
      {"F_GETFL",
       R([](Twins& tw, int i) { return ::fcntl(tw.rd[i], F_GETFL); },
         [](Twins& tw, int i) { return uepoll_fcntl(tw.rd[i], F_GETFL); })},
      {"F_SETFL",
       R([](Twins& tw, int i) { return ::fcntl(tw.rd[i], F_SETFL, 0); },
         [](Twins& tw, int i) { return uepoll_fcntl(tw.rd[i], F_SETFL, 0); })},
      {"F_GETFL after",
       R([](Twins& tw, int i) { return ::fcntl(tw.rd[i], F_GETFL); },
         [](Twins& tw, int i) { return uepoll_fcntl(tw.rd[i], F_GETFL); })},
      {"F_SETFD",
       R([](Twins& tw,
            int i) { return ::fcntl(tw.rd[i], F_SETFD, FD_CLOEXEC); },
         [](Twins& tw, int i) {
           return uepoll_fcntl(tw.rd[i], F_SETFD, FD_CLOEXEC);
         })},
      {"F_GETFD",
       R([](Twins& tw, int i) { return ::fcntl(tw.rd[i], F_GETFD); },
         [](Twins& tw, int i) { return uepoll_fcntl(tw.rd[i], F_GETFD); })},
      {"F_GETPIPE_SZ",
       R([](Twins& tw, int i) { return ::fcntl(tw.rd[i], F_GETPIPE_SZ); },
         [](Twins& tw, int i) {
           return uepoll_fcntl(tw.rd[i], F_GETPIPE_SZ);
         })},
      {"F_GETPIPE_SZ non-pipe",
       R([](Twins& tw, int i) { return ::fcntl(tw.efd[i], F_GETPIPE_SZ); },
         [](Twins& tw, int i) {
           return uepoll_fcntl(tw.efd[i], F_GETPIPE_SZ);
         })},
      {"fcntl bad cmd",
       R([](Twins& tw, int i) { return ::fcntl(tw.rd[i], 9999); },
         [](Twins& tw, int i) { return uepoll_fcntl(tw.rd[i], 9999); })},
      {"dup3 bad flags",
       R([](Twins& tw, int i) { return ::dup3(tw.rd[i], 900, 1); },
         [](Twins& tw, int i) { return uepoll_dup3(tw.rd[i], 900, 1); })},
      {"dup3 onto itself",
       R([](Twins& tw, int i) { return ::dup3(tw.rd[i], tw.rd[i], 0); },
         [](Twins& tw, int i) { return uepoll_dup3(tw.rd[i], tw.rd[i], 0); })},
      {"dup2 onto itself",
       R([](Twins& tw,
            int i) { return ::dup2(tw.rd[i], tw.rd[i]) == tw.rd[i]; },
         [](Twins& tw, int i) {
           return uepoll_dup2(tw.rd[i], tw.rd[i]) == tw.rd[i];
         })},
      {"dup2 negative",
       R([](Twins& tw, int i) { return ::dup2(tw.rd[i], -1); },
         [](Twins& tw, int i) { return uepoll_dup2(tw.rd[i], -1); })},
      {"dup2 beyond limit",
       R([](Twins& tw, int i) { return ::dup2(tw.rd[i], 1 << 29); },
         [](Twins& tw, int i) { return uepoll_dup2(tw.rd[i], 1 << 29); })},
      {"epoll_wait bad max", R(
                                 [](Twins& tw, int i) {
                                   epoll_event e;
                                   return ::epoll_wait(tw.kep[i], &e, 0, 0);
                                 },
                                 [](Twins& tw, int i) {
                                   epoll_event e;
                                   return uepoll_epoll_wait(tw.kep[i], &e, 0,
                                                            0);
                                 })},
      {"epoll_wait on non-epoll",
       R(
           [](Twins& tw, int i) {
             epoll_event e;
             return ::epoll_wait(tw.efd[i], &e, 1, 0);
           },
           [](Twins& tw, int i) {
             epoll_event e;
             return uepoll_epoll_wait(tw.efd[i], &e, 1, 0);
           })},
      {"epoll_ctl ADD",
       R(
           [](Twins& tw, int i) {
             epoll_event e{EPOLLIN, {.u64 = 5}};
             return ::epoll_ctl(tw.kep[i], EPOLL_CTL_ADD, tw.efd[i], &e);
           },
           [](Twins& tw, int i) {
             epoll_event e{EPOLLIN, {.u64 = 5}};
             return uepoll_epoll_ctl(tw.kep[i], EPOLL_CTL_ADD, tw.efd[i], &e);
           })},
      {"epoll_ctl ADD again",
       R(
           [](Twins& tw, int i) {
             epoll_event e{EPOLLIN, {}};
             return ::epoll_ctl(tw.kep[i], EPOLL_CTL_ADD, tw.efd[i], &e);
           },
           [](Twins& tw, int i) {
             epoll_event e{EPOLLIN, {}};
             return uepoll_epoll_ctl(tw.kep[i], EPOLL_CTL_ADD, tw.efd[i], &e);
           })},
      {"epoll_ctl file",
       R(
           [](Twins& tw, int i) {
             epoll_event e{EPOLLIN, {}};
             return ::epoll_ctl(tw.kep[i], EPOLL_CTL_ADD, tw.file[i], &e);
           },
           [](Twins& tw, int i) {
             epoll_event e{EPOLLIN, {}};
             return uepoll_epoll_ctl(tw.kep[i], EPOLL_CTL_ADD, tw.file[i], &e);
           })},
      {"epoll_wait", R(
                         [](Twins& tw, int i) {
                           epoll_event e{};
                           long r = ::epoll_wait(tw.kep[i], &e, 1, 0);
                           return r == 1 ? static_cast<long>(e.data.u64) : r;
                         },
                         [](Twins& tw, int i) {
                           epoll_event e{};
                           long r = uepoll_epoll_wait(tw.kep[i], &e, 1, 0);
                           return r == 1 ? static_cast<long>(e.data.u64) : r;
                         })},
      {"epoll_pwait", R(
                          [](Twins& tw, int i) {
                            epoll_event e{};
                            sigset_t none;
                            sigemptyset(&none);
                            return ::epoll_pwait(tw.kep[i], &e, 1, 0, &none);
                          },
                          [](Twins& tw, int i) {
                            epoll_event e{};
                            sigset_t none;
                            sigemptyset(&none);
                            return uepoll_epoll_pwait(tw.kep[i], &e, 1, 0,
                                                      &none);
                          })},
      {"epoll_pwait2",
       R(
           [](Twins& tw, int i) {
             epoll_event e{};
             timespec z{0, 0};
             return ::epoll_pwait2(tw.kep[i], &e, 1, &z, nullptr);
           },
           [](Twins& tw, int i) {
             epoll_event e{};
             timespec z{0, 0};
             return uepoll_epoll_pwait2(tw.kep[i], &e, 1, &z, nullptr);
           })},
      {"epoll_pwait2 bad timespec",
       R(
           [](Twins& tw, int i) {
             epoll_event e{};
             timespec bad{0, -1};
             return ::epoll_pwait2(tw.kep[i], &e, 1, &bad, nullptr);
           },
           [](Twins& tw, int i) {
             epoll_event e{};
             timespec bad{0, -1};
             return uepoll_epoll_pwait2(tw.kep[i], &e, 1, &bad, nullptr);
           })},
      {"epoll_ctl DEL", R(
                            [](Twins& tw, int i) {
                              return ::epoll_ctl(tw.kep[i], EPOLL_CTL_DEL,
                                                 tw.efd[i], nullptr);
                            },
                            [](Twins& tw, int i) {
                              return uepoll_epoll_ctl(tw.kep[i], EPOLL_CTL_DEL,
                                                      tw.efd[i], nullptr);
                            })},
      {"poll",
       R(
           [](Twins& tw, int i) {
             pollfd p[] = {
                 {tw.rd[i], POLLIN, 0}, {tw.wr[i], POLLOUT, 0}, {-1, 0, 0}};
             long r = ::poll(p, 3, 0);
             return r * 1000000 + p[0].revents * 1000 + p[1].revents;
           },
           [](Twins& tw, int i) {
             pollfd p[] = {
                 {tw.rd[i], POLLIN, 0}, {tw.wr[i], POLLOUT, 0}, {-1, 0, 0}};
             long r = uepoll_poll(p, 3, 0);
             return r * 1000000 + p[0].revents * 1000 + p[1].revents;
           })},
      {"sendmmsg socket",
       R(
           [](Twins& tw, int i) {
             char c = 'm';
             iovec io{&c, 1};
             mmsghdr m[2] = {};
             m[0].msg_hdr.msg_iov = m[1].msg_hdr.msg_iov = &io;
             m[0].msg_hdr.msg_iovlen = m[1].msg_hdr.msg_iovlen = 1;
             return long{::sendmmsg(tw.sb[i], m, 2, MSG_NOSIGNAL)} * 10 +
                    m[1].msg_len;
           },
           [](Twins& tw, int i) {
             char c = 'm';
             iovec io{&c, 1};
             mmsghdr m[2] = {};
             m[0].msg_hdr.msg_iov = m[1].msg_hdr.msg_iov = &io;
             m[0].msg_hdr.msg_iovlen = m[1].msg_hdr.msg_iovlen = 1;
             return long{uepoll_sendmmsg(tw.sb[i], m, 2, MSG_NOSIGNAL)} * 10 +
                    m[1].msg_len;
           })},
      {"recvmmsg socket",
       R(
           [](Twins& tw, int i) {
             char c[2][4];
             iovec io[2] = {{c[0], 4}, {c[1], 4}};
             mmsghdr m[2] = {};
             m[0].msg_hdr.msg_iov = &io[0];
             m[1].msg_hdr.msg_iov = &io[1];
             m[0].msg_hdr.msg_iovlen = m[1].msg_hdr.msg_iovlen = 1;
             return long{::recvmmsg(tw.sa[i], m, 2, MSG_DONTWAIT, nullptr)};
           },
           [](Twins& tw, int i) {
             char c[2][4];
             iovec io[2] = {{c[0], 4}, {c[1], 4}};
             mmsghdr m[2] = {};
             m[0].msg_hdr.msg_iov = &io[0];
             m[1].msg_hdr.msg_iov = &io[1];
             m[0].msg_hdr.msg_iovlen = m[1].msg_hdr.msg_iovlen = 1;
             return long{
                 uepoll_recvmmsg(tw.sa[i], m, 2, MSG_DONTWAIT, nullptr)};
           })},
      {"fstatfs pipe", R(
                           [](Twins& tw, int i) {
                             struct statfs f {};
                             long r = ::fstatfs(tw.rd[i], &f);
                             return r * 1000 + (f.f_type == 0x50495045);
                           },
                           [](Twins& tw, int i) {
                             struct statfs f {};
                             long r = uepoll_fstatfs(tw.rd[i], &f);
                             return r * 1000 + (f.f_type == 0x50495045);
                           })},
      {"posix_fadvise file", R(
                                 [](Twins& tw, int i) {
                                   return ::posix_fadvise(
                                       tw.file[i], 0, 0, POSIX_FADV_SEQUENTIAL);
                                 },
                                 [](Twins& tw, int i) {
                                   return uepoll_posix_fadvise(
                                       tw.file[i], 0, 0, POSIX_FADV_SEQUENTIAL);
                                 })},
      {"posix_fadvise pipe",
       R(
           [](Twins& tw, int i) {
             return ::posix_fadvise(tw.rd[i], 0, 0, POSIX_FADV_SEQUENTIAL);
           },
           [](Twins& tw, int i) {
             return uepoll_posix_fadvise(tw.rd[i], 0, 0, POSIX_FADV_SEQUENTIAL);
           })},
      {"fallocate eventfd",
       R([](Twins& tw, int i) { return ::fallocate(tw.efd[i], 0, 0, 1); },
         [](Twins& tw, int i) {
           return uepoll_fallocate(tw.efd[i], 0, 0, 1);
         })},
      {"syncfs file",
       R([](Twins& tw, int i) { return ::syncfs(tw.file[i]); },
         [](Twins& tw, int i) { return uepoll_syncfs(tw.file[i]); })},
      {"close", R([](Twins& tw, int i) { return ::close(tw.sb[i]); },
                  [](Twins& tw, int i) { return uepoll_close(tw.sb[i]); })},
      {"close again",
       R([](Twins& tw, int i) { return ::close(tw.sb[i]); },
         [](Twins& tw, int i) { return uepoll_close(tw.sb[i]); })},
      {"read closed",
       R([&](Twins& tw, int i) { return ::read(tw.sb[i], buf, 1); },
         [&](Twins& tw, int i) { return uepoll_read(tw.sb[i], buf, 1); })},
      {"fcntl closed",
       R([](Twins& tw, int i) { return ::fcntl(tw.sb[i], F_GETFD); },
         [](Twins& tw, int i) { return uepoll_fcntl(tw.sb[i], F_GETFD); })},
      {"dup closed", R([](Twins& tw, int i) { return ::dup(tw.sb[i]); },
                       [](Twins& tw, int i) { return uepoll_dup(tw.sb[i]); })},
      {"epoll_wait closed", R(
                                [](Twins& tw, int i) {
                                  epoll_event e;
                                  return ::epoll_wait(tw.sb[i], &e, 1, 0);
                                },
                                [](Twins& tw, int i) {
                                  epoll_event e;
                                  return uepoll_epoll_wait(tw.sb[i], &e, 1, 0);
                                })},
  };
  // The rows that change state run on both twins in turn, so that each
  // twin sees the same history.
  for (const Row& row : rows) {
    Outcome k = Capture([&] { return row.call(t, 0, false); });
    Outcome u = Capture([&] { return row.call(t, 1, true); });
    EXPECT_EQ(u, k) << row.what;
  }
  t.Close();
}

// Calls that return a new kernel descriptor: the same object, at the number
// the kernel would have chosen.
TEST_F(BridgeNumbering, UepollDupsOfKernelDescriptorsAreTheKernels) {
  Keep(uepoll_eventfd(0, 0));
  int k = Keep(::eventfd(0, 0));
  int want = LowestFree();
  int d = Keep(uepoll_dup(k));
  EXPECT_EQ(d, want);
  EXPECT_EQ(Inode(d), Inode(k));
  EXPECT_FALSE(uepoll_is_uepoll_fd(d));
  EXPECT_EQ(::fcntl(d, F_GETFD), 0);
  int c = Keep(uepoll_fcntl(k, F_DUPFD_CLOEXEC, 200));
  EXPECT_EQ(c, 200);
  EXPECT_EQ(::fcntl(c, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(Keep(uepoll_fcntl(k, F_DUPFD, 200)), 201);
  int free_no = LowestFree();
  EXPECT_EQ(uepoll_dup2(k, free_no), free_no);
  Keep(free_no);
  EXPECT_EQ(Inode(free_no), Inode(k));
  EXPECT_EQ(uepoll_dup3(k, 300, O_CLOEXEC), 300);
  Keep(300);
  EXPECT_EQ(::fcntl(300, F_GETFD), FD_CLOEXEC);
  // uepoll_close closes them in the kernel.
  for (int x : {d, c, 201, free_no, 300}) {
    EXPECT_EQ(uepoll_close(x), 0);
    Drop(x);
    EXPECT_FALSE(KernelOpen(x));
  }
}

TEST_F(BridgeNumbering, Pwait3AndParamsOnAKernelEpoll) {
  int kep = Keep(::epoll_create1(0));
  int k = Keep(::eventfd(1, 0));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 9;
  ASSERT_EQ(::epoll_ctl(kep, EPOLL_CTL_ADD, k, &ev), 0);
  timespec zero{0, 0};
  uepoll_wait_args a{};
  a.timeout = &zero;
  epoll_event out[2];
  ASSERT_EQ(uepoll_epoll_pwait3(kep, out, 2, &a), 1);
  EXPECT_EQ(out[0].data.u64, 9u);
  a.min_wait_ns = 1000;
  EXPECT_ERRNO(uepoll_epoll_pwait3(kep, out, 2, &a), EOPNOTSUPP);
  // The kernel's EPIOCGPARAMS/EPIOCSPARAMS, min_wait_ns aside.
  uepoll_params p{};
  ASSERT_EQ(uepoll_epoll_get_params(kep, &p), 0);
  EXPECT_EQ(p.busy_poll_usecs, 0u);
  p.busy_poll_usecs = 25;
  ASSERT_EQ(uepoll_epoll_set_params(kep, &p), 0);
  uepoll_params back{};
  ASSERT_EQ(uepoll_epoll_get_params(kep, &back), 0);
  EXPECT_EQ(back.busy_poll_usecs, 25u);
  EXPECT_EQ(back.min_wait_ns, 0u);
  p.min_wait_ns = 5;
  EXPECT_ERRNO(uepoll_epoll_set_params(kep, &p), EINVAL);
  p.min_wait_ns = 0;
  p.pad = 1;
  EXPECT_ERRNO(uepoll_epoll_set_params(kep, &p), EINVAL);
  EXPECT_ERRNO(uepoll_epoll_get_params(k, &back), ENOTTY);
}

// dup2/dup3 across kinds: the number names the other object afterwards,
// and whatever it named before is released.
TEST_F(BridgeNumbering, Dup2OfAKernelFdOntoAUepollNumberReleasesTheObject) {
  for (bool use_dup3 : {false, true}) {
    SCOPED_TRACE(use_dup3 ? "dup3" : "dup2");
    int p[2];
    ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
    Keep(p[1]);
    long files = Files();
    int k = Keep(::eventfd(7, EFD_NONBLOCK));
    int r = use_dup3 ? uepoll_dup3(k, p[0], O_CLOEXEC) : uepoll_dup2(k, p[0]);
    ASSERT_EQ(r, p[0]) << strerror(errno);
    Keep(p[0]);
    EXPECT_FALSE(uepoll_is_uepoll_fd(p[0]));
    EXPECT_EQ(Files(), files - 1) << "the read end was released";
    EXPECT_EQ(Inode(p[0]), Inode(k));
    EXPECT_EQ(::fcntl(p[0], F_GETFD), use_dup3 ? FD_CLOEXEC : 0);
    uint64_t v = 0;
    EXPECT_EQ(uepoll_read(p[0], &v, 8), 8);
    EXPECT_EQ(v, 7u);
    // The pipe's read end is gone: writing fails EPIPE.
    EXPECT_TRUE(RaisesSigpipe(
        [&] { EXPECT_ERRNO(uepoll_write(p[1], "x", 1), EPIPE); }));
    EXPECT_EQ(uepoll_close(p[0]), 0);
    EXPECT_EQ(uepoll_close(p[1]), 0);
    Drop(p[0]);
    Drop(p[1]);
  }
}

TEST_F(BridgeNumbering, Dup2OfAUepollFdOntoAKernelNumberClosesTheKernelFile) {
  for (bool use_dup3 : {false, true}) {
    SCOPED_TRACE(use_dup3 ? "dup3" : "dup2");
    int u = Keep(uepoll_eventfd(5, EFD_NONBLOCK));
    int kp[2];
    ASSERT_EQ(::pipe2(kp, O_NONBLOCK), 0);
    Keep(kp[0]);
    long descriptors = Descriptors();
    int r = use_dup3 ? uepoll_dup3(u, kp[1], O_CLOEXEC) : uepoll_dup2(u, kp[1]);
    ASSERT_EQ(r, kp[1]) << strerror(errno);
    Keep(kp[1]);
    EXPECT_TRUE(uepoll_is_uepoll_fd(kp[1]));
    EXPECT_EQ(Descriptors(), descriptors + 1);
    // The kernel pipe lost its only writer: its reader sees end of file.
    char c;
    EXPECT_EQ(::read(kp[0], &c, 1), 0);
    // The number is the uepoll eventfd's now, a placeholder to libc.
    uint64_t v = 0;
    EXPECT_EQ(uepoll_read(kp[1], &v, 8), 8);
    EXPECT_EQ(v, 5u);
    EXPECT_ERRNO(::read(kp[1], &v, 8), EBADF);
    EXPECT_EQ(uepoll_fcntl(kp[1], F_GETFD), use_dup3 ? FD_CLOEXEC : 0);
    EXPECT_EQ(uepoll_close(kp[1]), 0);
    Drop(kp[1]);
    EXPECT_FALSE(KernelOpen(kp[1]));
    EXPECT_EQ(Descriptors(), descriptors);
  }
}

TEST_F(BridgeNumbering, Dup2BetweenUepollObjectsReleasesTheReplacedOne) {
  int a = Keep(uepoll_eventfd(1, EFD_NONBLOCK));
  int b = Keep(uepoll_eventfd(2, EFD_NONBLOCK));
  EXPECT_EQ(Files(), 2);
  ASSERT_EQ(uepoll_dup2(a, b), b);
  EXPECT_EQ(Files(), 1);
  EXPECT_EQ(Descriptors(), 2);
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(b, &v, 8), 8);
  EXPECT_EQ(v, 1u);
  EXPECT_TRUE(KernelOpen(b)) << "still reserved";
}

// A uepoll descriptor cannot join a kernel epoll (not supported yet): ADD
// fails EPERM, after the checks the kernel makes first (EFAULT, EBADF for
// epfd, EINVAL when epfd is not an epoll instance), and nothing changes.
TEST_F(BridgeNumbering, UepollDescriptorIntoAKernelEpollFailsCleanly) {
  int u = Keep(uepoll_eventfd(1, 0));
  int kep = Keep(::epoll_create1(0));
  int kefd = Keep(::eventfd(0, 0));
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT_ERRNO(uepoll_epoll_ctl(kep, EPOLL_CTL_ADD, u, nullptr), EFAULT);
  EXPECT_ERRNO(uepoll_epoll_ctl(LowestFree(), EPOLL_CTL_ADD, u, &ev), EBADF);
  EXPECT_ERRNO(uepoll_epoll_ctl(kefd, EPOLL_CTL_ADD, u, &ev), EINVAL);
  EXPECT_ERRNO(uepoll_epoll_ctl(kep, EPOLL_CTL_ADD, u, &ev), EPERM);
  epoll_event out[1];
  EXPECT_EQ(::epoll_wait(kep, out, 1, 0), 0);
}

TEST_F(BridgeNumbering, ModeCannotChangeOnceADescriptorExists) {
  int u = uepoll_eventfd(0, 0);
  ASSERT_GE(u, 0);
  EXPECT_ERRNO(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), EBUSY);
  EXPECT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_KERNEL), 0) << "no change";
  EXPECT_ERRNO(uepoll_set_fd_mode(7), EINVAL);
  EXPECT_EQ(uepoll_get_fd_mode(), UEPOLL_FD_MODE_KERNEL);
  ASSERT_EQ(uepoll_close(u), 0);
  // Even with no descriptor left: the first one fixed the mode.
  EXPECT_ERRNO(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), EBUSY);
  EXPECT_EQ(uepoll_get_fd_mode(), UEPOLL_FD_MODE_KERNEL);
  int want = LowestFree();
  int again = Keep(uepoll_eventfd(0, 0));
  EXPECT_EQ(again, want) << "still the kernel's numbering";
  EXPECT_TRUE(KernelOpen(again));
}

}  // namespace
}  // namespace uepoll_test
