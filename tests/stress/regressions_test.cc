// Differences the stress tests found, pinned as deterministic tests on both
// backends (a blocked thread is detected with threads/waiter.h, never with a
// sleep). Each test states the kernel's behaviour; it fails on uepoll until
// the engine matches.
#include <poll.h>
#include <sys/eventfd.h>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

class StressRegressions : public BackendTest {};

// Found by Stress.InstanceCloseWithWaitersPollersAndWatchers (the kernel's
// poller returned POLLNVAL, uepoll's timed out). The kernel's do_poll looks
// every descriptor up again on each pass (do_pollfd: fdget), so a blocking
// poll() whose descriptor another thread closed reports POLLNVAL for it at
// the next wakeup. uepoll's poll() resolves the descriptors once and polls
// the files it pinned, so it reports the closed one as idle.
//
//   t: poll({a, IN}, {b, IN}, 5 s)      main: close(a); write(b, 1)
//   kernel: 2, a -> POLLNVAL, b -> POLLIN
TEST_P(StressRegressions, poll__descriptor_closed_during_blocking_poll_is_pollnval) {
  int a = Eventfd(0);
  int b = Eventfd(0);
  pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
  const Backend* be = &B();
  Waiter w([&](epoll_event*) { return be->poll(p, 2, 5000); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(Close(a), 0);
  uint64_t one = 1;
  ASSERT_EQ(B().write(b, &one, sizeof one), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 2);
  EXPECT_EQ(p[0].revents, POLLNVAL);
  EXPECT_EQ(p[1].revents, POLLIN);
}

// The same through an instance: a poller blocked on an epoll descriptor that
// is closed while the poller sleeps, woken by the instance's own event.
TEST_P(StressRegressions, poll__instance_closed_during_blocking_poll_is_pollnval) {
  int ep = Epoll();
  int src = Eventfd(0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, 1), 0);
  pollfd p = {ep, POLLIN, 0};
  const Backend* be = &B();
  Waiter w([&](epoll_event*) { return be->poll(&p, 1, 5000); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(Close(ep), 0);
  uint64_t one = 1;
  ASSERT_EQ(B().write(src, &one, sizeof one), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(p.revents, POLLNVAL);
}

UEPOLL_INSTANTIATE_BACKENDS(StressRegressions);

}  // namespace
}  // namespace uepoll_test
