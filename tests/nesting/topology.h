// Shared scaffolding for the nested-instance topology tests: building
// instance-over-instance graphs and running one parked thread per watcher.
#ifndef UEPOLL_TESTS_NESTING_TOPOLOGY_H_
#define UEPOLL_TESTS_NESTING_TOPOLOGY_H_

#include <poll.h>

#include <functional>
#include <memory>
#include <vector>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {

// How a child is registered: (lt) or (et).
inline constexpr uint32_t kLt = 0;
inline constexpr uint32_t kEt = EPOLLET;

// How a thread watches an instance: (ew) epoll_wait, or (p) poll() and then
// a zero-timeout epoll_wait to take what poll announced.
enum class Via { kWait, kPoll };

inline constexpr uint64_t kStopData = 99;

class NestingTest : public BackendTest {
 protected:
  void Signal(int efd) {
    uint64_t one = 1;
    ASSERT_EQ(B().write(efd, &one, sizeof one), 8);
  }

  // Registers child (a source or an instance) in parent for EPOLLIN.
  void Watch(int parent, int child, uint32_t mode, uint64_t data) {
    ASSERT_EQ(Ctl(parent, EPOLL_CTL_ADD, child, EPOLLIN | mode, data), 0);
  }

  int PollIn(int fd) {
    pollfd p{fd, POLLIN, 0};
    return B().poll(&p, 1, 0);
  }

  int WaitNow(int ep, epoll_event* ev = nullptr, int max = 1) {
    epoll_event local[8];
    return B().epoll_wait(ep, ev ? ev : local, max, 0);
  }

  // One thread per (instance, how) pair. All are parked before fire() runs.
  // Once at least `settle` of them have received a real event (not stop), a
  // level-triggered stop item registered in each of `stop_in` releases the
  // rest. Returns, per watcher, whether it received a real event.
  //
  // Stopping at `settle` would hide a late duplicate (a second delivery
  // that loses the race with the stop item), so once every watcher is done
  // each instance of `after` is drained in order with a zero-timeout wait,
  // which must report exactly the given number of real events: what stays
  // ready by rule (an LT item whose source is still readable), nothing more.
  std::vector<bool> Race(const std::vector<std::pair<int, Via>>& watchers,
                         const std::function<void()>& fire, int settle,
                         const std::vector<int>& stop_in,
                         const std::vector<std::pair<int, int>>& after) {
    int stop = Eventfd();
    for (int ep : stop_in)
      EXPECT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
    const Backend* b = &B();
    std::vector<std::unique_ptr<Waiter>> ws;
    for (auto [ep, via] : watchers) {
      ws.push_back(std::make_unique<Waiter>([b, ep, via](epoll_event* ev) {
        if (via == Via::kPoll) {
          pollfd p{ep, POLLIN, 0};
          int r = b->poll(&p, 1, kWaitMs);
          if (r != 1) return r < 0 ? r : -2;
          return b->epoll_wait(ep, ev, 1, 0);
        }
        return b->epoll_wait(ep, ev, 1, kWaitMs);
      }));
    }
    std::vector<bool> got(ws.size(), false);
    for (auto& w : ws) {
      if (!w->Parked()) {
        ADD_FAILURE() << "a watcher did not park";
        Signal(stop);
        return got;
      }
    }
    auto real = [](const Waiter& w) {
      return w.Done() && w.result() == 1 && w.event(0).data.u64 != kStopData;
    };
    fire();
    EXPECT_TRUE(Eventually([&] {
      int n = 0;
      for (auto& w : ws) n += real(*w);
      return n >= settle;
    })) << "fewer than "
        << settle << " watchers got the event";
    Signal(stop);
    for (size_t i = 0; i < ws.size(); ++i) {
      EXPECT_TRUE(ws[i]->WaitDone());
      EXPECT_GE(ws[i]->result(), 0) << "watcher " << i;
      got[i] = real(*ws[i]);
    }
    for (size_t i = 0; i < after.size(); ++i) {
      epoll_event ev[8];
      int n = B().epoll_wait(after[i].first, ev, 8, 0);
      EXPECT_GE(n, 0) << "drain " << i;
      int late = 0;
      for (int j = 0; j < n; ++j) late += ev[j].data.u64 != kStopData;
      EXPECT_EQ(late, after[i].second)
          << "real events left on instance " << i << " of `after`";
    }
    return got;
  }
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_NESTING_TOPOLOGY_H_
