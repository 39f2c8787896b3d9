// Concurrency stress: many threads and instances hammering shared sources,
// each test bounded by an iteration count and a wall-clock cap (stress.h),
// seeded and printing its seed. Every test ends on an exact account (tokens
// sent vs taken, deliveries vs re-arms, the graph left by racing ADDs) and
// the fixture's leak check, on both backends. Run under ThreadSanitizer and
// ASan too (docs/reliability.md). Closes racing everything else are in
// stress_close_test.cc.
#include "stress/stress.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
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

// ---------------------------------------------------------------------------
// The delivery tests pass tokens (stress.h, Tokens): a producer writes a
// source's next sequence number only once a consumer took the previous
// one, consumers wait with kLongWaitMs and read only what a report names,
// and an LT stop item in every instance ends them. A lost wakeup strands a
// token (the test then fails waiting for it) or ends a wait empty; a
// duplicate or misordered delivery reads the wrong number or nothing.
// A wait that lasts kLongWaitMs fails the test even if it then returns
// events (TimedWait). What the first version could not see: summed eventfd
// counts let the next write to a source repair a wakeup lost for the
// previous one, and 20 ms timeouts turned a lost wakeup into a retry.

constexpr uint64_t kStop = ~uint64_t{0};

// ONESHOT: 4 instances, 4 sources each, 8 consumer threads (2 per instance).
// A delivered item is disabled until its consumer re-arms it with MOD, so no
// two threads may hold it at once (in_flight), and every report must find
// exactly the token in flight.
TEST_P(Stress, OneshotDeliversEachEventToExactlyOneThread) {
  constexpr int kInstances = 4, kPerInstance = 4, kThreads = 8;
  constexpr int kSources = kInstances * kPerInstance;
  constexpr long kWrites = 200000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kWrites, 4.0);
  std::array<int, kInstances> eps;
  std::array<int, kSources> src;
  int stop = Eventfd(0, EFD_NONBLOCK);
  for (int& ep : eps) {
    ep = Epoll();
    ASSERT_EQ(AddEv(ep, stop, EPOLLIN, kStop), 0);
  }
  for (int i = 0; i < kSources; ++i) {
    src[i] = Eventfd(0, EFD_NONBLOCK);
    ASSERT_EQ(AddEv(eps[i % kInstances], src[i], EPOLLIN | EPOLLONESHOT,
                    static_cast<uint64_t>(i)),
              0);
  }
  Tokens tokens(kSources);
  std::array<std::atomic<bool>, kSources> in_flight{};
  std::atomic<long> doubles{0}, empty{0}, wrong{0}, errors{0}, timeouts{0};
  const Backend* b = &B();
  std::vector<std::thread> consumers;
  for (int t = 0; t < kThreads; ++t) {
    consumers.emplace_back([&, t] {
      int ep = eps[t % kInstances];
      for (;;) {
        epoll_event ev;
        bool late;
        int n = TimedWait(
            [&] { return b->epoll_wait(ep, &ev, 1, kLongWaitMs); }, &late);
        if (late) ++timeouts;
        if (n == 0) return;
        if (n != 1) {
          ++errors;
          return;
        }
        if (ev.data.u64 == kStop) return;
        int s = static_cast<int>(ev.data.u64);
        if (in_flight[s].exchange(true)) ++doubles;
        uint64_t v;
        bool got = b->read(src[s], &v, sizeof v) == 8;
        in_flight[s].store(false);
        // Re-arm before the token goes back: the next one finds it armed.
        epoll_event re{};
        re.events = EPOLLIN | EPOLLONESHOT;
        re.data.u64 = static_cast<uint64_t>(s);
        if (b->epoll_ctl(ep, EPOLL_CTL_MOD, src[s], &re) != 0) ++errors;
        if (!got) {
          ++empty;  // reported, yet nothing to read: a second delivery
        } else if (!tokens.Take(s, v)) {
          ++wrong;
        }
      }
    });
  }
  while (budget.Take()) {
    int s;
    while ((s = tokens.Claim(static_cast<int>(rng() % kSources))) < 0) {
      if (budget.PastHardDeadline()) break;
      std::this_thread::yield();
    }
    if (s < 0) break;  // every token stranded: the checks below report it
    uint64_t v = tokens.Next(s);
    ASSERT_EQ(B().write(src[s], &v, sizeof v), 8);
  }
  bool all = tokens.WaitAllTaken(kLongWaitMs);
  uint64_t one = 1;
  ASSERT_EQ(B().write(stop, &one, sizeof one), 8);
  for (auto& th : consumers) th.join();
  ReportBudget(Name(), budget, kWrites);
  EXPECT_TRUE(all) << "tokens never delivered:" << tokens.Stranded();
  EXPECT_EQ(timeouts.load(), 0)
      << "a wait found nothing in " << kLongWaitMs << " ms";
  EXPECT_EQ(doubles.load(), 0) << "an item was held by two threads";
  EXPECT_EQ(empty.load(), 0) << "an item was delivered twice";
  EXPECT_EQ(wrong.load(), 0) << "a token read out of order";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(tokens.taken(), tokens.sent());
}

