// A plain kernel epoll loop of the application's own watches a watchable
// uepoll instance: level-triggered with one harvest per wakeup, and
// edge-triggered, harvesting until the instance is empty.
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

#include "integration/traffic.h"

namespace uepoll_test {
namespace {

void KernelLoop(Traffic& t, uint32_t mode) {
  int kep = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(kep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN | mode;
  ASSERT_EQ(::epoll_ctl(kep, EPOLL_CTL_ADD, t.epfd(), &ev), 0) << errno;
  t.LoopReady();
  for (bool run = true; run;) {
    epoll_event out[4];
    int n = ::epoll_wait(kep, out, 4, -1);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_EQ(n, 1) << "only the instance is watched";
    EXPECT_EQ(out[0].events, uint32_t{EPOLLIN});
    run = t.OnReadable();
  }
  ASSERT_EQ(::epoll_ctl(kep, EPOLL_CTL_DEL, t.epfd(), nullptr), 0);
  ::close(kep);
}

TEST(IntegrationEpollLoop, level_triggered_one_harvest_per_wakeup) {
  Traffic::Run(Harvest::kOnce, [](Traffic& t) { KernelLoop(t, 0); });
}

TEST(IntegrationEpollLoop, edge_triggered_harvest_until_empty) {
  Traffic::Run(Harvest::kUntilEmpty,
               [](Traffic& t) { KernelLoop(t, EPOLLET); });
}

}  // namespace
}  // namespace uepoll_test
