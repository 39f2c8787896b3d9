// Allocation-failure injection over one scripted scenario that reaches every
// allocation site of the engine: each kind of source and instance, an item
// table grown by many ADDs, nested ADDs that run the loop/depth/path checks
// (with more than 16 files below, so the checks' file array grows), poll()
// with several descriptors (and a poll that has to sleep), pipe writes that
// need pages, socket writes that need skbs, the dup family.
//
// First the scenario runs with injection armed far away, to count its
// allocations (T). Then for every N in 1..T it runs with the Nth allocation
// failing. Exactly one call must fail, with ENOMEM (a pipe write may instead
// stop short), and leave everything as it was: the live counts, the item
// (DEL: ENOENT, the wait reports nothing from it), the descriptors, the data.
// The step is then retried (injection is off again) so that the rest of the
// scenario runs as usual; at the end everything is closed and nothing is
// left alive.
//
// tests/sources/alloc_failure_test.cc covers the pipe page and socket
// buffer accounting in depth; this file covers the sites as a whole.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

uepoll_live_counts Counts() {
  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  return c;
}

bool SameCounts(const uepoll_live_counts& a, const uepoll_live_counts& b) {
  return a.files == b.files && a.items == b.items &&
         a.descriptors == b.descriptors && a.instances == b.instances;
}

bool IsOpen(int fd) { return uepoll_fcntl(fd, F_GETFD) != -1; }

// Data values of the events a zero-timeout wait on ep reports right now.
std::vector<uint64_t> ReadyData(int ep) {
  epoll_event evs[256];
  int n = uepoll_epoll_wait(ep, evs, 256, 0);
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i)
    out.push_back(uint64_t{evs[i].data.u64});  // packed
  return out;
}

class Scenario {
 public:
  // Failures observed in this run: {step, how}.
  std::vector<std::string> failures;

  void Run() {
    // Instances and sources, each kind.
    int ep = Create("epoll_create1", [] { return uepoll_epoll_create1(0); });
    int ep_old = Create("epoll_create", [] { return uepoll_epoll_create(1); });
    int efd = Create("eventfd", [] { return uepoll_eventfd(1, EFD_NONBLOCK); });
    int p[2], s[2];
    CreatePair("pipe2", p,
               [](int* fds) { return uepoll_pipe2(fds, O_NONBLOCK); });
    CreatePair("socketpair", s, [](int* fds) {
      return uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds);
    });

    // Plain ADDs; the item table grows from empty to 64+ buckets.
    Add("ADD eventfd", ep, efd, EPOLLIN, 1);
    Add("ADD pipe", ep, p[0], EPOLLIN | EPOLLET, 2);
    Add("ADD socket", ep, s[1], EPOLLIN | EPOLLRDHUP, 3);
    Add("ADD into epoll_create instance", ep_old, efd, EPOLLIN, 4);
    std::vector<int> many;
    for (int i = 0; i < 40; ++i) {
      many.push_back(Create("eventfd (many)",
                            [] { return uepoll_eventfd(1, EFD_NONBLOCK); }));
      Add("ADD (many)", ep, many.back(), EPOLLIN | (i % 2 ? EPOLLET : 0u),
          100 + static_cast<uint64_t>(i));
    }

    // Nesting. inner watches 20 leaves; chain: top -> mid -> inner.
    //   top --(lt)--> mid --(et)--> inner --(lt)--> many[0..19]
    //   ep  --(lt)--> inner
    int inner =
        Create("epoll_create1 inner", [] { return uepoll_epoll_create1(0); });
    int mid =
        Create("epoll_create1 mid", [] { return uepoll_epoll_create1(0); });
    int top =
        Create("epoll_create1 top", [] { return uepoll_epoll_create1(0); });
    for (int i = 0; i < 20; ++i) {
      Add("ADD leaf into inner", inner, many[static_cast<size_t>(i)], EPOLLIN,
          200 + static_cast<uint64_t>(i));
    }
    Add("nested ADD inner into mid", mid, inner, EPOLLIN | EPOLLET, 300);
    Add("nested ADD mid into top", top, mid, EPOLLIN, 301);
    Add("nested ADD inner into ep", ep, inner, EPOLLIN, 302);
    // ADD into a watched instance: the full check with path counting.
    Add("ADD into watched inner", inner, efd, EPOLLIN, 303);
    Add("ADD pipe into watched inner", inner, p[0], EPOLLIN, 304);

    // poll() over several descriptors, at once and with a sleep.
    PollStep("poll 7 fds", {efd, p[0], p[1], s[0], s[1], ep, top}, 0);
    PollStep("poll sleeping", {p[0]}, 1);

    // Pipe write needing pages, socket writes needing buffers.
    PipeWrite(p[1], p[0], 3 * 4096 + 5);
    SocketWrite(s[0], s[1], 100);
    SocketWrite(s[0], s[1], 4096);

