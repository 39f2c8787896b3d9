// Bad-input classes that tests/badinput (the per-call errno tables) and
// tests/minwait (pwait3, params) do not cover: extreme integers (INT_MIN,
// INT_MAX) for every descriptor, size, flag and op argument, descriptor
// numbers beyond any limit, kernel descriptors handed to uepoll (a
// documented deviation: refused, never touched), and the debug API.
// docs/reliability.md has the whole table, with where each row is tested.
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "conformance/helpers.h"

namespace uepoll_test {
namespace {

// Sanitizer runtimes intercept poll() and read all nfds entries before the
// call (ASan) or walk them (TSan): the huge-nfds row cannot run on the
// kernel under them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

class BadInputExtra : public BackendTest {};

TEST_P(BadInputExtra, extreme_descriptor_numbers__are_ebadf_everywhere) {
  int ep = Epoll();
  int efd = Eventfd(1);
  char buf[8];
  epoll_event ev{EPOLLIN, {}};
  for (int fd : {INT_MAX, INT_MIN, -2}) {
    SCOPED_TRACE(fd);
    EXPECT_ERRNO(B().close(fd), EBADF);
    EXPECT_ERRNO(B().dup(fd), EBADF);
    EXPECT_ERRNO(B().dup2(fd, efd), EBADF);
    EXPECT_ERRNO(B().read(fd, buf, sizeof buf), EBADF);
    EXPECT_ERRNO(B().write(fd, buf, sizeof buf), EBADF);
    EXPECT_ERRNO(B().shutdown(fd, SHUT_RD), EBADF);
    EXPECT_ERRNO(B().fcntl(fd, F_GETFL, 0), EBADF);
    EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), EBADF);
    EXPECT_ERRNO(B().epoll_ctl(fd, EPOLL_CTL_ADD, efd, &ev), EBADF);
    EXPECT_ERRNO(B().epoll_wait(fd, &ev, 1, 0), EBADF);
  }
  // dup2/dup3 onto a number beyond any descriptor limit.
  EXPECT_ERRNO(B().dup2(efd, INT_MAX), EBADF);
  EXPECT_ERRNO(B().dup3(efd, INT_MAX, 0), EBADF);
  EXPECT_ERRNO(B().dup2(efd, INT_MIN), EBADF);
  // poll: a huge number is POLLNVAL, a negative one is ignored.
  pollfd p[2] = {{INT_MAX, POLLIN, 0}, {INT_MIN, POLLIN, 0x11}};
  EXPECT_EQ(B().poll(p, 2, 0), 1);
  EXPECT_EQ(p[0].revents, POLLNVAL);
  EXPECT_EQ(p[1].revents, 0);
  // Nothing above touched the live objects.
  uint64_t v;
  EXPECT_EQ(B().read(efd, &v, sizeof v), 8);
  EXPECT_EQ(v, 1u);
}

TEST_P(BadInputExtra, extreme_ops_flags_and_sizes__are_einval) {
  int ep = Epoll();
  int efd = Eventfd(0);
  epoll_event ev{EPOLLIN, {}};
  int sv[2] = {-7, -7};
  EXPECT_ERRNO(B().epoll_ctl(ep, INT_MAX, efd, &ev), EINVAL);
  EXPECT_ERRNO(B().epoll_ctl(ep, INT_MIN, efd, &ev), EINVAL);
  EXPECT_ERRNO(B().epoll_wait(ep, &ev, INT_MIN, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_wait(ep, &ev, INT_MAX, 0), EINVAL);
  EXPECT_ERRNO(B().epoll_create(INT_MIN), EINVAL);
  EXPECT_ERRNO(B().epoll_create1(INT_MIN), EINVAL);
  EXPECT_ERRNO(B().epoll_create1(INT_MAX), EINVAL);
  EXPECT_ERRNO(B().eventfd(0, INT_MIN), EINVAL);
  EXPECT_ERRNO(B().eventfd(0, INT_MAX), EINVAL);
  EXPECT_ERRNO(B().pipe2(sv, INT_MIN), EINVAL);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, INT_MIN, 0, sv), EINVAL);
  EXPECT_ERRNO(B().socketpair(AF_UNIX, INT_MAX, 0, sv), EINVAL);
  EXPECT_EQ(sv[0], -7) << "nothing stored on failure";
  EXPECT_ERRNO(B().dup3(efd, B().closed_fd, INT_MIN), EINVAL);
  EXPECT_ERRNO(B().fcntl(efd, -1, 0), EINVAL);
  EXPECT_ERRNO(B().fcntl(efd, INT_MAX, 0), EINVAL);
  EXPECT_ERRNO(B().fcntl(efd, F_DUPFD, INT_MIN), EINVAL);
  int s[2];
  SocketPair(s);
  EXPECT_ERRNO(B().shutdown(s[0], INT_MIN), EINVAL);
  EXPECT_ERRNO(B().shutdown(s[0], INT_MAX), EINVAL);
  // poll: nfds above any descriptor limit (not on the kernel under a
  // sanitizer, see kSanitized).
  pollfd p = {efd, POLLIN, 0};
  if (!(IsKernel() && kSanitized)) {
    EXPECT_ERRNO(B().poll(&p, static_cast<nfds_t>(INT_MAX) + 1, 0), EINVAL);
  }
  // Nothing was registered or created.
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), ENOENT);
}

