// The fixture every backend-parameterised test uses. It tracks the
// descriptors a test opens (through the Fd helpers), closes what is left at
// the end, and then checks that uepoll holds no live object, item or
// descriptor: every test ends with a leak check.
#ifndef UEPOLL_TESTS_SUPPORT_FIXTURE_H_
#define UEPOLL_TESTS_SUPPORT_FIXTURE_H_

#include <sys/eventfd.h>

#include <set>

#include <gtest/gtest.h>

#include "support/backend.h"

namespace uepoll_test {

// Asserts that uepoll has no live objects, items, descriptors or instances.
void ExpectNoUepollLeaks();

// Closes every open uepoll descriptor (below 65536 and in the disjoint
// range's first 65536 numbers); for stress tests whose slots may hold
// stale numbers. Returns how many it closed.
int CloseAllUepollDescriptors();

class BackendTest : public ::testing::TestWithParam<const Backend*> {
 protected:
  const Backend& B() const { return *GetParam(); }
  bool IsKernel() const { return GetParam()->is_kernel; }

  // Record fd (if >= 0) so that TearDown closes it if the test did not.
  int Track(int fd);
  // Close through the backend and forget it; returns close()'s result.
  int Close(int fd);
  void Forget(int fd) { tracked_.erase(fd); }

  // Creation helpers that ASSERT success and track the result.
  int Epoll(int flags = 0);
  int Eventfd(unsigned int initval = 0, int flags = EFD_NONBLOCK);
  void Pipe(int fds[2], int flags = 0);
  void SocketPair(int sv[2], int flags = 0);
  // epoll_ctl with events/data filled in.
  int Ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);

  void TearDown() override;

 private:
  std::set<int> tracked_;
};

// INSTANTIATE for a BackendTest subclass over both backends.
#define UEPOLL_INSTANTIATE_BACKENDS(Suite)                                   \
  INSTANTIATE_TEST_SUITE_P(                                                  \
      Backends, Suite,                                                       \
      ::testing::Values(&::uepoll_test::KernelBackend(),                     \
                        &::uepoll_test::UepollBackend()),                    \
      [](const ::testing::TestParamInfo<const ::uepoll_test::Backend*>& i) { \
        return ::uepoll_test::BackendName(i.param);                          \
      })

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SUPPORT_FIXTURE_H_
