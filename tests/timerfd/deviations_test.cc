// The timerfd rows of docs/semantics.md, pinned: each test shows uepoll's
// behaviour where it differs from the kernel's, and the kernel's beside it
// where the machine allows it.
#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "threads/waiter.h"
#include "timer/timer_queue.h"
#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

class TimerfdDeviations : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};

bool PollIn(int fd, bool kernel) {
  struct pollfd p {};
  p.fd = fd;
  p.events = POLLIN;
  int n = kernel ? int(::syscall(SYS_poll, &p, 1, kExpiryWaitMs))
                 : uepoll_poll(&p, 1, kExpiryWaitMs);
  return n == 1;
}

// D20: a read into a NULL buffer fails EFAULT before the expirations are
// consumed; the kernel consumes them, then faults on the copy.
TEST_F(TimerfdDeviations, ReadIntoNullFailsWithoutConsuming) {
  itimerspec v = Spec(1 * kMs);
  int k = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  ASSERT_GE(k, 0);
  ASSERT_EQ(::timerfd_settime(k, 0, &v, nullptr), 0);
  ASSERT_TRUE(PollIn(k, true));
  EXPECT_EQ(::syscall(SYS_read, k, nullptr, 8), -1);
  EXPECT_EQ(errno, EFAULT);
  uint64_t ticks = 0;
  EXPECT_EQ(::read(k, &ticks, 8), -1);  // consumed by the failed read
  EXPECT_EQ(errno, EAGAIN);
  ::close(k);

  int u = uepoll_timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  ASSERT_GE(u, 0);
  ASSERT_EQ(uepoll_timerfd_settime(u, 0, &v, nullptr), 0);
  ASSERT_TRUE(PollIn(u, false));
  EXPECT_EQ(uepoll_read(u, nullptr, 8), -1);
  EXPECT_EQ(errno, EFAULT);
  EXPECT_EQ(uepoll_read(u, &ticks, 8), 8);
  EXPECT_EQ(ticks, 1u);
  EXPECT_EQ(uepoll_close(u), 0);
}

// D22: arming a uepoll timer starts a thread of uepoll's own; it blocks
// every signal, so a process-directed signal never runs a handler on it.
TEST_F(TimerfdDeviations, ArmingStartsATimerThreadThatBlocksSignals) {
  // (Run alone, as CTest runs it, no thread exists yet; an earlier test in
  // the same process may have started it.)
  int u = uepoll_timerfd_create(CLOCK_MONOTONIC, 0);
  itimerspec v = Spec(3600 * kSec);
  ASSERT_EQ(uepoll_timerfd_settime(u, 0, &v, nullptr), 0);
  EXPECT_TRUE(uepoll::impl::TimerQueue::Get().thread_started());
  // The thread's signal mask, from /proc: every signal blocked.
  bool checked = false;
  ASSERT_TRUE(Eventually([&] {
    DIR* d = opendir("/proc/self/task");
    if (!d) return false;
    while (dirent* e = readdir(d)) {
      std::string base = std::string("/proc/self/task/") + e->d_name;
      FILE* f = fopen((base + "/comm").c_str(), "r");
      if (!f) continue;
      char comm[32] = {};
      if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
      fclose(f);
      if (std::string(comm) != "uepoll-timer\n") continue;
      FILE* s = fopen((base + "/status").c_str(), "r");
      char line[256];
      while (s && fgets(line, sizeof line, s)) {
        unsigned long long mask;
        if (sscanf(line, "SigBlk: %llx", &mask) == 1) {
          // Signals 1-31 but SIGKILL and SIGSTOP (which cannot be), and
          // the real-time ones above glibc's two internal signals.
          unsigned long long want = 0x7fffffffull & ~(1ull << (SIGKILL - 1)) &
                                    ~(1ull << (SIGSTOP - 1));
          EXPECT_EQ(mask & want, want) << std::hex << mask;
          EXPECT_EQ(mask >> 34, ~0ull >> 34) << std::hex << mask;
          checked = true;
        }
      }
      if (s) fclose(s);
    }
    closedir(d);
    return checked;
  }));
  EXPECT_EQ(uepoll_close(u), 0);
}

}  // namespace
}  // namespace uepoll_test
