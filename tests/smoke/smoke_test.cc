#include "support/fixture.h"

namespace uepoll_test {
namespace {
class Smoke : public BackendTest {};
TEST_P(Smoke, EventfdReadableAfterWrite) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 7), 0);
  uint64_t one = 1;
  ASSERT_EQ(B().write(efd, &one, 8), 8);
  epoll_event ev[4];
  ASSERT_EQ(B().epoll_wait(ep, ev, 4, 0), 1);
  EXPECT_EQ(ev[0].data.u64, 7u);
  EXPECT_EQ(ev[0].events, static_cast<uint32_t>(EPOLLIN));
}
UEPOLL_INSTANTIATE_BACKENDS(Smoke);
}  // namespace
}  // namespace uepoll_test
