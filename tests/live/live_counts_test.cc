// uepoll_debug_live_counts across threads (src/core/live.h): every thread
// counts in a slot of its own, and a slot outlives its thread and is handed
// to the next one. The totals must stay exact whatever thread created and
// whatever thread closed an object, across thread exits and slot reuse.
#include <sys/eventfd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

uepoll_live_counts Counts() {
  uepoll_live_counts c{};
  EXPECT_EQ(uepoll_debug_live_counts(&c), 0);
  return c;
}

// Objects made by threads that then exit stay counted; objects closed by
// other threads (that also exit) are uncounted; new threads reusing the
// slots of the exited ones start from their counts, not from zero.
TEST(LiveCounts, ExactAcrossThreadsExitsAndSlotReuse) {
  const uepoll_live_counts base = Counts();
  constexpr int kThreads = 8, kPer = 50;
  std::vector<int> fds(kThreads * kPer, -1);
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < kPer; ++i) {
          int fd = uepoll_eventfd(0, EFD_NONBLOCK);
          EXPECT_GE(fd, 0);
          epoll_event ev{};
          ev.events = EPOLLIN;
          EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
          fds[t * kPer + i] = fd;
        }
      });
    for (auto& t : ts) t.join();
  }
  uepoll_live_counts c = Counts();
  EXPECT_EQ(c.descriptors - base.descriptors, kThreads * kPer + 1);
  EXPECT_EQ(c.items - base.items, kThreads * kPer);
  EXPECT_EQ(c.instances - base.instances, 1);
  // Closed by other threads, in another split than they were made in.
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads / 2; ++t)
      ts.emplace_back([&, t] {
        for (int i = t; i < kThreads * kPer; i += kThreads / 2)
          EXPECT_EQ(uepoll_close(fds[i]), 0);
      });
    for (auto& t : ts) t.join();
  }
  c = Counts();
  EXPECT_EQ(c.descriptors - base.descriptors, 1);
  EXPECT_EQ(c.items - base.items, 0);
  // A new thread (on a reused slot) makes one object and exits.
  int fd = -1;
  std::thread([&] { fd = uepoll_eventfd(0, 0); }).join();
  ASSERT_GE(fd, 0);
  c = Counts();
  EXPECT_EQ(c.descriptors - base.descriptors, 2);
  EXPECT_EQ(uepoll_close(fd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  c = Counts();
  EXPECT_EQ(c.descriptors, base.descriptors);
  EXPECT_EQ(c.files, base.files);
  EXPECT_EQ(c.instances, base.instances);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
