// What a handler installed with uepoll_sigaction allocates inside uepoll
// comes from the handler arena (base/handler_arena.h), not from malloc,
// which the handler may have interrupted: a self-pipe write (a socket
// pair's message, a pipe's page) inside a handler must be as safe as the
// kernel's write(), wherever the signal lands.
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

namespace {

int g_sock[2] = {-1, -1};
int g_pipe[2] = {-1, -1};
std::atomic<int> g_sends{1};  // messages each handler run sends
std::atomic<long> g_send_failures{0};
std::atomic<long> g_handled{0};
sigjmp_buf g_jump;
std::atomic<bool> g_jump_out{false};

void OnSignal(int) {
  int saved = errno;
  for (int i = 0, n = g_sends.load(); i < n; ++i) {
    uint64_t v = 0x5E1F0000u + static_cast<uint64_t>(i);
    // Both directions: room for the most messages.
    if (uepoll_send(g_sock[i % 2], &v, sizeof v, MSG_DONTWAIT) != sizeof v) {
      ++g_send_failures;
    }
  }
  if (g_pipe[1] >= 0) {
    char c = 'p';
    if (uepoll_write(g_pipe[1], &c, 1) != 1) ++g_send_failures;
  }
  ++g_handled;
  errno = saved;
  if (g_jump_out) siglongjmp(g_jump, 1);
}

class HandlerAlloc : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "signals are delivered by ThreadSanitizer, at its own "
                    "points, not inside the code they interrupt";
#endif
    ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, g_sock), 0);
    g_pipe[0] = g_pipe[1] = -1;
    g_sends = 1;
    g_send_failures = 0;
    g_handled = 0;
    g_jump_out = false;
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(uepoll_sigaction(SIGUSR2, &sa, &old_), 0);
    base_blocks_ = uepoll_debug_handler_blocks();
  }
  void TearDown() override {
    if (g_sock[0] < 0) return;
    uepoll_sigaction(SIGUSR2, &old_, nullptr);
    uepoll_close(g_sock[0]);
    uepoll_close(g_sock[1]);
    if (g_pipe[0] >= 0) {
      uepoll_close(g_pipe[0]);
      uepoll_close(g_pipe[1]);
    }
    g_sock[0] = g_sock[1] = -1;
  }
  // Reads n messages, each the value a handler sent: message i at the end
  // of the pair it was not sent on (OnSignal).
  void ReadMessages(int n) {
    for (int i = 0; i < n; ++i) {
      uint64_t v = 0;
      ASSERT_EQ(uepoll_recv(g_sock[1 - i % 2], &v, sizeof v, MSG_WAITALL),
                static_cast<ssize_t>(sizeof v));
      EXPECT_EQ(v & ~uint64_t{0xFFFF}, 0x5E1F0000u);
    }
  }
  struct sigaction old_ {};
  long base_blocks_ = 0;
};

TEST_F(HandlerAlloc, MessagesAndPagesAHandlerWritesComeFromTheArena) {
  ASSERT_EQ(uepoll_pipe2(g_pipe, 0), 0);
  ASSERT_EQ(raise(SIGUSR2), 0);
  ASSERT_EQ(g_handled.load(), 1);
  EXPECT_EQ(g_send_failures.load(), 0);
  // The socket's message and the pipe's page.
  EXPECT_EQ(uepoll_debug_handler_blocks() - base_blocks_, 2);
  ReadMessages(1);
  // The message is freed by its reader, after the handler.
  EXPECT_EQ(uepoll_debug_handler_blocks() - base_blocks_, 1);
  char c = 0;
  ASSERT_EQ(uepoll_read(g_pipe[0], &c, 1), 1);
  EXPECT_EQ(c, 'p');
  // The page a pipe keeps for its next write (as the kernel's pipe keeps
  // tmp_page), until the pipe is closed.
  ASSERT_EQ(uepoll_close(g_pipe[0]), 0);
  ASSERT_EQ(uepoll_close(g_pipe[1]), 0);
  g_pipe[0] = g_pipe[1] = -1;
  EXPECT_EQ(uepoll_debug_handler_blocks(), base_blocks_);
}

