// Each test pins one deviation from Linux listed in docs/semantics.md: it
// asserts uepoll's documented behaviour, so that a change to it is noticed
// and the document updated.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"
#include "support/full_table.h"
#include "support/scm.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

// True once the thread sleeps in the kernel (a futex, or ppoll for masked
// waits).
bool WaitUntilSleeping(pid_t tid) {
  return Eventually([tid] { return TaskState(tid) == 'S'; });
}

class Deviations : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};

// D2: a NULL buffer fails EFAULT before the eventfd count is consumed.
TEST_F(Deviations, EventfdReadIntoNullFailsWithoutConsuming) {
  int efd = uepoll_eventfd(3, EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  EXPECT_EQ(uepoll_read(efd, nullptr, 8), -1);
  EXPECT_EQ(errno, EFAULT);
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(efd, &v, 8), 8);
  EXPECT_EQ(v, 3u);  // the kernel would have consumed it
  EXPECT_EQ(uepoll_close(efd), 0);
}

// D3: fcntl's locks and write hints are EINVAL on a uepoll object, where
// the kernel takes a pipe's locks and keeps its write hint on the inode;
// the leases, notifications and seals are answered as the kernel's
// (asked of a stand-in: DescriptorCalls.fcntl__leases_notify_and_seals_*).
TEST_F(Deviations, FcntlLocksAndWriteHintsAreEinval) {
  int p[2];
  ASSERT_EQ(uepoll_pipe(p), 0);
  struct flock fl {};
  fl.l_type = F_RDLCK;
  EXPECT_EQ(uepoll_fcntl(p[0], F_GETLK, &fl), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_fcntl(p[0], F_SETLK, &fl), -1);
  EXPECT_EQ(errno, EINVAL);
  uint64_t hint = 0;
  EXPECT_EQ(uepoll_fcntl(p[0], F_GET_RW_HINT, &hint), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_fcntl(p[0], F_GETOWN), 0) << "answered now";
  EXPECT_EQ(uepoll_fcntl(p[0], F_GETLEASE), F_UNLCK) << "answered now";
  EXPECT_EQ(uepoll_close(p[0]), 0);
  EXPECT_EQ(uepoll_close(p[1]), 0);
}

