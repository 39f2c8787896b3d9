// No lost wakeups (docs/contract.md section 7): races between waits and the
// operations that make items ready, repeated for a fixed number of rounds.
// Every event is accounted for exactly once; a lost wakeup shows as a wait
// that runs into its (generous) timeout.
#include <array>
#include <atomic>
#include <barrier>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr uint64_t kStopData = ~uint64_t{0};

class ThreadsRace : public BackendTest {
 protected:
  void Signal(int efd) {
    uint64_t one = 1;
    ASSERT_EQ(B().write(efd, &one, sizeof one), 8);
  }
};

// MOD re-polls an ET item; a wait that starts while a MOD is in flight must
// still see the readiness the MOD reported.
TEST_P(ThreadsRace, ModRacingWaitLosesNoWakeup) {
  constexpr int kRounds = 1000;
  int ep = Epoll();
  int src = Eventfd(1);  // always readable
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, 0), 0);
  // turn == 1: the modifier's move; 0: the waiter's.
  std::atomic<int> turn{0};
  std::atomic<bool> quit{false};
  const Backend* b = &B();
  std::thread modifier([&] {
    for (int i = 0; i < kRounds; ++i) {
      while (turn.load(std::memory_order_acquire) == 0) {
        if (quit.load(std::memory_order_acquire)) return;
        std::this_thread::yield();
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLET;
      b->epoll_ctl(ep, EPOLL_CTL_MOD, src, &ev);
      turn.store(0, std::memory_order_release);
    }
  });
  int lost_round = -1;
  for (int i = 0; i < kRounds; ++i) {
    epoll_event ev;
    if (B().epoll_wait(ep, &ev, 1, kWaitMs) != 1) {
      lost_round = i;
      break;
    }
    // Wait for the previous MOD to finish before arming the next, which then
    // races the epoll_wait above on the next iteration.
    while (turn.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    turn.store(1, std::memory_order_release);
  }
  quit = true;
  modifier.join();
  EXPECT_EQ(lost_round, -1);
}

// Ten ET items, ten waiters that each take one event per round and re-sleep:
// every round's ten events reach ten different waiters, none is lost.
TEST_P(ThreadsRace, TenEtWaitersResleepingAccountForEveryEvent) {
  constexpr int kWaiters = 10;
  constexpr int kRounds = 300;
  int ep = Epoll();
  std::array<int, kWaiters> efd;
  for (int i = 0; i < kWaiters; ++i) {
    efd[i] = Eventfd();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd[i], EPOLLIN | EPOLLET, i), 0);
  }
  const Backend* b = &B();
  // Per waiter: the round it is about to wait in (announced just before the
  // call), and the tid for the sleep check.
  std::array<std::atomic<int>, kWaiters> entered{};
  std::array<std::atomic<pid_t>, kWaiters> tids{};
  std::array<std::atomic<int>, kWaiters> got{};  // per item, over all rounds
  std::atomic<int> finished{0};                  // waits done this round
  std::atomic<int> go{0};                        // round the main released
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWaiters; ++t) {
    threads.emplace_back([&, t] {
      tids[t] = Gettid();
      for (int round = 1; round <= kRounds; ++round) {
        while (go.load(std::memory_order_acquire) < round) {
          if (go.load(std::memory_order_acquire) < 0) return;
          std::this_thread::yield();
        }
        entered[t].store(round, std::memory_order_release);
        epoll_event ev;
        int n = b->epoll_wait(ep, &ev, 1, kWaitMs);
        uint64_t v = 0;
        if (n != 1 || ev.data.u64 >= kWaiters ||
            b->read(efd[ev.data.u64], &v, sizeof v) != 8 || v != 1) {
          failures.fetch_add(1);
        } else {
          got[ev.data.u64].fetch_add(1);
        }
        finished.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  }
  bool ok = true;
  for (int round = 1; round <= kRounds && ok; ++round) {
    finished = 0;
    go.store(round, std::memory_order_release);
    ok = Eventually([&] {
      if (failures.load() > 0) return true;  // reported below
      std::vector<pid_t> all;
      for (int t = 0; t < kWaiters; ++t) {
        if (entered[t].load(std::memory_order_acquire) != round) return false;
        all.push_back(tids[t].load());
      }
      return AllSleepInSyscalls(all);
    });
    if (!ok || failures.load() > 0) {
      ADD_FAILURE() << "round " << round << ": waiters did not park";
      ok = false;
      break;
    }
    for (int i = 0; i < kWaiters; ++i) Signal(efd[i]);
    ok = Eventually([&] { return finished.load() == kWaiters; });
    EXPECT_TRUE(ok) << "round " << round << ": lost wakeup";
  }
  if (!ok) go = -1;
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int i = 0; i < kWaiters && ok; ++i) EXPECT_EQ(got[i].load(), kRounds);
}

// A timed waiter T is handed the wakeup just as its timeout expires. If T
// then returns 0 it must not have consumed the wakeup: the event goes to the
// blocking waiter B. Each round aims the event at T's deadline (with a jitter
// of +-50us: a target for the race, not a synchronization); an event that
// reaches neither shows as B running into its own timeout. Which of two
// waiters is picked first depends on the order they queued (the kernel picks
// the most recent), so the rounds alternate the order.
TEST_P(ThreadsRace, TimedWaiterRacingBlockingWaiterLosesNothing) {
  constexpr int kRounds = 300;
  constexpr auto kTimed = std::chrono::microseconds(2000);
  int ep = Epoll();
  int src = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, 1), 0);
  const Backend* b = &B();
  using Clock = std::chrono::steady_clock;
  int timed_got = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<Clock::time_point> t_start{};
    auto timed = [&](epoll_event* ev) {
      timespec ts{0, std::chrono::nanoseconds(kTimed).count()};
      t_start.store(Clock::now());
      return b->epoll_pwait2(ep, ev, 1, &ts, nullptr);
    };
    auto blocking = [&](epoll_event* ev) {
      return b->epoll_wait(ep, ev, 1, kWaitMs);
    };
    std::unique_ptr<Waiter> t, w;
    if (round % 2 == 0) {
      t = std::make_unique<Waiter>(timed);
      ASSERT_TRUE(t->Parked() || t->Done());
      w = std::make_unique<Waiter>(blocking);
      ASSERT_TRUE(w->Parked());
    } else {
      w = std::make_unique<Waiter>(blocking);
      ASSERT_TRUE(w->Parked());
      t = std::make_unique<Waiter>(timed);
      ASSERT_TRUE(t->Parked() || t->Done());
    }
    auto target = t_start.load() + kTimed +
                  std::chrono::microseconds(10 * (round % 11 - 5));
    while (Clock::now() < target) {
    }
    Signal(src);
    ASSERT_TRUE(t->WaitDone());
    ASSERT_GE(t->result(), 0);
    if (t->result() == 1) {
      ++timed_got;
      Signal(src);  // B's own event
    }
    ASSERT_TRUE(w->WaitDone());
    ASSERT_EQ(w->result(), 1) << "round " << round << ": wakeup lost";
    epoll_event ev;
    ASSERT_EQ(B().epoll_wait(ep, &ev, 1, 0), 0);
  }
  RecordProperty("timed_waiter_got", timed_got);
}

