// Shared by the source tests: a fixture on top of the conformance helpers,
// and a scoped signal handler for the blocking-I/O signal tests.
#ifndef UEPOLL_TESTS_SOURCES_SOURCE_TEST_H_
#define UEPOLL_TESTS_SOURCES_SOURCE_TEST_H_

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "conformance/helpers.h"
#include "support/scoped_handler.h"
#include "threads/waiter.h"

namespace uepoll_test {

inline std::atomic<int> g_signals{0};

// Declared after a Waiter: if a failed assertion leaves the waiter blocked,
// calls unblock() (bounded) so that the test fails instead of hanging in
// the Waiter's join. Does nothing when the waiter finished.
class Rescue {
 public:
  Rescue(const Waiter& w, std::function<void()> unblock)
      : w_(w), unblock_(std::move(unblock)) {}
  ~Rescue() {
    for (int i = 0; i < 1000 && !w_.Done(); ++i) {
      unblock_();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  Rescue(const Rescue&) = delete;
  Rescue& operator=(const Rescue&) = delete;

 private:
  const Waiter& w_;
  std::function<void()> unblock_;
};

// Installs a counting SIGUSR1 handler, with or without SA_RESTART, for the
// scope; the previous disposition comes back at the end.
class ScopedSigusr1 {
 public:
  // The count starts at 0; the test sends no signal before this returns.
  explicit ScopedSigusr1(bool restart)
      : handler_(SIGUSR1, Count, restart ? SA_RESTART : 0) {
    g_signals.store(0);
  }

 private:
  static void Count(int) { g_signals.fetch_add(1); }
  ScopedHandler handler_;
};

class SourceTest : public ConformanceTest {
 protected:
  // Fills a non-blocking write end with writes of n bytes; returns how
  // many succeeded in full (a partial write ends the loop too).
  int FillWith(int wfd, size_t n, int limit = 100000) {
    int count = 0;
    while (count < limit && WriteBytes(wfd, n) == static_cast<ssize_t>(n)) {
      ++count;
    }
    return count;
  }
  std::string ReadString(int fd, size_t n) {
    std::string s(n, '\0');
    ssize_t r = B().read(fd, s.data(), n);
    s.resize(r < 0 ? 0 : static_cast<size_t>(r));
    return s;
  }
  ssize_t WriteString(int fd, const std::string& s) {
    return B().write(fd, s.data(), s.size());
  }
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SOURCES_SOURCE_TEST_H_
