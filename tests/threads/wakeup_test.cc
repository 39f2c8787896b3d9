// Which blocked waiters an event wakes (docs/contract.md section 7), on both
// backends with one set of expectations.
//
// "Exactly one woke" is observed as "exactly one returned the event": a
// waiter woken for nothing sleeps again, which only its return value could
// show. So each test ends by releasing the waiters still blocked through a
// separate level-triggered "stop" item and counts who returned what.
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/fixture.h"
#include "threads/waiter.h"
#include "threads/waiter_group.h"

// ThreadSanitizer reports close() of a descriptor that another thread is
// using in a call as a data race. In CloseOfEpollFdDoesNotDisturbWaiter that
// race is the behaviour under test (the waiter sits inside epoll_wait when
// its descriptor closes), so it is suppressed for that close only
// (tests/support/tsan_suppressions.cc).

namespace uepoll_test {

[[gnu::noinline]] int CloseUnderBlockedWaiter(const Backend& b, int fd) {
  return b.close(fd);
}

}  // namespace uepoll_test

namespace uepoll_test {
namespace {

constexpr uint64_t kEventData = 1;
constexpr uint64_t kOtherData = 2;
constexpr uint64_t kStopData = 99;

class ThreadsWakeup : public BackendTest {
 protected:
  void Signal(int efd) {
    uint64_t one = 1;
    ASSERT_EQ(B().write(efd, &one, sizeof one), 8);
  }

  std::unique_ptr<Waiter> StartWaiter(int ep, int max = 1) {
    return StartEpollWaiter(B(), ep, max);
  }
  Waiters StartWaiters(int n, int ep) { return StartEpollWaiters(B(), n, ep); }

  // Closes fd (the fixture forgets it) on another thread while w is
  // blocked in a call on it, then runs release(), which must end that
  // call, so that the closer finishes either way. Expects the close to
  // have returned 0 without waiting, with w still blocked after it. `what`
  // names the call in the failures.
  void ExpectCloseLeavesBlockedCall(int fd, Waiter& w,
                                    const std::function<void()>& release,
                                    const char* what) {
    Forget(fd);
    std::atomic<bool> closed{false};
    std::atomic<int> close_result{-2};
    std::thread closer([&] {
      close_result = CloseUnderBlockedWaiter(B(), fd);
      closed = true;
    });
    bool returned = Eventually([&] { return closed.load(); });
    bool still_parked = returned && w.Parked();
    release();
    closer.join();
    ASSERT_TRUE(w.WaitDone());
    EXPECT_TRUE(returned) << "close() waited for the blocked " << what;
    EXPECT_EQ(close_result.load(), 0);
    EXPECT_TRUE(still_parked) << "close() ended the blocked " << what;
  }
};

TEST_P(ThreadsWakeup, EtEventWakesExactlyOneOfNWaiters) {
  constexpr int kWaiters = 4;
  int ep = Epoll();
  int src = Eventfd();
  int stop = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, kEventData), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
  auto ws = StartWaiters(kWaiters, ep);
  for (auto& w : ws) ASSERT_TRUE(w->Parked());

  Signal(src);
  ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 1; }));
  Signal(stop);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), 1);
  EXPECT_EQ(CountGot(ws, kStopData), kWaiters - 1);
}

// Blocked waiters are picked last-in first-out: the thread that went to
// sleep most recently (its cache still warm) gets the event.
TEST_P(ThreadsWakeup, EventGoesToTheMostRecentWaiter) {
  constexpr int kWaiters = 3;
  int ep = Epoll();
  int src = Eventfd();
  int stop = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, kEventData), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
  std::vector<std::unique_ptr<Waiter>> ws;
  for (int i = 0; i < kWaiters; ++i) {
    ws.push_back(StartWaiter(ep));
    ASSERT_TRUE(ws.back()->Parked());  // one at a time: a known order
  }
  Signal(src);
  ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 1; }));
  Signal(stop);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(ws.back()->event(0).data.u64, kEventData);
  EXPECT_EQ(CountGot(ws, kEventData), 1);
}

// The harvester re-queues the LT item and so hands the wakeup on.
TEST_P(ThreadsWakeup, LtEventWakesEveryWaiterInTurn) {
  constexpr int kWaiters = 4;
  int ep = Epoll();
  int src = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, kEventData), 0);
  auto ws = StartWaiters(kWaiters, ep);
  for (auto& w : ws) ASSERT_TRUE(w->Parked());

  Signal(src);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), kWaiters);
}

TEST_P(ThreadsWakeup, TwoEtItemsReadyTogetherWakeTwoWaiters) {
  constexpr int kWaiters = 3;
  int ep = Epoll();
  int a = Eventfd();
  int b = Eventfd();
  int stop = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, a, EPOLLIN | EPOLLET, kEventData), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, b, EPOLLIN | EPOLLET, kOtherData), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
  auto ws = StartWaiters(kWaiters, ep);
  for (auto& w : ws) ASSERT_TRUE(w->Parked());

  Signal(a);
  Signal(b);
  ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 2; }));
  Signal(stop);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), 1);
  EXPECT_EQ(CountGot(ws, kOtherData), 1);
  EXPECT_EQ(CountGot(ws, kStopData), kWaiters - 2);
}