// Concurrent harvests of an always-ready LT item: each poller must find it,
// even while another thread has it out of the ready list being reported.
TEST_P(ThreadsRace, SixtyFourZeroTimeoutPollersNeverSeeZero) {
  constexpr int kThreads = 64;
  constexpr int kCalls = 200;
  int ep = Epoll();
  int src = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, 5), 0);
  const Backend* b = &B();
  std::atomic<int> zeros{0};
  std::atomic<int> errors{0};
  std::barrier start(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < kCalls; ++i) {
        epoll_event ev;
        int n = b->epoll_wait(ep, &ev, 1, 0);
        if (n == 0) zeros.fetch_add(1);
        if (n < 0 || (n == 1 && ev.data.u64 != 5)) errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(zeros.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

// EPOLL_CTL_ADD or MOD racing a write that makes the source ready. The item
// hooks its wait entry (ADD) or publishes its new interest (MOD) before its
// first poll, so the event is seen either by that poll or by the callback
// the write makes, never lost. Polling first would lose it for good: the
// write's callback finds no entry (or the old interest), the poll saw
// nothing, and the item stays off the ready list. A zero-timeout wait after
// both is the oracle, each round. The writer starts each write a varying
// number of spins after the ctl call is released, so that the rounds sweep
// the window between the two steps.
class ThreadsCtlRace : public ThreadsRace {
 protected:
  // Rounds per registration mode: kMaxRounds, or as many as fit in 3 s but
  // at least kMinRounds (a loaded machine makes rounds slow) unless that
  // takes 30 s.
  static constexpr int kMaxRounds = 10000;
  static constexpr int kMinRounds = 1000;

  // Spins until pred() holds, yielding now and then so that a spinner
  // does not keep a loaded machine's only free core from the thread it
  // waits for. Returns false if stop() held first.
  template <class Pred, class Stop>
  static bool SpinUntil(Pred pred, Stop stop) {
    for (unsigned i = 1; !pred(); ++i) {
      if (stop()) return false;
      if (i % 4096 == 0) std::this_thread::yield();
    }
    return true;
  }

  // Runs rounds of: reset(), then ctl() on this thread while another
  // writes to src; then the event must be reported. Returns {rounds run,
  // rounds that lost the event}.
  template <class Reset, class CtlCall>
  std::pair<int, int> Rounds(int ep, int src, Reset reset, CtlCall ctl) {
    const Backend* b = &B();
    // Two CPUs when there are: the race needs both threads running at once.
    const std::vector<int> cpus = AllowedCpus();
    std::optional<ScopedCpuPin> pin;
    if (cpus.size() >= 2) pin.emplace(cpus[0]);
    std::atomic<int> go{0};     // the round the writer may write in; -1: quit
    std::atomic<int> ready{0};  // the round the writer is spinning for
    std::atomic<int> done{0};   // the last round the writer wrote in
    std::thread writer([&] {
      std::optional<ScopedCpuPin> writer_pin;
      if (cpus.size() >= 2) writer_pin.emplace(cpus[1]);
      for (int round = 1;; ++round) {
        // On its CPU and spinning: the ctl call starts only now, so that
        // both run at once (SpinUntil yields now and then, which may let a
        // loaded machine take the CPU away; that round is merely weaker).
        ready.store(round, std::memory_order_release);
        if (!SpinUntil(
                [&] { return go.load(std::memory_order_acquire) >= round; },
                [&] { return go.load(std::memory_order_acquire) < 0; })) {
          return;
        }
        // 0 to ~1 us, in steps of about a nanosecond, in a scattered order.
        SpinDelay((round * 7919) % 1024);
        uint64_t one = 1;
        b->write(src, &one, sizeof one);
        done.store(round, std::memory_order_release);
      }
    });
    const auto t0 = std::chrono::steady_clock::now();
    auto more = [&](int done_rounds) {
      auto spent = std::chrono::steady_clock::now() - t0;
      return done_rounds < kMaxRounds && spent < std::chrono::seconds(30) &&
             (spent < std::chrono::seconds(3) || done_rounds < kMinRounds);
    };
    int lost = 0;
    int round = 1;
    for (; more(round - 1); ++round) {
      reset();
      if (HasFatalFailure()) break;
      SpinUntil([&] { return ready.load(std::memory_order_acquire) >= round; },
                [] { return false; });
      go.store(round, std::memory_order_release);
      ctl();
      SpinUntil([&] { return done.load(std::memory_order_acquire) >= round; },
                [] { return false; });
      epoll_event ev;
      if (b->epoll_wait(ep, &ev, 1, 0) != 1 || !(ev.events & EPOLLIN)) ++lost;
    }
    go.store(-1, std::memory_order_release);
    writer.join();
    return {round - 1, lost};
  }

  // Empties the eventfd (nonblocking) and checks that ep reports nothing:
  // a harvest also drops any stale entry, so that only this round's
  // wakeup can make the next report.
  void Drain(int ep, int src) {
    uint64_t v;
    B().read(src, &v, sizeof v);
    epoll_event ev;
    ASSERT_EQ(B().epoll_wait(ep, &ev, 1, 0), 0);
  }
};

TEST_P(ThreadsCtlRace, AddRacingWriteLosesNoEvent) {
  for (uint32_t mode : {0u, static_cast<uint32_t>(EPOLLET)}) {
    SCOPED_TRACE(mode ? "ET" : "LT");
    int ep = Epoll();
    int src = Eventfd();
    bool added = false;
    auto [rounds, lost] = Rounds(
        ep, src,
        [&] {
          if (added) {
            ASSERT_EQ(Ctl(ep, EPOLL_CTL_DEL, src, 0, 0), 0);
          }
          added = false;
          Drain(ep, src);
        },
        [&] { added = Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | mode, 1) == 0; });
    EXPECT_EQ(lost, 0) << "of " << rounds << " rounds";
    ASSERT_EQ(Close(src), 0);
    ASSERT_EQ(Close(ep), 0);
  }
}

TEST_P(ThreadsCtlRace, ModRacingWriteLosesNoEvent) {
  for (uint32_t mode : {0u, static_cast<uint32_t>(EPOLLET)}) {
    SCOPED_TRACE(mode ? "ET" : "LT");
    int ep = Epoll();
    int src = Eventfd();
    // Interest 0 (only the implicit ERR|HUP, which an eventfd never has):
    // the write's callback filters itself out until MOD adds IN.
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, 0, 1), 0);
    auto [rounds, lost] = Rounds(
        ep, src,
        [&] {
          ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, src, 0, 1), 0);
          Drain(ep, src);
        },
        [&] { Ctl(ep, EPOLL_CTL_MOD, src, EPOLLIN | mode, 1); });
    EXPECT_EQ(lost, 0) << "of " << rounds << " rounds";
    ASSERT_EQ(Close(src), 0);
    ASSERT_EQ(Close(ep), 0);
  }
}

UEPOLL_INSTANTIATE_BACKENDS(ThreadsRace);
UEPOLL_INSTANTIATE_BACKENDS(ThreadsCtlRace);

}  // namespace
}  // namespace uepoll_test
