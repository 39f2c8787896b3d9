// What epoll_ctl(ADD) refuses when instances watch instances
// (docs/contract.md section 3, rule 6, and section 9): chains deeper than 5
// instances and cycles (ELOOP), an instance watching itself (EINVAL), too many
// wakeup paths to one source (EINVAL); and what it allows (diamonds). Diagram
// legend as in topology_test.cc; an arrow-less edge points from parent (above)
// to child.
#include <atomic>
#include <thread>
#include <vector>

#include "nesting/topology.h"

namespace uepoll_test {
namespace {

constexpr int kMaxChain = 5;  // instances; 4 instance-to-instance links

// Raises the backend's descriptor limit (RLIMIT_NOFILE, or uepoll's own) to
// at least `needed` for a scope, and restores it after.
class FdLimitAtLeast {
 public:
  FdLimitAtLeast(const Backend& b, long needed) : b_(b), needed_(needed) {
    prev_ = b_.set_fd_limit(needed_);
    if (prev_ > needed_) b_.set_fd_limit(prev_);
  }
  ~FdLimitAtLeast() {
    if (prev_ >= 0 && prev_ < needed_) b_.set_fd_limit(prev_);
  }

 private:
  const Backend& b_;
  long needed_;
  long prev_;
};

class NestingLimits : public NestingTest {
 protected:
  // ADD child into parent; returns 0 or errno.
  int AddErr(int parent, int child) {
    errno = 0;
    int r = Ctl(parent, EPOLL_CTL_ADD, child, EPOLLIN, 0);
    return r == 0 ? 0 : errno;
  }
  // The item must not exist after a refused ADD.
  void ExpectNoItem(int parent, int child) {
    EXPECT_EQ(Ctl(parent, EPOLL_CTL_DEL, child, 0, 0), -1);
    EXPECT_EQ(errno, ENOENT);
  }

  // Builds e[0] <- e[1] <- ... (e[i] watches e[i+1]) with n instances, in
  // the given direction, optionally with a leaf source under the last one.
  // Returns the errno of each link's ADD in the order made.
  std::vector<int> BuildChain(int n, bool top_down, bool leaf,
                              std::vector<int>* e, int* s0) {
    e->clear();
    for (int i = 0; i < n; ++i) e->push_back(Epoll());
    *s0 = Eventfd();
    if (leaf) Watch(e->back(), *s0, kLt, 1);
    std::vector<int> errs;
    if (top_down) {
      for (int i = 0; i + 1 < n; ++i)
        errs.push_back(AddErr((*e)[i], (*e)[i + 1]));
    } else {
      for (int i = n - 2; i >= 0; --i)
        errs.push_back(AddErr((*e)[i], (*e)[i + 1]));
    }
    return errs;
  }

  void CheckChainLimit(bool top_down, bool leaf) {
    std::vector<int> e;
    int s0;
    auto errs = BuildChain(kMaxChain + 1, top_down, leaf, &e, &s0);
    // The link that would make the chain 6 instances long is the last one
    // made in either direction.
    for (int i = 0; i + 1 < static_cast<int>(errs.size()); ++i)
      EXPECT_EQ(errs[i], 0) << "link " << i;
    EXPECT_EQ(errs.back(), ELOOP);
    if (top_down)
      ExpectNoItem(e[kMaxChain - 1], e[kMaxChain]);
    else
      ExpectNoItem(e[0], e[1]);
    if (!leaf) return;
    // The 5-instance chain that was accepted still propagates.
    int top = top_down ? e[0] : e[1];
    Signal(s0);
    EXPECT_EQ(PollIn(top), top_down ? 0 : 1);
    EXPECT_EQ(WaitNow(top), top_down ? 0 : 1);
  }

  // Paths of `len` instances from one source to a top instance: a chain of
  // len-1 instances above many "fan" instances, each holding the source.
  // Adds fans until an ADD fails; returns how many succeeded (and the errno).
  int CountPaths(int len, bool source_last, int* err) {
    std::vector<int> chain;
    for (int i = 0; i < len - 1; ++i) {
      chain.push_back(Epoll());
      if (i > 0) {
        EXPECT_EQ(AddErr(chain[i - 1], chain[i]), 0);
      }
    }
    int s = Eventfd();
    *err = 0;
    for (int n = 0; n < 2000; ++n) {
      int fan = Epoll();
      if (fan < 0) {
        *err = -1;
        return n;
      }
      int r;
      if (source_last) {
        EXPECT_EQ(AddErr(chain.back(), fan), 0);
        r = AddErr(fan, s);
        if (r != 0) ExpectNoItem(fan, s);
      } else {
        EXPECT_EQ(AddErr(fan, s), 0);
        r = AddErr(chain.back(), fan);
        if (r != 0) ExpectNoItem(chain.back(), fan);
      }
      if (r != 0) {
        *err = r;
        return n;
      }
    }
    return -1;
  }

