// A lockless eventfd wakeup (WaitQueue::WakeUpBorrowed: the writer calls
// the queue's lone epoll item without the queue's lock, protected only by
// its borrow of the eventfd) held in its window, between its load of the
// item and the call, while another thread removes that item: by DEL, and
// by closing the instance. The removal must wait for the waker before it
// frees the item (FreeRemovedItem, WaitForOtherBorrowers), and the waker,
// once let go, must not report the removed item. The stress test
// Stress.WritesRacingRemovalNeverReachARemovedItem hunts the same window
// by chance; here every round is in it. uepoll only: the kernel has no
// lockless wakeup to hold.
//
// How the window is held: the waker's hook (SetLocklessWakeHookForTest)
// spins until either the remover says it waits for a borrow (its hook,
// SetBorrowWaitHookForTest) or the removal has returned. The second can
// only happen when the removal did not wait: the waker then goes on into
// a freed item (a crash in Debug builds, which poison freed items; an
// ASan report), and the test fails on `freed_under_waker` in any build.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "core/borrow.h"
#include "core/wait_queue.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

using uepoll::impl::File;
using uepoll::impl::WaitEntry;
using uepoll::impl::WaitQueue;

struct Window {
  std::atomic<bool> armed{false};
  std::atomic<bool> in_window{false};
  std::atomic<bool> remover_waits{false};
  std::atomic<bool> removed{false};
  std::atomic<bool> freed_under_waker{false};
  std::atomic<bool> gave_up{false};
};
Window* g_window = nullptr;

// Runs in the writer, inside its lockless wakeup.
void HoldWaker(WaitEntry*) {
  Window* w = g_window;
  if (!w || !w->armed.exchange(false)) return;
  w->in_window.store(true);
  if (!Eventually([w] { return w->remover_waits || w->removed; })) {
    w->gave_up.store(true);  // no removal came: fail, don't hang
  } else if (!w->remover_waits) {
    // The removal returned while we hold the item: it did not wait.
    w->freed_under_waker.store(true);
  }
}

// Runs in the remover, each time it is about to wait for a borrow.
void NoteRemoverWaits(const File*) {
  if (Window* w = g_window) w->remover_waits.store(true);
}

enum class Removal { kDel, kCloseInstance };

class LocklessWake : public ::testing::TestWithParam<Removal> {
 protected:
  void SetUp() override {
    WaitQueue::SetLocklessWakeHookForTest(&HoldWaker);
    uepoll::impl::SetBorrowWaitHookForTest(&NoteRemoverWaits);
  }
  void TearDown() override {
    WaitQueue::SetLocklessWakeHookForTest(nullptr);
    uepoll::impl::SetBorrowWaitHookForTest(nullptr);
    g_window = nullptr;
  }
};

TEST_P(LocklessWake, RemovalWaitsForAWakerInItsWindow) {
  for (const bool et : {false, true}) {
    SCOPED_TRACE(et ? "EPOLLET" : "level-triggered");
    Window window;
    g_window = &window;
    const int efd = uepoll_eventfd(0, EFD_NONBLOCK);
    ASSERT_GE(efd, 0);
    const int ep = uepoll_epoll_create1(0);
    ASSERT_GE(ep, 0);
    epoll_event ev{};
    ev.events = EPOLLIN | (et ? EPOLLET : 0u);
    ev.data.u64 = 7;
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
    // The first borrowed wakeup takes the queue's lock and turns lockless
    // wakeups on; it is not held (the hook is not armed yet).
    const uint64_t one = 1;
    ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
    epoll_event out[2];
    ASSERT_EQ(uepoll_epoll_wait(ep, out, 2, 0), 1);
    uint64_t v = 0;
    ASSERT_EQ(uepoll_read(efd, &v, 8), 8);

    window.armed.store(true);
    std::thread writer([&] { (void)uepoll_write(efd, &one, 8); });
    if (!Eventually([&] { return window.in_window.load(); })) {
      window.armed.store(false);
      writer.join();
      FAIL() << "the write never reached a lockless wakeup";
    }
    int ep_after = ep;
    // EXPECT, not ASSERT: the writer is joined whatever the removal did.
    if (GetParam() == Removal::kDel) {
      EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
    } else {
      EXPECT_EQ(uepoll_close(ep), 0);
      ep_after = -1;
    }
    window.removed.store(true);
    writer.join();
    EXPECT_FALSE(window.gave_up.load());
    EXPECT_FALSE(window.freed_under_waker.load())
        << "the removal returned while a lockless waker held the item";
    EXPECT_TRUE(window.remover_waits.load());
    if (ep_after >= 0) {
      // The waker found the item removed: nothing is reported.
      EXPECT_EQ(uepoll_epoll_wait(ep_after, out, 2, 0), 0);
      EXPECT_EQ(uepoll_close(ep_after), 0);
    }
    EXPECT_EQ(uepoll_read(efd, &v, 8), 8);  // the write itself counted
    EXPECT_EQ(v, 1u);
    EXPECT_EQ(uepoll_close(efd), 0);
    g_window = nullptr;
  }
}

std::string RemovalName(const ::testing::TestParamInfo<Removal>& p) {
  return p.param == Removal::kDel ? "Del" : "CloseInstance";
}

INSTANTIATE_TEST_SUITE_P(, LocklessWake,
                         ::testing::Values(Removal::kDel,
                                           Removal::kCloseInstance),
                         RemovalName);

