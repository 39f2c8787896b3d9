// A min_wait phase counts only items that are ready: a level-triggered
// item an earlier harvest left queued and that went idle since must not end
// the phase early (found by reading the code: the phase compared the ready
// list's length with maxevents).
#include <sys/eventfd.h>

#include <cstdint>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

TEST(MinWaitIdle, an_item_gone_idle_does_not_end_the_phase) {
  int ep = uepoll_epoll_create1(0);
  int a = uepoll_eventfd(0, EFD_NONBLOCK);
  int b = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;  // level-triggered
  ev.data.u64 = 1;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, a, &ev), 0);
  ev.data.u64 = 2;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev), 0);
  uint64_t one = 1, v;
  ASSERT_EQ(uepoll_write(a, &one, 8), 8);
  ASSERT_EQ(uepoll_write(b, &one, 8), 8);
  epoll_event out[2];
  ASSERT_EQ(uepoll_epoll_wait(ep, out, 2, 0), 2);  // both stay queued (LT)
  ASSERT_EQ(uepoll_read(a, &v, 8), 8);             // a goes idle
  // b is ready, a is queued but idle: the phase must wait for a second
  // event, which comes only once the waiter sleeps.
  Waiter w([&](epoll_event* evs) {
    timespec timeout{20, 0};
    uepoll_wait_args args{};
    args.timeout = &timeout;
    args.min_wait_ns = 10'000'000'000ULL;  // 10 s
    return uepoll_epoll_pwait3(ep, evs, 2, &args);
  });
  ASSERT_TRUE(w.Parked()) << "the phase ended at once: the idle item counted";
  ASSERT_EQ(uepoll_write(a, &one, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 2);
  EXPECT_EQ(uepoll_close(a), 0);
  EXPECT_EQ(uepoll_close(b), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