  void CheckPathLimit(int len, int limit) {
    // 500 paths take over 500 instances.
    FdLimitAtLeast fds(B(), 2048);
    for (bool source_last : {false, true}) {
      int err;
      EXPECT_EQ(CountPaths(len, source_last, &err), limit)
          << "len " << len << (source_last ? ", source added last" : "");
      EXPECT_EQ(err, EINVAL);
    }
  }
};

//  e0
//   |
//  e1
//   |
//  e2
//   |
//  e3
//   |
//  e4
//   |      built top-down: e0<-e1 first, e4<-e5 last
//  e5  <- refused (ELOOP)
TEST_P(NestingLimits, ChainOfSixTopDownWithoutLeaf) {
  CheckChainLimit(true, false);
}

//  same, with a leaf:  e5 -(lt)- s0
TEST_P(NestingLimits, ChainOfSixTopDownWithLeaf) {
  CheckChainLimit(true, true);
}

//  e0  <- refused (ELOOP)
//   |
//  e1
//   |
//  e2
//   |
//  e3
//   |
//  e4
//   |      built bottom-up: e4<-e5 first, e0<-e1 last
//  e5
TEST_P(NestingLimits, ChainOfSixBottomUpWithoutLeaf) {
  CheckChainLimit(false, false);
}

//  same, with a leaf:  e5 -(lt)- s0
TEST_P(NestingLimits, ChainOfSixBottomUpWithLeaf) {
  CheckChainLimit(false, true);
}

//  a0          b0
//   |           |
//  a1          b1
//   |           |
//  a2  -----   b2      a2 <- b0 refused: the chain would be 6 long
// Depth counts above and below the new link.
TEST_P(NestingLimits, JoiningTwoChainsOfThreeIsTooDeep) {
  int a[3], b[3];
  for (int i = 0; i < 3; ++i) {
    a[i] = Epoll();
    b[i] = Epoll();
  }
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(AddErr(a[i], a[i + 1]), 0);
    ASSERT_EQ(AddErr(b[i], b[i + 1]), 0);
  }
  EXPECT_EQ(AddErr(a[2], b[0]), ELOOP);
  ExpectNoItem(a[2], b[0]);
  // Two plus three is fine.
  EXPECT_EQ(AddErr(a[1], b[0]), 0);
}

//  e0 --+
//   ^   |
//   +---+
TEST_P(NestingLimits, InstanceWatchingItselfIsEinval) {
  int e0 = Epoll();
  EXPECT_EQ(AddErr(e0, e0), EINVAL);
  int dup = Track(B().dup(e0));
  ASSERT_GE(dup, 0);
  EXPECT_EQ(AddErr(e0, dup), EINVAL);
  EXPECT_EQ(AddErr(dup, e0), EINVAL);
}

//  e0
//   |  ^
//   v  |      e1 <- e0 refused
//  e1 -+
TEST_P(NestingLimits, CycleOfTwoIsEloop) {
  int e0 = Epoll(), e1 = Epoll();
  ASSERT_EQ(AddErr(e0, e1), 0);
  EXPECT_EQ(AddErr(e1, e0), ELOOP);
  ExpectNoItem(e1, e0);
}

//  e0 -> e1 -> e2
//   ^           |     e2 <- e0 refused
//   +-----------+
TEST_P(NestingLimits, CycleOfThreeIsEloop) {
  int e0 = Epoll(), e1 = Epoll(), e2 = Epoll(), s0 = Eventfd();
  Watch(e2, s0, kLt, 1);
  ASSERT_EQ(AddErr(e0, e1), 0);
  ASSERT_EQ(AddErr(e1, e2), 0);
  EXPECT_EQ(AddErr(e2, e0), ELOOP);
  ExpectNoItem(e2, e0);
  // The refused ADD left the chain intact.
  Signal(s0);
  EXPECT_EQ(WaitNow(e0), 1);
}

//       e0
//  (lt) /  \ (lt)
//     e1    e2
//  (lt) \  / (lt)
//        e3
//        | (lt)
//        s0
// Two paths to the same source are not a cycle.
TEST_P(NestingLimits, DiamondIsAllowed) {
  int e0 = Epoll(), e1 = Epoll(), e2 = Epoll(), e3 = Epoll(), s0 = Eventfd();
  Watch(e3, s0, kLt, 1);
  Watch(e1, e3, kLt, 13);
  Watch(e2, e3, kLt, 23);
  Watch(e0, e1, kLt, 1);
  Watch(e0, e2, kLt, 2);
  EXPECT_EQ(WaitNow(e0), 0);
  Signal(s0);
  epoll_event ev[4];
  ASSERT_EQ(WaitNow(e0, ev, 4), 2);
  EXPECT_EQ(ev[0].data.u64 + ev[1].data.u64, 3u);
}

//            e0                 (top: watched by nobody)
//    /   /   |    \    \  (lt)
//  f1  f2   ...   f500  f501    f501 refused (EINVAL)
//    \   \   |    /    /  (lt)
//            s0
// Wakeup paths of 2 instances from one source: at most 500.
TEST_P(NestingLimits, AtMost500PathsOfLengthTwo) { CheckPathLimit(2, 500); }

//            e0
//            |
//            e1
//    /   /   |    \    \  (lt)
//  f1  f2   ...   f100  f101    f101 refused (EINVAL)
//    \   \   |    /    /  (lt)
//            s0
// Wakeup paths of 3 instances from one source: at most 100.
TEST_P(NestingLimits, AtMost100PathsOfLengthThree) { CheckPathLimit(3, 100); }

//            e0
//            |
//            e1
//            |
//            e2
//    /   /   |    \   \  (lt)
//  f1  f2   ...   f50  f51    f51 refused (EINVAL)
//    \   \   |    /   /  (lt)
//            s0
// Wakeup paths of 4 instances from one source: at most 50.
TEST_P(NestingLimits, AtMost50PathsOfLengthFour) { CheckPathLimit(4, 50); }

//            e0
//            |
//            e1
//            |
//            e2
//            |
//            e3
//    /   /   |    \   \  (lt)
//  f1  f2   ...   f10  f11    f11 refused (EINVAL)
//    \   \   |    /   /  (lt)
//            s0
// Wakeup paths of 5 instances from one source: at most 10.
TEST_P(NestingLimits, AtMost10PathsOfLengthFive) { CheckPathLimit(5, 10); }

//  t0 (ADD B into A)     t1 (ADD A into B), at once
//   A  ------------->  B
//   A  <-------------  B
// The cycle check and the insert are one step: both ADDs can never succeed,
// and the loser fails ELOOP. The pairs are made up front in batches and the
// two threads meet per pair on a yielding spin, so rounds stay cheap even on
// a loaded machine.
TEST_P(NestingLimits, ConcurrentCrossAddsNeverBothSucceed) {
  constexpr int kBatches = 4;
  constexpr int kPairs = 500;  // per batch
  FdLimitAtLeast fds(B(), 4 * kPairs);
  const Backend* b = &B();
  int both = 0, none = 0, wrong_errno = 0;
  for (int batch = 0; batch < kBatches; ++batch) {
    std::vector<int> fd(2 * kPairs);
    for (int& f : fd) f = Epoll();
    if (HasFailure()) return;
    std::vector<std::atomic<int>> arrived(kPairs);
    std::vector<int> res(2 * kPairs), err(2 * kPairs);
    auto adder = [&](int self) {
      for (int i = 0; i < kPairs; ++i) {
        arrived[i].fetch_add(1, std::memory_order_acq_rel);
        // Spin briefly (the partner is usually running), then yield to it.
        for (int spins = 0; arrived[i].load(std::memory_order_acquire) < 2;)
          if (++spins > 2000) std::this_thread::yield();
        epoll_event ev{};
        ev.events = EPOLLIN;
        errno = 0;
        res[2 * i + self] = b->epoll_ctl(fd[2 * i + self], EPOLL_CTL_ADD,
                                         fd[2 * i + 1 - self], &ev);
        err[2 * i + self] = errno;
      }
    };
    std::thread t0(adder, 0), t1(adder, 1);
    t0.join();
    t1.join();
    for (int i = 0; i < kPairs; ++i) {
      int r0 = res[2 * i], r1 = res[2 * i + 1];
      both += r0 == 0 && r1 == 0;
      none += r0 != 0 && r1 != 0;
      wrong_errno += (r0 != 0 && err[2 * i] != ELOOP) +
                     (r1 != 0 && err[2 * i + 1] != ELOOP);
    }
    for (int f : fd) Close(f);
  }
  EXPECT_EQ(both, 0);
  EXPECT_EQ(none, 0);
  EXPECT_EQ(wrong_errno, 0);
}

UEPOLL_INSTANTIATE_BACKENDS(NestingLimits);

}  // namespace
}  // namespace uepoll_test
