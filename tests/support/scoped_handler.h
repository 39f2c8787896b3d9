// A signal disposition for the scope of a test: installed by the
// constructor, the previous one put back by the destructor, so that a
// failed ASSERT leaves no handler behind for the next test.
#ifndef UEPOLL_TESTS_SUPPORT_SCOPED_HANDLER_H_
#define UEPOLL_TESTS_SUPPORT_SCOPED_HANDLER_H_

#include <signal.h>

#include <gtest/gtest.h>

namespace uepoll_test {

class ScopedHandler {
 public:
  // fn: a handler, SIG_IGN or SIG_DFL; flags: sa_flags (SA_RESTART...).
  ScopedHandler(int sig, void (*fn)(int), int flags) : sig_(sig) {
    struct sigaction sa {};
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    EXPECT_EQ(sigaction(sig, &sa, &old_), 0);
  }
  ~ScopedHandler() { EXPECT_EQ(sigaction(sig_, &old_, nullptr), 0); }
  ScopedHandler(const ScopedHandler&) = delete;
  ScopedHandler& operator=(const ScopedHandler&) = delete;

 private:
  int sig_;
  struct sigaction old_ {};
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SUPPORT_SCOPED_HANDLER_H_
