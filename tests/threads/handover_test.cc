// The wakeup an exclusive waiter was picked for, when that waiter leaves
// without consuming it: two threads block on one object, an event wakes
// one of them (pipes, datagram and seqpacket pairs wake exactly one
// reader or writer), and the one picked is cancelled (pthread_cancel)
// before it can act. On the kernel the other one gets the event: a task
// that is already running (the cancel's signal woke it) does not consume
// an exclusive wakeup, which moves on to the next waiter. uepoll's waiter
// must hand it on the same way (core/wait_queue.h, ThreadWaitEntry), or
// the other thread sleeps forever with data in the object.
//
// How the window is held open on both backends, with no timing: the
// thread to be picked is first sent a signal whose handler waits inside
// the call's sleep (a cancellation point in the handler: the cancel ends
// the thread from there). On the kernel the signal already took that
// thread off the wait queue; on uepoll its entry is still queued, so the
// event picks it, and only the hand-over reaches the other thread.
//
// The EINTR variant releases the handler instead (no SA_RESTART): no
// event may be lost and nobody may sleep with data there. Which thread
// gets it differs: the kernel fails the interrupted call EINTR (the signal
// came first) and the other thread reads; uepoll's interrupted call finds
// the data after its handler and returns it (docs/semantics.md D6).
//
// Every blocking wait is bounded: a lost wakeup fails the test.
//
// Not under ThreadSanitizer: its runtime only queues a signal that lands in
// a blocked call and runs the handler once the call returns, so no handler
// can hold a thread inside its sleep (tests/stress/handover_stress_test.cc
// exercises the hand-over there).
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/wait_queue.h"
#include "support/fixture.h"
#include "support/scoped_handler.h"
#include "threads/blocked.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

// The handler that holds a thread inside its sleep: it waits for the
// release in a loop around a cancellation point (nanosleep), where a
// cancel ends the thread.
std::atomic<int> g_held{0};
std::atomic<bool> g_release{false};
void HoldingHandler(int) {
  g_held.fetch_add(1);
  while (!g_release.load()) {
    timespec t{0, 200000};
    nanosleep(&t, nullptr);
  }
}

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif

#define SKIP_UNDER_TSAN()                                                   \
  do {                                                                      \
    if (kTsan) {                                                            \
      GTEST_SKIP() << "ThreadSanitizer runs a handler only after the call " \
                      "it interrupted returns (see the file comment)";      \
    }                                                                       \
  } while (0)

// The holding handler on SIGUSR1 for the scope; at its end, a handler
// still held is let go before the old disposition comes back (the member's
// destructor runs after this one's body).
class ScopedHoldingHandler {
 public:
  explicit ScopedHoldingHandler(bool restart)
      : handler_(SIGUSR1, &HoldingHandler, restart ? SA_RESTART : 0) {
    g_held.store(0);
    g_release.store(false);
  }
  ~ScopedHoldingHandler() { g_release.store(true); }

 private:
  ScopedHandler handler_;
};

// One kind of blocking call on one object: what blocks, what one event
// is (it wakes one exclusive waiter, or all non-exclusive ones), and what
// the woken call then returns.
struct Kind {
  const char* name;
  bool exclusive;  // its waiters wait exclusively (in both kernels)
};
constexpr Kind kKinds[] = {
    {"pipe_read", true},      {"pipe_write", true},   {"dgram_recv", true},
    {"seqpacket_recv", true}, {"stream_recv", false}, {"eventfd_read", false},
};

