// select, pselect and ppoll over uepoll and kernel descriptors, on both
// backends, as glibc presents them: readiness bits and counts, the time
// left written back by select only, timeout validation, EBADF for a closed
// descriptor in a set, sets left alone on an error, signal masks, and
// mixed sets where either kind wakes the sleeper (fs/select.c).
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "conformance/io_helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class Select : public IoTest {
 protected:
  // A number that is not open in the kernel now (and below its table
  // size, so select checks it).
  int ClosedLowFd() {
    int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::close(fd);
    return fd;
  }
};

TEST_P(Select, readiness__bits_and_count_per_set) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  fd_set r, w;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(p[0], &r);
  FD_SET(p[1], &w);
  FD_SET(p[1], &r);  // a write end is never readable
  timeval tv{0, 0};
  int n = std::max(p[0], p[1]) + 1;
  ASSERT_EQ(B().select(n, &r, &w, nullptr, &tv), 1);
  EXPECT_FALSE(FD_ISSET(p[0], &r));
  EXPECT_FALSE(FD_ISSET(p[1], &r));
  EXPECT_TRUE(FD_ISSET(p[1], &w));
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(p[0], &r);
  FD_SET(p[1], &w);
  EXPECT_EQ(B().select(n, &r, &w, nullptr, &tv), 2);
  EXPECT_TRUE(FD_ISSET(p[0], &r));
  EXPECT_TRUE(FD_ISSET(p[1], &w));
}

TEST_P(Select, readiness__one_descriptor_in_two_sets_counts_twice) {
  int sv[2];
  Pair(sv, SOCK_STREAM, SOCK_NONBLOCK);
  ASSERT_EQ(Send(sv[0], "x"), 1);
  fd_set r, w, e;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_ZERO(&e);
  FD_SET(sv[1], &r);
  FD_SET(sv[1], &w);
  FD_SET(sv[1], &e);
  timeval tv{0, 0};
  EXPECT_EQ(B().select(sv[1] + 1, &r, &w, &e, &tv), 2);
  EXPECT_FALSE(FD_ISSET(sv[1], &e));
}

TEST_P(Select, readiness__hangup_is_readable_error_is_both) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  int q[2];
  Pipe(q, O_NONBLOCK);
  ASSERT_EQ(Close(p[1]), 0);  // p[0]: HUP
  ASSERT_EQ(Close(q[0]), 0);  // q[1]: ERR
  fd_set r, w;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_SET(p[0], &r);
  FD_SET(q[1], &r);
  FD_SET(q[1], &w);
  timeval tv{0, 0};
  EXPECT_EQ(B().select(std::max(p[0], q[1]) + 1, &r, &w, nullptr, &tv), 3);
}

TEST_P(Select, timeout__time_left_is_written_back) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  timeval tv{0, 50000};
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), 0);
  EXPECT_ELAPSED(t0, 50'000'000);
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 0);
  EXPECT_FALSE(FD_ISSET(p[0], &r)) << "a timeout clears the sets";
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  FD_SET(p[0], &r);
  tv = {100, 0};
  EXPECT_EQ(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), 1);
  EXPECT_EQ(tv.tv_sec, 99) << "a ready select took (much) less than 1 s";
  EXPECT_GT(tv.tv_usec, 0);
}

// As glibc's select presents it: tv_usec (an int) folds into seconds
// before the kernel's check.
TEST_P(Select, timeout__microseconds_fold_into_seconds) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  timeval tv{0, 1000000};  // = 1 s: valid
  EXPECT_EQ(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), 1);
  EXPECT_EQ(tv.tv_sec, 0);
  // glibc refuses a negative tv_usec itself (the raw syscall would fold
  // {2, -1000000} into 1 s).
  tv = {2, -1000000};
  EXPECT_ERRNO(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), EINVAL);
  tv = {0, -1};
  EXPECT_ERRNO(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), EINVAL);
  tv = {-1, 0};
  EXPECT_ERRNO(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), EINVAL);
  tv = {0, 0};
  EXPECT_ERRNO(B().select(-1, &r, nullptr, nullptr, &tv), EINVAL);
}