TEST_P(ThreadsWakeup, SameSourceInNInstancesWakesAll) {
  constexpr int kInstances = 3;
  int src = Eventfd();
  std::vector<std::unique_ptr<Waiter>> ws;
  for (int i = 0; i < kInstances; ++i) {
    int ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, kEventData), 0);
    ws.push_back(StartWaiter(ep));
  }
  for (auto& w : ws) ASSERT_TRUE(w->Parked());

  Signal(src);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), kInstances);
}

// The contract is "one or more"; the kernel wakes exactly one when every
// instance has a waiter, and uepoll must match it.
TEST_P(ThreadsWakeup, ExclusiveOnEveryRegistrationWakesExactlyOne) {
  constexpr int kInstances = 3;
  int src = Eventfd();
  int stop = Eventfd();
  std::vector<std::unique_ptr<Waiter>> ws;
  for (int i = 0; i < kInstances; ++i) {
    int ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLEXCLUSIVE, kEventData),
              0);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
    ws.push_back(StartWaiter(ep));
  }
  for (auto& w : ws) ASSERT_TRUE(w->Parked());

  Signal(src);
  ASSERT_TRUE(Eventually([&] { return CountDone(ws) >= 1; }));
  Signal(stop);
  for (auto& w : ws) ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(CountGot(ws, kEventData), 1);
  EXPECT_EQ(CountGot(ws, kStopData), kInstances - 1);
}

// Without EXCLUSIVE on one of them, that instance is woken as well, in
// either registration order. Exclusive entries sit at the tail of the
// source's queue, after every non-exclusive one; queued at the head, an
// exclusive registration made after the plain one would take the wakeup
// and end the walk before the plain entry (the exclusive-first order alone
// cannot tell).
TEST_P(ThreadsWakeup, NonExclusiveRegistrationIsAlwaysWoken) {
  for (bool exclusive_first : {true, false}) {
    SCOPED_TRACE(exclusive_first ? "exclusive registered first"
                                 : "plain registered first");
    int src = Eventfd();
    int stop = Eventfd();
    int ex = Epoll();
    int plain = Epoll();
    auto add_ex = [&] {
      ASSERT_EQ(
          Ctl(ex, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLEXCLUSIVE, kEventData), 0);
    };
    auto add_plain = [&] {
      ASSERT_EQ(Ctl(plain, EPOLL_CTL_ADD, src, EPOLLIN, kOtherData), 0);
    };
    if (exclusive_first) {
      add_ex();
      add_plain();
    } else {
      add_plain();
      add_ex();
    }
    ASSERT_EQ(Ctl(ex, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
    ASSERT_EQ(Ctl(plain, EPOLL_CTL_ADD, stop, EPOLLIN, kStopData), 0);
    auto w_ex = StartWaiter(ex);
    auto w_plain = StartWaiter(plain);
    ASSERT_TRUE(w_ex->Parked());
    ASSERT_TRUE(w_plain->Parked());

    Signal(src);
    // Both must return the event; a waiter that was not woken returns only
    // through the stop item, once the other has its event.
    bool both = Eventually([&] { return w_ex->Done() && w_plain->Done(); });
    Signal(stop);
    ASSERT_TRUE(w_plain->WaitDone());
    ASSERT_TRUE(w_ex->WaitDone());
    EXPECT_TRUE(both) << "a registration was not woken";
    EXPECT_EQ(w_plain->result(), 1);
    EXPECT_EQ(w_plain->event(0).data.u64, kOtherData);
    EXPECT_EQ(w_ex->result(), 1);
    EXPECT_EQ(w_ex->event(0).data.u64, kEventData);
    w_ex.reset();
    w_plain.reset();
    for (int fd : {src, stop, ex, plain}) ASSERT_EQ(Close(fd), 0);
  }
}

TEST_P(ThreadsWakeup, AddOfReadySourceWakesBlockedWaiter) {
  int ep = Epoll();
  int src = Eventfd();
  Signal(src);
  auto w = StartWaiter(ep);
  ASSERT_TRUE(w->Parked());

  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, kEventData), 0);
  ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(w->result(), 1);
  EXPECT_EQ(w->event(0).data.u64, kEventData);
  EXPECT_EQ(w->event(0).events, static_cast<uint32_t>(EPOLLIN));
}

// A fresh eventfd is writable but not readable: MOD from IN to OUT makes the
// item ready without any write.
TEST_P(ThreadsWakeup, ModMakingItemReadyWakesWaiter) {
  int ep = Epoll();
  int src = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, kEventData), 0);
  auto w = StartWaiter(ep);
  ASSERT_TRUE(w->Parked());

  ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, src, EPOLLOUT, kOtherData), 0);
  ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(w->result(), 1);
  EXPECT_EQ(w->event(0).data.u64, kOtherData);
  EXPECT_EQ(w->event(0).events, static_cast<uint32_t>(EPOLLOUT));
}

