// Concurrency stress: many threads and instances hammering shared sources,
// each test bounded by an iteration count and a wall-clock cap (stress.h),
// seeded and printing its seed. Every test ends on an exact account (values
// written vs read, deliveries vs re-arms, the graph left by racing ADDs) and
// the fixture's leak check. Run under ThreadSanitizer and ASan too
// (docs/reliability.md).
//
// Tests that only make sense on uepoll (closing numbers other threads are
// using: on the kernel a reused number could be any descriptor of the test
// process) run on uepoll only.
#include "stress/stress.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "support/fixture.h"

// ThreadSanitizer reports close() of a kernel descriptor that another thread
// is using in a call as a data race. Here that race is the behaviour under
// test (a thread sits in epoll_wait/poll when the descriptor closes), so it
// is suppressed for closes made through CloseUnderWaiters only; every other
// close in this file is checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:CloseUnderWaiters\n";
}

namespace uepoll_test {

[[gnu::noinline]] int CloseUnderWaiters(const Backend& b, int fd) {
  return b.close(fd);
}

}  // namespace uepoll_test

namespace uepoll_test {
namespace {

class Stress : public BackendTest {
 protected:
  const char* Name() const {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  int AddEv(int ep, int fd, uint32_t events, uint64_t data) {
    return Ctl(ep, EPOLL_CTL_ADD, fd, events, data);
  }
};

class StressUepoll : public Stress {};

// ---------------------------------------------------------------------------
// ONESHOT: 4 instances, 4 sources each, 8 consumer threads (2 per instance).
// A delivered item is disabled until its consumer re-arms it with MOD, so no
// two threads may hold it at once (in_flight) and every reported source must
// be readable (else it was delivered twice). Every written unit is read.
TEST_P(Stress, OneshotDeliversEachEventToExactlyOneThread) {
  constexpr int kInstances = 4, kPerInstance = 4, kThreads = 8;
  constexpr int kSources = kInstances * kPerInstance;
  constexpr long kWrites = 200000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kWrites, 4.0);
  std::array<int, kInstances> eps;
  std::array<int, kSources> src;
  for (int& ep : eps) ep = Epoll();
  for (int i = 0; i < kSources; ++i) {
    src[i] = Eventfd(0, EFD_NONBLOCK);
    ASSERT_EQ(AddEv(eps[i % kInstances], src[i], EPOLLIN | EPOLLONESHOT,
                    static_cast<uint64_t>(i)),
              0);
  }
  std::array<std::atomic<bool>, kSources> in_flight{};
  std::atomic<long> produced{0}, consumed{0}, doubles{0}, empty{0}, errors{0};
  std::atomic<bool> producing{true};
  const Backend* b = &B();
  std::vector<std::thread> consumers;
  for (int t = 0; t < kThreads; ++t) {
    consumers.emplace_back([&, t] {
      int ep = eps[t % kInstances];
      while (!budget.PastHardDeadline()) {
        if (!producing.load() && consumed.load() == produced.load()) break;
        epoll_event ev;
        int n = b->epoll_wait(ep, &ev, 1, 20);
        if (n == 0) continue;
        if (n != 1) {
          ++errors;
          continue;
        }
        int s = static_cast<int>(ev.data.u64);
        if (in_flight[s].exchange(true)) ++doubles;
        uint64_t v;
        if (b->read(src[s], &v, sizeof v) == 8) {
          consumed += static_cast<long>(v);
        } else {
          ++empty;  // reported, yet nothing to read: a second delivery
        }
        in_flight[s].store(false);
        epoll_event re{};
        re.events = EPOLLIN | EPOLLONESHOT;
        re.data.u64 = static_cast<uint64_t>(s);
        if (b->epoll_ctl(ep, EPOLL_CTL_MOD, src[s], &re) != 0) ++errors;
      }
    });
  }
  std::uniform_int_distribution<int> pick(0, kSources - 1);
  uint64_t one = 1;
  while (budget.Take()) {
    // Count first: a consumer must never see consumed > produced.
    ++produced;
    ASSERT_EQ(B().write(src[pick(rng)], &one, sizeof one), 8);
  }
  producing.store(false);
  for (auto& th : consumers) th.join();
  ReportBudget(Name(), budget, kWrites);
  EXPECT_EQ(doubles.load(), 0) << "an item was held by two threads";
  EXPECT_EQ(empty.load(), 0) << "an item was delivered twice";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(consumed.load(), produced.load()) << "events lost";
}

// ---------------------------------------------------------------------------
// EPOLLEXCLUSIVE: 8 sources, each added exclusive to all 4 instances; 8
// threads (2 per instance) wait and read. A write wakes one or more
// instances; the eventfd's read-and-reset makes each unit land exactly once,
// and none may be left unread (a lost wakeup would strand it).
TEST_P(Stress, ExclusiveAcrossInstancesLosesAndDuplicatesNothing) {
  constexpr int kInstances = 4, kSources = 8, kThreads = 8;
  constexpr long kWrites = 200000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kWrites, 4.0);
  std::array<int, kInstances> eps;
  std::array<int, kSources> src;
  for (int& ep : eps) ep = Epoll();
  for (int i = 0; i < kSources; ++i) {
    src[i] = Eventfd(0, EFD_NONBLOCK);
    for (int ep : eps) {
      ASSERT_EQ(
          AddEv(ep, src[i], EPOLLIN | EPOLLEXCLUSIVE, static_cast<uint64_t>(i)),
          0);
    }
  }
  std::atomic<long> produced{0}, consumed{0}, stolen{0}, errors{0};
  std::atomic<bool> producing{true};
  const Backend* b = &B();
  std::vector<std::thread> consumers;
  for (int t = 0; t < kThreads; ++t) {
    consumers.emplace_back([&, t] {
      int ep = eps[t % kInstances];
      while (!budget.PastHardDeadline()) {
        if (!producing.load() && consumed.load() == produced.load()) break;
        epoll_event evs[kSources];
        int n = b->epoll_wait(ep, evs, kSources, 20);
        if (n < 0) ++errors;
        for (int i = 0; i < n; ++i) {
          uint64_t v;
          if (b->read(src[evs[i].data.u64], &v, sizeof v) == 8) {
            consumed += static_cast<long>(v);
          } else {
            ++stolen;  // another instance's thread read it first: allowed
          }
        }
      }
    });
  }
  std::uniform_int_distribution<int> pick(0, kSources - 1);
  uint64_t one = 1;
  while (budget.Take()) {
    ++produced;
    ASSERT_EQ(B().write(src[pick(rng)], &one, sizeof one), 8);
  }
  producing.store(false);
  for (auto& th : consumers) th.join();
  ReportBudget(Name(), budget, kWrites);
  std::printf("[stress] %s: %ld reports found the count already taken\n",
              Name(), stolen.load());
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(consumed.load(), produced.load()) << "events lost";
  for (int s : src) {
    uint64_t v;
    EXPECT_EQ(B().read(s, &v, sizeof v), -1) << "a count was left unread";
  }
}

// ---------------------------------------------------------------------------
// Zero lost wakeups: 4 producers write 1 to 8 eventfds (ET items of one
// instance), 4 consumers block in epoll_wait and read whatever a report
// names. Consumers never read without a report, so a lost wakeup strands a
// count and the sums differ. 1M writes (or the time cap).
TEST_P(Stress, EdgeTriggeredProducerConsumerLosesNoWakeupOver1MEvents) {
  constexpr int kSources = 8, kProducers = 4, kConsumers = 4;
  constexpr long kWrites = 1000000;
  std::mt19937_64 seed_rng(StressSeed(Name()));
  Budget budget(kWrites, 6.0);
  int ep = Epoll();
  std::array<int, kSources> src;
  for (int i = 0; i < kSources; ++i) {
    src[i] = Eventfd(0, EFD_NONBLOCK);
    ASSERT_EQ(AddEv(ep, src[i], EPOLLIN | EPOLLET, static_cast<uint64_t>(i)),
              0);
  }
  int stop = Eventfd(0, EFD_NONBLOCK);
  ASSERT_EQ(AddEv(ep, stop, EPOLLIN, kSources), 0);  // LT: wakes everyone
  std::atomic<long> produced{0}, consumed{0}, errors{0}, waits{0};
  const Backend* b = &B();
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      for (;;) {
        epoll_event evs[kSources + 1];
        // Blocking: a long timeout that only a lost wakeup would reach.
        int n = b->epoll_wait(ep, evs, kSources + 1, 10000);
        ++waits;
        if (n <= 0) {
          ++errors;
          return;
        }
        for (int i = 0; i < n; ++i) {
          if (evs[i].data.u64 == kSources) return;
          uint64_t v;
          // ET: drain (one read empties an eventfd).
          if (b->read(src[evs[i].data.u64], &v, sizeof v) == 8) {
            consumed += static_cast<long>(v);
          }
        }
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) {
    uint64_t pseed = seed_rng();
    threads.emplace_back([&, pseed] {
      std::mt19937_64 rng(pseed);
      uint64_t one = 1;
      while (budget.Take()) {
        if (b->write(src[rng() % kSources], &one, sizeof one) != 8) {
          ++errors;
          return;
        }
        ++produced;
      }
    });
  }
  // Producers end with the budget; then every count must be drained.
  while (!budget.Done())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  while (consumed.load() != produced.load() && !budget.PastHardDeadline()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  long missing = produced.load() - consumed.load();
  uint64_t one = 1;
  ASSERT_EQ(B().write(stop, &one, sizeof one), 8);
  for (auto& th : threads) th.join();
  ReportBudget(Name(), budget, kWrites);
  std::printf("[stress] %s: %ld events written, %ld waits returned\n", Name(),
              produced.load(), waits.load());
  EXPECT_EQ(errors.load(), 0) << "a wait timed out or failed";
  EXPECT_EQ(missing, 0) << "events written but never reported";
}

// ---------------------------------------------------------------------------
// Racing ADD/DEL of instances into instances from 4 threads, while a writer
// makes leaves ready and a poller polls and waits on random instances. The
// graph left behind must obey the ADD-time rules whatever the interleaving:
// no cycle, no chain longer than 4 links (probed afterwards with ADD:
// EEXIST means the edge exists).
TEST_P(Stress, RacingNestedAddsNeverLeaveACycleOrAnOverlongChain) {
  constexpr int kInstances = 6, kThreads = 4;
  constexpr long kOps = 40000;
  const uint64_t seed = StressSeed(Name());
  Budget budget(kOps, 4.0);
  std::array<int, kInstances> eps;
  for (int& ep : eps) ep = Epoll();
  std::array<int, 3> leaf;
  for (int i = 0; i < 3; ++i) {
    leaf[i] = Eventfd(0, EFD_NONBLOCK);
    ASSERT_EQ(AddEv(eps[i], leaf[i], EPOLLIN | EPOLLET, 100 + i), 0);
  }
  const Backend* b = &B();
  std::atomic<long> bad{0}, loops{0}, adds{0};
  std::atomic<int> bad_errno{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(t));
      while (budget.Take()) {
        int a = static_cast<int>(rng() % kInstances);
        int c = static_cast<int>(rng() % kInstances);
        if (a == c) continue;
        epoll_event ev{};
        ev.events = EPOLLIN | (rng() % 2 ? EPOLLET : 0u);
        ev.data.u64 = static_cast<uint64_t>(c);
        bool add = rng() % 10 < 7;
        int r = b->epoll_ctl(eps[a], add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL,
                             eps[c], &ev);
        int e = errno;
        if (r == 0 && add) ++adds;
        if (r == 0) continue;
        if (e == ELOOP) ++loops;
        if (e != EEXIST && e != ENOENT && e != ELOOP && e != EINVAL) {
          ++bad;
          bad_errno.store(e);
        }
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937_64 rng(seed ^ 0x5a5a);
    uint64_t one = 1;
    while (!budget.Done()) {
      b->write(leaf[rng() % 3], &one, sizeof one);
      int ep = eps[rng() % kInstances];
      pollfd p = {ep, POLLIN, 0};
      if (b->poll(&p, 1, 0) < 0) ++bad;
      epoll_event evs[8];
      if (b->epoll_wait(ep, evs, 8, 0) < 0) ++bad;
    }
  });
  for (auto& th : threads) th.join();
  ReportBudget(Name(), budget, kOps);
  EXPECT_EQ(bad.load(), 0) << "unexpected errno "
                           << strerrorname_np(bad_errno.load());
  // Probe the graph.
  bool edge[kInstances][kInstances] = {};
  for (int a = 0; a < kInstances; ++a) {
    for (int c = 0; c < kInstances; ++c) {
      if (a == c) continue;
      epoll_event ev{};
      ev.events = EPOLLIN;
      int r = B().epoll_ctl(eps[a], EPOLL_CTL_ADD, eps[c], &ev);
      if (r == -1 && errno == EEXIST) edge[a][c] = true;
      if (r == 0) B().epoll_ctl(eps[a], EPOLL_CTL_DEL, eps[c], nullptr);
    }
  }
  // Longest path (in links) from each node; a cycle shows as > kInstances.
  std::function<int(int, int)> longest = [&](int n, int depth) -> int {
    if (depth > kInstances) return depth;
    int best = 0;
    for (int c = 0; c < kInstances; ++c) {
      if (edge[n][c]) best = std::max(best, 1 + longest(c, depth + 1));
    }
    return best;
  };
  int max_chain = 0;
  for (int n = 0; n < kInstances; ++n)
    max_chain = std::max(max_chain, longest(n, 0));
  std::printf(
      "[stress] %s: %ld successful ADDs, %ld ELOOP, final longest "
      "chain %d links\n",
      Name(), adds.load(), loops.load(), max_chain);
  EXPECT_LE(max_chain, 4) << "a cycle or a chain longer than 4 links survived";
}

// ---------------------------------------------------------------------------
// Closing an instance's descriptor while threads wait on it, a poll()
// watches it and an outer instance has it as an item. The waiters keep
// waiting on the object (docs/contract.md section 7) and return an event or a
// timeout; one that started after the close gets EBADF. Nothing else.
TEST_P(Stress, InstanceCloseWithWaitersPollersAndWatchers) {
  constexpr long kRounds = 400;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 4.0);
  const Backend* b = &B();
  std::atomic<long> bad{0}, events{0}, timeouts{0}, ebadf{0};
  std::atomic<int> bad_errno{0};
  auto note = [&](int r, int e) {
    if (r > 0) {
      ++events;
    } else if (r == 0) {
      ++timeouts;
    } else if (e == EBADF) {
      ++ebadf;
    } else {
      ++bad;
      bad_errno.store(e);
    }
  };
  while (budget.Take()) {
    int ep = b->epoll_create1(0);
    int outer = b->epoll_create1(0);
    int src = b->eventfd(0, EFD_NONBLOCK);
    ASSERT_GE(ep, 0);
    ASSERT_GE(outer, 0);
    ASSERT_GE(src, 0);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_ADD, src, &ev), 0);
    ASSERT_EQ(b->epoll_ctl(outer, EPOLL_CTL_ADD, ep, &ev), 0);
    std::atomic<int> started{0};
    std::vector<std::thread> th;
    for (int w = 0; w < 2; ++w) {
      th.emplace_back([&] {
        ++started;
        epoll_event out;
        int r = b->epoll_wait(ep, &out, 1, 20);
        note(r, errno);
      });
    }
    th.emplace_back([&] {
      ++started;
      pollfd p = {ep, POLLIN, 0};
      int r = b->poll(&p, 1, 20);
      note(r, errno);
    });
    th.emplace_back([&] {
      ++started;
      epoll_event out;
      int r = b->epoll_wait(outer, &out, 1, 20);
      note(r, errno);
    });
    while (started.load() < 4) std::this_thread::yield();
    for (int i = static_cast<int>(rng() % 2000); i > 0; --i) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    ASSERT_EQ(CloseUnderWaiters(*b, ep), 0);
    uint64_t one = 1;
    ASSERT_EQ(b->write(src, &one, sizeof one), 8);
    for (auto& t : th) t.join();
    ASSERT_EQ(b->close(src), 0);
    ASSERT_EQ(b->close(outer), 0);
  }
  ReportBudget(Name(), budget, kRounds);
  std::printf("[stress] %s: %ld events, %ld timeouts, %ld EBADF\n", Name(),
              events.load(), timeouts.load(), ebadf.load());
  EXPECT_EQ(bad.load(), 0) << strerrorname_np(bad_errno.load());
}

