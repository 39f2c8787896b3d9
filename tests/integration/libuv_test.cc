// libuv (Debian's libuv1-dev) watches a watchable uepoll instance with a
// uv_poll_t on the instance's number: level-triggered, one harvest per
// callback.
#include <uv.h>

#include <gtest/gtest.h>

#include "integration/traffic.h"

namespace uepoll_test {
namespace {

void OnPoll(uv_poll_t* p, int status, int events) {
  auto* t = static_cast<Traffic*>(p->data);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(events, UV_READABLE);
  if (status == 0 && t->OnReadable()) return;
  uv_poll_stop(p);
  uv_close(reinterpret_cast<uv_handle_t*>(p), nullptr);
}

void LibuvLoop(Traffic& t) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  uv_poll_t poll;
  ASSERT_EQ(uv_poll_init(&loop, &poll, t.epfd()), 0);
  poll.data = &t;
  ASSERT_EQ(uv_poll_start(&poll, UV_READABLE, &OnPoll), 0);
  t.LoopReady();
  // Returns once the poll handle is closed: nothing else is active.
  EXPECT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  EXPECT_EQ(uv_loop_close(&loop), 0);
}

TEST(IntegrationLibuv, uv_poll_on_the_instance) {
  // libuv opens process-wide descriptors (its signal lock pipe) at the
  // first loop's creation and keeps them: create one before the scenario
  // counts the descriptors open.
  uv_loop_t warm;
  ASSERT_EQ(uv_loop_init(&warm), 0);
  ASSERT_EQ(uv_loop_close(&warm), 0);
  Traffic::Run(Harvest::kOnce, &LibuvLoop);
}

}  // namespace
}  // namespace uepoll_test
