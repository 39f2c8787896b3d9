// How a blocked thread ends its sleep: signals that race with wakeups,
// pthread_cancel of a blocked thread, and the kernel descriptors uepoll
// keeps for some sleeps when the application closes them under it.
//
// Each race is built deterministically: the signal handler itself waits
// until the main thread has made the event ready and another thread has
// taken it, so the blocked call sees "interrupted and woken, nothing found"
// every time, on both backends.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "scenarios/scenario.h"
#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

using Clock = std::chrono::steady_clock;

// --- signals racing with wakeups ---

std::atomic<bool> g_in_handler{false};
std::atomic<bool> g_release_handler{false};

// Holds the interrupted thread in its handler until the main thread says
// the event has come and gone (bounded, so a broken test cannot hang).
void HoldingHandler(int) {
  g_in_handler.store(true);
  auto end = Clock::now() + std::chrono::seconds(10);
  while (!g_release_handler.load() && Clock::now() < end) {
  }
}

class SignalRace : public BackendTest {
 protected:
  void SetUp() override {
    g_in_handler = false;
    g_release_handler = false;
    struct sigaction sa {};
    sa.sa_handler = HoldingHandler;
    sa.sa_flags = 0;  // no SA_RESTART: blocking reads fail EINTR too
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_), 0);
  }
  void TearDown() override {
    sigaction(SIGUSR1, &old_, nullptr);
    BackendTest::TearDown();
  }

  // Runs `blocked` on a thread; once it sleeps, signals it, and while its
  // handler runs, calls `make_ready_and_take` (which makes the awaited
  // event happen and consumes it from this thread). The blocked call must
  // then fail EINTR, promptly.
  void ExpectEintr(Waiter::Fn blocked,
                   const std::function<void()>& make_ready_and_take) {
    auto start = Clock::now();
    Waiter w(std::move(blocked));
    ASSERT_TRUE(w.Parked());
    pthread_kill(w.handle(), SIGUSR1);
    ASSERT_TRUE(Eventually([] { return g_in_handler.load(); }));
    make_ready_and_take();
    g_release_handler = true;
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), -1);
    EXPECT_EQ(w.error(), EINTR);
    // The blocked calls use 4 s timeouts: returning 0 after them is the bug.
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(3500));
  }

  struct sigaction old_ {};
};

// An edge-triggered eventfd in an instance: a write makes the event, and a
// zero-timeout wait from another thread takes it.
TEST_P(SignalRace, epoll_wait__signal_and_stolen_event_is_eintr) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  ExpectEintr(
      [&](epoll_event* out) { return B().epoll_wait(ep, out, 1, 4000); },
      [&] {
        uint64_t one = 1;
        ASSERT_EQ(B().write(efd, &one, 8), 8);
        epoll_event ev[1];
        ASSERT_EQ(B().epoll_wait(ep, ev, 1, 0), 1);
      });
}

TEST_P(SignalRace, epoll_pwait_with_mask__signal_and_stolen_event_is_eintr) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN | EPOLLET, 1), 0);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR2);  // a mask: the sleep installs it atomically
  ExpectEintr(
      [&](epoll_event* out) {
        return B().epoll_pwait(ep, out, 1, 4000, &mask);
      },
      [&] {
        uint64_t one = 1;
        ASSERT_EQ(B().write(efd, &one, 8), 8);
        epoll_event ev[1];
        ASSERT_EQ(B().epoll_wait(ep, ev, 1, 0), 1);
      });
}

TEST_P(SignalRace, poll__signal_and_stolen_data_is_eintr) {
  int p[2];
  Pipe(p);
  ExpectEintr(
      [&](epoll_event*) {
        pollfd pfd{p[0], POLLIN, 0};
        return B().poll(&pfd, 1, 4000);
      },
      [&] {
        ASSERT_EQ(B().write(p[1], "x", 1), 1);
        char c;
        ASSERT_EQ(B().read(p[0], &c, 1), 1);
      });
}