class HandoverIo : public ::testing::TestWithParam<
                       std::tuple<const Backend*, int /*kind*/>> {
 protected:
  const Backend& B() const { return *std::get<0>(GetParam()); }
  bool IsKernel() const { return B().is_kernel; }
  const Kind& K() const { return kKinds[std::get<1>(GetParam())]; }

  void SetUp() override {
    const std::string k = K().name;
    int sv[2] = {-1, -1};
    if (k == "pipe_read" || k == "pipe_write") {
      ASSERT_EQ(B().pipe(sv), 0);
    } else if (k == "eventfd_read") {
      sv[0] = sv[1] = B().eventfd(0, 0);
      ASSERT_GE(sv[0], 0);
    } else {
      int type = k == "dgram_recv"       ? SOCK_DGRAM
                 : k == "seqpacket_recv" ? SOCK_SEQPACKET
                                         : SOCK_STREAM;
      ASSERT_EQ(B().socketpair(AF_UNIX, type, 0, sv), 0);
    }
    rd_ = sv[0];
    wr_ = sv[1];
    if (k == "pipe_write") {
      // Full, and left blocking: a write of one byte blocks.
      int fl = B().fcntl(wr_, F_GETFL, 0);
      ASSERT_EQ(B().fcntl(wr_, F_SETFL, fl | O_NONBLOCK), 0);
      std::vector<char> chunk(4096, 'f');
      while (B().write(wr_, chunk.data(), chunk.size()) > 0) {
      }
      ASSERT_EQ(B().fcntl(wr_, F_SETFL, fl), 0);
    }
  }
  void TearDown() override {
    if (rd_ >= 0) B().close(rd_);
    if (wr_ >= 0 && wr_ != rd_) B().close(wr_);
    ExpectNoUepollLeaks();
  }

  // The blocking call, as a thread runs it.
  long Call() const {
    const std::string k = K().name;
    char buf[8];
    if (k == "pipe_read") return B().read(rd_, buf, 1);
    if (k == "pipe_write") return B().write(wr_, "w", 1);
    if (k == "eventfd_read") return B().read(rd_, buf, 8);
    return B().recv(wr_, buf, 1, 0);
  }
  // What a woken call returns.
  long Expected() const {
    return std::string(K().name) == "eventfd_read" ? 8 : 1;
  }
  // One event: it wakes one exclusive waiter (or every other kind).
  void Event() {
    const std::string k = K().name;
    if (k == "pipe_read") {
      ASSERT_EQ(B().write(wr_, "x", 1), 1);
    } else if (k == "pipe_write") {
      // One page read frees one slot: room for one writer.
      char page[4096];
      ASSERT_EQ(B().read(rd_, page, sizeof page), 4096);
    } else if (k == "eventfd_read") {
      uint64_t one = 1;
      ASSERT_EQ(B().write(rd_, &one, 8), 8);
    } else {
      ASSERT_EQ(B().send(rd_, "x", 1, 0), 1);
    }
  }
  std::function<long()> CallFn() {
    return [this] { return Call(); };
  }

  int rd_ = -1;
  int wr_ = -1;
};

// The picked waiter is cancelled inside its sleep: the other one must get
// the event.
TEST_P(HandoverIo, cancelled_picked_waiter_hands_the_wakeup_on) {
  SKIP_UNDER_TSAN();
  ScopedHoldingHandler handler(/*restart=*/true);
  Blocked a(CallFn());
  ASSERT_TRUE(a.Parked());
  Blocked b(CallFn());  // queued after a: a is the one an event picks
  ASSERT_TRUE(b.Parked());
  ASSERT_EQ(pthread_kill(a.handle(), SIGUSR1), 0);
  ASSERT_TRUE(Eventually([] { return g_held.load() == 1; }));
  Event();
  EXPECT_TRUE(a.CancelAndJoin());
  bool b_done = b.Join();
  EXPECT_TRUE(b_done) << "the other waiter slept on: the wakeup was lost";
  if (!b_done) {
    b.Kick();
    ASSERT_TRUE(b.Join());
  }
  EXPECT_EQ(b.value(), Expected());
}

