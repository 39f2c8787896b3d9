// pthread_cancel of a thread blocked in a C++ call that may block. The
// error_code and try_ forms of those calls throw nothing but are not
// noexcept: the cancellation unwinds the thread's stack through them, and a
// noexcept frame on the way would end the process in std::terminate (each
// test here aborted the whole binary while the calls were noexcept).
#include <fcntl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <system_error>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>
#include <uepoll/uepoll.hpp>

#include "scenarios/scenario.h"
#include "support/fixture.h"

namespace uepoll_test {
namespace {

using namespace std::chrono_literals;

TEST(CxxCancel, wait_with_error_code_is_a_cancellation_point) {
  auto ep = uepoll::Instance::create(0);
  auto efd = uepoll::EventFd::create(0, 0);
  ep.add(efd, EPOLLIN, 7);
  {
    CancellableCall call([&]() -> long {
      std::array<epoll_event, 4> out;
      std::error_code ec;
      return static_cast<long>(
          ep.wait(out, uepoll::Instance::kForever, ec).size());
    });
    ASSERT_TRUE(call.Parked());
    ASSERT_TRUE(call.CancelAndJoin());
  }
  // The instance keeps working: the cancelled wait left nothing behind.
  efd.write(1);
  std::array<epoll_event, 4> out;
  auto got = ep.wait(out, 10s);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data.u64, 7u);
  efd.close();
  ep.close();
  ExpectNoUepollLeaks();
}

TEST(CxxCancel, wait_options_with_error_code_is_a_cancellation_point) {
  auto ep = uepoll::Instance::create(0);
  auto efd = uepoll::EventFd::create(0, 0);
  ep.add(efd, EPOLLIN, 7);
  {
    CancellableCall call([&]() -> long {
      std::array<epoll_event, 4> out;
      uepoll::Instance::WaitOptions opts;
      opts.min_wait = 1ms;
      std::error_code ec;
      return static_cast<long>(ep.wait(out, opts, ec).size());
    });
    ASSERT_TRUE(call.Parked());
    ASSERT_TRUE(call.CancelAndJoin());
  }
  efd.close();
  ep.close();
  ExpectNoUepollLeaks();
}

TEST(CxxCancel, eventfd_reads_are_cancellation_points) {
  auto efd = uepoll::EventFd::create(0, 0);
  {
    CancellableCall call([&]() -> long {
      std::error_code ec;
      return static_cast<long>(efd.read(ec));
    });
    ASSERT_TRUE(call.Parked());
    ASSERT_TRUE(call.CancelAndJoin());
  }
  {
    CancellableCall call([&]() -> long {
      auto r = efd.try_read();
      return r ? static_cast<long>(*r) : -1;
    });
    ASSERT_TRUE(call.Parked());
    ASSERT_TRUE(call.CancelAndJoin());
  }
  efd.write(3);
  EXPECT_EQ(efd.read(), 3u);
  efd.close();
  ExpectNoUepollLeaks();
}

TEST(CxxCancel, pipe_read_and_write_are_cancellation_points) {
  auto p = uepoll::Pipe::create(0);
  {
    CancellableCall call([&]() -> long {
      std::array<std::byte, 16> buf;
      std::error_code ec;
      return static_cast<long>(p.read(buf, ec));
    });
    ASSERT_TRUE(call.Parked());
    ASSERT_TRUE(call.CancelAndJoin());
  }
  // Fill the pipe without blocking, then a blocking write sleeps.
  int wfd = p.write_end.get();
  int fl = uepoll_fcntl(wfd, F_GETFL, 0);
  ASSERT_EQ(uepoll_fcntl(wfd, F_SETFL, fl | O_NONBLOCK), 0);
  std::array<std::byte, 4096> chunk{};
  while (p.write_end.try_write(chunk)) {
  }
  ASSERT_EQ(uepoll_fcntl(wfd, F_SETFL, fl), 0);
  {
    CancellableCall call([&]() -> long {
      std::error_code ec;
      return static_cast<long>(p.write(chunk, ec));
    });
    ASSERT_TRUE(call.Parked());
    ASSERT_TRUE(call.CancelAndJoin());
  }
  p.read_end.close();
  p.write_end.close();
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
