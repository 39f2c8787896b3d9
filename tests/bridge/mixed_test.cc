// Instances holding both kinds of descriptor: the
// backend's own sources (uepoll objects on uepoll) beside kernel ones in one
// instance, fairness between them, nesting of instances that hold kernel
// descriptors (readiness, edges, the loop and depth checks), and poll()
// over arrays that mix both kinds. Differential: on the kernel backend the
// "backend's own" sources are kernel objects too, and the expectations are
// the same. min_wait (uepoll_epoll_pwait3) has no kernel analogue and is
// tested on uepoll alone (BridgeMixedMinWait).
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "bridge/bridge.h"

namespace uepoll_test {
namespace {

using Evs = std::vector<Ev>;

class BridgeMixed : public BridgeTest {
 protected:
  // ADD child into parent; 0 or errno.
  int AddErr(int parent, int child, uint32_t events = EPOLLIN) {
    errno = 0;
    return Ctl(parent, EPOLL_CTL_ADD, child, events, 0) == 0 ? 0 : errno;
  }
  int KAddErr(int parent, int child) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    errno = 0;
    return ::epoll_ctl(parent, EPOLL_CTL_ADD, child, &ev) == 0 ? 0 : errno;
  }
};

TEST_P(BridgeMixed, InstanceHoldingBothKindsReturnsBoth) {
  int ep = Epoll();
  int u = Eventfd(1);
  int k = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, u, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 2), 0);
  EXPECT_EQ(Sorted(Wait(ep)), (Evs{{EPOLLIN, 1}, {EPOLLIN, 2}}));
  // Each kind's item follows its own object.
  EfdRead(u);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
  uint64_t v;
  ASSERT_EQ(::read(k, &v, 8), 8);
  EXPECT_TRUE(Wait(ep).empty());
  EfdWrite(u, 1);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  // ET on both kinds: one report per edge each.
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, u, EPOLLIN | EPOLLET, 3), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, k, EPOLLIN | EPOLLET, 4), 0);
  KSignal(k);
  EXPECT_EQ(Sorted(Wait(ep)), (Evs{{EPOLLIN, 3}, {EPOLLIN, 4}}));
  EXPECT_TRUE(Wait(ep).empty());
  KSignal(k);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 4}}));
}

TEST_P(BridgeMixed, BlockedWaitWakesOnEitherKind) {
  int ep = Epoll();
  int u = Eventfd();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, u, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN | EPOLLET, 2), 0);
  const Backend* b = &B();
  for (bool kernel : {true, false, true}) {
    SCOPED_TRACE(kernel ? "kernel" : "backend's own");
    // The wait's own timeout lies well past WaitDone's deadline: a wait that
    // missed its wakeup and ended at a timeout as long as that deadline
    // would still report the event (the final check after a timeout), and
    // pass or fail by which of two 10 s timers came first.
    Waiter w([b, ep](epoll_event* ev) {
      return b->epoll_wait(ep, ev, 4, 3 * kWaitMs);
    });
    ASSERT_TRUE(w.Parked());
    std::thread writer([&] {
      if (kernel) {
        KSignal(k);
      } else {
        EfdWrite(u, 1);
      }
    });
    writer.join();
    ASSERT_TRUE(w.WaitDone());
    ASSERT_EQ(w.result(), 1);
    EXPECT_EQ(w.event(0).data.u64, kernel ? 2u : 1u);
  }
}

// Both kinds always ready (LT), maxevents small: neither starves. Items are
// added alternately, so that the kernel's round robin alternates too.
TEST_P(BridgeMixed, NeitherKindStarvesWithSmallMaxevents) {
  constexpr int kPerKind = 3;
  int ep = Epoll();
  for (int i = 0; i < kPerKind; ++i) {
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, Eventfd(1), EPOLLIN, 2 * i), 0);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, KEventfd(1), EPOLLIN, 2 * i + 1), 0);
  }
  for (int max : {1, 2}) {
    SCOPED_TRACE(max);
    constexpr int kWaits = 24;
    std::vector<std::set<int>> kinds(kWaits);  // 0 own, 1 kernel
    std::map<uint64_t, int> per_item;
    for (int i = 0; i < kWaits; ++i) {
      Evs got = Wait(ep, max);
      ASSERT_EQ(static_cast<int>(got.size()), max);
      for (const Ev& e : got) {
        kinds[i].insert(static_cast<int>(e.data % 2));
        ++per_item[e.data];
      }
    }
    for (int i = 0; i + 1 < kWaits; ++i) {
      std::set<int> two = kinds[i];
      two.insert(kinds[i + 1].begin(), kinds[i + 1].end());
      EXPECT_EQ(two.size(), 2u)
          << "waits " << i << " and " << i + 1 << " returned one kind only";
    }
    // Within each kind, round robin: every item was served equally.
    ASSERT_EQ(per_item.size(), size_t{2 * kPerKind});
    for (auto [data, n] : per_item) {
      EXPECT_EQ(n, kWaits * max / (2 * kPerKind)) << "item " << data;
    }
  }
}

