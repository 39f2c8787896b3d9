// libev (Debian's libev-dev), on its epoll backend, watches a watchable
// uepoll instance with an ev_io on the instance's number: level-triggered,
// one harvest per callback.
#include <ev.h>

#include <gtest/gtest.h>

#include "integration/traffic.h"

namespace uepoll_test {
namespace {

void OnIo(struct ev_loop* loop, ev_io* w, int revents) {
  auto* t = static_cast<Traffic*>(w->data);
  EXPECT_EQ(revents, EV_READ);
  // Stopping the only watcher ends ev_run.
  if (!t->OnReadable()) ev_io_stop(loop, w);
}

void LibevLoop(Traffic& t) {
  struct ev_loop* loop = ev_loop_new(EVBACKEND_EPOLL);
  ASSERT_NE(loop, nullptr);
  ASSERT_EQ(ev_backend(loop), unsigned{EVBACKEND_EPOLL});
  ev_io w;
  ev_io_init(&w, &OnIo, t.epfd(), EV_READ);
  w.data = &t;
  ev_io_start(loop, &w);
  t.LoopReady();
  EXPECT_FALSE(ev_run(loop, 0));  // false: no active watcher left
  ev_loop_destroy(loop);
}

TEST(IntegrationLibev, ev_io_on_the_instance) {
  Traffic::Run(Harvest::kOnce, &LibevLoop);
}

}  // namespace
}  // namespace uepoll_test