TEST_P(SignalRace, blocking_pipe_read__signal_and_stolen_data_is_eintr) {
  int p[2];
  Pipe(p);
  ExpectEintr(
      [&](epoll_event*) {
        char c;
        return static_cast<int>(B().read(p[0], &c, 1));
      },
      [&] {
        ASSERT_EQ(B().write(p[1], "x", 1), 1);
        // Take the byte back without blocking (the reader is in its
        // handler, not in the pipe).
        int fl = B().fcntl(p[0], F_GETFL, 0);
        ASSERT_EQ(B().fcntl(p[0], F_SETFL, fl | O_NONBLOCK), 0);
        char c;
        ASSERT_EQ(B().read(p[0], &c, 1), 1);
        ASSERT_EQ(B().fcntl(p[0], F_SETFL, fl), 0);
      });
}

UEPOLL_INSTANTIATE_BACKENDS(SignalRace);

// --- pthread_cancel of blocked threads ---

class Cancel : public BackendTest {
 protected:
  // Cancels a thread blocked in `blocked`; the thread must end cancelled.
  // (CancellableCall unpoisons the sleeping thread's stack under ASan, whose
  // runtime otherwise trips over the redzones the unwound frames leave.)
  void CancelWhileBlocked(const std::function<void()>& blocked) {
    CancellableCall call([&]() -> long {
      blocked();
      return 0;
    });
    ASSERT_TRUE(call.started());
    ASSERT_TRUE(call.Parked()) << "the call did not sleep";
    EXPECT_TRUE(call.CancelAndJoin()) << "the thread did not end cancelled";
    EXPECT_FALSE(call.returned());
  }
};