    // Descriptors.
    int d1 = Create("dup", [&] { return uepoll_dup(efd); });
    // Numbers no other object takes here (uepoll numbers are the kernel's).
    int target = 900;
    int d2 = Create("dup2", [&] { return uepoll_dup2(p[0], target); });
    int d3 = Create("dup3",
                    [&] { return uepoll_dup3(s[0], target + 1, O_CLOEXEC); });
    int d4 = Create("F_DUPFD", [&] { return uepoll_fcntl(ep, F_DUPFD, 950); });

    // Waits, nested included.
    Check("epoll_wait ep", [&] { return uepoll_epoll_wait(ep, evs_, 64, 0); });
    Check("epoll_wait top",
          [&] { return uepoll_epoll_wait(top, evs_, 64, 0); });
    Check("MOD", [&] {
      epoll_event ev{};
      ev.events = EPOLLOUT;
      return uepoll_epoll_ctl(ep, EPOLL_CTL_MOD, efd, &ev);
    });
    Check("DEL",
          [&] { return uepoll_epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr); });
    Check("shutdown", [&] { return uepoll_shutdown(s[1], SHUT_WR); });

    // Close everything: the instances last but one (so that items die with
    // their sources and with their instances).
    for (int fd : {d1, d2, d3, d4, efd, p[0], p[1], s[0], s[1]}) CloseStep(fd);
    CloseStep(ep);
    for (int fd : many) CloseStep(fd);
    for (int fd : {top, mid, inner, ep_old}) CloseStep(fd);
  }

 private:
  // A call returning a descriptor (or -1). On ENOMEM: no object, item or
  // descriptor appeared; then the call is retried.
  template <class F>
  int Create(const char* what, F call) {
    auto before = Counts();
    errno = 0;
    int fd = call();
    if (fd == -1 && errno == ENOMEM) {
      failures.push_back(what);
      EXPECT_TRUE(SameCounts(before, Counts())) << what << ": state changed";
      fd = call();
    }
    EXPECT_GE(fd, 0) << what << ": " << strerror(errno);
    return fd;
  }

  template <class F>
  void CreatePair(const char* what, int fds[2], F call) {
    auto before = Counts();
    fds[0] = fds[1] = -7;
    errno = 0;
    int r = call(fds);
    if (r == -1 && errno == ENOMEM) {
      failures.push_back(what);
      EXPECT_TRUE(SameCounts(before, Counts())) << what << ": state changed";
      EXPECT_EQ(fds[0], -7) << what << ": descriptors stored on failure";
      EXPECT_EQ(fds[1], -7) << what << ": descriptors stored on failure";
      r = call(fds);
    }
    EXPECT_EQ(r, 0) << what << ": " << strerror(errno);
  }

  void Add(const char* what, int ep, int fd, uint32_t events, uint64_t data) {
    auto before = Counts();
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    errno = 0;
    int r = uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    if (r == -1 && errno == ENOMEM) {
      failures.push_back(what);
      EXPECT_TRUE(SameCounts(before, Counts())) << what << ": state changed";
      errno = 0;
      EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr), -1) << what;
      EXPECT_EQ(errno, ENOENT) << what << ": the failed ADD left an item";
      for (uint64_t d : ReadyData(ep)) {
        EXPECT_NE(d, data) << what << ": the failed ADD reports events";
      }
      r = uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    EXPECT_EQ(r, 0) << what << ": " << strerror(errno);
  }

  void PollStep(const char* what, std::vector<int> fds, int timeout) {
    std::vector<pollfd> p;
    for (int fd : fds) p.push_back({fd, POLLIN | POLLOUT, 0x5555});
    if (timeout) p[0].events = POLLIN;  // an empty pipe: nothing ready
    errno = 0;
    int r = uepoll_poll(p.data(), p.size(), timeout);
    if (r == -1 && errno == ENOMEM) {
      failures.push_back(what);
      // Only a poll that has to sleep allocates (the references it holds
      // and its wait entries), and only after a first pass found nothing
      // ready. That pass has stored its revents, all 0, and they stay: the
      // kernel's do_sys_poll too copies revents out after a failure in its
      // sleeping pass.
      EXPECT_NE(timeout, 0) << what << ": a poll that need not sleep failed";
      for (auto& x : p) EXPECT_EQ(x.revents, 0) << what << ": fd " << x.fd;
      r = uepoll_poll(p.data(), p.size(), timeout);
    }
    EXPECT_GE(r, 0) << what << ": " << strerror(errno);
  }

  void PipeWrite(int wr, int rd, size_t n) {
    std::vector<char> out(n), in(n + 1);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(i * 7 + 3);
    size_t done = 0;
    while (done < n) {
      errno = 0;
      ssize_t w = uepoll_write(wr, out.data() + done, n - done);
      if (w == -1) {
        ASSERT_EQ(errno, ENOMEM) << "pipe write";
        failures.push_back("pipe write (ENOMEM)");
        continue;
      }
      if (static_cast<size_t>(w) < n - done)
        failures.push_back("pipe write (short)");
      done += static_cast<size_t>(w);
    }
    ssize_t r = uepoll_read(rd, in.data(), in.size());
    ASSERT_EQ(r, static_cast<ssize_t>(n)) << "exactly what was written";
    EXPECT_EQ(memcmp(in.data(), out.data(), n), 0) << "pipe data";
  }

  void SocketWrite(int from, int to, size_t n) {
    std::vector<char> out(n, 'x'), in(n + 1);
    errno = 0;
    ssize_t w = uepoll_write(from, out.data(), n);
    if (w == -1 && errno == ENOMEM) {
      failures.push_back("socket write");
      errno = 0;
      EXPECT_EQ(uepoll_read(to, in.data(), in.size()), -1);
      EXPECT_EQ(errno, EAGAIN) << "the failed write queued data";
      w = uepoll_write(from, out.data(), n);
    }
    EXPECT_EQ(w, static_cast<ssize_t>(n)) << strerror(errno);
    EXPECT_EQ(uepoll_read(to, in.data(), in.size()), static_cast<ssize_t>(n));
  }

  template <class F>
  void Check(const char* what, F call) {
    auto before = Counts();
    errno = 0;
    int r = call();
    if (r == -1 && errno == ENOMEM) {
      failures.push_back(what);
      EXPECT_TRUE(SameCounts(before, Counts())) << what << ": state changed";
      r = call();
    }
    EXPECT_GE(r, 0) << what << ": " << strerror(errno);
  }

  void CloseStep(int fd) {
    errno = 0;
    int r = uepoll_close(fd);
    if (r == -1 && errno == ENOMEM) {
      failures.push_back("close");
      EXPECT_TRUE(IsOpen(fd)) << "a failed close closed";
      r = uepoll_close(fd);
    }
    EXPECT_EQ(r, 0) << "close: " << strerror(errno);
  }

  epoll_event evs_[64];
};