// D26: a stream pair has no out-of-band data: send(MSG_OOB) fails
// EOPNOTSUPP and queues nothing (the kernel queues one urgent byte).
TEST_F(Deviations, StreamSendOobIsEopnotsupp) {
  int sv[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  EXPECT_EQ(uepoll_send(sv[0], "x", 1, MSG_OOB), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  char c;
  EXPECT_EQ(uepoll_recv(sv[1], &c, 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(uepoll_close(sv[0]), 0);
  EXPECT_EQ(uepoll_close(sv[1]), 0);
}

// D27 (b): a uepoll object with no kernel equivalent (a timerfd) cannot
// travel over a kernel socket (the kernel would pass its placeholder):
// sendmsg fails EOPNOTSUPP and sends nothing. (Pipes, socket pairs and
// eventfds are converted first: tests/crossing.)
TEST_F(Deviations, UnconvertibleDescriptorOverAKernelSocketIsEopnotsupp) {
  int ksv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, ksv), 0);
  int efd = uepoll_timerfd_create(CLOCK_MONOTONIC, 0);
  ASSERT_GE(efd, 0);
  char byte = 'x';
  OneFdMsg msg(&byte, 1, efd);
  EXPECT_EQ(uepoll_sendmsg(ksv[0], msg.msg(), 0), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(::recv(ksv[1], &byte, 1, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(uepoll_close(efd), 0);
  ::close(ksv[0]);
  ::close(ksv[1]);
}

// D28: a signal-driven I/O signal for a process group (or another
// process) is sent with kill(): it carries SI_USER and no si_fd (the
// kernel's carries POLL_IN, si_band and si_fd to every member). Checked
// in a child that leads a process group of its own, so that the signal
// reaches no other process.
int SigioToOwnGroupChild() {
  if (setpgid(0, 0) != 0) return 10;
  int p[2];
  if (uepoll_pipe2(p, O_NONBLOCK) != 0) return 11;
  int sig = SIGRTMIN + 3;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (uepoll_fcntl(p[0], F_SETOWN, -getpgrp()) != 0 ||
      uepoll_fcntl(p[0], F_SETSIG, sig) != 0 ||
      uepoll_fcntl(p[0], F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
    return 12;
  }
  siginfo_t si{};
  struct timespec zero {};
  if (uepoll_write(p[1], "x", 1) != 1) return 13;
  if (sigtimedwait(&set, &si, &zero) != sig) return 14;
  if (si.si_code != SI_USER || si.si_pid != getpid()) return 15;
  // To this process itself: the kernel's siginfo.
  if (uepoll_fcntl(p[0], F_SETOWN, getpid()) != 0) return 16;
  if (uepoll_write(p[1], "y", 1) != 1) return 17;
  if (sigtimedwait(&set, &si, &zero) != sig) return 18;
  if (si.si_code != POLL_IN || si.si_fd != p[0]) return 19;
  return 0;
}

TEST_F(Deviations, SigioToAProcessGroupIsSentByKill) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(SigioToOwnGroupChild());
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the step that failed";
}

// D14: a failed socketpair leaves sv as it was.
TEST_F(Deviations, FailedSocketpairLeavesSvUntouched) {
  int sv[2] = {-7, -8};
  EXPECT_EQ(uepoll_socketpair(AF_UNIX, 99, 0, sv), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(sv[0], -7);
  EXPECT_EQ(sv[1], -8);
}

// D5: in the opt-in disjoint numbering, descriptor numbers start at
// UEPOLL_FD_BASE, lowest free first in that range; kernel descriptors still
// pass through every call, but cannot join an instance, and a uepoll object
// cannot be dup2'ed onto a kernel number.
TEST_F(Deviations, DisjointModeNumbersFromTheBase) {
  ASSERT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), 0);
  int efd = uepoll_eventfd(0, 0);
  int ep = uepoll_epoll_create1(0);
  ASSERT_EQ(efd, UEPOLL_FD_BASE);
  ASSERT_EQ(ep, UEPOLL_FD_BASE + 1);
  EXPECT_TRUE(uepoll_is_uepoll_fd(efd));
  EXPECT_FALSE(uepoll_is_uepoll_fd(0));
  EXPECT_EQ(uepoll_get_fd_mode(), UEPOLL_FD_MODE_DISJOINT);
  EXPECT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_KERNEL), -1);
  EXPECT_EQ(errno, EBUSY);
  int kfd = ::eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(kfd, 0);
  uint64_t one = 1;
  EXPECT_EQ(uepoll_write(kfd, &one, 8), 8);  // passed to the kernel
  epoll_event ev{};
  ev.events = EPOLLIN;
  EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, kfd, &ev), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(uepoll_dup2(efd, 900), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(uepoll_close(kfd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
  EXPECT_EQ(uepoll_close(efd), 0);
}

int g_signal_efd = -1;
void WriteFromHandler(int) {
  uint64_t one = 1;
  uepoll_write(g_signal_efd, &one, 8);
}

// D6: a signal handler that makes an event ready while a thread is blocked
// in a wait: uepoll runs the handler inside its sleep and then finds the
// event, so the wait returns it; the kernel returns EINTR (its handler runs
// only after the call has returned).
TEST_F(Deviations, HandlerThatMakesAnEventReadyEndsTheWaitWithTheEvent) {
  int ep = uepoll_epoll_create1(0);
  g_signal_efd = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(ep, 0);
  ASSERT_GE(g_signal_efd, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, g_signal_efd, &ev), 0);
  struct sigaction sa {
  }, old{};
  sa.sa_handler = WriteFromHandler;
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  std::atomic<pid_t> tid{0};
  int got = 0;
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    epoll_event out[1];
    got = uepoll_epoll_wait(ep, out, 1, 10000);
  });
  while (tid == 0) std::this_thread::yield();
  ASSERT_TRUE(WaitUntilSleeping(tid));
  pthread_kill(waiter.native_handle(), SIGUSR2);
  waiter.join();
  EXPECT_EQ(got, 1);
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_EQ(uepoll_close(g_signal_efd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
}

// D7: a thread that cannot make its two sleep descriptors (descriptor table
// full) still waits with a signal mask: the mask is installed around a
// futex sleep instead of atomically, the wait times out normally, and a
// handled signal still ends it with EINTR even under SA_RESTART (a futex
// sleep with a timeout is never restarted after a handler).
std::atomic<int> g_usr1_handled{0};
void CountUsr1(int) { g_usr1_handled.fetch_add(1); }

TEST_F(Deviations, MaskedWaitWithoutKernelDescriptorsKeepsWaitSemantics) {
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  struct sigaction sa {
  }, old_sa{};
  sa.sa_handler = CountUsr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old_sa), 0);
  g_usr1_handled = 0;
  std::atomic<bool> second_wait{false}, done{false};
  int timed_out = -2, interrupted = -2, interrupted_errno = 0;
  bool table_full = false;
  std::thread t([&] {
    // A fresh thread has no sleep descriptors yet; use up the table first.
    FullTable full;
    table_full = full.full();
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGUSR2);
    epoll_event out[1];
    timed_out = uepoll_epoll_pwait(ep, out, 1, 20, &mask);
    second_wait = true;
    interrupted = uepoll_epoll_pwait(ep, out, 1, 5000, &mask);
    interrupted_errno = errno;
    done = true;
  });
  // The descriptor table is full, so /proc cannot tell when the thread
  // sleeps: signal it until its wait returns (a signal that lands before
  // the sleep only runs the handler; the next one finds it asleep).
  bool ended = Eventually([&] {
    if (!second_wait.load()) return false;
    if (done.load()) return true;
    pthread_kill(t.native_handle(), SIGUSR1);
    return done.load();
  });
  t.join();
  sigaction(SIGUSR1, &old_sa, nullptr);
  EXPECT_TRUE(table_full);
  EXPECT_EQ(timed_out, 0);
  EXPECT_TRUE(ended);
  EXPECT_EQ(interrupted, -1);
  EXPECT_EQ(interrupted_errno, EINTR);
  EXPECT_GE(g_usr1_handled.load(), 1);
  EXPECT_EQ(uepoll_close(ep), 0);
}

