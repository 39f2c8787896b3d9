// Watchdog: a test whose bug is a deadlock must fail, not hang. Armed for
// the scope of a scenario; if the scope has not ended within the limit,
// the process prints what hung and aborts (a deadlocked thread cannot be
// joined, so no gtest failure could be reported after it). Every test is
// its own process under ctest, so the abort fails exactly that test.
#ifndef UEPOLL_TESTS_STRESS_WATCHDOG_H_
#define UEPOLL_TESTS_STRESS_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace uepoll_test {

class Watchdog {
 public:
  explicit Watchdog(std::string what,
                    std::chrono::seconds limit = std::chrono::seconds(30))
      : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, limit, [this] { return done_; })) {
        std::fprintf(stderr,
                     "watchdog: %s did not finish within %lld s (a deadlock "
                     "or a lost wakeup); aborting\n",
                     what_.c_str(), static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_STRESS_WATCHDOG_H_