// EPOLLEXCLUSIVE: 8 sources, each added exclusive to all 4 instances; 8
// threads (2 per instance) wait and read. A write wakes one instance, or
// queues the item on several when none has a waiter, so a report may find
// the token already taken by another instance's thread (allowed, counted);
// every token must still be taken exactly once. Each source is first added
// to a fifth instance nobody waits on: its exclusive entry comes first on
// the source's queue, and since its instance has no waiter it must pass the
// wakeup on (ep_poll_callback's ewake) instead of keeping it.
TEST_P(Stress, ExclusiveAcrossInstancesLosesAndDuplicatesNothing) {
  constexpr int kInstances = 4, kSources = 8, kThreads = 8;
  constexpr long kWrites = 200000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kWrites, 4.0);
  std::array<int, kInstances> eps;
  std::array<int, kSources> src;
  int stop = Eventfd(0, EFD_NONBLOCK);
  for (int& ep : eps) {
    ep = Epoll();
    ASSERT_EQ(AddEv(ep, stop, EPOLLIN, kStop), 0);
  }
  const int idle = Epoll();
  for (int i = 0; i < kSources; ++i) {
    src[i] = Eventfd(0, EFD_NONBLOCK);
    ASSERT_EQ(
        AddEv(idle, src[i], EPOLLIN | EPOLLEXCLUSIVE, static_cast<uint64_t>(i)),
        0);
    for (int ep : eps) {
      ASSERT_EQ(
          AddEv(ep, src[i], EPOLLIN | EPOLLEXCLUSIVE, static_cast<uint64_t>(i)),
          0);
    }
  }
  Tokens tokens(kSources);
  std::atomic<long> stolen{0}, wrong{0}, errors{0}, timeouts{0};
  const Backend* b = &B();
  std::vector<std::thread> consumers;
  for (int t = 0; t < kThreads; ++t) {
    consumers.emplace_back([&, t] {
      int ep = eps[t % kInstances];
      for (;;) {
        epoll_event evs[kSources + 1];
        bool late;
        int n = TimedWait(
            [&] { return b->epoll_wait(ep, evs, kSources + 1, kLongWaitMs); },
            &late);
        if (late) ++timeouts;
        if (n == 0) return;
        if (n < 0) {
          ++errors;
          return;
        }
        for (int i = 0; i < n; ++i) {
          if (evs[i].data.u64 == kStop) return;
          int s = static_cast<int>(evs[i].data.u64);
          uint64_t v;
          if (b->read(src[s], &v, sizeof v) != 8) {
            ++stolen;  // another instance's thread read it first
          } else if (!tokens.Take(s, v)) {
            ++wrong;
          }
        }
      }
    });
  }
  while (budget.Take()) {
    int s;
    while ((s = tokens.Claim(static_cast<int>(rng() % kSources))) < 0) {
      if (budget.PastHardDeadline()) break;
      std::this_thread::yield();
    }
    if (s < 0) break;
    uint64_t v = tokens.Next(s);
    ASSERT_EQ(B().write(src[s], &v, sizeof v), 8);
  }
  bool all = tokens.WaitAllTaken(kLongWaitMs);
  uint64_t one = 1;
  ASSERT_EQ(B().write(stop, &one, sizeof one), 8);
  for (auto& th : consumers) th.join();
  ReportBudget(Name(), budget, kWrites);
  std::printf("[stress] %s: %ld reports found the token already taken\n",
              Name(), stolen.load());
  EXPECT_TRUE(all) << "tokens never delivered:" << tokens.Stranded();
  EXPECT_EQ(timeouts.load(), 0)
      << "a wait found nothing in " << kLongWaitMs << " ms";
  EXPECT_EQ(wrong.load(), 0) << "a token read twice or out of order";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(tokens.taken(), tokens.sent());
  for (int s : src) {
    uint64_t v;
    EXPECT_EQ(B().read(s, &v, sizeof v), -1) << "a token was left unread";
  }
}

