// poll()'s nfds against RLIMIT_NOFILE: the kernel fails
// EINVAL when nfds exceeds the soft limit - before it looks at the array -
// and takes nfds as an unsigned int. uepoll must follow the real
// RLIMIT_NOFILE, not its own descriptor limit, so this test lowers the real
// limit for both backends (the process's own, restored at the end).
//
// Every poll here has timeout 0 on a ready descriptor: with the limit
// lowered the process may not open a kernel descriptor (a uepoll sleep
// would need one).
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include <cerrno>
#include <vector>

#include <gtest/gtest.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

// Sets RLIMIT_NOFILE's soft limit for its lifetime.
class NofileLimit {
 public:
  explicit NofileLimit(rlim_t soft) {
    ok_ = getrlimit(RLIMIT_NOFILE, &saved_) == 0;
    rlimit rl = saved_;
    rl.rlim_cur = soft;
    ok_ = ok_ && setrlimit(RLIMIT_NOFILE, &rl) == 0;
  }
  ~NofileLimit() { setrlimit(RLIMIT_NOFILE, &saved_); }
  NofileLimit(const NofileLimit&) = delete;
  NofileLimit& operator=(const NofileLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

class PollNfds : public BackendTest {
 protected:
  void SetUp() override {
    efd_ = Eventfd(1);  // readable
    // Entry 0 polls the eventfd; the rest are ignored (negative fds).
    fds_.assign(kEntries, pollfd{-1, POLLIN, 0});
    fds_[0].fd = efd_;
  }
  // poll(fds_, n, 0): 1 (the eventfd) or -1 with errno.
  int PollN(nfds_t n) { return B().poll(fds_.data(), n, 0); }

  static constexpr size_t kEntries = 200;
  int efd_ = -1;
  std::vector<pollfd> fds_;
};

TEST_P(PollNfds, NfdsAboveRlimitNofileIsEinval) {
  for (rlim_t limit :
       {rlim_t{0}, rlim_t{1}, rlim_t{5}, rlim_t{64}, rlim_t{kEntries - 1}}) {
    NofileLimit lim(limit);
    ASSERT_TRUE(lim.ok()) << "setrlimit: " << strerror(errno);
    SCOPED_TRACE("RLIMIT_NOFILE " + std::to_string(limit));
    EXPECT_EQ(PollN(0), 0);
    if (limit > 0) {
      EXPECT_EQ(PollN(limit), 1);
    }
    errno = 0;
    EXPECT_EQ(PollN(limit + 1), -1);
    EXPECT_EQ(errno, EINVAL);
    // Checked before the array: a NULL array is EINVAL above the limit,
    // EFAULT within it.
    errno = 0;
    EXPECT_EQ(B().poll(nullptr, limit + 1, 0), -1);
    EXPECT_EQ(errno, EINVAL);
    if (limit > 0) {
      errno = 0;
      EXPECT_EQ(B().poll(nullptr, limit, 0), -1);
      EXPECT_EQ(errno, EFAULT);
    }
  }
  // Raised again, the same nfds succeeds.
  EXPECT_EQ(PollN(kEntries), 1);
}

// The syscall's nfds is an unsigned int: a 64-bit nfds_t loses its upper
// bits, and the rest is what is checked and polled.
TEST_P(PollNfds, NfdsIsTruncatedToAnUnsignedInt) {
  NofileLimit lim(5);
  ASSERT_TRUE(lim.ok()) << "setrlimit: " << strerror(errno);
  const nfds_t high = nfds_t{1} << 32;
  EXPECT_EQ(PollN(high), 0);      // polls nothing
  EXPECT_EQ(PollN(high + 1), 1);  // polls entry 0 only
  EXPECT_EQ(PollN(high + 5), 1);
  errno = 0;
  EXPECT_EQ(PollN(high + 6), -1);  // 6 > RLIMIT_NOFILE
  EXPECT_EQ(errno, EINVAL);
}

UEPOLL_INSTANTIATE_BACKENDS(PollNfds);

}  // namespace
}  // namespace uepoll_test
