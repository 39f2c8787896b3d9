// Helpers shared by the conformance and bad-input suites: a fixture with
// short forms for the calls every differential test repeats. Everything goes
// through B(), so one body runs on the kernel and on uepoll.
#ifndef UEPOLL_TESTS_CONFORMANCE_HELPERS_H_
#define UEPOLL_TESTS_CONFORMANCE_HELPERS_H_

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <vector>

#include "support/fixture.h"

namespace uepoll_test {

// One reported event, comparable as a value so a whole harvest can be
// checked with one EXPECT_EQ against the expected sequence.
struct Ev {
  uint32_t events;
  uint64_t data;
  bool operator==(const Ev& o) const {
    return events == o.events && data == o.data;
  }
};
inline std::ostream& operator<<(std::ostream& os, const Ev& e) {
  return os << "{events=0x" << std::hex << e.events << std::dec
            << ", data=" << e.data << "}";
}

// A failing call must return -1 and set exactly this errno. errno is cleared
// first so that a stale value cannot make the check pass.
#define EXPECT_ERRNO(expr, err)                                       \
  do {                                                                \
    errno = 0;                                                        \
    long r_ = static_cast<long>(expr);                                \
    int e_ = errno;                                                   \
    EXPECT_EQ(r_, -1) << #expr;                                       \
    EXPECT_EQ(e_, (err)) << #expr << ": got " << strerrorname_np(e_); \
  } while (0)

inline int64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A timed call that began at t0 (MonotonicNs) took at least want_ns, and no
// more than a generous bound (10x + 2 s): a loaded machine may return late,
// never early, and only a hang or a lost timeout is seconds late.
inline int64_t GenerousBoundNs(int64_t want_ns) {
  return 10 * want_ns + 2'000'000'000;
}
#define EXPECT_ELAPSED(t0, want_ns)                                  \
  do {                                                               \
    const int64_t el_ = ::uepoll_test::MonotonicNs() - (t0);         \
    const int64_t want_ = (want_ns);                                 \
    EXPECT_GE(el_, want_) << "returned early";                       \
    EXPECT_LE(el_, ::uepoll_test::GenerousBoundNs(want_)) << "hung"; \
  } while (0)

// Runs fn with SIGPIPE blocked and reports whether it left SIGPIPE pending;
// a pending SIGPIPE is consumed so that it cannot reach a later test.
template <class F>
bool RaisesSigpipe(F fn) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  fn();
  sigset_t pending;
  sigpending(&pending);
  bool raised = sigismember(&pending, SIGPIPE) == 1;
  struct timespec zero {};
  while (sigtimedwait(&pipe_set, nullptr, &zero) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return raised;
}

// For checks where only the set of reported items matters.
inline std::vector<Ev> Sorted(std::vector<Ev> v) {
  std::sort(v.begin(), v.end(), [](const Ev& a, const Ev& b) {
    return a.data != b.data ? a.data < b.data : a.events < b.events;
  });
  return v;
}

class ConformanceTest : public BackendTest {
 protected:
  static constexpr uint32_t kInOut = EPOLLIN | EPOLLOUT;

  // epoll_wait into a vector; a failing wait is a test failure.
  std::vector<Ev> Wait(int ep, int max = 16, int timeout = 0) {
    std::vector<epoll_event> buf(static_cast<size_t>(max));
    int n = B().epoll_wait(ep, buf.data(), max, timeout);
    EXPECT_GE(n, 0) << "epoll_wait: " << strerror(errno);
    std::vector<Ev> out;
    for (int i = 0; i < n; ++i) out.push_back({buf[i].events, buf[i].data.u64});
    return out;
  }

  int Dup(int fd) {
    int d = B().dup(fd);
    EXPECT_GE(d, 0) << "dup: " << strerror(errno);
    return Track(d);
  }

  void EfdWrite(int fd, uint64_t v) {
    ASSERT_EQ(B().write(fd, &v, sizeof v), 8) << strerror(errno);
  }
  uint64_t EfdRead(int fd) {
    uint64_t v = 0;
    EXPECT_EQ(B().read(fd, &v, sizeof v), 8) << strerror(errno);
    return v;
  }

  // Write n bytes of filler; returns write()'s result.
  ssize_t WriteBytes(int fd, size_t n) {
    std::vector<char> buf(n, 'x');
    return B().write(fd, buf.data(), n);
  }
  ssize_t ReadBytes(int fd, size_t n) {
    std::vector<char> buf(n);
    return B().read(fd, buf.data(), n);
  }

  // poll() one descriptor for every condition poll can report, so the
  // result is the source's full mask as the kernel computes it.
  short PollMask(int fd) {
    struct pollfd p {};
    p.fd = fd;
    p.events = POLLIN | POLLPRI | POLLOUT | POLLRDNORM | POLLRDBAND |
               POLLWRNORM | POLLWRBAND | POLLRDHUP;
    int n = B().poll(&p, 1, 0);
    EXPECT_GE(n, 0) << "poll: " << strerror(errno);
    return p.revents;
  }
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_CONFORMANCE_HELPERS_H_
