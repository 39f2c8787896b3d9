// The library must never close, read or write a descriptor it does not own
// (docs/semantics.md D19). A thread that has slept in uepoll keeps kernel
// descriptors for its sleeps; a program that closes descriptors behind the
// library's back (a daemon's child after fork(), closefrom(), close_range())
// and opens its own files gets those numbers back, and the library must
// notice that its descriptors are gone without trusting the numbers.
//
// Each scenario runs in a child process, whose exit status is the number of
// the first check that failed (0: all passed); stderr says which. The same
// body runs on the kernel backend, where it passes by construction: the
// kernel has no descriptors of its own in the process.
//
// Both tests failed on uepoll while it trusted the numbers of its sleep
// descriptors (docs/reliability.md, section 8).
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "scenarios/scenario.h"

namespace uepoll_test {
namespace {

// In the child: report the failed check on stderr and return its number.
#define CHILD_CHECK(cond, step)                                            \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "child check %d failed: %s (errno %s)\n", step, \
                   #cond, strerrorname_np(errno));                         \
      return step;                                                         \
    }                                                                      \
  } while (0)

// Runs body in a forked child and returns its exit status (0: success),
// 128 + the signal that killed it, or -1 if it did not finish within 60 s
// (it is then killed).
int RunInChild(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  if (pid < 0) return -2;
  int status = 0;
  bool done = Eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; },
                         std::chrono::seconds(60));
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

struct FileId {
  dev_t dev;
  ino_t ino;
};

bool SameFile(int fd, const FileId& id, off_t size) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_dev == id.dev && st.st_ino == id.ino &&
         st.st_size == size;
}

// The part both scenarios share, in the child, once the program has closed
// everything from 3 up: it opens two files (3 and 4), then uses epoll: a
// timed wait that sleeps and times out, and a wait woken by another
// thread. Then the files must be the same files, untouched, and work.
int OpenFilesThenWait(const Backend& b) {
  int f3 = memfd_create("uepoll-scenario-a", MFD_CLOEXEC);
  int f4 = memfd_create("uepoll-scenario-b", MFD_CLOEXEC);
  CHILD_CHECK(f3 == 3 && f4 == 4, 1);
  struct stat st3, st4;
  CHILD_CHECK(fstat(3, &st3) == 0 && fstat(4, &st4) == 0, 2);
  const FileId id3{st3.st_dev, st3.st_ino}, id4{st4.st_dev, st4.st_ino};

  int ep = b.epoll_create1(EPOLL_CLOEXEC);
  int efd = b.eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  CHILD_CHECK(ep >= 0 && efd >= 0, 3);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 5;
  CHILD_CHECK(b.epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0, 4);

  // A timed wait that sleeps and runs into its timeout.
  auto t0 = std::chrono::steady_clock::now();
  CHILD_CHECK(b.epoll_wait(ep, &ev, 1, 50) == 0, 5);
  CHILD_CHECK(
      std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(50),
      6);
  // Twice a wait woken by another thread's write.
  for (int round = 0; round < 2; ++round) {
    const pid_t me = Gettid();
    bool parked = false;
    std::thread waker([&] {
      parked = WaitUntilParked(me);
      uint64_t one = 1;
      b.write(efd, &one, sizeof one);
    });
    int n = b.epoll_wait(ep, &ev, 1, kWaitMs);
    waker.join();
    CHILD_CHECK(parked, 7);
    CHILD_CHECK(n == 1 && ev.data.u64 == 5, 8);
    uint64_t v;
    CHILD_CHECK(b.read(efd, &v, sizeof v) == 8 && v == 1, 9);
  }

  // The files are the ones opened, nothing was written to them, and they
  // work.
  CHILD_CHECK(SameFile(3, id3, 0), 10);
  CHILD_CHECK(SameFile(4, id4, 0), 11);
  CHILD_CHECK(pwrite(3, "hello", 5, 0) == 5, 12);
  CHILD_CHECK(pwrite(4, "world!", 6, 0) == 6, 13);
  char buf[8] = {};
  CHILD_CHECK(pread(3, buf, sizeof buf, 0) == 5 && memcmp(buf, "hello", 5) == 0,
              14);
  CHILD_CHECK(
      pread(4, buf, sizeof buf, 0) == 6 && memcmp(buf, "world!", 6) == 0, 15);
  CHILD_CHECK(SameFile(3, id3, 5) && SameFile(4, id4, 6), 16);
  CHILD_CHECK(b.close(efd) == 0 && b.close(ep) == 0, 17);
  return 0;
}

class ForkScenario : public BackendTest {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                    "process whose child keeps running";
#endif
  }
};

// A daemon's child: the parent has slept in epoll on the thread that forks
// (so, on uepoll, that thread holds its sleep descriptors); the child closes
// every inherited descriptor from 3 up, opens its files (3 and 4) and then
// uses epoll.
TEST_P(ForkScenario, ChildThatClosesInheritedDescriptorsKeepsItsFiles) {
  int ep = Epoll();
  const Backend* b = &B();
  int status = -3;
  std::thread forker([&] {
    epoll_event ev;
    b->epoll_wait(ep, &ev, 1, 1);  // this thread sleeps once
    status = RunInChild([b] {
      if (close_range(3, ~0U, 0) != 0) return 100;
      return OpenFilesThenWait(*b);
    });
  });
  forker.join();
  EXPECT_EQ(status, 0) << "see the child's report on stderr";
}

// The same without fork(): a thread sleeps in epoll, then the program calls
// closefrom(3), opens its files and uses epoll again on that thread. (Run
// in a child process all the same, so that closefrom cannot take this test
// process's descriptors; in the child it starts from a clean slate.)
TEST_P(ForkScenario, ClosefromInAThreadedProcessKeepsTheNewFiles) {
  const Backend* b = &B();
  int status = RunInChild([b] {
    closefrom(3);  // a clean slate: the lowest free number is 3
    int result = 100;
    std::thread t([&] {
      // Sleep once, on an instance closed before the closefrom: this
      // thread now holds whatever a sleep needs.
      int ep = b->epoll_create1(0);
      epoll_event ev;
      if (ep < 0 || b->epoll_wait(ep, &ev, 1, 1) != 0) return;
      b->close(ep);
      closefrom(3);
      result = OpenFilesThenWait(*b);
    });
    t.join();
    return result;
  });
  EXPECT_EQ(status, 0) << "see the child's report on stderr";
}

UEPOLL_INSTANTIATE_BACKENDS(ForkScenario);

}  // namespace
}  // namespace uepoll_test