TEST_F(HandlerAlloc, WritesOutsideHandlersUseMalloc) {
  uint64_t v = 0x5E1F0000u;
  ASSERT_EQ(uepoll_send(g_sock[0], &v, sizeof v, 0),
            static_cast<ssize_t>(sizeof v));
  EXPECT_EQ(uepoll_debug_handler_blocks(), base_blocks_);
  ReadMessages(1);
}

TEST_F(HandlerAlloc, ABlockFreedOnAnotherThreadReturnsToTheArena) {
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_EQ(uepoll_debug_handler_blocks() - base_blocks_, 1);
  std::thread reader([&] { ReadMessages(1); });
  reader.join();
  EXPECT_EQ(uepoll_debug_handler_blocks(), base_blocks_);
}

// More messages than the arena has small blocks: the rest come from
// malloc, and every send succeeds as it would have without the arena.
TEST_F(HandlerAlloc, AnExhaustedArenaFallsBackToMalloc) {
  g_sends = 300;
  ASSERT_EQ(raise(SIGUSR2), 0);
  EXPECT_EQ(g_send_failures.load(), 0);
  long used = uepoll_debug_handler_blocks() - base_blocks_;
  EXPECT_GT(used, 0);
  EXPECT_LT(used, 300);
  ReadMessages(300);
  EXPECT_EQ(uepoll_debug_handler_blocks(), base_blocks_);
}

// A handler that leaves by siglongjmp leaves its record behind: the
// thread, back in the code it interrupted, allocates from malloc again.
TEST_F(HandlerAlloc, AfterASiglongjmpOutOfAHandlerAllocationsUseMalloc) {
  g_jump_out = true;
  if (sigsetjmp(g_jump, 1) == 0) {
    raise(SIGUSR2);
    FAIL() << "the handler returned instead of jumping";
  }
  g_jump_out = false;
  ASSERT_EQ(g_handled.load(), 1);
  EXPECT_EQ(uepoll_debug_handler_blocks() - base_blocks_, 1);
  uint64_t v = 0x5E1F0001u;
  ASSERT_EQ(uepoll_send(g_sock[1], &v, sizeof v, 0),
            static_cast<ssize_t>(sizeof v));
  EXPECT_EQ(uepoll_debug_handler_blocks() - base_blocks_, 1);
  ReadMessages(2);
  EXPECT_EQ(uepoll_debug_handler_blocks(), base_blocks_);
}

// The hazard itself: a thread that does nothing but malloc and free, and
// signals whose handler sends on the pair, delivered to that thread
// wherever it is. With the handler's message from malloc, glibc's
// per-thread cache is corrupted when the signal lands inside malloc or
// free (an abort, "malloc(): unaligned tcache chunk", or a crash).
TEST_F(HandlerAlloc, SignalsLandingInsideMallocCorruptNothing) {
  constexpr long kSignals = 20000;
  std::atomic<bool> stop{false};
  std::atomic<bool> ready{false};
  pthread_t target{};
  std::thread churn([&] {
    target = pthread_self();
    ready = true;
    std::vector<void*> held(64, nullptr);
    for (unsigned i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      size_t k = i % held.size();
      std::free(held[k]);
      held[k] = std::malloc(16 + (i * 37) % 200);
      if (held[k]) std::memset(held[k], 0xA5, 16);
    }
    for (void* p : held) std::free(p);
  });
  while (!ready) std::this_thread::yield();
  long received = 0;
  for (long s = 0; s < kSignals; ++s) {
    ASSERT_EQ(pthread_kill(target, SIGUSR2), 0);
    // One signal at a time: the next is sent once this one's message is
    // here (a pending signal would merge with it).
    uint64_t v = 0;
    ASSERT_EQ(uepoll_recv(g_sock[1], &v, sizeof v, MSG_WAITALL),
              static_cast<ssize_t>(sizeof v));
    ++received;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(received, kSignals);
  EXPECT_EQ(g_send_failures.load(), 0);
  EXPECT_EQ(uepoll_debug_handler_blocks(), base_blocks_);
}

}  // namespace
