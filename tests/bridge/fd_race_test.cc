// The descriptor table under concurrency, on the
// kernel and on uepoll with one set of expectations:
// - dup2/dup3 onto a number that another thread is closing never fails
//   EBUSY (the kernel's EBUSY is only for a number an open has reserved
//   and not yet filled);
// - after concurrent opens and closes, a new descriptor is the lowest free
//   number;
// - a number closed on one thread and reopened on another refers to the
//   new object only, for every thread, from the moment the reopen returns.
// This file is built twice: bridge_fd_race_test (default numbering) and
// bridge_fd_race_disjoint_test (UEPOLL_FD_RACE_DISJOINT: the whole process
// in the disjoint numbering, uepoll only, since its allocator is uepoll's
// own there).
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

// ThreadSanitizer reports a close() racing with a dup2() onto the same
// descriptor as a data race on the descriptor. That race is what
// DupOntoANumberBeingClosedNeverFailsEbusy is about (on the kernel, and on
// uepoll's placeholders), so it is suppressed for those two calls only
// (tests/support/tsan_suppressions.cc). The race leaves TSan's own
// descriptor bookkeeping confused: a later test in the same process may get
// a spurious report on a descriptor call, even on the kernel backend alone.
// CTest runs each test in its own process.

namespace uepoll_test {

[[gnu::noinline]] int RacingClose(const Backend& b, int fd) {
  return b.close(fd);
}
[[gnu::noinline]] int RacingDup(const Backend& b, bool use_dup3, int src,
                                int n) {
  return use_dup3 ? b.dup3(src, n, O_CLOEXEC) : b.dup2(src, n);
}

namespace {

#ifdef UEPOLL_FD_RACE_DISJOINT
class DisjointMode : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), 0);
  }
};
[[maybe_unused]] ::testing::Environment* const g_env =
    ::testing::AddGlobalTestEnvironment(new DisjointMode);
#endif

// A thread that runs the functions given to it, one at a time, in order;
// Run() returns when the function has.
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Run(std::function<void()> fn) {
    std::unique_lock<std::mutex> l(mu_);
    job_ = std::move(fn);
    cv_.notify_all();
    cv_.wait(l, [this] { return !job_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return quit_ || job_; });
      if (quit_) return;
      job_();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool quit_ = false;
  std::thread thread_;
};

class BridgeFdRace : public BackendTest {
 protected:
  // The lowest number this backend would hand out now. On the kernel, and
  // on uepoll's default numbering, the kernel's; in the disjoint numbering,
  // the first number from UEPOLL_FD_BASE that uepoll does not hold.
  int LowestFree() {
    if (!IsKernel() && uepoll_get_fd_mode() == UEPOLL_FD_MODE_DISJOINT) {
      int fd = UEPOLL_FD_BASE;
      while (uepoll_fcntl(fd, F_GETFD) >= 0) ++fd;
      return fd;
    }
    int fd = ::fcntl(0, F_DUPFD, 0);
    ::close(fd);
    return fd;
  }
};

