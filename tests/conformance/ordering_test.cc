// docs/contract.md section 6: reports come in the order items became ready, a
// short buffer takes exactly maxevents, and nothing is reported twice.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <set>
#include <thread>
#include <vector>

#include "conformance/helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class Ordering : public ConformanceTest {
 protected:
  std::vector<uint64_t> Datas(int ep, int max = 16) {
    std::vector<uint64_t> out;
    for (const Ev& e : Wait(ep, max)) out.push_back(e.data);
    return out;
  }
  // n idle eventfds registered with data 0..n-1.
  std::vector<int> Items(int ep, int n, uint32_t events) {
    std::vector<int> fds;
    for (int i = 0; i < n; ++i) {
      fds.push_back(Eventfd());
      EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, fds.back(), events, uint64_t(i)), 0);
    }
    return fds;
  }
};

using Ids = std::vector<uint64_t>;

TEST_P(Ordering, ReportOrderIsOrderOfBecomingReady) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 4, EPOLLIN);
  for (int i : {2, 0, 3, 1}) EfdWrite(f[i], 1);
  EXPECT_EQ(Datas(ep), (Ids{2, 0, 3, 1}));
}

TEST_P(Ordering, ItemsReadyAtAddQueueInAddOrder) {
  int ep = Epoll();
  int a = Eventfd(1), b = Eventfd(1), c = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN, 0), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN, 1), 0);
  EXPECT_EQ(Datas(ep), (Ids{2, 0, 1}));
}

TEST_P(Ordering, NewEventOnQueuedItemKeepsItsPlace) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 3, EPOLLIN | EPOLLET);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  EfdWrite(f[0], 1);
  EfdWrite(f[2], 1);
  EXPECT_EQ(Datas(ep), (Ids{0, 1, 2}));
}

TEST_P(Ordering, ModOfQueuedItemKeepsItsPlace) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 2, EPOLLIN);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, f[0], EPOLLIN, 7), 0);
  EXPECT_EQ(Datas(ep), (Ids{7, 1}));
}

TEST_P(Ordering, DelAndReAddMovesItemToTail) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 2, EPOLLIN);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  ASSERT_EQ(B().epoll_ctl(ep, EPOLL_CTL_DEL, f[0], nullptr), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, f[0], EPOLLIN, 0), 0);
  EXPECT_EQ(Datas(ep), (Ids{1, 0}));
}

TEST_P(Ordering, LtItemGoesBehindLaterReadyItems) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 3, EPOLLIN);
  EfdWrite(f[0], 1);
  EfdWrite(f[1], 1);
  ASSERT_EQ(Datas(ep, 1), (Ids{0}));
  EfdWrite(f[2], 1);
  EXPECT_EQ(Datas(ep), (Ids{1, 0, 2}));
}

TEST_P(Ordering, MaxeventsSmallerThanReadyReturnsExactlyMaxNoDuplicates) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 5, EPOLLIN | EPOLLET);
  for (int fd : f) EfdWrite(fd, 1);
  std::vector<size_t> sizes;
  std::set<uint64_t> seen;
  for (int round = 0; round < 4; ++round) {
    Ids got = Datas(ep, 2);
    sizes.push_back(got.size());
    for (uint64_t d : got) EXPECT_TRUE(seen.insert(d).second) << d;
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1, 0}));
  EXPECT_EQ(seen.size(), 5u);
}

TEST_P(Ordering, LeftoverItemsComeFirstInTheNextCall) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 4, EPOLLIN | EPOLLET);
  for (int fd : f) EfdWrite(fd, 1);
  ASSERT_EQ(Datas(ep, 3), (Ids{0, 1, 2}));
  EfdWrite(f[0], 1);
  EXPECT_EQ(Datas(ep), (Ids{3, 0}));
}

TEST_P(Ordering, IdleQueuedItemDoesNotUseASlot) {
  int ep = Epoll();
  std::vector<int> f = Items(ep, 3, EPOLLIN);
  for (int fd : f) EfdWrite(fd, 1);
  EfdRead(f[1]);
  EXPECT_EQ(Datas(ep, 2), (Ids{0, 2}));
}

TEST_P(Ordering, OneshotItemLeavesRoundRobin) {
  int ep = Epoll();
  int a = Eventfd(1), b = Eventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN | EPOLLONESHOT, 0), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN, 1), 0);
  EXPECT_EQ(Datas(ep, 1), (Ids{0}));
  EXPECT_EQ(Datas(ep), (Ids{1}));
  EXPECT_EQ(Datas(ep), (Ids{1}));
}