// ---------------------------------------------------------------------------
// uepoll only. Sources and instances are closed and recreated (and dup2'ed
// over) while other threads wait on, ctl, write to and read from the same
// numbers. Every call must end in success or an errno that the race can
// explain; nothing may crash, leak or trip a sanitizer.
TEST_P(StressUepoll, CloseRacesWaitCtlAndWrites) {
  constexpr int kSlots = 12, kEpSlots = 3;
  constexpr long kOps = 60000;
  const uint64_t seed = StressSeed(Name());
  // Writes to a pipe or socket whose peer is gone raise SIGPIPE, as on the
  // kernel; the test wants the EPIPE.
  struct sigaction ign {
  }, old_pipe{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old_pipe);
  Budget budget(kOps, 4.0);
  const Backend* b = &B();
  // Numbers are kept in slots; a thread reads a slot and uses whatever that
  // number is by then (maybe closed, maybe another object).
  std::array<std::atomic<int>, kSlots> slot;
  std::array<std::atomic<int>, kEpSlots> ep_slot;
  auto make_source = [&](std::mt19937_64& rng) {
    switch (rng() % 3) {
      case 0:
        return b->eventfd(1, EFD_NONBLOCK);
      case 1: {
        int p[2];
        if (b->pipe2(p, O_NONBLOCK) != 0) return -1;
        size_t keep = rng() % 2;
        b->close(p[1 - keep]);
        return p[keep];
      }
      default: {
        int sv[2];
        if (b->socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
          return -1;
        b->close(sv[1]);
        return sv[0];
      }
    }
  };
  {
    std::mt19937_64 rng(seed);
    for (auto& s : slot) s.store(make_source(rng));
    for (auto& s : ep_slot) s.store(b->epoll_create1(0));
  }
  ErrnoTally tally;
  std::vector<std::thread> th;
  // Waiters.
  for (int w = 0; w < 2; ++w) {
    th.emplace_back([&, w] {
      epoll_event evs[8];
      while (!budget.Done()) {
        int r = b->epoll_wait(ep_slot[static_cast<size_t>(w) % kEpSlots].load(),
                              evs, 8, 2);
        tally.Check(r, errno, 1, {EBADF, EINVAL});
      }
    });
  }
  // ctl, writes and reads, closes/recreates.
  for (int t = 0; t < 3; ++t) {
    th.emplace_back([&, t] {
      std::mt19937_64 rng(seed + 1 + static_cast<uint64_t>(t));
      char buf[64] = {};
      while (budget.Take()) {
        int s = slot[rng() % kSlots].load();
        int ep = ep_slot[rng() % kEpSlots].load();
        switch (rng() % 8) {
          case 0:
          case 1: {
            epoll_event ev{};
            ev.events = EPOLLIN | EPOLLOUT | (rng() % 2 ? EPOLLET : 0u) |
                        (rng() % 4 ? 0u : EPOLLONESHOT);
            int op = 1 + static_cast<int>(rng() % 3);
            int r = b->epoll_ctl(ep, op, s, &ev);
            tally.Check(r, errno, 2,
                        {EBADF, EINVAL, EEXIST, ENOENT, ELOOP, EPERM});
            break;
          }
          case 2:
          case 3: {
            uint64_t one = 1;
            long r = b->write(s, &one, sizeof one);
            tally.Check(r, errno, 3, {EBADF, EINVAL, EAGAIN, EPIPE});
            break;
          }
          case 4: {
            long r = b->read(s, buf, sizeof buf);
            tally.Check(r, errno, 4, {EBADF, EINVAL, EAGAIN, ECONNRESET});
            break;
          }
          case 5: {  // close and recreate a source
            size_t i = rng() % kSlots;
            int old = slot[i].exchange(-1);
            if (old >= 0) {
              int r = b->close(old);  // before reading errno: argument
              tally.Check(r, errno, 5, {EBADF});  // order is unspecified
            }
            slot[i].store(make_source(rng));
            break;
          }
          case 6: {  // dup2 one source over another's number
            int other = slot[rng() % kSlots].load();
            if (s >= 0 && other >= 0) {
              int r = b->dup2(s, other);
              tally.Check(r, errno, 6, {EBADF, EBUSY});
            }
            break;
          }
          default: {  // close and recreate an instance (waiters on it)
            if (rng() % 8) break;
            size_t i = rng() % kEpSlots;
            int fresh = b->epoll_create1(0);
            int old = ep_slot[i].exchange(fresh);
            if (old >= 0) {
              int r = b->close(old);
              tally.Check(r, errno, 7, {EBADF});
            }
            if (fresh >= 0 && rng() % 2) {  // nest it into another instance
              epoll_event ev{};
              ev.events = EPOLLIN;
              int r = b->epoll_ctl(ep_slot[rng() % kEpSlots].load(),
                                   EPOLL_CTL_ADD, fresh, &ev);
              tally.Check(r, errno, 8, {EBADF, EINVAL, EEXIST, ELOOP});
            }
            break;
          }
        }
      }
    });
  }
  for (auto& t : th) t.join();
  ReportBudget(Name(), budget, kOps);
  EXPECT_EQ(tally.bad(), 0) << "op " << tally.last_op() << ": unexpected errno "
                            << strerrorname_np(tally.last_errno());
  // Close every number that may still be open (slots can hold stale
  // numbers, so close by range), then the fixture checks for leaks.
  CloseAllUepollDescriptors();
  sigaction(SIGPIPE, &old_pipe, nullptr);
}

// ---------------------------------------------------------------------------
// uepoll only. epoll_wait(timeout 0) and epoll_ctl borrow their instances
// (and an instance they add) instead of counting a reference
// (src/core/borrow.h), so closes and dup2s of instance numbers must wait out
// those borrows. Here threads borrow in tight loops while another closes
// instances, dup2s one instance over another's number, dup2s an eventfd
// over an instance's number (the slot stops being borrowable) and
// recreates them. Every call must end in success or an errno the race
// explains, every event must carry a value some ADD/MOD set, and nothing
// may leak or trip a sanitizer.
TEST_P(StressUepoll, CloseAndDup2OfBorrowedInstances) {
  constexpr int kEpSlots = 4, kSources = 8;
  constexpr long kOps = 200000;
  constexpr uint64_t kMagic = 0xB0770000'00000000ULL;
  const uint64_t seed = StressSeed(Name());
  Budget budget(kOps, 3.0);
  const Backend* b = &B();
  std::array<int, kSources> src;
  for (int& s : src) {
    s = b->eventfd(1, EFD_NONBLOCK);  // always readable
    ASSERT_GE(s, 0);
  }
  std::array<std::atomic<int>, kEpSlots> ep_slot;
  for (auto& e : ep_slot) e.store(b->epoll_create1(0));
  std::atomic<long> events{0}, bad_data{0};
  ErrnoTally tally;
  std::vector<std::thread> th;
  for (int t = 0; t < 3; ++t) {
    th.emplace_back([&, t] {
      std::mt19937_64 rng(seed + 1 + static_cast<uint64_t>(t));
      epoll_event evs[8];
      while (budget.Take()) {
        int ep = ep_slot[rng() % kEpSlots].load();
        switch (rng() % 4) {
          case 0:
          case 1: {
            int r = b->epoll_wait(ep, evs, 8, 0);
            tally.Check(r, errno, 1, {EBADF, EINVAL});
            for (int i = 0; i < r; ++i) {
              if ((evs[i].data.u64 & 0xFFFF0000'00000000ULL) != kMagic)
                ++bad_data;
            }
            if (r > 0) events += r;
            break;
          }
          case 2: {  // a source: ADD, MOD or DEL
            epoll_event ev{};
            ev.events = EPOLLIN | (rng() % 2 ? EPOLLET : 0u);
            ev.data.u64 = kMagic | rng() % 1000;
            int op = 1 + static_cast<int>(rng() % 3);
            int r = b->epoll_ctl(ep, op, src[rng() % kSources], &ev);
            tally.Check(r, errno, 2, {EBADF, EINVAL, EEXIST, ENOENT});
            break;
          }
          default: {  // an instance into an instance: two borrows
            epoll_event ev{};
            ev.events = EPOLLIN;
            ev.data.u64 = kMagic | 1000;
            int inner = ep_slot[rng() % kEpSlots].load();
            int op = rng() % 2 ? EPOLL_CTL_ADD : EPOLL_CTL_DEL;
            int r = b->epoll_ctl(ep, op, inner, &ev);
            tally.Check(r, errno, 3, {EBADF, EINVAL, EEXIST, ENOENT, ELOOP});
            break;
          }
        }
      }
    });
  }
  th.emplace_back([&] {
    std::mt19937_64 rng(seed);
    while (!budget.Done() && !budget.PastHardDeadline()) {
      size_t i = rng() % kEpSlots;
      int cur = ep_slot[i].load();
      switch (rng() % 3) {
        case 0: {  // close and recreate
          int fresh = b->epoll_create1(0);
          int old = ep_slot[i].exchange(fresh);
          int r = b->close(old);
          tally.Check(r, errno, 4, {EBADF});
          break;
        }
        case 1: {  // another instance over this number
          int other = ep_slot[(i + 1) % kEpSlots].load();
          int r = b->dup2(other, cur);
          tally.Check(r, errno, 5, {EBADF, EBUSY});
          break;
        }
        default: {  // an eventfd over this number, then an instance again
          int r = b->dup2(src[rng() % kSources], cur);
          tally.Check(r, errno, 6, {EBADF, EBUSY});
          int fresh = b->epoll_create1(0);
          if (ep_slot[i].compare_exchange_strong(cur, fresh)) {
            r = b->close(cur);
            tally.Check(r, errno, 7, {EBADF});
          } else {
            b->close(fresh);
          }
          break;
        }
      }
    }
  });
  for (auto& t : th) t.join();
  ReportBudget(Name(), budget, kOps);
  std::printf("[stress] %s: %ld events\n", Name(), events.load());
  EXPECT_EQ(tally.bad(), 0) << "op " << tally.last_op() << ": unexpected errno "
                            << strerrorname_np(tally.last_errno());
  EXPECT_EQ(bad_data.load(), 0) << "an event carried data no ADD/MOD set";
  EXPECT_GT(events.load(), 0) << "no wait ever found an event: the test "
                                 "did not exercise harvests";
  for (auto& e : ep_slot) b->close(e.load());
  for (int s : src) ASSERT_EQ(b->close(s), 0);
}

UEPOLL_INSTANTIATE_BACKENDS(Stress);
INSTANTIATE_TEST_SUITE_P(Uepoll, StressUepoll,
                         ::testing::Values(&UepollBackend()),
                         [](const auto& i) { return BackendName(i.param); });

}  // namespace
}  // namespace uepoll_test
