// fork() while other threads work (docs/semantics.md D12):
// a child that uses only objects it makes itself must not find any
// process-wide uepoll state held by a thread that does not exist in it.
//
// Parent threads do nested ADDs and DELs in a loop (each ADD of an instance
// into an instance takes the process-wide nesting lock) while the main
// thread forks again and again. Each child makes its own instances and an
// eventfd, does both kinds of ADD that take that lock (an instance into an
// instance, a source into a watched instance), checks that the event
// travels up, and exits 0. The parent waits for each child with a bound and
// fails, naming the round, if one hangs or fails. On both backends (the
// kernel's nesting lock lives in the kernel, so it is the control).
//
// ThreadSanitizer does not support a forked child that keeps running in a
// multi-threaded process (it may deadlock in its own runtime): skipped there.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

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

constexpr int kForks = 60;  // ASan makes each fork of a threaded parent slow
constexpr int kAdders = 3;
constexpr auto kChildLimit = std::chrono::seconds(10);

class Fork : public BackendTest {};

// What the child does; its exit code names the first step that failed.
int ChildBody(const Backend& b) {
  int top = b.epoll_create1(0);
  int mid = b.epoll_create1(0);
  int efd = b.eventfd(0, EFD_NONBLOCK);
  if (top < 0 || mid < 0 || efd < 0) return 10;
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (b.epoll_ctl(top, EPOLL_CTL_ADD, mid, &ev) != 0) return 11;  // nested
  if (b.epoll_ctl(mid, EPOLL_CTL_ADD, efd, &ev) != 0) return 12;  // watched
  uint64_t one = 1;
  if (b.write(efd, &one, 8) != 8) return 13;
  epoll_event out[1];
  if (b.epoll_wait(top, out, 1, 0) != 1) return 14;
  if (b.epoll_ctl(top, EPOLL_CTL_DEL, mid, nullptr) != 0) return 15;
  if (b.close(efd) != 0 || b.close(mid) != 0 || b.close(top) != 0) return 16;
  return 0;
}

TEST_P(Fork, ChildDoesNestedAddsWhileParentThreadsDoNestedAdds) {
  if (kTsan) {
    GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                    "process whose child keeps running";
  }
  std::atomic<bool> stop{false};
  std::atomic<long> adds{0};
  std::vector<std::thread> adders;
  for (int t = 0; t < kAdders; ++t) {
    int outer = Epoll();
    int inner = Epoll();
    int src = Eventfd();
    ASSERT_EQ(Ctl(inner, EPOLL_CTL_ADD, src, EPOLLIN, 0), 0);
    adders.emplace_back([&, outer, inner] {
      epoll_event ev{};
      ev.events = EPOLLIN;
      while (!stop.load(std::memory_order_relaxed)) {
        if (B().epoll_ctl(outer, EPOLL_CTL_ADD, inner, &ev) == 0) {
          adds.fetch_add(1, std::memory_order_relaxed);
          B().epoll_ctl(outer, EPOLL_CTL_DEL, inner, nullptr);
        }
      }
    });
  }
  // Forks only once the adders run, so that each fork can land in an ADD.
  auto started = std::chrono::steady_clock::now();
  while (adds.load() < 100 &&
         std::chrono::steady_clock::now() - started < kChildLimit) {
    std::this_thread::yield();
  }

  std::string failure;
  int forks = 0;
  for (; forks < kForks && failure.empty(); ++forks) {
    pid_t pid = fork();
    if (pid == 0) _exit(ChildBody(B()));
    if (pid < 0) {
      failure = "fork failed: " + std::string(strerror(errno));
      break;
    }
    int status = 0;
    pid_t got = 0;
    auto end = std::chrono::steady_clock::now() + kChildLimit;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (got == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      failure = "child " + std::to_string(forks) + " still running after " +
                std::to_string(kChildLimit.count()) +
                " s: deadlocked on state a parent thread held at fork()";
    } else if (got != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failure = "child " + std::to_string(forks) + " failed: status " +
                std::to_string(status) + " (exit code = failing step)";
    }
  }
  stop = true;
  for (auto& t : adders) t.join();
  EXPECT_EQ(failure, "");
  EXPECT_EQ(forks, kForks);
  EXPECT_GT(adds.load(), 0);
  std::printf("[fork] %d children, %ld nested ADDs in the parent\n", forks,
              adds.load());
}

UEPOLL_INSTANTIATE_BACKENDS(Fork);

}  // namespace
}  // namespace uepoll_test