// One ready list holding eventfds and pipes, level-triggered, edge-
// triggered, one-shot and an item that went idle while queued: every
// harvest reports the first maxevents ready items in list order, drops the
// idle one, and re-queues the level-triggered ones behind the rest. uepoll
// takes the first few eventfds of a harvest without starting a scan
// (docs/design.md, "Harvest: the head under one hold of lock_"), so the
// lengths below put the end of that part, and the first pipe, at
// different places in the harvest; the order must not show where it was.
TEST_P(Ordering, HarvestsAcrossSourceKindsKeepListOrder) {
  int ep = Epoll();
  struct Item {
    uint64_t id;
    char mode;  // 'l' LT, 'e' ET, 'o' ONESHOT, 's' LT but idle when polled
  };
  std::deque<Item> model;
  uint64_t next_id = 0;
  auto add_eventfd = [&](char mode) {
    int fd = Eventfd(1);
    uint32_t ev = EPOLLIN | (mode == 'e' ? EPOLLET : 0u) |
                  (mode == 'o' ? EPOLLONESHOT : 0u);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, ev, next_id), 0);
    // Queued by the ADD; the read's wakeup (EPOLLOUT) does not dequeue it.
    if (mode == 's') EXPECT_EQ(EfdRead(fd), 1u);
    model.push_back({next_id++, mode});
  };
  auto add_pipe = [&] {
    int p[2];
    Pipe(p);
    ASSERT_EQ(WriteBytes(p[1], 1), 1);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN, next_id), 0);
    model.push_back({next_id++, 'l'});
  };
  for (char m : {'l', 'l', 'l', 'o', 'l', 'l', 's', 'e', 'l', 'l', 'l', 'l'}) {
    add_eventfd(m);
  }
  add_pipe();
  add_eventfd('l');
  add_pipe();
  add_eventfd('l');
  for (int max : {1, 3, 8, 9, 64, 2, 5, 7, 13, 64}) {
    Ids want;
    std::vector<Item> requeue;
    while (!model.empty() && static_cast<int>(want.size()) < max) {
      Item it = model.front();
      model.pop_front();
      if (it.mode == 's') continue;
      want.push_back(it.id);
      if (it.mode == 'l') requeue.push_back(it);
    }
    model.insert(model.end(), requeue.begin(), requeue.end());
    EXPECT_EQ(Datas(ep, max), want) << "maxevents " << max;
  }
}