// The time left, for every timeout glibc accepts: the kernel keeps its end
// time as a timespec (now + timeout, saturated at {INT64_MAX s, 0}), so
// even a timeout of INT64_MAX seconds writes back the time left, never
// {0, 0}. Each answer must lie in the window the clock readings around
// the call allow (tv_usec truncates: 1 us of slack below).
__extension__ typedef __int128 Ns;
constexpr Ns kSec = 1000000000;

bool LeftWithin(const timeval& tv, Ns lo, Ns hi) {
  Ns left = Ns{tv.tv_sec} * kSec + Ns{tv.tv_usec} * 1000;
  return tv.tv_usec >= 0 && tv.tv_usec < 1000000 && left >= lo - 1000 &&
         left <= hi;
}

TEST_P(Select, timeout__time_left_of_huge_and_odd_timeouts) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  const Ns kMax = Ns{INT64_MAX} * kSec;  // the saturated end time
  struct Case {
    int64_t sec;
    long usec;
    bool saturates;  // the end time is {INT64_MAX, 0}
    Ns timeout;      // else: the timeout as the kernel takes it
  } cases[] = {
      {INT64_MAX, 999999, true, 0},  // the largest timeval glibc accepts
      {INT64_MAX, 0, true, 0},
      {INT64_MAX, 1999999, true, 0},  // tv_usec overflows tv_sec
      {INT64_MAX - 100, 2000000, true, 0},
      {int64_t{1} << 62, 0, false, (Ns{1} << 62) * kSec},
      {9223372036, 0, false, 9223372036 * kSec},    // just below KTIME_MAX
      {9223372037, 0, false, 9223372037 * kSec},    // just above it
      {0, 2000000, false, 2 * kSec},                // tv_usec folds
      {3, (1L << 32) + 5, false, 3 * kSec + 5000},  // tv_usec is an int
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.sec) + " s " + std::to_string(c.usec) +
                 " us");
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    timeval tv{c.sec, c.usec};
    Ns before = MonotonicNs();
    ASSERT_EQ(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), 1);
    Ns after = MonotonicNs();
    if (c.saturates) {
      EXPECT_TRUE(LeftWithin(tv, kMax - after, kMax - before))
          << tv.tv_sec << " s " << tv.tv_usec << " us";
    } else {
      EXPECT_TRUE(LeftWithin(tv, c.timeout - (after - before), c.timeout))
          << tv.tv_sec << " s " << tv.tv_usec << " us";
    }
  }
  // tv_usec's int is 0: a zero timeout, and glibc writes its {0, 0} back.
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  timeval tv{0, 1L << 32};
  ASSERT_EQ(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), 1);
  EXPECT_EQ(tv.tv_sec, 0);
  EXPECT_EQ(tv.tv_usec, 0);
  // A negative int there is refused, and nothing is written back.
  tv = {7, 1L << 31};
  EXPECT_ERRNO(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), EINVAL);
  EXPECT_EQ(tv.tv_sec, 7);
  EXPECT_EQ(tv.tv_usec, 1L << 31);
  // An error found after the timeout was taken still writes the time left.
  int closed = ClosedLowFd();
  FD_SET(closed, &r);
  tv = {100, 0};
  EXPECT_ERRNO(
      B().select(std::max(p[0], closed) + 1, &r, nullptr, nullptr, &tv), EBADF);
  EXPECT_EQ(tv.tv_sec, 99);
}

TEST_P(Select, ebadf__closed_descriptor_in_a_set_leaves_the_sets_alone) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  int closed = ClosedLowFd();
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  FD_SET(closed, &r);
  timeval tv{0, 0};
  EXPECT_ERRNO(
      B().select(std::max(p[0], closed) + 1, &r, nullptr, nullptr, &tv), EBADF);
  EXPECT_TRUE(FD_ISSET(p[0], &r));
  EXPECT_TRUE(FD_ISSET(closed, &r));
  // Beyond nfds it is not looked at.
  FD_CLR(closed, &r);
  if (closed > p[0]) {
    FD_SET(closed, &r);
    EXPECT_EQ(B().select(p[0] + 1, &r, nullptr, nullptr, &tv), 1);
  }
}

