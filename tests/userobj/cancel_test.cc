// pthread_cancel of a thread inside a user object's read or write: at a
// cancellation point inside the callback (the application's own code), in
// the sleep of a blocking descriptor, and inside the callback's retry
// after a notify woke that sleep. The callbacks run with the descriptor
// pinned and the thread hooked on the object's queue: a cancellation must
// leave neither behind (a reference would keep the object from ever being
// released, an entry on a dead stack would be walked by the next notify).
// After each cancel the object must still work for other threads, and its
// release must run exactly once at the last close (the leak check after
// each test catches a reference left behind, ASan a stale entry).
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "threads/blocked.h"

namespace uepoll_test {
namespace {

struct Obj {
  std::atomic<bool> ready{false};
  // The next call of the read callback (on cancel_target, if set) cancels
  // its own thread and reaches a cancellation point.
  std::atomic<bool> cancel_in_callback{false};
  std::atomic<bool> targeted{false};
  pthread_t cancel_target{};
  std::atomic<int> reads{0};
  std::atomic<int> releases{0};
  uepoll_obj* handle = nullptr;
  int fd = -1;
};

uint32_t ObjPoll(void* ctx) {
  return static_cast<Obj*>(ctx)->ready.load() ? uint32_t{EPOLLIN} : 0u;
}
ssize_t ObjRead(void* ctx, void* buf, size_t) {
  auto* o = static_cast<Obj*>(ctx);
  o->reads.fetch_add(1);
  bool mine =
      !o->targeted.load() || pthread_equal(o->cancel_target, pthread_self());
  if (mine && o->cancel_in_callback.exchange(false)) {
    pthread_cancel(pthread_self());
    UnpoisonMyStack();
    pthread_testcancel();
  }
  if (!o->ready.load()) return -EAGAIN;
  std::memcpy(buf, "r", 1);
  return 1;
}
void ObjRelease(void* ctx) { static_cast<Obj*>(ctx)->releases.fetch_add(1); }
const uepoll_obj_ops kOps = {&ObjPoll, &ObjRead, nullptr, &ObjRelease};

class UserCancel : public ::testing::Test {
 protected:
  void Create(int flags) {
    o_.fd = uepoll_obj_create(&kOps, &o_, flags, &o_.handle);
    ASSERT_GE(o_.fd, 0) << strerror(errno);
  }
  long Read() const {
    char c;
    return uepoll_read(o_.fd, &c, 1);
  }
  // The object still works: a blocked reader is woken by a notify, and the
  // last close runs release once.
  void ExpectStillWorks() {
    o_.ready = false;
    int fl = uepoll_fcntl(o_.fd, F_GETFL);
    ASSERT_EQ(uepoll_fcntl(o_.fd, F_SETFL, fl & ~O_NONBLOCK), 0);
    Blocked r([this] { return Read(); });
    ASSERT_TRUE(r.Parked());
    o_.ready = true;
    uepoll_obj_notify(o_.handle, EPOLLIN);
    ASSERT_TRUE(r.Join());
    EXPECT_EQ(r.value(), 1);
    EXPECT_EQ(o_.releases.load(), 0);
    ASSERT_EQ(uepoll_close(o_.fd), 0);
    EXPECT_EQ(o_.releases.load(), 1);
    // Nobody watches any more: a notify does nothing (and walks no entry).
    uepoll_obj_notify(o_.handle, EPOLLIN);
    uepoll_obj_put(o_.handle);
  }
  void TearDown() override { ExpectNoUepollLeaks(); }

  Obj o_;
};

// The read callback of a nonblocking descriptor reaches a cancellation
// point: the thread ends there, and the read's pin goes with it.
TEST_F(UserCancel, InsideTheReadCallback) {
  Create(O_NONBLOCK);
  o_.cancel_in_callback = true;
  Blocked t([this] { return Read(); });
  ASSERT_TRUE(t.Join());
  EXPECT_FALSE(t.returned()) << "the cancellation was not acted on";
  ExpectStillWorks();
}

// A blocking read asleep (the callback said -EAGAIN) is cancelled in its
// sleep.
TEST_F(UserCancel, InTheSleepOfABlockingRead) {
  Create(0);
  Blocked t([this] { return Read(); });
  ASSERT_TRUE(t.Parked());
  EXPECT_TRUE(t.CancelAndJoin());
  ExpectStillWorks();
}

// A notify wakes the sleeper, whose retry of the callback is cancelled at
// a cancellation point inside it: the thread is hooked on the queue again
// at that moment (so that no notify is lost), and must leave it. A second
// sleeper is woken by the same notify and reads.
TEST_F(UserCancel, InTheRetryAfterANotify) {
  Create(0);
  Blocked t([this] { return Read(); });
  ASSERT_TRUE(t.Parked());
  Blocked other([this] { return Read(); });
  ASSERT_TRUE(other.Parked());
  o_.cancel_target = t.handle();
  o_.targeted = true;
  o_.cancel_in_callback = true;
  o_.ready = true;
  uepoll_obj_notify(o_.handle, EPOLLIN);
  ASSERT_TRUE(other.Join());
  EXPECT_EQ(other.value(), 1);
  ASSERT_TRUE(t.Join());
  EXPECT_FALSE(t.returned()) << "the cancellation was not acted on";
  EXPECT_FALSE(o_.cancel_in_callback.load());
  o_.targeted = false;
  ExpectStillWorks();
}

}  // namespace
}  // namespace uepoll_test
