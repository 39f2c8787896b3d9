// Shared pieces of the concurrency stress tests: a seed (printed, and taken
// from UEPOLL_STRESS_SEED when set, so a failing run can be repeated), and a
// budget that ends a test at an iteration count or a wall-clock cap,
// whichever comes first (UEPOLL_STRESS_SECONDS overrides the cap).
//
// A stress test must fail, never hang: every blocking wait has a timeout,
// and every "until done" loop also checks the hard deadline. Timeouts are
// long (kLongWaitMs): a wait that reaches one is reported as a lost wakeup,
// never retried, so that a lost wakeup fails the test instead of slowing it.
#ifndef UEPOLL_TESTS_STRESS_STRESS_H_
#define UEPOLL_TESTS_STRESS_STRESS_H_

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <thread>

namespace uepoll_test {

// The timeout of every wait that some event must end: 20 s, far beyond any
// scheduling delay, so reaching it means the event was lost.
inline constexpr int kLongWaitMs = 20000;

// Runs wait() and says whether it took kLongWaitMs or more: a lost wakeup
// even when the wait then returned events (uepoll harvests what is ready
// when its timeout ends, so a sleeper whose wakeup was lost returns late
// with events instead of returning 0).
template <class Wait>
int TimedWait(Wait wait, bool* slept_through) {
  auto start = std::chrono::steady_clock::now();
  int n = wait();
  *slept_through = std::chrono::steady_clock::now() - start >=
                   std::chrono::milliseconds(kLongWaitMs);
  return n;
}

inline uint64_t StressSeed(const char* test) {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("UEPOLL_STRESS_SEED")) {
      return static_cast<uint64_t>(std::strtoull(s, nullptr, 0));
    }
    return static_cast<uint64_t>(std::random_device{}()) << 32 |
           std::random_device{}();
  }();
  std::printf("[stress] %s: seed %llu (repeat with UEPOLL_STRESS_SEED=%llu)\n",
              test, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

// Iterations and wall clock. Workers poll Go(); the producer side counts.
class Budget {
 public:
  using Clock = std::chrono::steady_clock;
  Budget(long iterations, double default_seconds) : iterations_(iterations) {
    start_ = Clock::now();
    double s = default_seconds;
    if (const char* e = std::getenv("UEPOLL_STRESS_SECONDS")) s = std::atof(e);
    cap_ = Clock::now() + std::chrono::microseconds(static_cast<long>(s * 1e6));
    // After the cap, a test gets this much more to drain and check.
    hard_ = cap_ + std::chrono::seconds(5);
  }
  // Claims one iteration; false once the count or the cap is reached.
  bool Take() {
    if (done_.load(std::memory_order_relaxed)) return false;
    if (used_.fetch_add(1, std::memory_order_relaxed) >= iterations_) {
      done_.store(true, std::memory_order_relaxed);
      return false;  // used() clamps at iterations_
    }
    if (Clock::now() >= cap_) {
      // Not an iteration: undo the claim, or used() would count one more
      // round than ran (and the tests' exact totals would miss one).
      used_.fetch_sub(1, std::memory_order_relaxed);
      done_.store(true, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  bool Done() const { return done_.load(std::memory_order_relaxed); }
  bool PastHardDeadline() const { return Clock::now() >= hard_; }
  // From the budget's start to its hard deadline, rounded up: what a
  // watchdog over the whole run must allow, before its own margin.
  std::chrono::seconds span() const {
    return std::chrono::ceil<std::chrono::seconds>(hard_ - start_);
  }
  long used() const {
    long u = used_.load(std::memory_order_relaxed);
    return u < iterations_ ? u : iterations_;
  }
  bool capped_by_time() const { return used() < iterations_; }

 private:
  const long iterations_;
  std::atomic<long> used_{0};
  std::atomic<bool> done_{false};
  Clock::time_point start_, cap_, hard_;
};

// Calls that failed with an errno outside the set a race can explain: a
// count, and the last such errno and operation for the report.
class ErrnoTally {
 public:
  void Check(long r, int e, int op, std::initializer_list<int> ok) {
    if (r >= 0) return;
    for (int x : ok) {
      if (x == e) return;
    }
    bad_.fetch_add(1, std::memory_order_relaxed);
    errno_.store(e, std::memory_order_relaxed);
    op_.store(op, std::memory_order_relaxed);
  }
  long bad() const { return bad_.load(std::memory_order_relaxed); }
  int last_errno() const { return errno_.load(std::memory_order_relaxed); }
  int last_op() const { return op_.load(std::memory_order_relaxed); }

 private:
  std::atomic<long> bad_{0};
  std::atomic<int> errno_{0}, op_{0};
};

// Tokens for the delivery tests: each source holds at most one token at a
// time, and the token's value is its sequence number on that source. A
// producer writes a source only after a consumer took its previous token,
// so a lost wakeup strands that token for good (no later write to the same
// source can deliver it along with a newer one, as summed eventfd counts
// would), and the test fails when it waits for every token to come back.
// A token read twice, out of order, or read where none was in flight
// shows as a wrong value or an empty read.
class Tokens {
 public:
  explicit Tokens(int n)
      : n_(n),
        busy_(new std::atomic<bool>[static_cast<size_t>(n)]),
        sent_(new std::atomic<uint64_t>[static_cast<size_t>(n)]) {
    for (int i = 0; i < n; ++i) {
      busy_[i].store(false);
      sent_[i].store(0);
    }
  }
  // Claims a source with no token in flight, searching from `hint`; -1 if
  // every source has one.
  int Claim(int hint) {
    for (int k = 0; k < n_; ++k) {
      int s = (hint + k) % n_;
      if (!busy_[s].load(std::memory_order_relaxed) &&
          !busy_[s].exchange(true, std::memory_order_acquire)) {
        return s;
      }
    }
    return -1;
  }
  // The claimed source's next token. Published before the write that
  // carries it (release: the consumer's acquire load in Take sees it).
  uint64_t Next(int s) {
    uint64_t v = sent_[s].load(std::memory_order_relaxed) + 1;
    sent_[s].store(v, std::memory_order_release);
    total_.fetch_add(1, std::memory_order_relaxed);
    return v;
  }
  // A consumer read v from source s: true if v is the token in flight;
  // the source is then free again.
  bool Take(int s, uint64_t v) {
    if (!busy_[s].load(std::memory_order_acquire) ||
        v != sent_[s].load(std::memory_order_acquire)) {
      return false;
    }
    taken_.fetch_add(1, std::memory_order_relaxed);
    busy_[s].store(false, std::memory_order_release);  // pairs with Claim
    return true;
  }
  long sent() const { return total_.load(); }
  long taken() const { return taken_.load(); }
  // Waits (bounded) until every token was taken; false if one is stranded.
  bool WaitAllTaken(int ms) const {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (taken() != sent()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // The sources whose token was never taken, for the failure message.
  std::string Stranded() const {
    std::string out;
    for (int i = 0; i < n_; ++i) {
      if (busy_[i].load()) {
        out += " source " + std::to_string(i) + " (token " +
               std::to_string(sent_[i].load()) + ")";
      }
    }
    return out.empty() ? " none" : out;
  }

 private:
  const int n_;
  std::unique_ptr<std::atomic<bool>[]> busy_;
  std::unique_ptr<std::atomic<uint64_t>[]> sent_;
  std::atomic<long> total_{0}, taken_{0};
};

// Pins this thread and one other to two different CPUs (of those the
// process may use), so that two threads racing over a window of a few
// instructions really run at once: left to the scheduler on a loaded
// machine they often share one CPU and the race is never run. Restores
// this thread's affinity when it goes. Does nothing with fewer than 2 CPUs.
class CpuPair {
 public:
  CpuPair() {
    CPU_ZERO(&saved_);
    if (pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) != 0) {
      return;
    }
    for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; ++c) {
      if (CPU_ISSET(c, &saved_)) cpu_[n++] = c;
    }
    if (cpu_[1] >= 0) Pin(cpu_[0]);
  }
  ~CpuPair() {
    if (cpu_[1] >= 0) {
      pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
    }
  }
  CpuPair(const CpuPair&) = delete;
  CpuPair& operator=(const CpuPair&) = delete;
  // Called by the other thread.
  void PinOther() const {
    if (cpu_[1] >= 0) Pin(cpu_[1]);
  }

 private:
  static void Pin(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  }
  cpu_set_t saved_;
  int cpu_[2] = {-1, -1};
};

// Busy-waits n iterations touching no shared memory (the fence only keeps
// the compiler from removing the loop): a delay of random length shifts
// where a racing thread's write lands in the window a test aims at.
inline void SpinIterations(uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
}

// Tells a helper thread to stop (`stop`, which its loop checks) and joins
// it when the test's scope ends, also when an ASSERT returns early.
class ThreadStopper {
 public:
  ThreadStopper(std::atomic<bool>& stop, std::thread& t) : stop_(stop), t_(t) {}
  ~ThreadStopper() {
    stop_.store(true);
    if (t_.joinable()) t_.join();
  }
  ThreadStopper(const ThreadStopper&) = delete;
  ThreadStopper& operator=(const ThreadStopper&) = delete;

 private:
  std::atomic<bool>& stop_;
  std::thread& t_;
};

inline void ReportBudget(const char* test, const Budget& b, long iterations) {
  std::printf("[stress] %s: %ld of %ld iterations%s\n", test, b.used(),
              iterations,
              b.capped_by_time() ? " (stopped by the time cap)" : "");
  std::fflush(stdout);
}

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_STRESS_STRESS_H_