// A set may hold kernel and uepoll descriptors; either wakes the sleeper.
TEST_P(Select, mixed__either_kind_wakes_a_blocked_select) {
  int up[2];
  Pipe(up, O_NONBLOCK);
  int kp[2];
  KernelPipe(kp, O_NONBLOCK);
  for (int writer : {0, 1}) {
    SCOPED_TRACE(writer);
    fd_set r;
    Waiter w([&](epoll_event*) {
      FD_ZERO(&r);
      FD_SET(up[0], &r);
      FD_SET(kp[0], &r);
      timeval tv{10, 0};
      return B().select(std::max(up[0], kp[0]) + 1, &r, nullptr, nullptr, &tv);
    });
    ASSERT_TRUE(w.Parked());
    int wfd = writer == 0 ? up[1] : kp[1];
    ASSERT_EQ(B().write(wfd, "x", 1), 1);
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 1);
    EXPECT_EQ(FD_ISSET(up[0], &r) != 0, writer == 0);
    EXPECT_EQ(FD_ISSET(kp[0], &r) != 0, writer == 1);
    char c;
    ASSERT_EQ(B().read(writer == 0 ? up[0] : kp[0], &c, 1), 1);
  }
}

TEST_P(Select, pselect__timeout_not_written_back_and_validated) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  timespec ts{0, 20'000'000};
  EXPECT_EQ(B().pselect(p[0] + 1, &r, nullptr, nullptr, &ts, nullptr), 0);
  EXPECT_EQ(ts.tv_nsec, 20'000'000);
  ts = {0, 1'000'000'000};
  EXPECT_ERRNO(B().pselect(p[0] + 1, &r, nullptr, nullptr, &ts, nullptr),
               EINVAL);
  ts = {-1, 0};
  EXPECT_ERRNO(B().pselect(p[0] + 1, &r, nullptr, nullptr, &ts, nullptr),
               EINVAL);
}

std::atomic<int> g_usr2{0};

// The mask is installed for the sleep only: a signal blocked outside,
// unblocked by the mask, interrupts the wait and its handler runs.
TEST_P(Select, masks__pselect_and_ppoll_sleep_under_the_mask) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) { g_usr2.fetch_add(1); };
  sigaction(SIGUSR2, &sa, &old);
  sigset_t block, old_mask, wait_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  pthread_sigmask(SIG_BLOCK, nullptr, &wait_mask);
  sigdelset(&wait_mask, SIGUSR2);
  for (int which : {0, 1}) {
    SCOPED_TRACE(which);
    g_usr2.store(0);
    ASSERT_EQ(raise(SIGUSR2), 0);  // pending, blocked
    EXPECT_EQ(g_usr2.load(), 0);
    if (which == 0) {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(p[0], &r);
      timespec ts{5, 0};
      EXPECT_ERRNO(B().pselect(p[0] + 1, &r, nullptr, nullptr, &ts, &wait_mask),
                   EINTR);
    } else {
      pollfd pf{p[0], POLLIN, 0};
      timespec ts{5, 0};
      EXPECT_ERRNO(B().ppoll(&pf, 1, &ts, &wait_mask), EINTR);
    }
    EXPECT_EQ(g_usr2.load(), 1);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGUSR2, &old, nullptr);
}

