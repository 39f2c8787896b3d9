// EPOLL_CTL_MIN_WAIT (op 4), the interface of the min_wait patch set (seed
// 004): epoll_ctl(epfd, 4, -1, &ev) sets the instance's minimum wait to
// ev.data.u64 microseconds and returns the previous value. Linux never
// merged it, so the kernel answers EINVAL; the differential tests below
// state each side's expectation separately. The rest pins the patch's
// semantics on uepoll: its example program, 0 turning it off, the zero
// timeout, the 32-bit field, and that it is the value set_params sets.
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

constexpr int kMinWaitOp = UEPOLL_EPOLL_CTL_MIN_WAIT;
static_assert(kMinWaitOp == 4, "the patch's EPOLL_CTL_MIN_WAIT value");

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int SetMinWaitUs(const Backend& b, int epfd, uint64_t us, int fd = -1) {
  epoll_event ev{};
  ev.data.u64 = us;
  return b.epoll_ctl(epfd, kMinWaitOp, fd, &ev);
}

uint64_t InstanceMinWaitNs(int epfd) {
  uepoll_params p{};
  EXPECT_EQ(uepoll_epoll_get_params(epfd, &p), 0);
  return p.min_wait_ns;
}

class MinWaitCtl : public BackendTest {};

// The op itself, called as the patch's example calls it (fd -1): Linux has
// no op 4 and looks fd up before it looks at op, so it answers EBADF (with
// an open fd it answers EINVAL: FdIsIgnored); uepoll takes the op, ignores
// fd and returns the previous value.
TEST_P(MinWaitCtl, OpFourOnAnInstance) {
  int ep = Epoll();
  errno = 0;
  int r = SetMinWaitUs(B(), ep, 200000);
  if (IsKernel()) {
    EXPECT_EQ(r, -1);
    EXPECT_EQ(errno, EBADF);
  } else {
    EXPECT_EQ(r, 0) << "no minimum wait was set before";
    EXPECT_EQ(errno, 0) << "errno is left alone on success";
    EXPECT_EQ(InstanceMinWaitNs(ep), 200000ull * 1000);
    EXPECT_EQ(SetMinWaitUs(B(), ep, 0), 200000);
    EXPECT_EQ(InstanceMinWaitNs(ep), 0u);
  }
}

// fd is not looked up by the patch: an open, unrelated descriptor is as
// good as -1. The kernel rejects the unknown op (EINVAL) once both
// descriptors check out.
TEST_P(MinWaitCtl, FdIsIgnored) {
  int ep = Epoll();
  int efd = Eventfd();
  errno = 0;
  int r = SetMinWaitUs(B(), ep, 1000, efd);
  if (IsKernel()) {
    EXPECT_EQ(r, -1);
    EXPECT_EQ(errno, EINVAL);
  } else {
    EXPECT_EQ(r, 0);
    EXPECT_EQ(InstanceMinWaitNs(ep), 1000000u);
    EXPECT_EQ(SetMinWaitUs(B(), ep, 5, B().closed_fd), 1000);
  }
}

// Errors both sides agree on: the event is read first (EFAULT), then epfd
// must be open (EBADF), then an instance (EINVAL: with an open fd the
// kernel reaches its is-epoll check too).
TEST_P(MinWaitCtl, ErrorsBothSidesShare) {
  int ep = Epoll();
  int efd = Eventfd();
  errno = 0;
  EXPECT_EQ(B().epoll_ctl(ep, kMinWaitOp, -1, nullptr), -1);
  EXPECT_EQ(errno, EFAULT);
  errno = 0;
  EXPECT_EQ(SetMinWaitUs(B(), B().closed_fd, 100, efd), -1);
  EXPECT_EQ(errno, EBADF);
  errno = 0;
  EXPECT_EQ(SetMinWaitUs(B(), efd, 100, efd), -1);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  int other = Eventfd();
  EXPECT_EQ(SetMinWaitUs(B(), efd, 100, other), -1);
  EXPECT_EQ(errno, EINVAL);
}

// With fd = -1 and epfd not an instance the two differ: the kernel looks fd
// up before it checks epfd's kind (EBADF); the patch checks epfd's kind
// first and never looks at fd (EINVAL).
TEST_P(MinWaitCtl, NotAnInstanceWithFdMinusOne) {
  int efd = Eventfd();
  errno = 0;
  EXPECT_EQ(SetMinWaitUs(B(), efd, 100), -1);
  EXPECT_EQ(errno, IsKernel() ? EBADF : EINVAL);
}

UEPOLL_INSTANTIATE_BACKENDS(MinWaitCtl);