// Zero lost wakeups with edge triggering: 4 producers pass tokens through
// 8 ET eventfds of one instance, 4 consumers block in epoll_wait and read
// only what a report names. One token per source is in flight, so every
// token is an edge of its own and must be reported exactly once: a report
// that finds nothing is a duplicate. 1M tokens (or the time cap).
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
  ASSERT_EQ(AddEv(ep, stop, EPOLLIN, kStop), 0);  // LT: wakes everyone
  Tokens tokens(kSources);
  std::atomic<long> errors{0}, timeouts{0}, empty{0}, wrong{0}, waits{0};
  const Backend* b = &B();
  std::vector<std::thread> threads;
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      for (;;) {
        epoll_event evs[kSources + 1];
        bool late;
        int n = TimedWait(
            [&] { return b->epoll_wait(ep, evs, kSources + 1, kLongWaitMs); },
            &late);
        ++waits;
        if (late) ++timeouts;
        if (n == 0) return;
        if (n < 0) {
          ++errors;
          return;
        }
        for (int i = 0; i < n; ++i) {
          if (evs[i].data.u64 == kStop) return;
          int s = static_cast<int>(evs[i].data.u64);
          uint64_t v;
          if (b->read(src[s], &v, sizeof v) != 8) {
            ++empty;
          } else if (!tokens.Take(s, v)) {
            ++wrong;
          }
        }
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    uint64_t pseed = seed_rng();
    producers.emplace_back([&, pseed] {
      std::mt19937_64 rng(pseed);
      while (budget.Take()) {
        int s;
        while ((s = tokens.Claim(static_cast<int>(rng() % kSources))) < 0) {
          if (budget.PastHardDeadline()) return;
          std::this_thread::yield();
        }
        uint64_t v = tokens.Next(s);
        if (b->write(src[s], &v, sizeof v) != 8) {
          ++errors;
          return;
        }
      }
    });
  }
  // Producers end with the budget; then every token must come back.
  for (auto& th : producers) th.join();
  bool all = tokens.WaitAllTaken(kLongWaitMs);
  uint64_t one = 1;
  ASSERT_EQ(B().write(stop, &one, sizeof one), 8);
  for (auto& th : threads) th.join();
  ReportBudget(Name(), budget, kWrites);
  std::printf("[stress] %s: %ld tokens passed, %ld waits returned\n", Name(),
              tokens.sent(), waits.load());
  EXPECT_TRUE(all) << "tokens never reported:" << tokens.Stranded();
  EXPECT_EQ(timeouts.load(), 0)
      << "a wait found nothing in " << kLongWaitMs << " ms";
  EXPECT_EQ(empty.load(), 0) << "an ET item was reported twice for a token";
  EXPECT_EQ(wrong.load(), 0) << "a token read out of order";
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(tokens.taken(), tokens.sent());
}