//  t -(ew)- e0
//            | (lt)
//           e1
//            | (lt)
//            k      (a kernel eventfd, written by another thread)
TEST_P(BridgeMixed, BlockedWaitOnAParentIsWokenByAKernelFdInAChild) {
  for (bool child_first : {true, false}) {
    SCOPED_TRACE(child_first ? "kernel fd added before nesting"
                             : "kernel fd added after nesting");
    int e0 = Epoll();
    int e1 = Epoll();
    int k = KEventfd();
    if (child_first) {
      ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
    }
    ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, EPOLLIN, 1), 0);
    if (!child_first) {
      ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
    }
    const Backend* b = &B();
    Waiter w(
        [b, e0](epoll_event* ev) { return b->epoll_wait(e0, ev, 4, kWaitMs); });
    ASSERT_TRUE(w.Parked());
    std::thread writer([k] { KSignal(k); });
    writer.join();
    ASSERT_TRUE(w.WaitDone());
    ASSERT_EQ(w.result(), 1);
    EXPECT_EQ(w.event(0).data.u64, 1u);
    EXPECT_EQ(Wait(e1), (Evs{{EPOLLIN, 7}}));
  }
}

// The kernel fd is added to the child while a thread is already blocked on
// the parent.
TEST_P(BridgeMixed, KernelFdAddedToAChildUnderABlockedParentWaiter) {
  int e0 = Epoll();
  int e1 = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, EPOLLIN, 1), 0);
  const Backend* b = &B();
  Waiter w(
      [b, e0](epoll_event* ev) { return b->epoll_wait(e0, ev, 4, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
  ASSERT_TRUE(w.Parked()) << "an idle ADD woke the parent's waiter for good";
  KSignal(k);
  ASSERT_TRUE(w.WaitDone());
  ASSERT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 1u);
}

//  e0 -(et)- e1 -(lt)- k
// Each kernel event is one edge for the parent's ET item, seen by zero-
// timeout waits (nobody sleeps) and by poll().
TEST_P(BridgeMixed, EtParentSeesOneEdgePerKernelEventInAChild) {
  int e0 = Epoll();
  int e1 = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, EPOLLIN | EPOLLET, 1), 0);
  EXPECT_TRUE(Wait(e0).empty());
  for (int edge = 0; edge < 3; ++edge) {
    SCOPED_TRACE(edge);
    KSignal(k);  // the child stays readable: nothing is read
    EXPECT_EQ(PollMask(e0), POLLIN | POLLRDNORM);
    EXPECT_EQ(Wait(e0), (Evs{{EPOLLIN, 1}}));
    EXPECT_TRUE(Wait(e0).empty()) << "one edge per event";
  }
}

//  e0 -(lt)- e1 -(lt)- k
TEST_P(BridgeMixed, LtParentSeesAKernelEventInAChildWithoutSleeping) {
  int e0 = Epoll();
  int e1 = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, EPOLLIN, 1), 0);
  EXPECT_EQ(PollMask(e0), 0);
  KSignal(k);
  EXPECT_EQ(PollMask(e0), POLLIN | POLLRDNORM);
  EXPECT_EQ(Wait(e0), (Evs{{EPOLLIN, 1}}));
  EXPECT_EQ(Wait(e0), (Evs{{EPOLLIN, 1}})) << "level-triggered";
  uint64_t v;
  ASSERT_EQ(::read(k, &v, 8), 8);
  EXPECT_TRUE(Wait(e0).empty());
}