// A zero timeout too: the kernel installs the mask before it looks, so a
// pending signal the mask unblocks fails the call with EINTR and its
// handler runs inside it, unless a descriptor is ready (then the count,
// and the signal stays pending under the caller's own mask).
TEST_P(Select, masks__zero_timeout_runs_a_pending_handler_the_mask_unblocks) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) { g_usr2.fetch_add(1); };
  sigaction(SIGUSR2, &sa, &old);
  sigset_t block, old_mask, wait_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  pthread_sigmask(SIG_BLOCK, nullptr, &wait_mask);
  sigdelset(&wait_mask, SIGUSR2);
  auto call = [&](int which, int* fd_ready) {
    timespec zero{0, 0};
    if (which == 0) {
      fd_set r;
      FD_ZERO(&r);
      FD_SET(p[0], &r);
      int n = B().pselect(p[0] + 1, &r, nullptr, nullptr, &zero, &wait_mask);
      *fd_ready = n > 0 && FD_ISSET(p[0], &r);
      return n;
    }
    pollfd pf{p[0], POLLIN, 0};
    int n = B().ppoll(&pf, 1, &zero, &wait_mask);
    *fd_ready = n > 0 && pf.revents == POLLIN;
    return n;
  };
  for (int which : {0, 1}) {
    SCOPED_TRACE(which == 0 ? "pselect" : "ppoll");
    g_usr2.store(0);
    ASSERT_EQ(raise(SIGUSR2), 0);  // pending, blocked
    int ready = 0;
    EXPECT_ERRNO(call(which, &ready), EINTR);
    EXPECT_EQ(g_usr2.load(), 1) << "the handler ran inside the call";
    // Nothing pending any more: a plain zero-timeout answer.
    EXPECT_EQ(call(which, &ready), 0);
    // Ready descriptors win; the signal stays pending.
    ASSERT_EQ(WriteStr(p[1], "x"), 1);
    ASSERT_EQ(raise(SIGUSR2), 0);
    EXPECT_EQ(call(which, &ready), 1);
    EXPECT_TRUE(ready);
    EXPECT_EQ(g_usr2.load(), 1);
    ASSERT_EQ(ReadStr(p[0], 1), "x");
    // The mask the signal waits under is the caller's: unblocked, it runs.
    pthread_sigmask(SIG_UNBLOCK, &block, nullptr);
    EXPECT_EQ(g_usr2.load(), 2);
    pthread_sigmask(SIG_BLOCK, &block, nullptr);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGUSR2, &old, nullptr);
}

TEST_P(Select, ppoll__timeout_not_written_back_and_validated) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  pollfd pf{p[0], POLLIN, 0};
  timespec ts{0, 20'000'000};
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().ppoll(&pf, 1, &ts, nullptr), 0);
  EXPECT_ELAPSED(t0, 20'000'000);
  EXPECT_EQ(ts.tv_nsec, 20'000'000);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  ts = {5, 0};
  EXPECT_EQ(B().ppoll(&pf, 1, &ts, nullptr), 1);
  EXPECT_EQ(pf.revents, POLLIN);
  EXPECT_EQ(ts.tv_sec, 5);
  ts = {0, -1};
  EXPECT_ERRNO(B().ppoll(&pf, 1, &ts, nullptr), EINVAL);
  ts = {-1, 0};
  EXPECT_ERRNO(B().ppoll(&pf, 1, &ts, nullptr), EINVAL);
  ts = {0, 0};
  EXPECT_EQ(B().ppoll(&pf, 1, &ts, nullptr), 1);
}

TEST_P(Select, ppoll__nfds_over_rlimit_is_einval_before_the_array) {
  struct rlimit rl;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  timespec ts{0, 0};
  EXPECT_ERRNO(B().ppoll(nullptr, rl.rlim_cur + 1, &ts, nullptr), EINVAL);
  EXPECT_ERRNO(B().ppoll(nullptr, 1, &ts, nullptr), EFAULT);
}

// A uepoll set of 1024 descriptors (FD_SETSIZE) answers like the kernel's.
TEST_P(Select, fd_setsize__the_whole_set_is_read) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(p[0], &r);
  timeval tv{0, 0};
  EXPECT_EQ(B().select(FD_SETSIZE, &r, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(p[0], &r));
}

// The kernel's descriptor table size (fdt->max_fds), or -1. System calls
// and the stack only: a fork child calls it too.
int KernelTableSize() {
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "\nFDSize:");
  if (!at) return -1;
  at += sizeof "\nFDSize:" - 1;
  while (*at == ' ' || *at == '\t') ++at;
  int size = 0;
  for (; *at >= '0' && *at <= '9'; ++at) size = size * 10 + (*at - '0');
  return size > 0 ? size : -1;
}

