// Small pieces every workload shares: clocks, CPU pinning, the start gate,
// failure reporting across threads, and perf's statistics.
#ifndef UEPOLL_BENCH_UTIL_H_
#define UEPOLL_BENCH_UTIL_H_

#include <stdint.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uepoll_bench {

int64_t NowNs();  // CLOCK_MONOTONIC

// CPUs this process may run on (sched_getaffinity), at least 1.
unsigned AllowedCpus();
// Pins the calling thread to the index'th allowed CPU (modulo their count),
// as perf pins worker i to CPU i % nCPUs.
void PinToCpu(unsigned index);

// What a cache line costs to move between the first two allowed CPUs right
// now: nanoseconds per round trip of two threads ping-ponging one atomic
// (about 5 ms of work), or -1 with fewer than two CPUs. On a VM this moves
// with the host's placement of the vCPUs (115 ns and 495 ns were both seen
// on the 2-core machine of BENCHMARKS.md, minutes apart), and every
// multi-threaded figure moves with it, so each measurement records it.
// -1 also when UEPOLL_BENCH_NO_RTT is set (for runs under valgrind).
double CoreRoundTripNs();

// The first error any thread hits; the measurement then stops early and is
// reported as skipped with this message rather than aborting the process.
class Failure {
 public:
  void Set(const std::string& msg);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string message() const;
  // Sleeps up to `seconds`, returning early once Set() is called.
  void SleepFor(double seconds);

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string msg_;
};

// Worker threads that start together: each calls Arrive() after its setup and
// blocks until the main thread, having seen every arrival, calls Open(). This
// keeps thread creation out of the measured interval.
class Gate {
 public:
  void Arrive();
  void WaitArrivals(unsigned n);
  void Open();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  unsigned arrived_ = 0;
  bool open_ = false;
};

// Joins threads, but gives up (and exits the process with a message) if they
// do not finish within `timeout_s`: a backend that loses a wakeup must not
// hang a whole suite run.
class ThreadGroup {
 public:
  ~ThreadGroup();
  void Spawn(std::function<void()> fn);
  void JoinAll(double timeout_s, const char* what);
  size_t size() const { return threads_.size(); }

 private:
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t finished_ = 0;
};

// Mean and standard error of the mean, as perf's util/stat.c computes them
// (Welford), so the "+- x%" figure means the same thing as perf's.
class Stats {
 public:
  void Add(double v);
  double mean() const { return mean_; }
  double RelStddevPct() const;  // 100 * stderr / mean

 private:
  long n_ = 0;
  double mean_ = 0, m2_ = 0;
};

// Syscalls made by the whole process, counted by a perf event on the
// raw_syscalls:sys_enter tracepoint that every thread created after it
// inherits. Enabling that tracepoint puts every syscall of the machine on
// the kernel's slow entry path (about 240 ns each here), so it is never open
// during a timed measurement: RunMeasurement makes a second, short "counted
// pass" of each measurement with the counter open, and takes syscalls per
// operation from that pass only.
class SyscallCounter {
 public:
  // Finds the tracepoint's id (tracefs; where it is not mounted, a child
  // process mounts it in a mount namespace of its own, so the machine's
  // mounts do not change). Call once from the main thread, before any other
  // thread exists. False, with the reason in why(), where unavailable.
  static bool Init();
  static bool available();
  static const std::string& why();
  static void Disable(const std::string& why);  // --no-syscalls

  // Open for the lifetime of the object, counting the calling thread and
  // every thread it creates from then on.
  SyscallCounter();
  ~SyscallCounter();
  SyscallCounter(const SyscallCounter&) = delete;
  SyscallCounter& operator=(const SyscallCounter&) = delete;
  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  // The running total (threads still alive included), or -1.
  int64_t Read() const;

 private:
  int fd_ = -1;
  std::string error_;
};

// True while the counted pass of a measurement runs (main thread only).
bool InCountedPass();
// How long a workload should run: `runtime`, or the counted pass's short
// time (0.1 s at most).
double PassRuntime(double runtime);

// A workload marks its measured interval with Start() and Stop(), then
// gives its operation count to Finish(): outside a counted pass all three do
// nothing.
class SyscallWindow {
 public:
  void Start();
  void Stop();
  // Records the count and the operations on r (Result::syscalls,
  // Result::syscall_ops).
  template <class R>
  void Finish(R* r, double ops) const {
    if (c1_ < 0 || c0_ < 0) return;
    r->syscalls = double(c1_ - c0_);
    r->syscall_ops = ops;
  }

 private:
  int64_t c0_ = -1, c1_ = -1;
};

// p in [0,1]; sorts v. The nearest rank (0 for an empty v).
template <class T>
T Percentile(std::vector<T>& v, double p) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Thread counts and sizes given as "1,2,4,16". False on a malformed list,
// or on a 0 unless allow_zero.
bool ParseUintList(const std::string& s, std::vector<unsigned long>* out,
                   bool allow_zero = false);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_UTIL_H_
