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
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <uepoll/uepoll.h>

#include "core/borrow.h"
#include "core/wait_queue.h"

namespace uepoll_test {
namespace {

using uepoll::impl::File;
using uepoll::impl::WaitEntry;
using uepoll::impl::WaitQueue;

constexpr auto kWindowWait = std::chrono::seconds(10);

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
  const auto deadline = std::chrono::steady_clock::now() + kWindowWait;
  while (!w->remover_waits.load()) {
    if (w->removed.load()) {
      // The removal returned while we hold the item: it did not wait.
      w->freed_under_waker.store(true);
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      w->gave_up.store(true);  // no removal came: fail, don't hang
      return;
    }
    std::this_thread::yield();
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
    g_window = &window_;
    WaitQueue::SetLocklessWakeHookForTest(&HoldWaker);
    uepoll::impl::SetBorrowWaitHookForTest(&NoteRemoverWaits);
  }
  void TearDown() override {
    WaitQueue::SetLocklessWakeHookForTest(nullptr);
    uepoll::impl::SetBorrowWaitHookForTest(nullptr);
    g_window = nullptr;
  }
  Window window_;
};

TEST_P(LocklessWake, RemovalWaitsForAWakerInItsWindow) {
  for (const bool et : {false, true}) {
    SCOPED_TRACE(et ? "EPOLLET" : "level-triggered");
    window_.~Window();
    new (&window_) Window();
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

    window_.armed.store(true);
    std::thread writer([&] { (void)uepoll_write(efd, &one, 8); });
    const auto deadline = std::chrono::steady_clock::now() + kWindowWait;
    while (!window_.in_window.load() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (!window_.in_window.load()) {
      window_.armed.store(false);
      writer.join();
      FAIL() << "the write never reached a lockless wakeup";
    }
    int ep_after = ep;
    if (GetParam() == Removal::kDel) {
      ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_DEL, efd, nullptr), 0);
    } else {
      ASSERT_EQ(uepoll_close(ep), 0);
      ep_after = -1;
    }
    window_.removed.store(true);
    writer.join();
    EXPECT_FALSE(window_.gave_up.load());
    EXPECT_FALSE(window_.freed_under_waker.load())
        << "the removal returned while a lockless waker held the item";
    EXPECT_TRUE(window_.remover_waits.load());
    if (ep_after >= 0) {
      // The waker found the item removed: nothing is reported.
      EXPECT_EQ(uepoll_epoll_wait(ep_after, out, 2, 0), 0);
      EXPECT_EQ(uepoll_close(ep_after), 0);
    }
    EXPECT_EQ(uepoll_read(efd, &v, 8), 8);  // the write itself counted
    EXPECT_EQ(v, 1u);
    EXPECT_EQ(uepoll_close(efd), 0);
  }
}

std::string RemovalName(const ::testing::TestParamInfo<Removal>& p) {
  return p.param == Removal::kDel ? "Del" : "CloseInstance";
}

INSTANTIATE_TEST_SUITE_P(, LocklessWake,
                         ::testing::Values(Removal::kDel,
                                           Removal::kCloseInstance),
                         RemovalName);

}  // namespace
}  // namespace uepoll_test
