// Blocked: a pthread running one blocking call, which a test may signal,
// cancel (pthread_cancel) and join with a bound; std::thread can do none
// of these. Shared by tests that take a blocked thread away
// (tests/threads/handover_test.cc, tests/userobj/cancel_test.cc, and as
// CancellableCall the scenario tests, tests/scenarios/scenario.h).
#ifndef UEPOLL_TESTS_THREADS_BLOCKED_H_
#define UEPOLL_TESTS_THREADS_BLOCKED_H_

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "threads/waiter.h"

namespace uepoll_test {

// ASan poisons the redzones of each instrumented frame on entry and
// unpoisons them on return. Frames that a cancellation unwinds never
// return, and the poison they leave trips ASan's own runtime when it next
// places a local there: its sigaltstack call in __asan_handle_no_return
// (run before _Unwind_Resume by every instrumented cleanup on the way up)
// and in its thread teardown report a stack-buffer-overflow, on the
// kernel backend too (GCC 12's libasan). While a thread sleeps in its
// call, its frames stay put, so its whole stack is unpoisoned just before
// the cancel (Blocked::CancelAndJoin): ASan then misses an overflow of
// those frames' locals during the unwinding, and reports everything else.
// UnpoisonMyStack is the same, called by a thread on itself right before
// it reaches a cancellation point that will act.
inline void UnpoisonMyStack() {
#if defined(__SANITIZE_ADDRESS__)
  pthread_attr_t attr;
  void* lo = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    __asan_unpoison_memory_region(lo, size);
  }
#endif
}

// A pthread running one blocking call.
class Blocked {
 public:
  explicit Blocked(std::function<long()> fn) : fn_(std::move(fn)) {
    started_ = pthread_create(&thread_, nullptr, &Run, this) == 0;
  }
  Blocked(const Blocked&) = delete;
  Blocked& operator=(const Blocked&) = delete;
  // A call still blocked (a failed test) is kicked out of its sleep first.
  ~Blocked() {
    if (!started_ || joined_) return;
    Kick();
    pthread_join(thread_, nullptr);
  }

  // Ends the blocking call of a thread whose wakeup was lost (a later
  // event need not wake it: a pipe that is not empty wakes no reader): a
  // signal whose handler does nothing, without SA_RESTART.
  void Kick() {
    struct sigaction sa {
    }, old{};
    sa.sa_handler = [](int) {};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, &old);
    for (int i = 0; i < 100 && !returned_.load(); ++i) {
      pthread_kill(thread_, SIGUSR2);
      Eventually([this] { return returned_.load(); },
                 std::chrono::milliseconds(100));
    }
    sigaction(SIGUSR2, &old, nullptr);
  }

  pthread_t handle() const { return thread_; }
  bool started() const { return started_; }
  bool Parked() const {
    return Eventually([this] {
             return returned_.load() ||
                    (tid_.load() != 0 && SleepsInSyscall(tid_.load()));
           }) &&
           !returned_.load();
  }
  // True if the thread ended cancelled.
  bool CancelAndJoin() {
#if defined(__SANITIZE_ADDRESS__)
    // Frames a cancellation unwinds leave their redzones poisoned (above).
    if (stack_lo_ != nullptr) {
      __asan_unpoison_memory_region(stack_lo_, stack_size_);
    }
#endif
    if (pthread_cancel(thread_) != 0) return false;
    return Join() && result_ == PTHREAD_CANCELED;
  }
  // A join bounded by kDeadline; true if the thread has ended.
  bool Join() {
    if (joined_) return true;
    timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += static_cast<time_t>(kDeadline.count());
    joined_ = pthread_timedjoin_np(thread_, &result_, &until) == 0;
    return joined_;
  }
  bool returned() const { return returned_.load(); }
  long value() const { return value_.load(); }
  int error() const { return error_.load(); }

 private:
  static void* Run(void* self) {
    auto* c = static_cast<Blocked*>(self);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &c->stack_lo_, &c->stack_size_);
      pthread_attr_destroy(&attr);
    }
    c->tid_.store(Gettid());
    errno = 0;
    long v = c->fn_();
    c->error_.store(errno);
    c->value_.store(v);
    c->returned_.store(true);
    return nullptr;
  }

  std::function<long()> fn_;
  pthread_t thread_{};
  bool started_ = false;
  bool joined_ = false;
  void* result_ = nullptr;
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> returned_{false};
  std::atomic<long> value_{0};
  std::atomic<int> error_{0};
  void* stack_lo_ = nullptr;
  size_t stack_size_ = 0;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_THREADS_BLOCKED_H_