// One thread closes the number over and over while another dup2s (or
// dup3s) onto it: every dup succeeds with the number; no EBUSY.
TEST_P(BridgeFdRace, DupOntoANumberBeingClosedNeverFailsEbusy) {
  // Dups go on until the closer has closed the number this many times (a
  // close succeeds only on what a dup installed), or a cap.
  constexpr long kCloses = 5000;
  constexpr long kMaxDups = 2000000;
  constexpr int kHole = 32;
  for (bool use_dup3 : {false, true}) {
    SCOPED_TRACE(use_dup3 ? "dup3" : "dup2");
    int src = Eventfd(3);
    // The contested number sits above a hole of free numbers: an open
    // anywhere in the process takes the lowest free number, and an open
    // that reserved n while it was closed would make the dup's EBUSY right
    // (ThreadSanitizer opens /proc/self/maps and the binaries on the
    // closer's thread when it matches a report against the suppressions).
    int n = B().fcntl(src, F_DUPFD, LowestFree() + kHole);
    ASSERT_GE(n, 0);
    const Backend* b = &B();
    std::atomic<bool> stop{false}, running{false};
    std::atomic<long> closes{0}, close_errors{0};
    std::thread closer([&] {
      running = true;
      while (!stop.load(std::memory_order_relaxed)) {
        int r = RacingClose(*b, n);
        if (r == 0) {
          closes.fetch_add(1, std::memory_order_relaxed);
        } else if (errno != EBADF) {
          close_errors.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
    ASSERT_TRUE(Eventually([&] { return running.load(); }));
    std::map<int, long> errs;
    long dups = 0;
    while (closes.load(std::memory_order_relaxed) < kCloses &&
           dups < kMaxDups) {
      errno = 0;
      int r = RacingDup(*b, use_dup3, src, n);
      if (r != n) ++errs[errno];
      ++dups;
    }
    stop = true;
    closer.join();
    EXPECT_TRUE(errs.empty())
        << "first failure: " << strerrorname_np(errs.begin()->first) << " x"
        << errs.begin()->second;
    EXPECT_EQ(close_errors.load(), 0);
    EXPECT_GE(closes.load(), 10) << "the two threads hardly overlapped";
    RecordProperty(use_dup3 ? "dup3_closes" : "dup2_closes",
                   static_cast<int>(closes.load()));
    // The number names src's object or nothing.
    b->close(n);
  }
}

// Threads create and close descriptors at once; afterwards, with the
// process quiet, the next descriptor is the lowest free number. Each phase
// leaves some descriptors open in a pattern with holes.
TEST_P(BridgeFdRace, AfterConcurrentChurnANewDescriptorIsTheLowestFree) {
  constexpr int kThreads = 4;
  constexpr int kPhases = 300;
  constexpr int kPerThread = 64;
  const Backend* b = &B();
  for (int phase = 0; phase < kPhases; ++phase) {
    SCOPED_TRACE(phase);
    std::vector<std::vector<int>> kept(kThreads);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([b, t, phase, &kept] {
        std::vector<int> mine;
        for (int i = 0; i < kPerThread; ++i) {
          int fd = b->eventfd(0, 0);
          if (fd < 0) continue;
          mine.push_back(fd);
          // Close some of what was made, out of order, as we go.
          if ((i + t + phase) % 3 == 0) {
            size_t victim = static_cast<size_t>(i * 7 + t) % mine.size();
            b->close(mine[victim]);
            mine.erase(mine.begin() + static_cast<long>(victim));
          }
        }
        // Close all but every fifth.
        for (size_t i = 0; i < mine.size(); ++i) {
          if (i % 5 == 0) {
            kept[t].push_back(mine[i]);
          } else {
            b->close(mine[i]);
          }
        }
      });
    }
    for (auto& th : ts) th.join();
    for (int round = 0; round < 3; ++round) {
      int want = LowestFree();
      int fd = b->eventfd(0, 0);
      EXPECT_EQ(fd, want) << "round " << round;
      kept[0].push_back(fd);
    }
    for (auto& k : kept) {
      for (int fd : k) EXPECT_EQ(b->close(fd), 0);
    }
  }
}

// The pattern that defeats a lowest-free hint: numbers are freed in
// ascending order above the hint while other threads allocate, so that an
// allocation scanning past a number just before it is freed (and so not
// lowering the hint) could push the hint beyond it. Afterwards the next
// descriptor must still be the lowest free number.
TEST_P(BridgeFdRace, AllocationsRacingAscendingFreesLeaveNoHole) {
  // uepoll's own allocator (the disjoint numbering) scans a bitmap: many
  // held numbers make each scan long enough to race with the frees. The
  // kernel's numbers are bounded by RLIMIT_NOFILE.
  const bool own_allocator =
      !IsKernel() && uepoll_get_fd_mode() == UEPOLL_FD_MODE_DISJOINT;
  const int kHeld = own_allocator ? 60000 : 1024;
  constexpr int kRounds = 30;
  constexpr int kAllocators = 2;
  const Backend* b = &B();
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    std::vector<int> held;
    for (int i = 0; i < kHeld; ++i) {
      int fd = b->eventfd(0, 0);
      ASSERT_GE(fd, 0);
      held.push_back(fd);
    }
    std::sort(held.begin(), held.end());
    std::atomic<bool> go{false};
    std::vector<std::vector<int>> got(kAllocators);
    std::vector<std::thread> ts;
    ts.emplace_back([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      for (int i = kHeld / 2; i < kHeld; ++i) b->close(held[i]);
    });
    for (int a = 0; a < kAllocators; ++a) {
      ts.emplace_back([&, a] {
        while (!go.load(std::memory_order_acquire)) {
        }
        for (int i = 0; i < kHeld / 8; ++i) {
          int fd = b->eventfd(0, 0);
          if (fd >= 0) got[a].push_back(fd);
        }
      });
    }
    go.store(true, std::memory_order_release);
    for (auto& t : ts) t.join();
    int want = LowestFree();
    int fd = b->eventfd(0, 0);
    EXPECT_EQ(fd, want);
    b->close(fd);
    for (int i = 0; i < kHeld / 2; ++i) b->close(held[i]);
    for (auto& g : got) {
      for (int x : g) EXPECT_EQ(b->close(x), 0);
    }
  }
}

// A number closed on one thread and reopened on another names the new
// object alone. Probe threads read the number's status flags throughout:
// the old object has O_NONBLOCK, the new one has not. A probe that begins
// after the close returned must not see the old object; one that begins
// after the reopen returned must see the new one.
TEST_P(BridgeFdRace, ANumberReopenedOnAnotherThreadNamesTheNewObjectOnly) {
  constexpr int kRounds = 500;
  constexpr int kProbes = 2;
  const Backend* b = &B();
  Worker creator, closer, reopener;
  enum Phase : long { kOld = 0, kClosed = 1, kNew = 2, kDone = 3 };
  // round * 4 + phase, so that a probe can tell whether the round it
  // started in was still on when its call returned.
  std::atomic<long> state{kDone};
  std::atomic<int> number{-1};
  std::atomic<long> stale_after_close{0}, wrong_after_reopen{0}, probes{0};
  std::atomic<bool> quit{false};
  const int old_flags = O_RDWR | O_NONBLOCK;
  const int new_flags = O_RDWR;
  std::vector<std::thread> probers;
  for (int p = 0; p < kProbes; ++p) {
    probers.emplace_back([&] {
      while (!quit.load(std::memory_order_acquire)) {
        long s1 = state.load(std::memory_order_acquire);
        int fd = number.load(std::memory_order_acquire);
        if (fd < 0 || s1 % 4 == kDone) continue;
        int fl = b->fcntl(fd, F_GETFL, 0);
        long s2 = state.load(std::memory_order_acquire);
        // The round ended meanwhile: the number may name its successor.
        if (s2 / 4 != s1 / 4 || s2 % 4 == kDone) continue;
        probes.fetch_add(1, std::memory_order_relaxed);
        if (s1 % 4 >= kClosed && fl == old_flags) stale_after_close++;
        if (s1 % 4 == kNew && fl != new_flags) wrong_after_reopen++;
      }
    });
  }
  for (int round = 0; round < kRounds; ++round) {
    int n = -1;
    creator.Run([&] { n = b->eventfd(1, EFD_NONBLOCK); });
    ASSERT_GE(n, 0);
    // The creator uses its number once from another thread too, as a
    // program's workers would.
    closer.Run([&] {
      uint64_t v;
      EXPECT_EQ(b->read(n, &v, 8), 8);
      EXPECT_EQ(v, 1u);
    });
    number.store(n, std::memory_order_release);
    state.store(round * 4L + kOld, std::memory_order_release);
    int closed = -1;
    closer.Run([&] { closed = b->close(n); });
    ASSERT_EQ(closed, 0);
    state.store(round * 4L + kClosed, std::memory_order_release);
    int again = -1;
#ifdef UEPOLL_FD_RACE_DISJOINT
    // The disjoint numbering parks a closed number for its closer (D5):
    // another thread's create would skip it. The closer reopens it, still
    // a thread other than the first object's creator.
    Worker& reopens = IsKernel() ? reopener : closer;
#else
    Worker& reopens = reopener;
#endif
    reopens.Run([&] { again = b->eventfd(7, 0); });
    ASSERT_EQ(again, n) << "the lowest free number";
    state.store(round * 4L + kNew, std::memory_order_release);
    // Every thread, the first object's creator included, reaches the new
    // object through the number.
    uint64_t v = 0;
    creator.Run([&] { EXPECT_EQ(b->read(n, &v, 8), 8); });
    EXPECT_EQ(v, 7u);
    closer.Run([&] {
      uint64_t one = 1;
      EXPECT_EQ(b->write(n, &one, 8), 8);
    });
    EXPECT_EQ(b->read(n, &v, 8), 8);
    EXPECT_EQ(v, 1u);
    if (!IsKernel()) {
      // A probe's call in flight may still hold the first object (as a
      // syscall holds its file): it goes when that call returns.
      EXPECT_TRUE(Eventually([] {
        uepoll_live_counts c{};
        uepoll_debug_live_counts(&c);
        return c.files == 1;
      })) << "the first object outlived the calls that used it";
    }
    state.store(round * 4L + kDone, std::memory_order_release);
    number.store(-1, std::memory_order_release);
    creator.Run([&] { EXPECT_EQ(b->close(n), 0); });
  }
  quit.store(true, std::memory_order_release);
  for (auto& t : probers) t.join();
  EXPECT_EQ(stale_after_close.load(), 0);
  EXPECT_EQ(wrong_after_reopen.load(), 0);
  RecordProperty("probes", static_cast<int>(probes.load()));
}

// One call each on two threads, started together, round after round: the
// caller's thread runs call(0) and a helper thread call(1) (two threads,
// not three, so that on two CPUs both run at once). Run returns when both
// calls of the round have.
class RoundPair {
 public:
  explicit RoundPair(std::function<void(int)> call)
      : call_(std::move(call)), helper_([this] { Loop(); }) {
    // Each on a CPU of its own where the process has two: two threads the
    // scheduler left on one CPU would take turns, never race.
    have_saved_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
    int cpus[2], n = 0;
    for (int c = 0; have_saved_ && c < CPU_SETSIZE && n < 2; ++c) {
      if (CPU_ISSET(c, &saved_)) cpus[n++] = c;
    }
    if (n == 2) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[1], &one);
      pthread_setaffinity_np(helper_.native_handle(), sizeof one, &one);
      CPU_ZERO(&one);
      CPU_SET(cpus[0], &one);
      sched_setaffinity(0, sizeof one, &one);
    }
  }
  ~RoundPair() {
    quit_.store(true, std::memory_order_release);
    helper_.join();
    if (have_saved_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  void Run() {
    while (!ready_.load(std::memory_order_acquire)) std::this_thread::yield();
    ready_.store(false, std::memory_order_relaxed);
    done_.store(false, std::memory_order_relaxed);
    go_.fetch_add(1, std::memory_order_release);
    call_(0);
    while (!done_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

 private:
  void Loop() {
    for (long round = 1;; ++round) {
      ready_.store(true, std::memory_order_release);
      while (go_.load(std::memory_order_acquire) < round) {
        if (quit_.load(std::memory_order_acquire)) return;
      }
      call_(1);
      done_.store(true, std::memory_order_release);
    }
  }
  std::function<void(int)> call_;
  std::atomic<long> go_{0};  // the round the helper may run
  std::atomic<bool> ready_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> quit_{false};
  cpu_set_t saved_;  // the caller's CPUs, restored at the end
  bool have_saved_ = false;
  std::thread helper_;  // last: it uses the fields above
};

// Two threads close one number at once: one close succeeds and the other
// fails EBADF, as the kernel serializes them, and nothing is left at the
// number. A close that took the number for free while the other was still
// closing its kernel side would close that kernel file itself, and both
// would succeed (FdTable::Close reads the slot first, and goes on without
// a write only when no close or dup2 of the number is finishing).
TEST_P(BridgeFdRace, TwoClosesOfOneNumberSucceedOnce) {
  constexpr long kRounds = 20000;
  const Backend* b = &B();
  std::atomic<int> number{-1};
  int result[2] = {0, 0};
  int error[2] = {0, 0};
  RoundPair closers([&](int me) {
    errno = 0;
    result[me] = RacingClose(*b, number.load(std::memory_order_acquire));
    error[me] = errno;
  });
  long both = 0, neither = 0, wrong_errno = 0, left_open = 0;
  for (long round = 1; round <= kRounds; ++round) {
    int n = b->eventfd(0, 0);
    if (n < 0) {
      ADD_FAILURE() << "eventfd: " << strerror(errno);
      break;
    }
    number.store(n, std::memory_order_release);
    closers.Run();
    int ok = (result[0] == 0) + (result[1] == 0);
    if (ok == 2) ++both;
    if (ok == 0) ++neither;
    for (int i = 0; i < 2; ++i) {
      if (result[i] != 0 && error[i] != EBADF) ++wrong_errno;
    }
    if (b->fcntl(n, F_GETFD, 0) >= 0) {
      ++left_open;
      b->close(n);
    }
  }
  EXPECT_EQ(both, 0) << "rounds where both closes succeeded";
  EXPECT_EQ(neither, 0) << "rounds where neither close succeeded";
  EXPECT_EQ(wrong_errno, 0) << "failed closes not EBADF";
  EXPECT_EQ(left_open, 0) << "rounds that left the number open";
}

// One thread dup2s a kernel descriptor (a pipe's write end) onto a number
// while another dup2s the backend's eventfd onto it. Either may come last,
// but the backend and the kernel must then agree on what the number is:
// the eventfd (uepoll's standing on its placeholder) or the pipe. On
// uepoll, a kernel dup that did not wait for the uepoll dup2's busy bit
// could replace the placeholder after the table named the object
// (FdTable::Dup3). On the kernel, both answers come from one table.
TEST_P(BridgeFdRace, KernelAndUepollDupsOntoOneNumberLeaveTheTablesAgreeing) {
  if (!IsKernel() && uepoll_get_fd_mode() != UEPOLL_FD_MODE_KERNEL) {
    GTEST_SKIP() << "the disjoint numbering shares no number with the kernel";
  }
  constexpr long kRounds = 20000;
  const Backend* b = &B();
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  int u = b->eventfd(0, 0);
  ASSERT_GE(u, 0);
  int n = LowestFree() + 32;  // above a hole, as in the test above
  int result[2] = {0, 0};
  // One of the two starts a little later each round, by a sweep of
  // offsets either way, so that the rounds cover each call's steps.
  std::atomic<int> delay{0};
  auto wait = [](int spins) {
    for (int i = 0; i < spins; ++i) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
  };
  RoundPair dups([&](int me) {
    int d = delay.load(std::memory_order_relaxed);
    if (me == 0) {
      wait(d);
      result[0] = RacingDup(*b, false, p[1], n);
    } else {
      wait(-d);
      result[1] = RacingDup(*b, false, u, n);
    }
  });
  long failed = 0, disagree = 0;
  for (long round = 1; round <= kRounds; ++round) {
    delay.store(static_cast<int>(round * 7919 % 2048) - 1024,
                std::memory_order_relaxed);
    dups.Run();
    if (result[0] != n || result[1] != n) ++failed;
    struct stat st {};
    bool kernel_says_pipe = ::fstat(n, &st) == 0 && S_ISFIFO(st.st_mode);
    // The pipe's end is write-only, the eventfd read-write.
    bool backend_says_pipe = (b->fcntl(n, F_GETFL, 0) & O_ACCMODE) == O_WRONLY;
    if (kernel_says_pipe != backend_says_pipe) ++disagree;
    b->close(n);
  }
  EXPECT_EQ(failed, 0) << "rounds where a dup2 failed";
  EXPECT_EQ(disagree, 0) << "rounds where the two tables disagreed";
  b->close(u);
  ::close(p[0]);
  ::close(p[1]);
}

#ifdef UEPOLL_FD_RACE_DISJOINT
INSTANTIATE_TEST_SUITE_P(Backends, BridgeFdRace,
                         ::testing::Values(&UepollBackend()),
                         [](const auto& i) { return BackendName(i.param); });
#else
UEPOLL_INSTANTIATE_BACKENDS(BridgeFdRace);
#endif

}  // namespace
}  // namespace uepoll_test