// The patch's own example, renamed: two pipes, a writer 10 ms then 10 ms
// more, a 200 ms min_wait set with op 4, and one epoll_wait(maxevents 2,
// timeout -1) that must return both events instead of the first alone.
TEST(MinWaitCtlUepoll, PatchExample) {
  int efd = uepoll_epoll_create1(0);
  ASSERT_GE(efd, 0);
  int p1[2], p2[2];
  ASSERT_EQ(uepoll_pipe(p1), 0);
  ASSERT_EQ(uepoll_pipe(p2), 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = p1[0];
  ASSERT_EQ(uepoll_epoll_ctl(efd, EPOLL_CTL_ADD, p1[0], &ev), 0);
  ev.events = EPOLLIN;
  ev.data.fd = p2[0];
  ASSERT_EQ(uepoll_epoll_ctl(efd, EPOLL_CTL_ADD, p2[0], &ev), 0);
  ev.data.u64 = 200000;  // always wait 200 ms for events
  ASSERT_GE(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev), 0);
  std::thread writer([&] {
    char b = static_cast<char>(0x89);
    usleep(10000);
    EXPECT_EQ(uepoll_write(p1[1], &b, 1), 1);
    usleep(10000);
    EXPECT_EQ(uepoll_write(p2[1], &b, 1), 1);
  });
  epoll_event events[2];
  int ret = uepoll_epoll_wait(efd, events, 2, -1);
  writer.join();
  EXPECT_EQ(ret, 2) << "expected both events rather than the first alone";
  for (int fd : {p1[0], p1[1], p2[0], p2[1], efd}) uepoll_close(fd);
  ExpectNoUepollLeaks();
}

// The same rule without depending on the machine's speed: with a minimum
// wait of an hour, the wait can only return once both events are ready, so
// a writer delayed by any amount still sees one wait return two.
TEST(MinWaitCtlUepoll, HoldsTheFirstEventForTheSecond) {
  int efd = uepoll_epoll_create1(0);
  ASSERT_GE(efd, 0);
  int a = uepoll_eventfd(0, EFD_NONBLOCK), b = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 1;
  ASSERT_EQ(uepoll_epoll_ctl(efd, EPOLL_CTL_ADD, a, &ev), 0);
  ev.data.u64 = 2;
  ASSERT_EQ(uepoll_epoll_ctl(efd, EPOLL_CTL_ADD, b, &ev), 0);
  ev.data.u64 = 3600ull * 1000000;  // an hour, in microseconds (< 2^32)
  ASSERT_EQ(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev), 0);
  std::thread writer([&] {
    uint64_t one = 1;
    EXPECT_EQ(uepoll_write(a, &one, 8), 8);
    usleep(20000);
    EXPECT_EQ(uepoll_write(b, &one, 8), 8);
  });
  epoll_event events[2];
  int ret = uepoll_epoll_wait(efd, events, 2, -1);
  writer.join();
  EXPECT_EQ(ret, 2);
  for (int fd : {a, b, efd}) uepoll_close(fd);
  ExpectNoUepollLeaks();
}

// 0 turns it off, and a zero timeout ignores it: with 1000 s set, neither a
// wait after setting 0 nor a timeout-0 wait may hold back a ready event
// (the bound of 5 s only turns a hang into a failure).
TEST(MinWaitCtlUepoll, ZeroDisablesAndZeroTimeoutIgnores) {
  int efd = uepoll_epoll_create1(0);
  ASSERT_GE(efd, 0);
  int a = uepoll_eventfd(1, EFD_NONBLOCK);
  ASSERT_GE(a, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(efd, EPOLL_CTL_ADD, a, &ev), 0);
  ev.data.u64 = 1000ull * 1000000;  // 1000 s
  ASSERT_EQ(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev), 0);
  epoll_event events[2];
  int64_t t0 = NowNs();
  EXPECT_EQ(uepoll_epoll_wait(efd, events, 2, 0), 1);
  EXPECT_LT(NowNs() - t0, 5000000000LL);
  ev.data.u64 = 0;
  EXPECT_EQ(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev),
            1000 * 1000000);
  EXPECT_EQ(InstanceMinWaitNs(efd), 0u);
  t0 = NowNs();
  EXPECT_EQ(uepoll_epoll_wait(efd, events, 2, 10000), 1);
  EXPECT_LT(NowNs() - t0, 5000000000LL);
  for (int fd : {a, efd}) uepoll_close(fd);
  ExpectNoUepollLeaks();
}

// The patch kept the value in an unsigned int: the high 32 bits of data
// are dropped. And it is the same per-instance value set_params sets.
TEST(MinWaitCtlUepoll, ThirtyTwoBitFieldSharedWithSetParams) {
  int efd = uepoll_epoll_create1(0);
  ASSERT_GE(efd, 0);
  epoll_event ev{};
  ev.data.u64 = (uint64_t{1} << 32) + 7;
  ASSERT_EQ(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev), 0);
  EXPECT_EQ(InstanceMinWaitNs(efd), 7000u);
  uepoll_params p{};
  p.min_wait_ns = 5000000;  // 5 ms
  ASSERT_EQ(uepoll_epoll_set_params(efd, &p), 0);
  ev.data.u64 = 0;
  EXPECT_EQ(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev), 5000);
  // A previous value beyond INT_MAX microseconds is reported as INT_MAX.
  p.min_wait_ns = uint64_t{3000000000} * 1000;
  ASSERT_EQ(uepoll_epoll_set_params(efd, &p), 0);
  EXPECT_EQ(uepoll_epoll_ctl(efd, UEPOLL_EPOLL_CTL_MIN_WAIT, -1, &ev),
            2147483647);
  uepoll_close(efd);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
