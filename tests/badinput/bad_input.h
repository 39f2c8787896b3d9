// Table-driven bad-input checks: each row is one failing call with the errno
// the kernel gives. Every row runs against a fresh set of objects (Env) and,
// after the failure, the runner checks that nothing observable changed:
// descriptors (no leak, no close), the epoll item, eventfd count, pipe and
// socket contents and flags.
#ifndef UEPOLL_TESTS_BADINPUT_BAD_INPUT_H_
#define UEPOLL_TESTS_BADINPUT_BAD_INPUT_H_

#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {

struct Env {
  const Backend* b;
  int ep;                  // watches efd: EPOLLIN, data kItemData
  int efd;                 // eventfd, count 1
  int rd, wr;              // pipe holding "abc"
  int s0, s1;              // socketpair, "xy" unread at s0
  int orphan;              // pipe write end whose reader is closed
  int shut;                // socket end shut down for writing
  int shut_peer;           // its peer
  int file;                // regular file (kernel only; -1 on uepoll)
  int closed;              // certainly not open
  std::vector<int>* made;  // descriptors a row created, closed afterwards
};

inline constexpr uint64_t kItemData = 42;

enum class State {
  kKept,       // the failure must leave everything as it was
  kMayChange,  // the kernel itself changes state (noted per row)
};

struct BadRow {
  const char* what;
  long (*call)(Env&);
  int err;
  State state = State::kKept;
  bool kernel_only = false;
};

// Success rows: errno must be left untouched.
struct GoodRow {
  const char* what;
  long (*call)(Env&);
};

class BadInputTest : public ConformanceTest {
 protected:
  Env MakeEnv();
  // Runs every row on a fresh Env; checks errno and unchanged state.
  void RunBad(const BadRow* rows, size_t n);
  void RunGood(const GoodRow* rows, size_t n);

 private:
  void ExpectUnchanged(Env& e, int next_fd);
  void Release(Env& e);
  std::vector<int> made_;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_BADINPUT_BAD_INPUT_H_