// ---------------------------------------------------------------------------
// EPOLL_CTL_ADD racing a write to its source. ADD hooks the item's wait
// entry before its first poll of the source (ep_insert), so whatever the
// interleaving either that poll sees the write or the write's wakeup finds
// the entry: a zero-timeout wait after both must report the event, for LT
// and ET items alike. Each round has 32 fresh eventfds; this thread ADDs
// them in turn, announcing each ADD just before it makes it, and a writer
// thread waits for each announcement, spins a random while and writes once
// to that eventfd, so that its writes land before, inside and after the
// ADDs; the two threads run on two different CPUs. (Polling before
// hooking loses a write that falls between the two for good: no later
// write comes.)
TEST_P(Stress, AddRacingAWriteNeverLosesTheEvent) {
  constexpr int kPerRound = 32;
  constexpr long kRounds = 20000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 3.0);
  const Backend* b = &B();
  int ep = Epoll();
  std::array<std::atomic<int>, kPerRound> src;
  // armed = round * kPerRound + i: the ADD of src[i] is about to start.
  std::atomic<long> armed{-1}, written{0}, errors{0};
  std::atomic<bool> stop{false};
  CpuPair cpus;  // the race needs both threads running at once
  uint64_t wseed = rng();
  std::thread writer([&] {
    cpus.PinOther();
    std::mt19937_64 r(wseed);
    for (long g = 1;; ++g) {
      for (int i = 0; i < kPerRound; ++i) {
        const long want = g * kPerRound + i;
        // Spin a while before yielding: a writer that has to be scheduled
        // again would write long after the ADD.
        for (int k = 0; armed.load(std::memory_order_acquire) < want; ++k) {
          if (stop.load(std::memory_order_relaxed)) return;
          if (k > 20000) std::this_thread::yield();
        }
        // Spins over several scales: where the write has to land depends on
        // the machine (0-256 iterations hit most often on the test machine).
        static constexpr uint64_t kScales[] = {64, 256, 1024, 4096};
        SpinIterations(r() % kScales[r() % 4]);
        uint64_t one = 1;
        if (b->write(src[i].load(std::memory_order_relaxed), &one, 8) != 8) {
          ++errors;
        }
      }
      written.store(g, std::memory_order_release);
    }
  });
  ThreadStopper stopper(stop, writer);
  long lost_lt = 0, lost_et = 0;
  for (long g = 1; budget.Take(); ++g) {
    for (auto& fd : src) {
      fd.store(b->eventfd(0, EFD_NONBLOCK), std::memory_order_relaxed);
      ASSERT_GE(fd.load(), 0);
    }
    const bool et = rng() % 2;
    for (int i = 0; i < kPerRound; ++i) {
      epoll_event ev{};
      ev.events = EPOLLIN | (et ? EPOLLET : 0u);
      ev.data.u64 = static_cast<uint64_t>(i);
      // Release: the writer sees src[i] once it sees the announcement.
      armed.store(g * kPerRound + i, std::memory_order_release);
      ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_ADD, src[i].load(), &ev), 0);
    }
    while (written.load(std::memory_order_acquire) != g) {
      ASSERT_FALSE(budget.PastHardDeadline()) << "the writer stopped";
      std::this_thread::yield();
    }
    epoll_event out[kPerRound + 1];
    int n = b->epoll_wait(ep, out, kPerRound + 1, 0);
    if (n != kPerRound) (et ? lost_et : lost_lt) += kPerRound - n;
    for (auto& fd : src) {
      ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_DEL, fd.load(), nullptr), 0);
      ASSERT_EQ(b->close(fd.load()), 0);
    }
  }
  ReportBudget(Name(), budget, kRounds);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(lost_lt, 0) << "LT items whose racing write was never reported";
  EXPECT_EQ(lost_et, 0) << "ET items whose racing write was never reported";
}