// The picked waiter's handler returns (no SA_RESTART): no event is lost,
// nobody sleeps with the event pending.
TEST_P(HandoverIo, interrupted_picked_waiter_loses_nothing) {
  SKIP_UNDER_TSAN();
  ScopedHoldingHandler handler(/*restart=*/false);
  Blocked a(CallFn());
  ASSERT_TRUE(a.Parked());
  Blocked b(CallFn());
  ASSERT_TRUE(b.Parked());
  ASSERT_EQ(pthread_kill(a.handle(), SIGUSR1), 0);
  ASSERT_TRUE(Eventually([] { return g_held.load() == 1; }));
  Event();
  g_release.store(true);
  ASSERT_TRUE(a.Join());
  if (a.value() < 0) {
    // The kernel's answer: the signal came first.
    EXPECT_EQ(a.error(), EINTR);
    bool b_done = b.Join();
    EXPECT_TRUE(b_done) << "the other waiter slept on: the wakeup was lost";
    if (!b_done) {
      b.Kick();
      ASSERT_TRUE(b.Join());
    }
    EXPECT_EQ(b.value(), Expected());
  } else {
    // The event found after the handler wins (uepoll, D6): the other
    // waiter must sleep on, with nothing left for it.
    EXPECT_EQ(a.value(), Expected());
    EXPECT_TRUE(b.Parked());
    Event();
    bool b_done = b.Join();
    EXPECT_TRUE(b_done) << "a later event did not wake the other waiter";
    if (!b_done) {
      b.Kick();
      ASSERT_TRUE(b.Join());
    }
    EXPECT_EQ(b.value(), Expected());
  }
  // Pinned: which of the two got it, for the exclusive kinds (the others
  // wake both, and the two race on uepoll).
  if (K().exclusive) {
    EXPECT_EQ(a.value() < 0, IsKernel());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Backends, HandoverIo,
    ::testing::Combine(::testing::Values(&KernelBackend(), &UepollBackend()),
                       ::testing::Range(0, static_cast<int>(sizeof kKinds /
                                                            sizeof *kKinds))),
    [](const ::testing::TestParamInfo<std::tuple<const Backend*, int>>& i) {
      return std::string(kKinds[std::get<1>(i.param)].name) + "_" +
             BackendName(std::get<0>(i.param));
    });

// The picked waiter's signal ends its sleep, its last test finds nothing,
// and the event comes right after that test, before the call returns
// EINTR: uepoll only (the window is inside uepoll's WaitForIo, held open
// by WaitQueue's test hook, which the interrupted thread runs itself). The
// interrupted waiter must be off the queue before its last test, so that
// the event wakes the other waiter; were it still queued, the event would
// pick it and be lost with its EINTR, the other waiter asleep with data
// in the object. Exclusive kinds only: the others wake every waiter.
class HandoverIoInterruptedUepoll : public HandoverIo {
 protected:
  static void EventInTheWindow(uepoll::impl::WaitQueue*) {
    // Once, and only on the interrupted thread (b is never interrupted).
    if (current_ == nullptr || fired_.exchange(true)) return;
    current_->Event();
  }
  void SetUp() override {
    HandoverIo::SetUp();
    current_ = this;
    fired_ = false;
  }
  void TearDown() override {
    uepoll::impl::WaitQueue::SetInterruptedTestHookForTest(nullptr);
    current_ = nullptr;
    HandoverIo::TearDown();
  }
  static inline HandoverIoInterruptedUepoll* current_ = nullptr;
  static inline std::atomic<bool> fired_{false};
};

TEST_P(HandoverIoInterruptedUepoll, event_after_the_last_test_wakes_the_other) {
  SKIP_UNDER_TSAN();
  ASSERT_TRUE(K().exclusive);
  ScopedHoldingHandler handler(/*restart=*/false);
  g_release.store(true);  // the handler returns at once: EINTR
  Blocked a(CallFn());
  ASSERT_TRUE(a.Parked());
  Blocked b(CallFn());  // queued after a
  ASSERT_TRUE(b.Parked());
  uepoll::impl::WaitQueue::SetInterruptedTestHookForTest(&EventInTheWindow);
  ASSERT_EQ(pthread_kill(a.handle(), SIGUSR1), 0);
  ASSERT_TRUE(a.Join());
  EXPECT_TRUE(fired_.load()) << "the interrupted call never reached its "
                                "last test with nothing there";
  EXPECT_EQ(a.value(), -1);
  EXPECT_EQ(a.error(), EINTR);
  bool b_done = b.Join();
  EXPECT_TRUE(b_done) << "the other waiter slept on: the event that came "
                         "after the interrupted waiter's last test was lost";
  if (!b_done) {
    b.Kick();
    ASSERT_TRUE(b.Join());
  }
  EXPECT_EQ(b.value(), Expected());
}

INSTANTIATE_TEST_SUITE_P(
    Backends, HandoverIoInterruptedUepoll,
    ::testing::Combine(::testing::Values(&UepollBackend()),
                       ::testing::Values(0, 1, 2, 3)),  // the exclusive kinds
    [](const ::testing::TestParamInfo<std::tuple<const Backend*, int>>& i) {
      return std::string(kKinds[std::get<1>(i.param)].name);
    });

// The hand-over goes past an exclusive registration that does not take it:
// an EPOLLEXCLUSIVE item of an instance nobody waits on (the kernel's
// callback returns 0 then, and the wake moves on). Queue order on the
// pipe: the reader to be picked, the idle registration, the other reader.
class HandoverPipe : public BackendTest {};

TEST_P(HandoverPipe, hand_over_passes_an_idle_exclusive_registration) {
  SKIP_UNDER_TSAN();
  int p[2];
  Pipe(p);
  ScopedHoldingHandler handler(/*restart=*/true);
  const Backend* bk = &B();
  auto read1 = [bk, &p] {
    char c;
    return long{bk->read(p[0], &c, 1)};
  };
  Blocked a(read1);
  ASSERT_TRUE(a.Parked());
  int ep = Epoll();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLEXCLUSIVE, 5), 0);
  Blocked b(read1);
  ASSERT_TRUE(b.Parked());
  ASSERT_EQ(pthread_kill(a.handle(), SIGUSR1), 0);
  ASSERT_TRUE(Eventually([] { return g_held.load() == 1; }));
  ASSERT_EQ(B().write(p[1], "x", 1), 1);
  EXPECT_TRUE(a.CancelAndJoin());
  bool b_done = b.Join();
  EXPECT_TRUE(b_done) << "the hand-over stopped at the idle registration";
  if (!b_done) {
    b.Kick();
    ASSERT_TRUE(b.Join());
  }
  EXPECT_EQ(b.value(), 1);
}

