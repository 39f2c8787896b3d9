// Shared scaffolding of the scenario tests (issue 15): whole-program
// situations that the unit-level suites do not reach (pthread_cancel of a
// blocked call, fork and closefrom, exec, descriptor-table races), on both
// backends with one set of expectations wherever the kernel has the
// behaviour.
//
// Some of these tests fail on uepoll until the fixes of issue 15's bugs land;
// each such test says so ("fails on uepoll before the fix of bug N"). They
// live in their own binary so that they can be merged with those fixes.
#ifndef UEPOLL_TESTS_SCENARIOS_SCENARIO_H_
#define UEPOLL_TESTS_SCENARIOS_SCENARIO_H_

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <functional>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {

// A pthread running one blocking call, which the test cancels once the
// thread sleeps in it. std::thread cannot be cancelled and joined with a
// bound; this can.
class CancellableCall {
 public:
  explicit CancellableCall(std::function<long()> fn) : fn_(std::move(fn)) {
    started_ = pthread_create(&thread_, nullptr, &Run, this) == 0;
  }
  CancellableCall(const CancellableCall&) = delete;
  CancellableCall& operator=(const CancellableCall&) = delete;
  ~CancellableCall() {
    if (started_ && !joined_) pthread_join(thread_, nullptr);
  }

  bool started() const { return started_; }
  // True once the thread sleeps in its call (and has not returned).
  bool Parked() const {
    return Eventually([this] {
             return returned_.load() ||
                    (tid_.load() != 0 && SleepsInSyscall(tid_.load()));
           }) &&
           !returned_.load();
  }
  // pthread_cancel, then a join bounded by kDeadline. True if the thread
  // ended cancelled; false if it returned normally or is still running
  // (then unblock() must let it finish before the object is destroyed).
  bool CancelAndJoin() {
    ForgetRedzonesOfSleepingThread();
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
  // Whether the call returned (instead of being cancelled), and its value.
  bool returned() const { return returned_.load(); }
  long value() const { return value_.load(); }

 private:
  static void* Run(void* self) {
    auto* c = static_cast<CancellableCall*>(self);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &c->stack_lo_, &c->stack_size_);
      pthread_attr_destroy(&attr);
    }
    c->tid_.store(Gettid());
    long v = c->fn_();
    c->value_.store(v);
    c->returned_.store(true);
    return nullptr;
  }

  // ASan poisons the redzones of each instrumented frame on entry and
  // unpoisons them on return. Frames that a cancellation unwinds never
  // return, and the poison they leave trips ASan's own runtime when it next
  // places a local there: its sigaltstack call in __asan_handle_no_return
  // (run before _Unwind_Resume by every instrumented cleanup on the way
  // up) and in its thread teardown report a stack-buffer-overflow, on the
  // kernel backend too (GCC 12's libasan). While the thread sleeps in its
  // call, its frames stay put, so its whole stack is unpoisoned just before
  // the cancel: ASan then misses an overflow of those frames' locals during
  // the unwinding, and reports everything else.
  void ForgetRedzonesOfSleepingThread() {
#if defined(__SANITIZE_ADDRESS__)
    if (stack_lo_ != nullptr) {
      __asan_unpoison_memory_region(stack_lo_, stack_size_);
    }
#endif
  }

  std::function<long()> fn_;
  pthread_t thread_{};
  bool started_ = false;
  bool joined_ = false;
  void* result_ = nullptr;
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> returned_{false};
  std::atomic<long> value_{0};
  void* stack_lo_ = nullptr;  // written by the thread before tid_
  size_t stack_size_ = 0;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SCENARIOS_SCENARIO_H_