// ---------------------------------------------------------------------------
// A harvest that finds a queued LT item idle, racing a write to it. uepoll
// polls a queued LT eventfd before it clears the item's queued flag (which
// a write's wakeup reads to see whether it must link the item): if that
// poll finds nothing, the flag is cleared and the item polled again before
// it is dropped (docs/design.md, "Harvest: the head under one hold of
// lock_"). A write that lands between the first poll and the clear sees
// the item queued and links nothing, so without the second poll it is lost
// for good. Each round: the item is queued and idle (reported, then read
// to 0); this thread announces the round and harvests once with a zero
// timeout while a writer on the other CPU spins a random while and writes
// once; after the write, a zero-timeout wait must report the item. The
// window is a few instructions wide: with the second poll removed, about 4
// writes in 200,000 rounds land in it, so the test runs up to 1,000,000
// rounds (or its time cap) to catch that bug every time.
TEST_P(Stress, IdleLtItemHarvestedRacingAWriteNeverLosesIt) {
  constexpr long kRounds = 1000000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 3.0);
  const Backend* b = &B();
  int ep = Epoll();
  int efd = Eventfd(0, EFD_NONBLOCK);
  ASSERT_EQ(AddEv(ep, efd, EPOLLIN, 7), 0);
  std::atomic<long> armed{0}, written{0}, errors{0};
  std::atomic<bool> stop{false};
  CpuPair cpus;  // the race needs both threads running at once
  uint64_t wseed = rng();
  std::thread writer([&] {
    cpus.PinOther();
    std::mt19937_64 r(wseed);
    for (long g = 1;; ++g) {
      for (int k = 0; armed.load(std::memory_order_acquire) < g; ++k) {
        if (stop.load(std::memory_order_relaxed)) return;
        if (k > 20000) std::this_thread::yield();
      }
      static constexpr uint64_t kScales[] = {16, 64, 256, 1024};
      SpinIterations(r() % kScales[r() % 4]);
      uint64_t one = 1;
      if (b->write(efd, &one, 8) != 8) ++errors;
      written.store(g, std::memory_order_release);
    }
  });
  ThreadStopper stopper(stop, writer);
  long lost = 0, rounds = 0;
  epoll_event out[2];
  for (long g = 1; budget.Take(); ++g) {
    // Queued and idle: the write of the last round was reported (LT: the
    // item stays queued) and is read now.
    uint64_t v;
    if (g > 1) {
      ASSERT_EQ(b->read(efd, &v, sizeof v), 8);
    }
    armed.store(g, std::memory_order_release);
    // Both sides spin a random while, so that the write lands at every
    // point of the harvest over the rounds (the writer alone always lands
    // behind it: it first has to see the announcement).
    SpinIterations(rng() % 2048);
    ASSERT_GE(b->epoll_wait(ep, out, 2, 0), 0);
    while (written.load(std::memory_order_acquire) != g) {
      ASSERT_FALSE(budget.PastHardDeadline()) << "the writer stopped";
    }
    int n = b->epoll_wait(ep, out, 2, 0);
    ASSERT_GE(n, 0);
    if (n != 1) {
      ++lost;
      // Put the item back on the list for the next round (a DEL and ADD
      // poll it afresh), so one loss does not end the test.
      ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
      ASSERT_EQ(AddEv(ep, efd, EPOLLIN, 7), 0);
    }
    ++rounds;
  }
  ReportBudget(Name(), budget, kRounds);
  std::printf("[stress] %s: %ld rounds\n", Name(), rounds);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(lost, 0) << "rounds whose write to an idle LT item was never "
                        "reported";
}

