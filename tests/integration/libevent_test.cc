// libevent (Debian's libevent-dev), on its epoll backend, watches a
// watchable uepoll instance with event_new(EV_READ | EV_PERSIST) on the
// instance's number: level-triggered, one harvest per callback.
#include <event2/event.h>

#include <cstring>

#include <gtest/gtest.h>

#include "integration/traffic.h"

namespace uepoll_test {
namespace {

struct Watch {
  Traffic* traffic;
  event_base* base;
};

void OnEvent(evutil_socket_t, short what, void* arg) {
  auto* w = static_cast<Watch*>(arg);
  EXPECT_EQ(what, EV_READ);
  if (!w->traffic->OnReadable()) event_base_loopbreak(w->base);
}

void LibeventLoop(Traffic& t) {
  event_base* base = event_base_new();
  ASSERT_NE(base, nullptr);
  EXPECT_STREQ(event_base_get_method(base), "epoll");
  Watch w{&t, base};
  event* ev = event_new(base, t.epfd(), EV_READ | EV_PERSIST, &OnEvent, &w);
  ASSERT_NE(ev, nullptr);
  ASSERT_EQ(event_add(ev, nullptr), 0);
  t.LoopReady();
  EXPECT_EQ(event_base_dispatch(base), 0);  // 0: ended by loopbreak
  event_free(ev);
  event_base_free(base);
}

TEST(IntegrationLibevent, persistent_read_event_on_the_instance) {
  Traffic::Run(Harvest::kOnce, &LibeventLoop);
}

}  // namespace
}  // namespace uepoll_test
