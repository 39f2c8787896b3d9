// Shared pieces of the concurrency stress tests: a seed (printed, and taken
// from UEPOLL_STRESS_SEED when set, so a failing run can be repeated), and a
// budget that ends a test at an iteration count or a wall-clock cap,
// whichever comes first (UEPOLL_STRESS_SECONDS overrides the cap).
//
// A stress test must fail, never hang: every blocking wait has a timeout,
// and every "until done" loop also checks the hard deadline.
#ifndef UEPOLL_TESTS_STRESS_STRESS_H_
#define UEPOLL_TESTS_STRESS_STRESS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <random>

namespace uepoll_test {

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
    double s = default_seconds;
    if (const char* e = std::getenv("UEPOLL_STRESS_SECONDS")) s = std::atof(e);
    cap_ = Clock::now() + std::chrono::microseconds(static_cast<long>(s * 1e6));
    // After the cap, a test gets this much more to drain and check.
    hard_ = cap_ + std::chrono::seconds(5);
  }
  // Claims one iteration; false once the count or the cap is reached.
  bool Take() {
    if (done_.load(std::memory_order_relaxed)) return false;
    if (used_.fetch_add(1, std::memory_order_relaxed) >= iterations_ ||
        Clock::now() >= cap_) {
      done_.store(true, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  bool Done() const { return done_.load(std::memory_order_relaxed); }
  bool PastHardDeadline() const { return Clock::now() >= hard_; }
  long used() const {
    long u = used_.load(std::memory_order_relaxed);
    return u < iterations_ ? u : iterations_;
  }
  bool capped_by_time() const { return used() < iterations_; }

 private:
  const long iterations_;
  std::atomic<long> used_{0};
  std::atomic<bool> done_{false};
  Clock::time_point cap_, hard_;
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

inline void ReportBudget(const char* test, const Budget& b, long iterations) {
  std::printf("[stress] %s: %ld of %ld iterations%s\n", test, b.used(),
              iterations,
              b.capped_by_time() ? " (stopped by the time cap)" : "");
  std::fflush(stdout);
}

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_STRESS_STRESS_H_