// ---------------------------------------------------------------------------
// The ready list's order when an item fires during a harvest. Items A, B, C
// (LT, ready, in that order; A an eventfd or, every other round, a pipe)
// and D (LT, not ready) are in an instance; a harvest of one event takes A
// while a writer makes D ready at a random moment (before, during or after
// the harvest's scan). The kernel's
// ep_done_scan puts the items the harvest did not reach (B, C) first, then
// those that fired during the scan (D), then the LT items it re-queues (A):
// whatever the timing, the next harvest starts with B, C, and reports all
// four. (Where D lands relative to A depends on the timing, so it is not
// checked.)
TEST_P(Stress, HarvestRacingAnArrivalKeepsUnreachedItemsFirst) {
  constexpr long kRounds = 20000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 3.0);
  const Backend* b = &B();
  std::atomic<long> round{0}, ready{0}, written{0}, errors{0};
  std::atomic<int> d_fd{-1};
  std::atomic<bool> stop{false};
  CpuPair cpus;  // the race needs both threads running at once
  uint64_t wseed = rng();
  std::thread writer([&] {
    cpus.PinOther();
    std::mt19937_64 r(wseed);
    long seen = 0;
    for (;;) {
      long g;
      for (int k = 0; (g = round.load(std::memory_order_acquire)) == seen;
           ++k) {
        if (stop.load(std::memory_order_relaxed)) return;
        if (k > 20000) std::this_thread::yield();
      }
      seen = g;
      ready.store(g, std::memory_order_release);
      SpinIterations(r() % 3000);
      uint64_t one = 1;
      if (b->write(d_fd.load(std::memory_order_relaxed), &one, 8) != 8) {
        ++errors;
      }
      written.store(g, std::memory_order_release);
    }
  });
  ThreadStopper stopper(stop, writer);
  long misordered = 0;
  std::string example;
  for (long r = 0; budget.Take(); ++r) {
    int ep = b->epoll_create1(0);
    ASSERT_GE(ep, 0);
    int fd[4];
    // Every other round A is a pipe holding a byte: uepoll harvests
    // eventfds at the head of the list without a scan, under the lock
    // that D's wakeup then waits for (docs/design.md), so only a pipe
    // first makes its harvest a scan that D can fire during.
    int a_pipe[2] = {-1, -1};
    for (int i = 0; i < 4; ++i) {
      if (i == 0 && r % 2) {
        ASSERT_EQ(b->pipe2(a_pipe, O_NONBLOCK), 0);
        ASSERT_EQ(b->write(a_pipe[1], "x", 1), 1);
        fd[0] = a_pipe[0];
      } else {
        fd[i] = b->eventfd(i < 3 ? 1 : 0, EFD_NONBLOCK);  // A B C ready
      }
      ASSERT_GE(fd[i], 0);
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = static_cast<uint64_t>('A' + i);
      ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &ev), 0);
    }
    d_fd.store(fd[3], std::memory_order_relaxed);
    long g = round.fetch_add(1, std::memory_order_release) + 1;
    for (int k = 0; ready.load(std::memory_order_acquire) != g; ++k) {
      ASSERT_FALSE(budget.PastHardDeadline()) << "the writer stopped";
      if (k > 20000) std::this_thread::yield();
    }
    SpinIterations(rng() % 3000);
    epoll_event out[8];
    ASSERT_EQ(b->epoll_wait(ep, out, 1, 0), 1);
    ASSERT_EQ(out[0].data.u64, uint64_t{'A'});
    while (written.load(std::memory_order_acquire) != g) {
      ASSERT_FALSE(budget.PastHardDeadline()) << "the writer stopped";
      std::this_thread::yield();
    }
    int n = b->epoll_wait(ep, out, 8, 0);
    std::string order;
    for (int i = 0; i < n; ++i) order += static_cast<char>(out[i].data.u64);
    if (n != 4 || order.compare(0, 2, "BC") != 0) {
      ++misordered;
      example = order;
    }
    for (int f : fd) ASSERT_EQ(b->close(f), 0);
    if (a_pipe[1] >= 0) {
      ASSERT_EQ(b->close(a_pipe[1]), 0);
    }
    ASSERT_EQ(b->close(ep), 0);
  }
  ReportBudget(Name(), budget, kRounds);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(misordered, 0) << "e.g. " << example << " (want BC then A, D)";
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
// Writes racing the removal of the item that watches the eventfd. An
// eventfd watched by one epoll item wakes it without the queue's lock
// (docs/design.md, "Lockless eventfd wakeups"), so a writer may be inside
// the item's callback while the main thread removes the item, by DEL or by
// closing its instance. Each round the main thread ADDs the eventfd (ET or
// LT) to a new instance, harvests once (an ET item then leaves the ready
// list, and the writer's next writes take the callback's slow path and
// link it again), waits a random while, and removes it. As on the kernel:
// once DEL returned, a wait reports nothing (no late write links the
// removed item again), and no freed item is touched (ASan: the remover
// waits for the writers' borrows before it frees, WaitForOtherBorrowers).
TEST_P(Stress, WritesRacingRemovalNeverReachARemovedItem) {
  constexpr long kRounds = 100000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 3.0);
  const Backend* b = &B();
  int efd = Eventfd(0, EFD_NONBLOCK);
  std::atomic<bool> stop{false};
  std::atomic<long> errors{0}, writes{0};
  CpuPair cpus;  // the race needs both threads running at once
  std::thread writer([&] {
    cpus.PinOther();
    const uint64_t one = 1;
    while (!stop.load(std::memory_order_relaxed)) {
      if (b->write(efd, &one, 8) != 8) ++errors;
      writes.fetch_add(1, std::memory_order_relaxed);
    }
  });
  ThreadStopper stopper(stop, writer);
  long late = 0, rounds = 0, closes = 0;
  epoll_event out[4];
  while (budget.Take()) {
    const bool et = rng() & 1;
    const bool close_instance = rng() % 4 == 0;
    int ep = b->epoll_create1(0);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN | (et ? EPOLLET : 0u);
    ev.data.u64 = 7;
    ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
    ASSERT_GE(b->epoll_wait(ep, out, 4, 0), 0);
    uint64_t v;
    if (rng() & 1) b->read(efd, &v, sizeof v);  // EAGAIN when just read
    SpinIterations(rng() % 4096);
    if (close_instance) {
      ++closes;
    } else {
      ASSERT_EQ(b->epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
      int n = b->epoll_wait(ep, out, 4, 0);
      ASSERT_GE(n, 0);
      if (n != 0) ++late;
    }
    ASSERT_EQ(b->close(ep), 0);
    ++rounds;
  }
  stop.store(true);
  writer.join();
  ReportBudget(Name(), budget, kRounds);
  std::printf(
      "[stress] %s: %ld rounds (%ld by closing the instance), %ld "
      "writes\n",
      Name(), rounds, closes, writes.load());
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(late, 0) << "rounds whose removed registration was reported";
  EXPECT_GT(writes.load(), rounds) << "the writer did not run alongside";
}