// An nfds past the kernel's descriptor table: the kernel reads and writes
// only as many bits as its table has slots. Within one fd_set
// (select(FD_SETSIZE, ...) in a process with a smaller table), and far
// beyond the caller's sets (select(getdtablesize(), ...)). The bits past
// the table here are a pattern that must come back as it was and never be
// taken for descriptors.
TEST_P(Select, nfds__beyond_the_table_only_the_tables_bits_are_touched) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  const int table = KernelTableSize();
  ASSERT_GT(table, p[0]);
  constexpr uint64_t kPattern = 0xa5a5a5a5a5a5a5a5u;
  std::vector<int> sizes = {4 * std::max(table, FD_SETSIZE)};
  if (table < FD_SETSIZE) sizes.push_back(FD_SETSIZE);
  for (int nfds : sizes) {
    SCOPED_TRACE(nfds);
    std::vector<uint64_t> words(static_cast<size_t>(nfds) / 64, kPattern);
    auto* r = reinterpret_cast<fd_set*>(words.data());
    auto untouched = [&] {
      int touched = 0;
      for (size_t i = static_cast<size_t>(table) / 64; i < words.size(); ++i) {
        touched += words[i] != kPattern;
      }
      return touched == 0;
    };
    std::memset(words.data(), 0, static_cast<size_t>(table) / 8);
    FD_SET(p[0], r);
    timeval tv{0, 0};
    EXPECT_EQ(B().select(nfds, r, nullptr, nullptr, &tv), 1);
    EXPECT_TRUE(FD_ISSET(p[0], r));
    EXPECT_TRUE(untouched());
    std::memset(words.data(), 0, static_cast<size_t>(table) / 8);
    FD_SET(p[0], r);
    timespec ts{0, 0};
    EXPECT_EQ(B().pselect(nfds, r, nullptr, nullptr, &ts, nullptr), 1);
    EXPECT_TRUE(untouched());
    // A timeout writes the table's bits (all clear) and no others.
    std::memset(words.data(), 0, static_cast<size_t>(table) / 8);
    FD_SET(p[1], r);
    EXPECT_EQ(B().select(nfds, r, nullptr, nullptr, &tv), 0);
    EXPECT_FALSE(FD_ISSET(p[1], r));
    EXPECT_TRUE(untouched());
  }
}