// Events that arrive while a harvest scans the ready list. The scan
// (ep_send_events) takes the list private; callbacks meanwhile chain their
// items on the overflow list; then ep_done_scan rebuilds the ready list as:
// the items the scan did not reach, then the arrivals in arrival order, then
// the LT items the scan re-queued. So an ET item that fires during the scan
// is reported, next time, before the LT items the scan re-queued; one that
// fires after the scan, behind them.
//
// Nothing in one thread can fire during a scan (polls have no side
// effects), so a writer thread fires the ET items E0..E31, in that order
// and spaced out, while this thread harvests 256 ready LT items (plus any E
// already ready), starting at a point that varies from round to round;
// then, with the writer done, a second harvest shows the rebuilt list. Each
// E fired before the scan (then the first harvest reports it, after the LT
// items), during it, or after it, in write order, so every outcome has the
// shape
//   first:  [LT items] [E0 .. Ea-1]
//   second: [Ea .. Eb-1] [the same LT items, same order] [Eb .. E31]
// for some a <= b, which both backends must produce in every round. Rounds
// with a < b (an arrival during the scan, placed before the re-queued LT
// items) are the ones that tell the kernel's order from "arrivals after
// the re-queued items" (which always gives a = b); the rounds sweep the
// writer's start across the scan until enough of them were seen.
TEST_P(Ordering, ArrivalsDuringAHarvestComeBeforeRequeuedLtItems) {
  constexpr int kLt = 256;
  constexpr int kEt = 32;
  constexpr uint64_t kEtBase = 1000;
  constexpr int kMaxRounds = 3000;
  constexpr int kWantMidScanRounds = 10;
  const auto budget = std::chrono::seconds(20);
  int ep = Epoll();
  for (int i = 0; i < kLt; ++i) {
    int fd = Eventfd(1);  // always readable
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, uint64_t(i)), 0);
  }
  std::vector<int> et;
  for (int i = 0; i < kEt; ++i) {
    et.push_back(Eventfd());
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, et.back(), EPOLLIN | EPOLLET,
                  kEtBase + uint64_t(i)),
              0);
  }
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() < 2) {
    GTEST_SKIP() << "needs two CPUs: a write can only land during a scan "
                    "if the writer runs while the harvest does";
  }
  ScopedCpuPin pin(cpus[0]);
  const Backend* b = &B();
  std::atomic<int> go{0};     // the round the writer may fire in; -1: quit
  std::atomic<int> ready{0};  // the round the writer is spinning for
  std::atomic<int> done{0};
  std::thread writer([&] {
    ScopedCpuPin writer_pin(cpus[1]);
    for (int round = 1;; ++round) {
      // Announce that this thread is on its CPU and spinning, so that the
      // harvest starts while it runs. It spins without yielding for a
      // while (a loaded machine shares both CPUs with other work), then
      // yields now and then.
      ready.store(round, std::memory_order_release);
      int g;
      for (unsigned i = 1; (g = go.load(std::memory_order_acquire)) < round;
           ++i) {
        if (g < 0) return;
        if (i > (1u << 20) && i % 4096 == 0) {
          std::this_thread::yield();
          ready.store(round, std::memory_order_release);
        }
      }
      // Spaced out, so that the writes span a few microseconds.
      uint64_t one = 1;
      for (int fd : et) {
        b->write(fd, &one, sizeof one);
        SpinDelay(200);
      }
      done.store(round, std::memory_order_release);
    }
  });

  std::vector<epoll_event> buf(kLt + kEt);
  auto harvest = [&] {
    int n = b->epoll_wait(ep, buf.data(), kLt + kEt, 0);
    std::vector<uint64_t> out;
    for (int i = 0; i < n; ++i) out.push_back(buf[i].data.u64);
    return out;
  };
  auto ets = [&](int from, int to) {
    std::vector<uint64_t> v;
    for (int i = from; i < to; ++i) v.push_back(kEtBase + uint64_t(i));
    return v;
  };
  const auto end = std::chrono::steady_clock::now() + budget;
  int rounds = 0, mid_scan_rounds = 0;
  for (int round = 1;
       round <= kMaxRounds && mid_scan_rounds < kWantMidScanRounds &&
       std::chrono::steady_clock::now() < end;
       ++round) {
    for (unsigned i = 1; ready.load(std::memory_order_acquire) < round; ++i) {
      if (i % 4096 == 0) std::this_thread::yield();
    }
    go.store(round, std::memory_order_release);
    // The harvest starts 0 to a few microseconds into the writes, scattered.
    SpinDelay((round * 7919) % 8192);
    std::vector<uint64_t> first = harvest();
    for (unsigned i = 1; done.load(std::memory_order_acquire) < round; ++i) {
      if (i % 4096 == 0) std::this_thread::yield();
    }
    std::vector<uint64_t> second = harvest();
    ++rounds;

    // first = [LT block][E0 .. Ea-1]
    ASSERT_GE(first.size(), size_t{kLt}) << "round " << round;
    std::vector<uint64_t> lt(first.begin(), first.begin() + kLt);
    ASSERT_EQ(std::set<uint64_t>(lt.begin(), lt.end()).size(), size_t{kLt});
    ASSERT_LT(*std::max_element(lt.begin(), lt.end()), uint64_t{kLt});
    const int a = static_cast<int>(first.size()) - kLt;
    ASSERT_EQ(std::vector<uint64_t>(first.begin() + kLt, first.end()),
              ets(0, a))
        << "round " << round;
    // second = [Ea .. Eb-1][LT block][Eb .. E31]
    ASSERT_EQ(second.size(), static_cast<size_t>(kLt + kEt - a))
        << "round " << round;
    int bb = a;
    while (bb - a < static_cast<int>(second.size()) &&
           second[static_cast<size_t>(bb - a)] >= kEtBase) {
      ++bb;
    }
    ASSERT_EQ(std::vector<uint64_t>(second.begin(), second.begin() + (bb - a)),
              ets(a, bb))
        << "round " << round;
    ASSERT_EQ(std::vector<uint64_t>(second.begin() + (bb - a),
                                    second.begin() + (bb - a) + kLt),
              lt)
        << "round " << round << ": the LT items keep their order";
    ASSERT_EQ(
        std::vector<uint64_t>(second.begin() + (bb - a) + kLt, second.end()),
        ets(bb, kEt))
        << "round " << round;
    if (bb > a) ++mid_scan_rounds;
  }
  go.store(-1, std::memory_order_release);
  writer.join();
  RecordProperty("rounds", rounds);
  RecordProperty("mid_scan_rounds", mid_scan_rounds);
  EXPECT_GE(mid_scan_rounds, 1)
      << "in " << rounds
      << " rounds no event that arrived during a harvest came before the "
         "LT items it re-queued";
}

UEPOLL_INSTANTIATE_BACKENDS(Ordering);

}  // namespace
}  // namespace uepoll_test