UEPOLL_INSTANTIATE_BACKENDS(HandoverPipe);

// The same for two threads in epoll_wait on one instance: an event wakes
// one waiter (the newest, on both), which is cancelled inside its sleep.
class HandoverEpoll : public BackendTest {};

TEST_P(HandoverEpoll, cancelled_picked_waiter_hands_the_wakeup_on) {
  SKIP_UNDER_TSAN();
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 7), 0);
  ScopedHoldingHandler handler(/*restart=*/true);
  const Backend* b = &B();
  auto wait = [b, ep] {
    epoll_event ev[2];
    return long{b->epoll_wait(ep, ev, 2, 20000)};
  };
  Blocked older(wait);
  ASSERT_TRUE(older.Parked());
  Blocked newest(wait);  // the one an event picks
  ASSERT_TRUE(newest.Parked());
  ASSERT_EQ(pthread_kill(newest.handle(), SIGUSR1), 0);
  ASSERT_TRUE(Eventually([] { return g_held.load() == 1; }));
  uint64_t one = 1;
  ASSERT_EQ(B().write(efd, &one, 8), 8);
  EXPECT_TRUE(newest.CancelAndJoin());
  bool done = older.Join();
  EXPECT_TRUE(done) << "the other waiter slept on: the wakeup was lost";
  if (!done) {
    // Its timeout ends it.
    ASSERT_TRUE(
        Eventually([&] { return older.returned(); }, std::chrono::seconds(25)));
    ASSERT_TRUE(older.Join());
  }
  EXPECT_EQ(older.value(), 1);
}

// Signal variants for epoll waiters: the picked (newest) waiter's handler
// returns (no SA_RESTART), either at once or only after the waiter's own
// timeout has passed (the timeout variant: a picked waiter whose time is
// up still owes the event it was picked for).
void InterruptedEpollWaiter(const Backend& bk, int ep, int efd,
                            int newest_timeout_ms, bool wait_out_timeout) {
  ScopedHoldingHandler handler(/*restart=*/false);
  const Backend* b = &bk;
  Blocked older([b, ep] {
    epoll_event ev[2];
    return long{b->epoll_wait(ep, ev, 2, kWaitMs)};
  });
  ASSERT_TRUE(older.Parked());
  Blocked newest([b, ep, newest_timeout_ms] {
    epoll_event ev[2];
    return long{b->epoll_wait(ep, ev, 2, newest_timeout_ms)};
  });
  ASSERT_TRUE(newest.Parked());
  int64_t start_ns = 0;
  {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    start_ns = ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }
  ASSERT_EQ(pthread_kill(newest.handle(), SIGUSR1), 0);
  ASSERT_TRUE(Eventually([] { return g_held.load() == 1; }));
  uint64_t one = 1;
  ASSERT_EQ(bk.write(efd, &one, 8), 8);
  // The timeout variant: the handler returns only once the waiter's
  // timeout is over (measured from before the signal, so certainly over).
  ASSERT_TRUE(!wait_out_timeout || Eventually([&] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec - start_ns >
           int64_t{newest_timeout_ms} * 1000000;
  }));
  g_release.store(true);
  ASSERT_TRUE(newest.Join());
  if (newest.value() <= 0) {
    // The kernel: the signal came first (EINTR); the event went to the
    // other waiter.
    EXPECT_EQ(newest.value(), -1);
    EXPECT_EQ(newest.error(), EINTR);
    ASSERT_TRUE(older.Join()) << "the other waiter slept on";
    EXPECT_EQ(older.value(), 1);
  } else {
    // Events found after the handler win (D6); the ET event went to it.
    EXPECT_EQ(newest.value(), 1);
    EXPECT_TRUE(older.Parked());
    ASSERT_EQ(bk.write(efd, &one, 8), 8);
    ASSERT_TRUE(older.Join());
    EXPECT_EQ(older.value(), 1);
  }
  EXPECT_EQ(newest.value() < 0, bk.is_kernel);
}

TEST_P(HandoverEpoll, interrupted_picked_waiter_loses_nothing) {
  SKIP_UNDER_TSAN();
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 7), 0);
  InterruptedEpollWaiter(B(), ep, efd, kWaitMs, false);
}

TEST_P(HandoverEpoll, timed_out_picked_waiter_loses_nothing) {
  SKIP_UNDER_TSAN();
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 7), 0);
  InterruptedEpollWaiter(B(), ep, efd, 50, true);
}

UEPOLL_INSTANTIATE_BACKENDS(HandoverEpoll);

}  // namespace
}  // namespace uepoll_test