TEST_P(Cancel, epoll_wait__cancelled_waiter_leaves_the_instance_working) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 7), 0);
  CancelWhileBlocked([&] {
    epoll_event out[1];
    B().epoll_wait(ep, out, 1, -1);
  });
  // The next waiter is woken normally; a wakeup walks no dead stack.
  Waiter w(
      [&](epoll_event* out) { return B().epoll_wait(ep, out, 1, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  uint64_t one = 1;
  ASSERT_EQ(B().write(efd, &one, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 7u);
}

TEST_P(Cancel,
       epoll_pwait_with_mask__cancelled_waiter_leaves_the_instance_working) {
  int ep = Epoll();
  int efd = Eventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, efd, EPOLLIN, 7), 0);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR2);
  CancelWhileBlocked([&] {
    epoll_event out[1];
    B().epoll_pwait(ep, out, 1, -1, &mask);
  });
  Waiter w([&](epoll_event* out) {
    return B().epoll_pwait(ep, out, 1, kWaitMs, &mask);
  });
  ASSERT_TRUE(w.Parked());
  uint64_t one = 1;
  ASSERT_EQ(B().write(efd, &one, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

TEST_P(Cancel, poll__cancelled_poller_leaves_the_pipe_working) {
  int p[2];
  Pipe(p);
  CancelWhileBlocked([&] {
    pollfd pfd{p[0], POLLIN, 0};
    // The kernel backend's poll is the raw syscall (support/backend.cc),
    // which is no cancellation point; libc's poll is.
    if (IsKernel()) {
      ::poll(&pfd, 1, -1);
    } else {
      B().poll(&pfd, 1, -1);
    }
  });
  Waiter w([&](epoll_event*) {
    pollfd pfd{p[0], POLLIN, 0};
    return B().poll(&pfd, 1, kWaitMs);
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(p[1], "x", 1), 1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

TEST_P(Cancel, blocking_pipe_read__cancelled_reader_leaves_the_pipe_working) {
  int p[2];
  Pipe(p);
  CancelWhileBlocked([&] {
    char c;
    B().read(p[0], &c, 1);
  });
  Waiter w([&](epoll_event*) {
    char c;
    return static_cast<int>(B().read(p[0], &c, 1));
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(p[1], "x", 1), 1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

TEST_P(Cancel,
       blocking_eventfd_read__cancelled_reader_leaves_the_eventfd_working) {
  int efd = Eventfd(0, 0);  // blocking
  CancelWhileBlocked([&] {
    uint64_t v;
    B().read(efd, &v, 8);
  });
  Waiter w([&](epoll_event*) {
    uint64_t v = 0;
    return B().read(efd, &v, 8) == 8 ? static_cast<int>(v) : -1;
  });
  ASSERT_TRUE(w.Parked());
  uint64_t three = 3;
  ASSERT_EQ(B().write(efd, &three, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 3);
}

TEST_P(Cancel, blocking_socket_read__cancelled_reader_leaves_the_pair_working) {
  int sv[2];
  SocketPair(sv);
  CancelWhileBlocked([&] {
    char c;
    B().read(sv[0], &c, 1);
  });
  Waiter w([&](epoll_event*) {
    char c;
    return static_cast<int>(B().read(sv[0], &c, 1));
  });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(B().write(sv[1], "x", 1), 1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
}

UEPOLL_INSTANTIATE_BACKENDS(Cancel);

// --- the kernel descriptors of a sleep, closed under uepoll (D19) ---

// The descriptors of this process that name anon inodes of `kind`
// ("[eventfd]", "[eventpoll]").
std::set<int> AnonFds(const char* kind) {
  std::set<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = 0;
    if (strstr(link, kind)) out.insert(fd);
  }
  closedir(d);
  return out;
}

// A file with known content, at exactly `want` (the test closed it first).
int FileAt(int want, const std::string& content) {
  int fd = memfd_create("app-file", MFD_CLOEXEC);
  if (fd < 0) return -1;
  if (fd != want) {
    int moved = dup3(fd, want, O_CLOEXEC);
    ::close(fd);
    fd = moved;
  }
  if (write(fd, content.data(), content.size()) !=
      static_cast<ssize_t>(content.size())) {
    return -1;
  }
  return fd;
}

// The file at fd still holds exactly `content` and is the same inode.
void ExpectFileIntact(int fd, const std::string& content, ino_t ino) {
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0) << "the application's file was closed";
  EXPECT_EQ(st.st_ino, ino) << "the number names another file now";
  EXPECT_EQ(static_cast<size_t>(st.st_size), content.size())
      << "something wrote to the application's file";
  std::string back(content.size(), '\0');
  ASSERT_EQ(pread(fd, back.data(), back.size(), 0),
            static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, content);
}

// One wait that needs kernel descriptors (a signal mask), woken from the
// main thread through an eventfd in the instance.
int MaskedWaitWokenByMain(int ep, int efd) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR2);
  std::atomic<int> result{-2};
  std::atomic<pid_t> tid{0};
  std::thread t([&] {
    tid = Gettid();
    epoll_event out[1];
    result = uepoll_epoll_pwait(ep, out, 1, kWaitMs, &mask);
  });
  bool parked = Eventually(
      [&] { return tid.load() != 0 && TaskState(tid.load()) == 'S'; });
  uint64_t one = 1;
  uepoll_write(efd, &one, 8);
  t.join();
  uint64_t v;
  uepoll_read(efd, &v, 8);
  return parked ? result.load() : -3;
}

TEST(ParkerDescriptors, closed_and_reused_under_a_thread_are_never_touched) {
  int ep = uepoll_epoll_create1(0);
  int efd = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(ep, 0);
  ASSERT_GE(efd, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGUSR2);
  std::atomic<int> phase{0};
  std::atomic<int> results[2] = {-2, -2};
  std::atomic<pid_t> tid{0};
  std::set<int> before_eventfds = AnonFds("[eventfd]");
  std::set<int> before_epolls = AnonFds("[eventpoll]");
  std::thread t([&] {
    tid = Gettid();
    for (int i = 0; i < 2; ++i) {
      while (phase.load() != 2 * i) std::this_thread::yield();
      phase.store(2 * i + 1);
      epoll_event out[1];
      // No timeout: a lost wakeup hangs here (and ctest fails it) rather
      // than ending at a deadline that would hide it.
      results[i] = uepoll_epoll_pwait(ep, out, 1, -1, &mask);
      uint64_t v;
      uepoll_read(efd, &v, 8);
    }
  });
  uint64_t one = 1;
  // First sleep: it makes the descriptor that wakes it.
  ASSERT_TRUE(Eventually(
      [&] { return phase.load() == 1 && TaskState(tid.load()) == 'S'; }));
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  ASSERT_TRUE(Eventually([&] { return results[0].load() != -2; }));
  EXPECT_EQ(results[0].load(), 1);
  std::set<int> new_fds;
  for (int fd : AnonFds("[eventfd]")) {
    if (!before_eventfds.count(fd)) new_fds.insert(fd);
  }
  for (int fd : AnonFds("[eventpoll]")) {
    if (!before_epolls.count(fd)) new_fds.insert(fd);
  }
  // A masked wait sleeps in epoll_pwait on the instance's kernel half
  // (made with the instance, before the snapshot) and is woken through the
  // process's wake eventfd (kernel/wake_fd.h), made at the first such
  // sleep: that is the one descriptor uepoll made for it.
  ASSERT_EQ(new_fds.size(), 1u) << "the masked wait made no descriptors";
  // The application closes them (as closefrom would) and opens its own
  // files at the same numbers.
  std::vector<std::pair<int, ino_t>> files;
  const std::string content = "application data";
  for (int fd : new_fds) {
    ASSERT_EQ(::close(fd), 0);
    int f = FileAt(fd, content);
    ASSERT_EQ(f, fd);
    struct stat st {};
    ASSERT_EQ(fstat(f, &st), 0);
    files.emplace_back(f, st.st_ino);
  }
  // Second sleep and its wakeup: they must work, on new descriptors.
  phase.store(2);
  ASSERT_TRUE(Eventually(
      [&] { return phase.load() == 3 && TaskState(tid.load()) == 'S'; }));
  ASSERT_EQ(uepoll_write(efd, &one, 8), 8);
  t.join();  // the thread exits: its parker must not close our files either
  EXPECT_EQ(results[1].load(), 1);
  for (auto& [fd, ino] : files) {
    ExpectFileIntact(fd, content, ino);
    ::close(fd);
  }
  EXPECT_EQ(uepoll_close(efd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  ExpectNoUepollLeaks();
}

TEST(ParkerDescriptors, forked_child_closing_everything_keeps_its_files) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  // A thread of the parent has sleep descriptors when the process forks.
  int ep = uepoll_epoll_create1(0);
  int efd = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(ep, 0);
  ASSERT_GE(efd, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
  ASSERT_EQ(MaskedWaitWokenByMain(ep, efd), 1);
  // This thread too (it is the one that forks).
  sigset_t mask;
  sigemptyset(&mask);
  epoll_event out[1];
  ASSERT_EQ(uepoll_epoll_pwait(ep, out, 1, 1, &mask), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The daemon's child: close every inherited descriptor, open a log.
    syscall(SYS_close_range, 3u, ~0u, 0u);
    const std::string content = "log line\n";
    int log = FileAt(3, content);
    struct stat st {};
    if (log != 3 || fstat(log, &st) != 0) _exit(10);
    int log2 = FileAt(4, content);
    struct stat st2 {};
    if (log2 != 4 || fstat(log2, &st2) != 0) _exit(11);
    int cep = uepoll_epoll_create1(0);
    int cefd = uepoll_eventfd(0, EFD_NONBLOCK);
    epoll_event cev{};
    cev.events = EPOLLIN;
    if (cep < 0 || cefd < 0 ||
        uepoll_epoll_ctl(cep, EPOLL_CTL_ADD, cefd, &cev) != 0) {
      _exit(12);
    }
    // Masked sleeps on this thread and on a new one, each woken.
    if (MaskedWaitWokenByMain(cep, cefd) != 1) _exit(13);
    std::atomic<int> r{-2};
    pid_t me = Gettid();
    std::thread waker([&] {
      Eventually([&] { return TaskState(me) == 'S'; });
      uint64_t one = 1;
      uepoll_write(cefd, &one, 8);
    });
    r = uepoll_epoll_pwait(cep, out, 1, kWaitMs, &mask);
    waker.join();
    if (r.load() != 1) _exit(14);
    struct stat now {};
    if (fstat(3, &now) != 0 || now.st_ino != st.st_ino ||
        now.st_size != static_cast<off_t>(content.size())) {
      _exit(15);
    }
    if (fstat(4, &now) != 0 || now.st_ino != st2.st_ino ||
        now.st_size != static_cast<off_t>(content.size())) {
      _exit(16);
    }
    _exit(0);
  }
  int status = 0;
  bool exited =
      Eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                 std::chrono::seconds(20));
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(exited) << "the child hung";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the _exit codes in the child";
  EXPECT_EQ(uepoll_close(efd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