// ---------------------------------------------------------------------------
// A reader blocked on an eventfd and a writer that changes the count
// without the queue's lock (EventFd::TryWrite, then a look at the queue):
// the reader queues its entry and only then tests the count again
// (WaitEventLocked), so either the writer sees the entry or the reader sees
// the count. Tokens: the writer writes round g's value once the reader has
// taken round g-1's, at a random moment, so that the write lands anywhere
// in the reader's way to sleep. A lost wakeup leaves the reader asleep with
// the token unread: the main thread waits for it kLongWaitMs, counts the
// loss, and writes again so that the reader wakes and the test ends.
TEST_P(Stress, BlockingReadRacingAWriteNeverSleepsThroughIt) {
  constexpr long kRounds = 200000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 3.0);
  const Backend* b = &B();
  int efd = Eventfd(0, 0);  // blocking
  std::atomic<long> taken{0}, errors{0};
  std::atomic<bool> stop{false};
  CpuPair cpus;  // the race needs both threads running at once
  std::thread reader([&] {
    cpus.PinOther();
    for (long g = 1; !stop.load(std::memory_order_relaxed); ++g) {
      uint64_t v = 0;
      if (b->read(efd, &v, sizeof v) != 8) ++errors;
      // A value of 0 or more than one token: the stop write, or a round
      // the main thread repaired after a loss.
      taken.store(g, std::memory_order_release);
    }
  });
  long lost = 0, rounds = 0;
  for (long g = 1; budget.Take(); ++g) {
    // Both sides spin a random while: the reader reaches its sleep at a
    // random point after taking the last token, the write lands anywhere.
    SpinIterations(rng() % 4096);
    const uint64_t one = 1;
    ASSERT_EQ(b->write(efd, &one, 8), 8);
    auto end = std::chrono::steady_clock::now() +
               std::chrono::milliseconds(kLongWaitMs);
    while (taken.load(std::memory_order_acquire) < g) {
      if (std::chrono::steady_clock::now() > end) {
        ++lost;
        ASSERT_EQ(b->write(efd, &one, 8), 8);  // wake it: it slept through
        end = std::chrono::steady_clock::now() +
              std::chrono::milliseconds(kLongWaitMs);
      }
    }
    ++rounds;
  }
  stop.store(true);
  const uint64_t one = 1;
  ASSERT_EQ(b->write(efd, &one, 8), 8);  // the reader's last read
  reader.join();
  ReportBudget(Name(), budget, kRounds);
  std::printf("[stress] %s: %ld rounds\n", Name(), rounds);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(lost, 0) << "rounds whose write left the blocked reader asleep";
}

