// Helpers for tests that must know a thread is blocked in a wait before they
// act, without a sleep standing in for synchronization.
//
// A thread counts as parked once it has announced that its next step is the
// blocking call AND /proc shows it asleep inside one of the system calls a
// wait may sleep in (kSleepSyscalls), in the same call with the same
// arguments and without having run in between, across two samples taken
// 2 ms apart. Both backends really sleep in the kernel: the kernel backend in
// the call under test (epoll_wait, poll, read, ...), uepoll in the call its
// parker sleeps in, so one check serves both.
//
// Why not just state 'S': a uepoll thread blocked on an internal lock (a
// futex) between the announcement and parking also shows 'S'. A syscall
// other than the listed ones (an allocator's mmap, a lookup of /proc) is
// rejected by the list. A lock's futex is in the list (uepoll's parker may
// sleep on a futex too), so the two samples are what reject it: a thread
// waiting for a lock is woken as soon as the holder releases it, which
// changes its voluntary context-switch count; a parked waiter has nobody to
// wake it. (Only a lock holder that itself stays off the CPU for the whole
// 2 ms could still pass for a parked waiter.) Every test built on this
// helper still ends on counts that a too-early conclusion cannot fake as
// success.
//
// Every wait is bounded (kDeadline) so that a bug fails a test, never hangs it.
#ifndef UEPOLL_TESTS_THREADS_WAITER_H_
#define UEPOLL_TESTS_THREADS_WAITER_H_

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace uepoll_test {

// ThreadSanitizer runs a signal handler only when the thread leaves the
// intercepted call, and the kernel restarts a call under SA_RESTART
// without leaving it: a test that waits for the handler of a call that
// sleeps on cannot run under it.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kTsan = true;
#else
inline constexpr bool kTsan = false;
#endif
#else
inline constexpr bool kTsan = false;
#endif

inline constexpr std::chrono::seconds kDeadline{10};
// Timeout (ms) for every wait a helper thread makes.
inline constexpr int kWaitMs = 10000;

inline pid_t Gettid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// The scheduler state letter of one of our threads ('R', 'S', ...), or 0.
inline char TaskState(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // The command name may itself hold ')' or spaces: the state follows the
  // last ')'.
  std::string s(buf);
  size_t p = s.rfind(')');
  if (p == std::string::npos || p + 2 >= s.size()) return 0;
  return s[p + 2];
}

// The system calls a waiting thread may sleep in, in one place. The kernel
// backend blocks in the call under test; uepoll's parker sleeps in futex
// (a futex sleep), epoll_pwait2 or ppoll (with a per-thread kernel
// descriptor), io_uring_enter (a timer keeper in its ring,
// base/keeper_ring.h), or read (blocking I/O on its eventfd). When uepoll
// changes how it sleeps, this list is what changes.
inline constexpr long kSleepSyscalls[] = {
    SYS_read,        SYS_write,        SYS_readv,  SYS_writev,
    SYS_recvfrom,    SYS_recvmsg,      SYS_sendto, SYS_sendmsg,
    SYS_recvmmsg,    SYS_sendmmsg,     SYS_ppoll,  SYS_pselect6,
    SYS_epoll_pwait, SYS_epoll_pwait2, SYS_futex,  SYS_io_uring_enter,
#ifdef SYS_poll
    SYS_poll,
#endif
#ifdef SYS_select
    SYS_select,
#endif
#ifdef SYS_epoll_wait
    SYS_epoll_wait,
#endif
};

// What /proc says about a thread that is not running: the scheduler state,
// the system call it is blocked in (number, arguments, stack and
// instruction pointers: one line that identifies the call), and how often
// it has given up the CPU.
struct TaskSnapshot {
  char state = 0;
  std::string syscall;  // empty unless blocked in a system call
  long nr = -1;
  long switches = -1;
};

inline std::string ReadProcFile(const char* path) {
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return {};
  std::string out;
  char buf[1024];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

inline TaskSnapshot Snapshot(pid_t tid) {
  TaskSnapshot s;
  s.state = TaskState(tid);
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  std::string line = ReadProcFile(path);
  // "running", or "-1 sp pc" outside a system call, or "nr a0..a5 sp pc".
  if (!line.empty() && line[0] >= '0' && line[0] <= '9') {
    s.syscall = line;
    s.nr = std::strtol(line.c_str(), nullptr, 10);
  }
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  std::string status = ReadProcFile(path);
  size_t p = status.find("voluntary_ctxt_switches:");
  if (p != std::string::npos && (p == 0 || status[p - 1] == '\n')) {
    s.switches = std::strtol(status.c_str() + p + 24, nullptr, 10);
  }
  return s;
}

inline bool IsSleepSyscall(long nr) {
  for (long s : kSleepSyscalls) {
    if (s == nr) return true;
  }
  return false;
}

// One check: every thread of tids sleeps in one of kSleepSyscalls and
// stayed asleep in that same call for 2 ms (see the file comment for why
// twice). One 2 ms pause serves all of them.
inline bool AllSleepInSyscalls(const std::vector<pid_t>& tids) {
  std::vector<TaskSnapshot> first;
  for (pid_t tid : tids) {
    TaskSnapshot a = Snapshot(tid);
    if (a.state != 'S' || !IsSleepSyscall(a.nr) || a.switches < 0) {
      return false;
    }
    first.push_back(a);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (size_t i = 0; i < tids.size(); ++i) {
    TaskSnapshot b = Snapshot(tids[i]);
    if (b.state != 'S' || b.syscall != first[i].syscall ||
        b.switches != first[i].switches) {
      return false;
    }
  }
  return true;
}
inline bool SleepsInSyscall(pid_t tid) { return AllSleepInSyscalls({tid}); }

// The CPUs the calling thread may run on.
inline std::vector<int> AllowedCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Pins the calling thread to one CPU for the object's lifetime. Races that
// need two threads to run at the same time pin them to different CPUs:
// left to itself, a loaded scheduler may keep both on one CPU, where they
// only ever take turns and the race never happens.
class ScopedCpuPin {
 public:
  explicit ScopedCpuPin(int cpu) {
    ok_ = sched_getaffinity(0, sizeof old_, &old_) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ok_ = ok_ && sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~ScopedCpuPin() {
    if (ok_) sched_setaffinity(0, sizeof old_, &old_);
  }
  ScopedCpuPin(const ScopedCpuPin&) = delete;
  ScopedCpuPin& operator=(const ScopedCpuPin&) = delete;

 private:
  cpu_set_t old_;
  bool ok_ = false;
};

// Busy work of n loop turns (about a nanosecond each), to offset one
// racing thread from another by a varying amount: not a sleep, and never
// synchronization. The empty asm keeps the compiler from removing it.
inline void SpinDelay(int n) {
  for (int i = 0; i < n; ++i) asm volatile("" ::: "memory");
}

// Polls pred until it holds or the deadline passes; returns pred's last value.
template <class Pred>
bool Eventually(Pred pred, std::chrono::milliseconds limit = kDeadline) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// True once tid sleeps in a wait (SleepsInSyscall), within the deadline.
inline bool WaitUntilParked(pid_t tid) {
  return Eventually([tid] { return SleepsInSyscall(tid); });
}

// One helper thread running one blocking call (or a short sequence starting
// with one). fn receives an event buffer of kEvents entries; its result and
// errno are kept.
class Waiter {
 public:
  static constexpr int kEvents = 8;
  using Fn = std::function<int(epoll_event*)>;

  explicit Waiter(Fn fn) : fn_(std::move(fn)) {
    thread_ = std::thread([this] {
      tid_.store(Gettid(), std::memory_order_release);
      handle_.store(pthread_self(), std::memory_order_release);
      entered_.store(true, std::memory_order_release);
      errno = 0;
      int r = fn_(events_);
      error_ = errno;
      result_ = r;
      // release: pairs with the acquire in Done(), publishing result_,
      // error_ and events_.
      done_.store(true, std::memory_order_release);
    });
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter() { thread_.join(); }

  // True once the thread sleeps in its call; false if it returned first or
  // never slept before the deadline.
  bool Parked() const {
    return Eventually([this] {
             return Done() ||
                    (entered_.load(std::memory_order_acquire) &&
                     SleepsInSyscall(tid_.load(std::memory_order_acquire)));
           }) &&
           !Done();
  }
  bool Done() const { return done_.load(std::memory_order_acquire); }
  bool WaitDone() const {
    return Eventually([this] { return Done(); });
  }
  // Valid once Done().
  int result() const { return result_; }
  int error() const { return error_; }
  const epoll_event& event(int i) const { return events_[i]; }
  pthread_t handle() const { return handle_.load(std::memory_order_acquire); }
  pid_t tid() const { return tid_.load(std::memory_order_acquire); }

 private:
  Fn fn_;
  std::atomic<pid_t> tid_{0};
  std::atomic<pthread_t> handle_{};
  std::atomic<bool> entered_{false};
  std::atomic<bool> done_{false};
  int result_ = 0;
  int error_ = 0;
  epoll_event events_[kEvents]{};
  std::thread thread_;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_THREADS_WAITER_H_