// ---------------------------------------------------------------------------
// The other side of a lockless write: a thread that blocks on the eventfd.
// It tests the count under the queue's lock, finds it empty, and queues its
// entry; a write that changes the count without that lock in between finds
// no entry to wake (WaitQueue::Active() is false), so the blocking thread
// must test the count again once queued (WaitEventLocked). The hook holds
// the reader between its test and its queueing while the test thread
// writes: every run is in that window.

struct BeforeQueue {
  std::atomic<bool> armed{false};
  std::atomic<bool> in_window{false};
  std::atomic<bool> written{false};
  std::atomic<bool> gave_up{false};
};
BeforeQueue* g_before_queue = nullptr;

void HoldReaderBeforeQueueing(WaitQueue*) {
  BeforeQueue* h = g_before_queue;
  if (!h || !h->armed.exchange(false)) return;
  h->in_window.store(true);
  if (!Eventually([h] { return h->written.load(); })) h->gave_up.store(true);
}

class LocklessWakeBlocking : public ::testing::Test {
 protected:
  void SetUp() override {
    WaitQueue::SetBeforeQueueHookForTest(&HoldReaderBeforeQueueing);
  }
  void TearDown() override {
    WaitQueue::SetBeforeQueueHookForTest(nullptr);
    g_before_queue = nullptr;
  }
};

TEST_F(LocklessWakeBlocking, WriteBetweenAReadersTestAndItsQueueingWakesIt) {
  BeforeQueue h;
  g_before_queue = &h;
  const int efd = uepoll_eventfd(0, 0);  // blocking
  ASSERT_GE(efd, 0);
  h.armed.store(true);
  Waiter reader([efd](epoll_event*) {
    uint64_t v = 0;
    return uepoll_read(efd, &v, 8) == 8 ? static_cast<int>(v) : -1;
  });
  const bool reached = Eventually([&] { return h.in_window.load(); });
  const uint64_t one = 1;
  EXPECT_EQ(uepoll_write(efd, &one, 8), 8);
  h.written.store(true);
  // A reader that slept through the write sleeps until kDeadline: then a
  // second write, which finds its entry, lets it go.
  const bool woken = reader.WaitDone();
  if (!woken) {
    EXPECT_EQ(uepoll_write(efd, &one, 8), 8);
  }
  EXPECT_TRUE(reached) << "the read never blocked";
  EXPECT_TRUE(woken) << "the reader slept through a write made before it "
                        "queued itself";
  (void)reader.WaitDone();
  EXPECT_FALSE(h.gave_up.load());
  EXPECT_EQ(uepoll_close(efd), 0);
}

// ---------------------------------------------------------------------------
// A lockless write wakes the queue's lone epoll item without the lock
// (solo_). A poll() or a blocking read that joins the queue beside that
// item must take the lone-item status away, or the next lockless write
// wakes the item alone. The newcomer is asleep (Waiter::Parked) before the
// write.
enum class Newcomer { kPoll, kRead };

class LocklessWakeNewcomer : public ::testing::TestWithParam<Newcomer> {};

TEST_P(LocklessWakeNewcomer, WriteAfterAWaiterJoinedALoneItemWakesBoth) {
  const bool by_poll = GetParam() == Newcomer::kPoll;
  const int efd = uepoll_eventfd(0, by_poll ? EFD_NONBLOCK : 0);
  ASSERT_GE(efd, 0);
  const int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = 7;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
  // Lockless wakeups on: the first borrowed write takes the lock.
  const uint64_t one = 1;
  uint64_t v = 0;
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  epoll_event out[2];
  ASSERT_EQ(uepoll_epoll_wait(ep, out, 2, 0), 1);
  ASSERT_EQ(uepoll_read(efd, &v, 8), 8);

  Waiter waiter([efd, by_poll](epoll_event*) {
    if (by_poll) {
      pollfd p{efd, POLLIN, 0};
      // No timeout: a poll() that times out polls again and would find
      // the count, hiding the lost wakeup.
      return uepoll_poll(&p, 1, -1) == 1 && (p.revents & POLLIN) ? 1 : 0;
    }
    uint64_t got = 0;
    return uepoll_read(efd, &got, 8) == 8 ? 1 : 0;
  });
  ASSERT_TRUE(waiter.Parked());
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  const bool woken = waiter.WaitDone();
  if (!woken) {
    // Lets the waiter go: with the item gone, the waiter's entry is the
    // queue's only one, and a write wakes it under the lock.
    EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
    EXPECT_EQ(uepoll_write(efd, &one, 8), 8);
  }
  EXPECT_TRUE(woken) << "the lockless write woke the lone item only";
  (void)waiter.WaitDone();
  EXPECT_EQ(waiter.result(), 1);
  if (by_poll && woken) {
    // The item heard of the write too (poll() consumed nothing).
    EXPECT_EQ(uepoll_epoll_wait(ep, out, 2, 0), 1);
  }
  EXPECT_EQ(uepoll_close(ep), 0);
  EXPECT_EQ(uepoll_close(efd), 0);
}

std::string NewcomerName(const ::testing::TestParamInfo<Newcomer>& p) {
  return p.param == Newcomer::kPoll ? "Poll" : "BlockingRead";
}

INSTANTIATE_TEST_SUITE_P(, LocklessWakeNewcomer,
                         ::testing::Values(Newcomer::kPoll, Newcomer::kRead),
                         NewcomerName);

}  // namespace
}  // namespace uepoll_test