// ---------------------------------------------------------------------------
// A poll() that hooks on an eventfd whose only other watcher is an epoll
// item. While the item is alone, a write wakes it without the queue's lock
// (WaitQueue::WakeUpBorrowed, solo_); once poll()'s entry is on the queue
// too, the write must wake that entry, under the lock. Each round the
// writer writes a token at a random moment after the poller took the last
// one, so that the write lands anywhere in poll()'s hooking (the queue's
// solo_ changes as its entry comes and goes). A write that saw the item
// alone after the entry was queued, or a poll() that tested the count
// before its entry was visible, leaves poll() asleep with the token
// unread: it then returns at its 20 s timeout, which fails the round.
TEST_P(Stress, PollHookingBesideALoneItemNeverMissesAWrite) {
  constexpr long kRounds = 100000;
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(kRounds, 3.0);
  const Backend* b = &B();
  int ep = Epoll();
  int efd = Eventfd(0, EFD_NONBLOCK);
  ASSERT_EQ(AddEv(ep, efd, EPOLLIN | EPOLLET, 1), 0);
  std::atomic<long> taken{0}, errors{0}, slept{0};
  std::atomic<bool> stop{false};
  CpuPair cpus;  // the race needs both threads running at once
  std::thread poller([&] {
    cpus.PinOther();
    for (long g = 1; !stop.load(std::memory_order_relaxed); ++g) {
      pollfd p{efd, POLLIN, 0};
      auto start = std::chrono::steady_clock::now();
      int n = b->poll(&p, 1, kLongWaitMs);
      if (std::chrono::steady_clock::now() - start >=
          std::chrono::milliseconds(kLongWaitMs)) {
        ++slept;
      }
      uint64_t v;
      if (n != 1 || b->read(efd, &v, sizeof v) != 8) ++errors;
      taken.store(g, std::memory_order_release);
    }
  });
  long rounds = 0;
  epoll_event out[2];
  for (long g = 1; budget.Take(); ++g) {
    SpinIterations(rng() % 4096);
    const uint64_t one = 1;
    ASSERT_EQ(b->write(efd, &one, 8), 8);
    // The item's edge: harvested now and then, so that it is both queued
    // and not when the writes come.
    if (rng() % 4 == 0) {
      ASSERT_GE(b->epoll_wait(ep, out, 2, 0), 0);
    }
    // The poller's poll() ends by kLongWaitMs at the latest, so this ends.
    while (taken.load(std::memory_order_acquire) < g) {
      std::this_thread::yield();
    }
    ++rounds;
  }
  stop.store(true);
  const uint64_t one = 1;
  ASSERT_EQ(b->write(efd, &one, 8), 8);  // the poller's last poll()
  poller.join();
  ReportBudget(Name(), budget, kRounds);
  std::printf("[stress] %s: %ld rounds\n", Name(), rounds);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(slept.load(), 0) << "polls that slept through a write";
}

UEPOLL_INSTANTIATE_BACKENDS(Stress);

}  // namespace
}  // namespace uepoll_test