long CountAllocations() {
  long before = uepoll_debug_alloc_count();
  uepoll_debug_fail_alloc(LONG_MAX);
  Scenario s;
  s.Run();
  uepoll_debug_fail_alloc(0);
  EXPECT_TRUE(s.failures.empty());
  return uepoll_debug_alloc_count() - before;
}

// Descriptor-table chunks are allocated once and never freed: a warm-up
// makes the first chunk exist before counting (its own site is covered by
// AllocFailure.fd_table_chunk__failure_is_enomem_and_retry_works).
void WarmUp() {
  int e = uepoll_eventfd(0, 0);
  ASSERT_GE(e, 0);
  ASSERT_EQ(uepoll_close(e), 0);
}

TEST(AllocFailure, scenario__every_allocation_fails_cleanly_once) {
  WarmUp();
  const long total = CountAllocations();
  ExpectNoUepollLeaks();
  ASSERT_GT(total, 100) << "the scenario should reach many allocations";
  std::printf(
      "alloc_failure: the scenario makes %ld allocations; injecting "
      "a failure at each N in 1..%ld\n",
      total, total);
  std::map<std::string, std::vector<long>> sites;  // step -> the N failing it
  for (long n = 1; n <= total; ++n) {
    SCOPED_TRACE("failing allocation N = " + std::to_string(n));
    ASSERT_EQ(uepoll_debug_fail_alloc(n), 0);
    Scenario s;
    s.Run();
    uepoll_debug_fail_alloc(0);
    for (const auto& f : s.failures) sites[f].push_back(n);
    EXPECT_EQ(s.failures.size(), 1u)
        << "exactly one call must see the failure; saw "
        << (s.failures.empty() ? std::string("none") : s.failures[0]);
    ExpectNoUepollLeaks();
    if (HasFailure()) break;  // one N's report is enough to debug
  }
  for (const auto& [step, ns] : sites) {
    std::printf("  %-32s failed by %zu allocation(s): N = %ld..%ld\n",
                step.c_str(), ns.size(), ns.front(), ns.back());
  }
  // Past the end: nothing fails.
  ASSERT_EQ(uepoll_debug_fail_alloc(total + 1), 0);
  Scenario s;
  s.Run();
  uepoll_debug_fail_alloc(0);
  EXPECT_TRUE(s.failures.empty());
  ExpectNoUepollLeaks();
}

TEST(AllocFailure, fd_table_chunk__failure_is_enomem_and_retry_works) {
  int e = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(e, 0);
  // A number in a chunk no other test touches: its chunk is allocated here
  // (below RLIMIT_NOFILE, which dup2 checks first).
  const int far = 7 * 1024 + 3;
  struct rlimit rl {};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur <= static_cast<rlim_t>(far)) {
    rl.rlim_cur = static_cast<rlim_t>(far) + 1;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  ASSERT_EQ(uepoll_debug_fail_alloc(1), 0);
  errno = 0;
  int r = uepoll_dup2(e, far);
  int err = errno;
  uepoll_debug_fail_alloc(0);
  // Nothing else in this process touches that chunk (ctest runs each test
  // in a process of its own, and the scenario stays in the first chunk),
  // so the allocation must happen, and fail, here.
  EXPECT_EQ(r, -1) << "the chunk existed already: nothing was injected";
  EXPECT_EQ(err, ENOMEM);
  EXPECT_FALSE(IsOpen(far));
  EXPECT_EQ(uepoll_dup2(e, far), far);
  EXPECT_EQ(uepoll_close(far), 0);
  EXPECT_EQ(uepoll_close(e), 0);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
