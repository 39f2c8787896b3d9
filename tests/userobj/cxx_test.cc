// The C++ API for user objects, mask-mode objects and timerfds: a class
// derived from uepoll::UserObject behaves like a kernel object under
// epoll, its lifetime is shared between the application and the
// descriptors, and both error forms work.
#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>

#include <uepoll/uepoll.hpp>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

using namespace std::chrono_literals;

std::atomic<int> g_destroyed{0};

// A byte queue: IN while non-empty, always OUT. Readable through the
// descriptor too.
class ByteQueue : public uepoll::UserObject {
 public:
  explicit ByteQueue(int* released) : released_(released) {}
  ~ByteQueue() override { g_destroyed.fetch_add(1); }

  std::uint32_t poll() noexcept override {
    std::lock_guard<std::mutex> l(mu_);
    return (q_.empty() ? 0 : EPOLLIN | EPOLLRDNORM) | EPOLLOUT;
  }
  ssize_t read(void* buf, std::size_t n) noexcept override {
    std::lock_guard<std::mutex> l(mu_);
    if (q_.empty()) return -EAGAIN;
    std::size_t k = 0;
    for (; k < n && !q_.empty(); ++k) {
      static_cast<char*>(buf)[k] = q_.front();
      q_.pop_front();
    }
    return static_cast<ssize_t>(k);
  }
  void on_release() noexcept override { ++*released_; }

  void push(char c) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(c);
    }
    notify(EPOLLIN | EPOLLRDNORM);
  }

 private:
  int* released_;
  std::mutex mu_;
  std::deque<char> q_;
};

class CxxUserObject : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};

TEST_F(CxxUserObject, WatchedLikeAnyDescriptor) {
  int released = 0;
  {
    auto [fd, q] = uepoll::make_user_object<ByteQueue>(O_NONBLOCK, &released);
    auto ep = uepoll::Instance::create();
    ep.add(fd, EPOLLIN | EPOLLET, 7);
    epoll_event evs[4];
    EXPECT_TRUE(ep.wait(evs, 0ms).empty());
    q->push('a');
    auto got = ep.wait(evs, 0ms);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].events, uint32_t(EPOLLIN));
    EXPECT_EQ(got[0].data.u64, 7u);
    char c = 0;
    EXPECT_EQ(uepoll_read(fd.get(), &c, 1), 1);
    EXPECT_EQ(c, 'a');
    EXPECT_EQ(uepoll_read(fd.get(), &c, 1), -1);
    EXPECT_EQ(errno, EAGAIN);
  }
  EXPECT_EQ(released, 1);
}

TEST_F(CxxUserObject, TheObjectOutlivesItsDescriptors) {
  int released = 0;
  g_destroyed = 0;
  auto h = uepoll::make_user_object<ByteQueue>(0, &released);
  h.fd.close();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(g_destroyed.load(), 0);
  h.object->push('x');  // notify after the last close: nothing to wake
  h.object.reset();
  EXPECT_EQ(g_destroyed.load(), 1);
}

TEST_F(CxxUserObject, TheDescriptorsKeepTheObjectAlive) {
  int released = 0;
  g_destroyed = 0;
  auto h = uepoll::make_user_object<ByteQueue>(0, &released);
  auto ep = uepoll::Instance::create();
  ep.add(h.fd, EPOLLIN, 1);
  ByteQueue* raw = h.object.get();
  h.object.reset();  // the application lets go first
  EXPECT_EQ(g_destroyed.load(), 0);
  raw->push('y');  // still alive: the descriptor holds it
  epoll_event evs[2];
  EXPECT_EQ(ep.wait(evs, 0ms).size(), 1u);
  h.fd.close();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(g_destroyed.load(), 1);
}

TEST_F(CxxUserObject, AttachTwiceIsEbusy) {
  int released = 0;
  auto q = std::make_shared<ByteQueue>(&released);
  auto h = uepoll::attach_user_object(q, O_CLOEXEC);
  EXPECT_EQ(uepoll_fcntl(h.fd.get(), F_GETFD), FD_CLOEXEC);
  std::error_code ec;
  auto again = uepoll::attach_user_object(q, 0, ec);
  EXPECT_EQ(ec, std::errc::device_or_resource_busy);
  EXPECT_FALSE(again.fd);
  EXPECT_THROW((void)uepoll::attach_user_object(q, 0), std::system_error);
  EXPECT_THROW((void)uepoll::make_user_object<ByteQueue>(O_RDWR, &released),
               std::system_error);
}

TEST_F(CxxUserObject, VpollFd) {
  auto v = uepoll::VpollFd::create(EPOLLOUT, O_NONBLOCK);
  auto ep = uepoll::Instance::create();
  ep.add(v, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 3);
  epoll_event evs[2];
  auto got = ep.wait(evs, 0ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].events, uint32_t(EPOLLOUT));
  v.add(EPOLLRDHUP);
  v.del(EPOLLOUT);
  got = ep.wait(evs, 0ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].events, uint32_t(EPOLLRDHUP));
  v.set(0);
  EXPECT_TRUE(ep.wait(evs, 0ms).empty());
  std::error_code ec;
  v.add(EPOLLET, ec);
  EXPECT_EQ(ec, std::errc::invalid_argument);
  EXPECT_THROW(v.set(EPOLLONESHOT), std::system_error);
}

TEST_F(CxxUserObject, TimerFd) {
  auto t = uepoll::TimerFd::create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  std::error_code ec;
  EXPECT_EQ(t.read(ec), 0u);
  EXPECT_EQ(ec, std::errc::resource_unavailable_try_again);
  t.arm(3600s, 1s);
  itimerspec cur = t.gettime();
  EXPECT_GT(cur.it_value.tv_sec, 3500);
  EXPECT_EQ(cur.it_interval.tv_sec, 1);
  t.arm(1ms);
  auto ep = uepoll::Instance::create();
  ep.add(t, EPOLLIN, 1);
  epoll_event evs[1];
  ASSERT_EQ(ep.wait(evs, 10s).size(), 1u);
  EXPECT_EQ(t.read(), 1u);
  t.disarm();
  EXPECT_EQ(t.gettime().it_value.tv_nsec, 0);
  EXPECT_THROW((void)uepoll::TimerFd::create(CLOCK_TAI, 0), std::system_error);
  itimerspec bad{};
  bad.it_value.tv_nsec = -1;
  EXPECT_THROW((void)t.settime(0, bad), std::system_error);
}

}  // namespace
}  // namespace uepoll_test
