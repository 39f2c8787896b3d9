// Helpers for tests that must know a thread is blocked in a wait before they
// act, without a sleep standing in for synchronization.
//
// A thread counts as parked once it has announced that its next step is the
// blocking call AND /proc/self/task/<tid>/stat shows it sleeping ('S'). Both
// backends really sleep in the kernel: the kernel backend in epoll_wait or
// poll, uepoll in the epoll_pwait2/read it parks on, so one check serves both.
// Caveat: a uepoll thread that sleeps on an internal lock between the
// announcement and parking also shows 'S'; every test built on this helper
// still ends on counts that a too-early conclusion cannot fake as success.
//
// Every wait is bounded (kDeadline) so that a bug fails a test, never hangs it.
#ifndef UEPOLL_TESTS_THREADS_WAITER_H_
#define UEPOLL_TESTS_THREADS_WAITER_H_

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

namespace uepoll_test {

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
                     TaskState(tid_.load(std::memory_order_acquire)) == 'S');
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