//  t -(ew)- e0 -(lt)- e1 -(et)- e2 -(lt)- k       three levels
TEST_P(BridgeMixed, KernelEventPropagatesThroughThreeLevels) {
  int e0 = Epoll(), e1 = Epoll(), e2 = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(e2, EPOLL_CTL_ADD, k, EPOLLIN, 7), 0);
  ASSERT_EQ(Ctl(e1, EPOLL_CTL_ADD, e2, EPOLLIN | EPOLLET, 2), 0);
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, e1, EPOLLIN, 1), 0);
  KSignal(k);
  EXPECT_EQ(Wait(e0), (Evs{{EPOLLIN, 1}}));
  EXPECT_EQ(Wait(e1), (Evs{{EPOLLIN, 2}}));
  EXPECT_TRUE(Wait(e0).empty()) << "e1's ET item was consumed";
  const Backend* b = &B();
  Waiter w(
      [b, e0](epoll_event* ev) { return b->epoll_wait(e0, ev, 4, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  std::thread writer([k] { KSignal(k); });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  ASSERT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 1u);
}

// The loop and depth checks between the backend's instances are unchanged
// when they hold kernel descriptors.
//  e0 -> e1 -> e2, each holding a kernel eventfd;  e2 <- e0 refused
TEST_P(BridgeMixed, CycleOfInstancesHoldingKernelFdsIsEloop) {
  int e[3];
  for (int& x : e) {
    x = Epoll();
    ASSERT_EQ(Ctl(x, EPOLL_CTL_ADD, KEventfd(), EPOLLIN, 0), 0);
  }
  ASSERT_EQ(AddErr(e[0], e[1]), 0);
  ASSERT_EQ(AddErr(e[1], e[2]), 0);
  EXPECT_EQ(AddErr(e[2], e[0]), ELOOP);
  EXPECT_EQ(AddErr(e[1], e[0]), ELOOP);
  EXPECT_EQ(AddErr(e[2], e[2]), EINVAL);
  EXPECT_ERRNO(Ctl(e[2], EPOLL_CTL_DEL, e[0], 0, 0), ENOENT);
}

//  e0 - e1 - e2 - e3 - e4 - e5, each holding a kernel eventfd: the sixth
//  is refused, whichever end is linked last.
TEST_P(BridgeMixed, ChainOfSixInstancesHoldingKernelFdsIsEloop) {
  for (bool top_down : {true, false}) {
    SCOPED_TRACE(top_down ? "top-down" : "bottom-up");
    int e[6];
    for (int& x : e) {
      x = Epoll();
      ASSERT_EQ(Ctl(x, EPOLL_CTL_ADD, KEventfd(), EPOLLIN, 0), 0);
    }
    std::vector<int> errs;
    if (top_down) {
      for (int i = 0; i < 5; ++i) errs.push_back(AddErr(e[i], e[i + 1]));
    } else {
      for (int i = 4; i >= 0; --i) errs.push_back(AddErr(e[i], e[i + 1]));
    }
    EXPECT_EQ(errs, (std::vector<int>{0, 0, 0, 0, ELOOP}));
  }
}

// A kernel epoll instance inside the backend's instance, holding a kernel
// eventfd:  e0 -(et)- K -(lt)- k
TEST_P(BridgeMixed, KernelEpollInsideAnInstance) {
  int e0 = Epoll();
  int K = KEpoll();
  int k = KEventfd();
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 7;
  ASSERT_EQ(::epoll_ctl(K, EPOLL_CTL_ADD, k, &ev), 0);
  ASSERT_EQ(Ctl(e0, EPOLL_CTL_ADD, K, EPOLLIN | EPOLLET, 1), 0);
  EXPECT_TRUE(Wait(e0).empty());
  for (int edge = 0; edge < 2; ++edge) {
    KSignal(k);
    EXPECT_EQ(Wait(e0), (Evs{{EPOLLIN, 1}}));
    EXPECT_TRUE(Wait(e0).empty());
  }
  const Backend* b = &B();
  Waiter w(
      [b, e0](epoll_event* out) { return b->epoll_wait(e0, out, 4, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  std::thread writer([k] { KSignal(k); });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  ASSERT_EQ(w.result(), 1);
  epoll_event kev[1];
  ASSERT_EQ(::epoll_wait(K, kev, 1, 0), 1);
  EXPECT_EQ(kev[0].data.u64, 7u);
}

// The loop check sees through kernel epolls: an instance cannot watch a
// kernel epoll that (through the kernel) already watches it.
//  e0 -(lt)- K         K -(lt)- e0 ?  ELOOP on the kernel; on uepoll the
//                                      instance cannot join a kernel epoll
TEST_P(BridgeMixed, KernelEpollInsideAnInstanceCannotWatchIt) {
  int e0 = Epoll();
  int K = KEpoll();
  ASSERT_EQ(AddErr(e0, K), 0);
  int err = KAddErr(K, e0);
  if (IsKernel()) {
    EXPECT_EQ(err, ELOOP);
  } else {
    // A uepoll number is not a kernel instance: refused one way or another.
    EXPECT_NE(err, 0);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  errno = 0;
  EXPECT_EQ(B().epoll_ctl(K, EPOLL_CTL_ADD, e0, &ev), -1);
  EXPECT_EQ(errno, IsKernel() ? ELOOP : EPERM);
  // Nothing was registered in K.
  EXPECT_EQ(::epoll_ctl(K, EPOLL_CTL_DEL, e0, nullptr), -1);
  EXPECT_EQ(Ctl(e0, EPOLL_CTL_DEL, K, 0, 0), 0);
}

// A chain through both kinds of instance is held to the kernel's depth
// limit: every instance's kernel half holds its children's kernel halves,
// so the kernel sees the whole chain (kernel/kernel_half.h).
// Depth: instances of the backend above kernel epolls count as one chain.
//  e0 - e1 - e2 - K3 - K4 - K5      (6 instances: one too many)
// Built bottom-up, the last link (e0 <- e1) is refused.
TEST_P(BridgeMixed, ChainThroughKernelEpollsHasTheKernelsDepthLimit) {
  int K3 = KEpoll(), K4 = KEpoll(), K5 = KEpoll();
  ASSERT_EQ(KAddErr(K4, K5), 0);
  ASSERT_EQ(KAddErr(K3, K4), 0);
  int e[3];
  for (int& x : e) x = Epoll();
  EXPECT_EQ(AddErr(e[2], K3), 0);
  EXPECT_EQ(AddErr(e[1], e[2]), 0);
  EXPECT_EQ(AddErr(e[0], e[1]), ELOOP);
  // A chain of five is fine.
  int f = Epoll();
  ASSERT_EQ(Ctl(e[2], EPOLL_CTL_DEL, K3, 0, 0), 0);
  EXPECT_EQ(AddErr(e[2], K4), 0);
  EXPECT_EQ(AddErr(e[0], e[1]), 0);
  EXPECT_EQ(AddErr(f, e[0]), ELOOP);
}

// Built top-down, the link into the kernel chain is the one refused.
TEST_P(BridgeMixed, ChainIntoKernelEpollsTopDownIsRefusedAtTheKernelLink) {
  int K3 = KEpoll(), K4 = KEpoll(), K5 = KEpoll();
  ASSERT_EQ(KAddErr(K4, K5), 0);
  ASSERT_EQ(KAddErr(K3, K4), 0);
  int e[3];
  for (int& x : e) x = Epoll();
  ASSERT_EQ(AddErr(e[0], e[1]), 0);
  ASSERT_EQ(AddErr(e[1], e[2]), 0);
  EXPECT_EQ(AddErr(e[2], K3), ELOOP);
  EXPECT_EQ(AddErr(e[2], K4), 0);
}

// poll() over an array of both kinds.
TEST_P(BridgeMixed, PollOfAMixedArrayReportsBothKinds) {
  int u = Eventfd(1);
  int uidle = Eventfd();
  int kp[2];
  KPipe(kp);
  ASSERT_EQ(::write(kp[1], "x", 1), 1);
  int kidle = KEventfd();
  pollfd p[] = {{u, POLLIN, 0},
                {kp[0], POLLIN, 0},
                {uidle, POLLIN, 0},
                {kidle, POLLIN, 0},
                {kp[1], POLLOUT, 0}};
  ASSERT_EQ(B().poll(p, 5, 0), 3);
  EXPECT_EQ(p[0].revents, POLLIN);
  EXPECT_EQ(p[1].revents, POLLIN);
  EXPECT_EQ(p[2].revents, 0);
  EXPECT_EQ(p[3].revents, 0);
  EXPECT_EQ(p[4].revents, POLLOUT);
}

TEST_P(BridgeMixed, BlockedPollOfAMixedArrayIsWokenByEitherKind) {
  int u = Eventfd();
  int kp[2];
  KPipe(kp);
  const Backend* b = &B();
  for (bool kernel : {true, false}) {
    SCOPED_TRACE(kernel ? "kernel pipe" : "backend's eventfd");
    std::atomic<short> r0{0}, r1{0};
    Waiter w([b, u, &kp, &r0, &r1](epoll_event*) {
      pollfd p[] = {{u, POLLIN, 0}, {kp[0], POLLIN, 0}};
      int r = b->poll(p, 2, kWaitMs);
      r0 = p[0].revents;
      r1 = p[1].revents;
      return r;
    });
    ASSERT_TRUE(w.Parked());
    std::thread writer([&] {
      if (kernel) {
        ASSERT_EQ(::write(kp[1], "x", 1), 1);
      } else {
        EfdWrite(u, 1);
      }
    });
    writer.join();
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 1);
    EXPECT_EQ(r0.load(), kernel ? 0 : POLLIN);
    EXPECT_EQ(r1.load(), kernel ? POLLIN : 0);
    if (kernel) {
      char c;
      ASSERT_EQ(::read(kp[0], &c, 1), 1);
    } else {
      EfdRead(u);
    }
  }
}

TEST_P(BridgeMixed, PollReportsPollnvalForAClosedNumberOfEitherKind) {
  int live = Eventfd(1);
  int u = Eventfd();
  int k = KEventfd();
  ASSERT_NE(u, k);
  ASSERT_EQ(Close(u), 0);
  ASSERT_EQ(KClose(k), 0);
  pollfd p[] = {{u, POLLIN, 0}, {k, POLLIN, 0}, {live, POLLIN, 0}};
  ASSERT_EQ(B().poll(p, 3, kWaitMs), 3);
  EXPECT_EQ(p[0].revents, POLLNVAL);
  EXPECT_EQ(p[1].revents, POLLNVAL);
  EXPECT_EQ(p[2].revents, POLLIN);
}

// A mixed instance polled inside a mixed array.
TEST_P(BridgeMixed, PollOfAMixedInstanceInAMixedArray) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  int u = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, u, EPOLLIN, 2), 0);
  int kp[2];
  KPipe(kp);
  const Backend* b = &B();
  std::atomic<short> rev{0};
  Waiter w([b, ep, &kp, &rev](epoll_event*) {
    pollfd p[] = {{ep, POLLIN, 0}, {kp[0], POLLIN, 0}};
    int r = b->poll(p, 2, kWaitMs);
    rev = p[0].revents;
    return r;
  });
  ASSERT_TRUE(w.Parked());
  std::thread writer([k] { KSignal(k); });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(rev.load(), POLLIN);
}

UEPOLL_INSTANTIATE_BACKENDS(BridgeMixed);

// min_wait batching over both halves of a mixed instance (uepoll only).
class BridgeMixedMinWait : public BridgeTest {};

TEST_P(BridgeMixedMinWait, MinWaitBatchesKernelAndUepollEvents) {
  int ep = Epoll();
  int u = Eventfd();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, u, EPOLLIN | EPOLLET, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN | EPOLLET, 2), 0);
  for (bool kernel_first : {true, false}) {
    SCOPED_TRACE(kernel_first ? "kernel event first" : "uepoll event first");
    // A minimum wait of an hour: the call returns only once maxevents (2)
    // events are ready, so both are in one batch.
    Waiter w([ep](epoll_event* ev) {
      timespec timeout{3600, 0};
      uepoll_wait_args a{};
      a.timeout = &timeout;
      a.min_wait_ns = 3600ull * 1000000000ull;
      return uepoll_epoll_pwait3(ep, ev, 2, &a);
    });
    ASSERT_TRUE(w.Parked());
    if (kernel_first) {
      KSignal(k);
    } else {
      EfdWrite(u, 1);
    }
    ASSERT_TRUE(w.Parked()) << "one event ended the minimum wait";
    if (kernel_first) {
      EfdWrite(u, 1);
    } else {
      KSignal(k);
    }
    ASSERT_TRUE(w.WaitDone());
    ASSERT_EQ(w.result(), 2);
    EXPECT_EQ(Sorted({{w.event(0).events, w.event(0).data.u64},
                      {w.event(1).events, w.event(1).data.u64}}),
              (Evs{{EPOLLIN, 1}, {EPOLLIN, 2}}));
    EXPECT_TRUE(Wait(ep).empty()) << "nothing reported twice";
  }
}

// After its minimum wait a batch of one kernel event is returned.
TEST_P(BridgeMixedMinWait, MinWaitReturnsAKernelEventWhenItEnds) {
  int ep = Epoll();
  int k = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, Eventfd(), EPOLLIN, 1), 0);
  timespec timeout{60, 0};
  uepoll_wait_args a{};
  a.timeout = &timeout;
  a.min_wait_ns = 30 * 1000000ull;
  epoll_event ev[4];
  int64_t t0 = MonotonicNs();
  ASSERT_EQ(uepoll_epoll_pwait3(ep, ev, 4, &a), 1);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
  EXPECT_EQ(ev[0].data.u64, 2u);
}

INSTANTIATE_TEST_SUITE_P(Uepoll, BridgeMixedMinWait,
                         ::testing::Values(&UepollBackend()),
                         [](const auto& i) { return BackendName(i.param); });

}  // namespace
}  // namespace uepoll_test