// D12's neighbour: a child forked by a thread that has slept in uepoll on
// kernel descriptors gets that thread's parker as a copy, descriptors
// included. The child closes its copies at fork and makes its own: were
// they shared, a wake meant for the parent's thread could end the child's
// sleep instead, and the parent's thread would sleep on. Here the child
// sleeps after the parent's thread, so it would be the one woken.
char ProcessState(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  std::ifstream in(path);
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  size_t p = stat.rfind(')');
  return p == std::string::npos || p + 2 >= stat.size() ? 0 : stat[p + 2];
}

TEST_F(Deviations, ForkedChildDoesNotTakeTheParentsWakeups) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                  "process whose child keeps running";
#endif
  int ep = uepoll_epoll_create1(0);
  int efd = uepoll_eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(ep, 0);
  ASSERT_GE(efd, 0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev), 0);
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::atomic<pid_t> child{0}, tid{0};
  std::atomic<int> result{-2};
  std::thread h([&] {
    epoll_event out[1];
    // Masked waits sleep on the thread's kernel descriptors (parker.h).
    sigset_t mask;
    sigemptyset(&mask);
    uepoll_epoll_pwait(ep, out, 1, 1, &mask);  // made once, before fork
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    pid_t pid = fork();
    if (pid == 0) {
      char c;
      if (::read(go[0], &c, 1) != 1) _exit(1);
      int cep = uepoll_epoll_create1(0);
      uepoll_epoll_pwait(cep, out, 1, 10000, &mask);  // the newest sleeper
      _exit(0);
    }
    child = pid;
    if (pid < 0) return;
    result = uepoll_epoll_pwait(ep, out, 1, -1, &mask);
  });
  // No ASSERT until h is joined: each step only decides whether the next
  // one can be meaningful.
  bool forked =
      Eventually([&] { return child.load() != 0; }) && child.load() > 0;
  bool parked = forked && WaitUntilSleeping(tid.load());
  bool child_slept = parked && ::write(go[1], "x", 1) == 1 &&
                     Eventually([&] { return ProcessState(child) == 'S'; });
  uint64_t one = 1;
  bool written = forked && uepoll_write(efd, &one, sizeof one) == 8;
  bool woken = written && Eventually([&] { return result.load() != -2; });
  if (forked) {
    kill(child.load(), SIGKILL);  // the child's sleep is no longer needed
    waitpid(child.load(), nullptr, 0);
  }
  // Rescue a thread whose wakeup was taken: its token is set, so a signal
  // that ends its sleep makes it harvest (the handler does nothing).
  struct sigaction sa {
  }, old_sa{};
  sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, &old_sa);
  Eventually([&] {
    if (result.load() != -2 || !forked) return true;
    pthread_kill(h.native_handle(), SIGUSR1);
    return result.load() != -2;
  });
  h.join();
  sigaction(SIGUSR1, &old_sa, nullptr);
  ::close(go[0]);
  ::close(go[1]);
  ASSERT_TRUE(forked) << "fork failed";
  EXPECT_TRUE(parked);
  EXPECT_TRUE(child_slept);
  EXPECT_TRUE(woken) << "the parent's thread missed its wakeup";
  EXPECT_EQ(result.load(), 1);
  EXPECT_EQ(uepoll_close(efd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
}

// D8: no per-user watch limit: ENOSPC is never returned. (In the disjoint
// numbering, so that the registrations need no kernel descriptors.)
TEST_F(Deviations, ManyRegistrationsNeverHitAWatchLimit) {
  ASSERT_EQ(uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT), 0);
  int ep = uepoll_epoll_create1(0);
  int efd = uepoll_eventfd(0, 0);
  ASSERT_GE(ep, 0);
  ASSERT_GE(efd, 0);
  std::vector<int> dups;
  for (int i = 0; i < 20000; ++i) {
    int d = uepoll_dup(efd);
    ASSERT_GE(d, 0);
    dups.push_back(d);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, d, &ev), 0) << i;
  }
  for (int d : dups) uepoll_close(d);
  EXPECT_EQ(uepoll_close(efd), 0);
  EXPECT_EQ(uepoll_close(ep), 0);
}

}  // namespace
}  // namespace uepoll_test