// A count that is huge but whose buffer is valid for what is there: the
// kernel copies what is available (pipes, sockets); eventfd needs >= 8.
TEST_P(BadInputExtra, huge_counts_with_valid_buffers__copy_what_is_there) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  char buf[16] = "abc";
  ASSERT_EQ(B().write(p[1], buf, 3), 3);
  // SSIZE_MAX is beyond the buffer only past the data: the kernel checks
  // access_ok for the whole range first, which fails on x86-64 (EFAULT).
  EXPECT_ERRNO(B().read(p[0], buf, static_cast<size_t>(SSIZE_MAX)), EFAULT);
  EXPECT_EQ(B().read(p[0], buf, sizeof buf), 3) << "the data is still there";
}

TEST(BadInputDebugApi, debug_calls__reject_bad_arguments_and_change_nothing) {
  EXPECT_ERRNO(uepoll_debug_live_counts(nullptr), EFAULT);
  long cap = uepoll_debug_fd_capacity();
  ASSERT_GT(cap, 0);
  long before = uepoll_debug_set_fd_limit(cap);  // read the current limit
  ASSERT_GT(before, 0);
  EXPECT_ERRNO(uepoll_debug_set_fd_limit(0), EINVAL);
  EXPECT_ERRNO(uepoll_debug_set_fd_limit(-1), EINVAL);
  EXPECT_ERRNO(uepoll_debug_set_fd_limit(LONG_MIN), EINVAL);
  EXPECT_ERRNO(uepoll_debug_set_fd_limit(cap + 1), EINVAL);
  EXPECT_EQ(uepoll_debug_set_fd_limit(before), cap)
      << "limit unchanged by errors";
  EXPECT_ERRNO(uepoll_debug_fail_alloc(-1), EINVAL);
  EXPECT_ERRNO(uepoll_debug_fail_alloc(LONG_MIN), EINVAL);
  // fail_alloc(-1) must not have armed anything: creation works.
  int e = uepoll_eventfd(0, 0);
  EXPECT_GE(e, 0);
  EXPECT_EQ(uepoll_close(e), 0);
  EXPECT_EQ(uepoll_is_uepoll_fd(-1), 0);
  EXPECT_EQ(uepoll_is_uepoll_fd(INT_MIN), 0);
  EXPECT_EQ(uepoll_is_uepoll_fd(e), 0) << "closed";
  EXPECT_EQ(uepoll_is_uepoll_fd(UEPOLL_FD_BASE), 0);
  EXPECT_ERRNO(uepoll_set_fd_mode(2), EINVAL);
  EXPECT_ERRNO(uepoll_set_fd_mode(-1), EINVAL);
  // A descriptor was created: the other numbering cannot be chosen now.
  EXPECT_ERRNO(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), EBUSY);
  EXPECT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_KERNEL), 0);
  EXPECT_EQ(uepoll_get_fd_mode(), UEPOLL_FD_MODE_KERNEL);
  ExpectNoUepollLeaks();
}

UEPOLL_INSTANTIATE_BACKENDS(BadInputExtra);

}  // namespace
}  // namespace uepoll_test