// The wait holds its own reference to the instance: closing the descriptor
// removes neither the instance nor its items under the waiter's feet.
TEST_P(ThreadsWakeup, CloseOfEpollFdDoesNotDisturbWaiter) {
  int ep = Epoll();
  int src = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN, kEventData), 0);
  auto w = StartWaiter(ep);
  ASSERT_TRUE(w->Parked());

  Forget(ep);
  ASSERT_EQ(CloseUnderBlockedWaiter(B(), ep), 0);
  ASSERT_TRUE(w->Parked()) << "close() woke the waiter";
  Signal(src);
  ASSERT_TRUE(w->WaitDone());
  EXPECT_EQ(w->result(), 1);
  EXPECT_EQ(w->event(0).data.u64, kEventData);
}

// A blocked read keeps the pipe for the length of the call (the kernel's
// fget): closing the number on another thread returns at once, and the read
// goes on and returns what a later write brings. On uepoll the reader
// borrows the pipe (it did not create it) and must pin the borrow before it
// sleeps, or the close would wait for the read to end.
TEST_P(ThreadsWakeup, CloseOfPipeDoesNotDisturbBlockedReader) {
  int p[2];
  Pipe(p);  // blocking
  char c = 0;
  const Backend* b = &B();
  int rd = p[0];
  // The reader reads twice: a first, ready byte (on uepoll this makes the
  // number borrowable: another thread than its creator uses it), then it
  // blocks.
  ASSERT_EQ(b->write(p[1], "a", 1), 1);
  auto w = std::make_unique<Waiter>([b, rd, &c](epoll_event*) {
    char first = 0;
    if (b->read(rd, &first, 1) != 1 || first != 'a') return -1;
    return static_cast<int>(b->read(rd, &c, 1));
  });
  ASSERT_TRUE(w->Parked());
  // Either way, a byte ends the read.
  ExpectCloseLeavesBlockedCall(
      rd, *w, [&] { ASSERT_EQ(b->write(p[1], "x", 1), 1); }, "read");
  EXPECT_EQ(w->result(), 1);
  EXPECT_EQ(c, 'x');
}

// The same for a recvmmsg blocked for its first message on a socket: the
// batch keeps the socket, the close returns at once, and a later send
// ends the batch with that message.
TEST_P(ThreadsWakeup, CloseOfSocketDoesNotDisturbBlockedRecvmmsg) {
  int sv[2];
  SocketPair(sv);  // blocking
  const Backend* b = &B();
  int rd = sv[0];
  char buf[8] = {};
  ASSERT_EQ(b->write(sv[1], "a", 1), 1);
  auto w = std::make_unique<Waiter>([b, rd, &buf](epoll_event*) {
    char first = 0;
    if (b->read(rd, &first, 1) != 1 || first != 'a') return -1;
    iovec iov{buf, sizeof buf};
    mmsghdr m{};
    m.msg_hdr.msg_iov = &iov;
    m.msg_hdr.msg_iovlen = 1;
    int n = b->recvmmsg(rd, &m, 1, 0, nullptr);
    return n == 1 ? static_cast<int>(m.msg_len) : -1;
  });
  ASSERT_TRUE(w->Parked());
  ExpectCloseLeavesBlockedCall(
      rd, *w, [&] { ASSERT_EQ(b->write(sv[1], "xy", 2), 2); }, "recvmmsg");
  EXPECT_EQ(w->result(), 2);
  EXPECT_EQ(std::string(buf, 2), "xy");
}

// The event is stolen by a timeout-0 wait between the waiter's wakeup and its
// harvest whenever the race goes that way; the waiter must then sleep on, not
// return 0. Which way each round goes is up to the scheduler, so every round
// accounts for its event exactly once either way.
TEST_P(ThreadsWakeup, WaiterWhoseEventWasStolenKeepsWaiting) {
  constexpr int kRounds = 200;
  int ep = Epoll();
  int src = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, src, EPOLLIN | EPOLLET, kEventData), 0);
  int stolen = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto w = StartWaiter(ep);
    ASSERT_TRUE(w->Parked()) << "round " << round;
    Signal(src);
    epoll_event ev;
    int n = B().epoll_wait(ep, &ev, 1, 0);
    ASSERT_GE(n, 0);
    if (n == 1) {
      ++stolen;
      // The waiter was woken for an event it cannot have: it must go back to
      // sleep and take the next one.
      ASSERT_TRUE(w->Parked())
          << "round " << round << ": returned " << w->result();
      Signal(src);
    }
    ASSERT_TRUE(w->WaitDone());
    ASSERT_EQ(w->result(), 1) << "round " << round;
    ASSERT_EQ(w->event(0).data.u64, kEventData);
    ASSERT_EQ(B().epoll_wait(ep, &ev, 1, 0), 0) << "event reported twice";
  }
  RecordProperty("stolen_rounds", stolen);
}

UEPOLL_INSTANTIATE_BACKENDS(ThreadsWakeup);

}  // namespace
}  // namespace uepoll_test