// The same with sets that end where the table does, at the end of the
// mapped memory: the bits past the table are not even readable, and the
// kernel never reads them.
TEST_P(Select, nfds__beyond_the_table_sets_may_end_with_the_table) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  const int table = KernelTableSize();
  ASSERT_GT(table, p[0]);
  const long page = ::sysconf(_SC_PAGESIZE);
  const long len = (table / 8 + page - 1) / page * page;
  auto* m =
      static_cast<char*>(::mmap(nullptr, len + page, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(::mprotect(m + len, page, PROT_NONE), 0);
  auto* r = reinterpret_cast<fd_set*>(m + len - table / 8);
  std::memset(r, 0, static_cast<size_t>(table) / 8);
  FD_SET(p[0], r);
  timeval tv{0, 0};
  // Past one fd_set: the kernel's clamp (within one, select reads it).
  EXPECT_EQ(
      B().select(4 * std::max(table, FD_SETSIZE), r, nullptr, nullptr, &tv), 1);
  EXPECT_TRUE(FD_ISSET(p[0], r));
  ::munmap(m, len + page);
}

// The table grows when a number past it is taken, and never shrinks: a
// bit there is read once the table holds it, and once that number is
// closed again it is a closed descriptor within the table (EBADF), no
// longer a bit past it.
TEST_P(Select, nfds__a_grown_table_is_read_to_its_new_end) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  const int table = KernelTableSize();
  const int high = table + table / 2;
  struct rlimit rl {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (high >= static_cast<long>(rl.rlim_cur)) {
    GTEST_SKIP() << "the table (" << table << " slots, grown by the tests "
                 << "run before in this process) cannot grow under the "
                 << "limit; alone, as ctest runs it, it can";
  }
  const int nfds = 4 * table;
  std::vector<uint64_t> words(static_cast<size_t>(nfds) / 64, 0);
  auto* r = reinterpret_cast<fd_set*>(words.data());
  auto fill = [&] {
    std::fill(words.begin(), words.end(), 0);
    FD_SET(p[0], r);
    FD_SET(high, r);
  };
  fill();
  timeval tv{0, 0};
  EXPECT_EQ(B().select(nfds, r, nullptr, nullptr, &tv), 1)
      << "past the table: ignored";
  EXPECT_TRUE(FD_ISSET(p[0], r));
  EXPECT_TRUE(FD_ISSET(high, r)) << "nor written";
  ASSERT_EQ(B().dup2(p[0], high), high);
  EXPECT_GT(KernelTableSize(), high);
  fill();
  EXPECT_EQ(B().select(nfds, r, nullptr, nullptr, &tv), 2);
  EXPECT_TRUE(FD_ISSET(p[0], r));
  EXPECT_TRUE(FD_ISSET(high, r));
  ASSERT_EQ(B().close(high), 0);
  fill();
  EXPECT_ERRNO(B().select(nfds, r, nullptr, nullptr, &tv), EBADF);
  EXPECT_TRUE(FD_ISSET(high, r)) << "the sets are left alone on an error";
}

// A select past the table that sleeps until another thread writes: it
// ends as one with a zero timeout does, the table's bits written and no
// others.
TEST_P(Select, nfds__beyond_the_table_a_sleeping_select_is_woken) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  const int table = KernelTableSize();
  ASSERT_GT(table, p[1]);
  constexpr uint64_t kPattern = 0xa5a5a5a5a5a5a5a5u;
  const int nfds = 4 * std::max(table, FD_SETSIZE);
  std::vector<uint64_t> words(static_cast<size_t>(nfds) / 64, kPattern);
  std::memset(words.data(), 0, static_cast<size_t>(table) / 8);
  auto* r = reinterpret_cast<fd_set*>(words.data());
  FD_SET(p[0], r);
  Waiter w([&](epoll_event*) {
    timeval tv{kWaitMs / 1000, 0};
    return B().select(nfds, r, nullptr, nullptr, &tv);
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_TRUE(FD_ISSET(p[0], r));
  int touched = 0;
  for (size_t i = static_cast<size_t>(table) / 64; i < words.size(); ++i) {
    touched += words[i] != kPattern;
  }
  EXPECT_EQ(touched, 0);
}

// A fork child's table has as many slots as the numbers open at the fork
// need (the kernel's dup_fd), which may be fewer than the parent's table
// grew to. What the parent learned of its own table does not carry over:
// the child's select reads its sets only to its own table's end, here
// where its sets end and its mapping with them.
TEST_P(Select, nfds__a_fork_child_reads_only_its_own_table) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteStr(p[1], "x"), 1);
  const int table = KernelTableSize();
  const int high = 2 * table + table / 2;
  struct rlimit rl {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (high >= static_cast<long>(rl.rlim_cur)) {
    GTEST_SKIP() << "the table (" << table << " slots) cannot grow under "
                 << "the limit";
  }
  ASSERT_EQ(B().dup2(p[0], high), high);
  const int grown = KernelTableSize();
  ASSERT_GT(grown, high);
  const int nfds = 4 * std::max(grown, FD_SETSIZE);
  std::vector<uint64_t> words(static_cast<size_t>(nfds) / 64, 0);
  auto* set = reinterpret_cast<fd_set*>(words.data());
  FD_SET(p[0], set);
  timeval tv{0, 0};
  // The parent reads its grown table (and uepoll learns its size).
  ASSERT_EQ(B().select(nfds, set, nullptr, nullptr, &tv), 1);
  ASSERT_EQ(B().close(high), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int own = KernelTableSize();
    if (own <= p[0] || own >= grown) ::_exit(2);
    const long page = ::sysconf(_SC_PAGESIZE);
    const long len = (own / 8 + page - 1) / page * page;
    auto* m =
        static_cast<char*>(::mmap(nullptr, len + page, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (m == MAP_FAILED || ::mprotect(m + len, page, PROT_NONE) != 0) {
      ::_exit(4);
    }
    auto* r = reinterpret_cast<fd_set*>(m + len - own / 8);
    std::memset(r, 0, static_cast<size_t>(own) / 8);
    FD_SET(p[0], r);
    timeval zero{0, 0};
    int n = B().select(nfds, r, nullptr, nullptr, &zero);
    ::_exit(n == 1 && FD_ISSET(p[0], r) ? 0 : 3);
  }
  int status = 0;
  bool reaped =
      Eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
  if (!reaped) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(reaped) << "the child's select did not return";
  ASSERT_TRUE(WIFEXITED(status))
      << "the child's select died of signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 2) {
    GTEST_SKIP() << "the child's table is not smaller than the parent's "
                 << grown << " slots";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the select's result, 4: mmap";
}

UEPOLL_INSTANTIATE_BACKENDS(Select);

}  // namespace
}  // namespace uepoll_test
