// Kernel descriptors in a uepoll instance on a kernel without epoll_pwait2
// (before Linux 5.11), or under a tool that does not know the call
// (valgrind 3.19). An instance's kernel half is waited on with
// epoll_pwait2; where it fails ENOSYS, the engine must fall back to
// epoll_pwait instead of taking the failure for a lost kernel half, which
// left the instance reporting none of its kernel descriptors again.
//
// Each test forks a child that installs a seccomp filter making
// epoll_pwait2 fail ENOSYS, as such a kernel does, runs its checks there
// and reports the first failing one in its exit status.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "no seccomp arch for this machine: add its AUDIT_ARCH_"
#endif

// epoll_pwait2 fails ENOSYS; every other call is allowed.
bool DenyPwait2() {
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_epoll_pwait2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & 0xffff)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog = {static_cast<unsigned short>(sizeof code / sizeof code[0]),
                     code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                 SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0;
}

int64_t NowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// Runs checks (which return 0 or the number of the failing check) in a
// child under the filter; returns the child's answer.
template <class Checks>
int InChild(Checks checks) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!DenyPwait2()) _exit(100);
    epoll_event ev;
    timespec zero{0, 0};
    // The filter does what an old kernel does.
    if (syscall(SYS_epoll_pwait2, -1, &ev, 1, &zero, nullptr, 8) != -1 ||
        errno != ENOSYS) {
      _exit(101);
    }
    _exit(checks());
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -2;
  if (!WIFEXITED(status)) return 1000 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

TEST(BridgeNoPwait2, KernelDescriptorIsReportedByZeroAndTimedWaits) {
  EXPECT_EQ(InChild([] {
              int ep = uepoll_epoll_create1(0);
              int k = eventfd(0, EFD_NONBLOCK);  // the kernel's
              if (ep < 0 || k < 0) return 1;
              epoll_event ev{};
              ev.events = EPOLLIN;
              ev.data.u64 = 7;
              if (uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev) != 0) return 2;
              epoll_event out{};
              if (uepoll_epoll_wait(ep, &out, 1, 0) != 0) return 3;
              uint64_t one = 1;
              if (write(k, &one, sizeof one) != 8) return 4;
              // A harvest (timeout 0) and a wait that need not sleep.
              if (uepoll_epoll_wait(ep, &out, 1, 0) != 1) return 5;
              if (out.data.u64 != 7 || out.events != EPOLLIN) return 6;
              out = {};
              if (uepoll_epoll_wait(ep, &out, 1, 1000) != 1) return 7;
              if (out.data.u64 != 7) return 8;
              // Still there after another ADD: the kernel half survived.
              int k2 = eventfd(1, EFD_NONBLOCK);
              ev.data.u64 = 9;
              if (uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k2, &ev) != 0) return 9;
              epoll_event two[2];
              if (uepoll_epoll_wait(ep, two, 2, 0) != 2) return 10;
              return 0;
            }),
            0);
}

TEST(BridgeNoPwait2, SleepingWaitIsWokenAndTimesOutNoEarlier) {
  EXPECT_EQ(InChild([] {
              int ep = uepoll_epoll_create1(0);
              int k = eventfd(0, EFD_NONBLOCK);
              if (ep < 0 || k < 0) return 1;
              epoll_event ev{};
              ev.events = EPOLLIN;
              ev.data.u64 = 3;
              if (uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev) != 0) return 2;
              // Nothing ready: the wait ends at its timeout, not before
              // (the fallback rounds its timeout up to whole ms).
              epoll_event out{};
              int64_t t0 = NowNs();
              if (uepoll_epoll_wait(ep, &out, 1, 30) != 0) return 3;
              if (NowNs() - t0 < 30 * 1000000LL) return 4;
              // With a signal mask too (the masked sleep).
              sigset_t mask;
              sigemptyset(&mask);
              t0 = NowNs();
              if (uepoll_epoll_pwait(ep, &out, 1, 20, &mask) != 0) return 5;
              if (NowNs() - t0 < 20 * 1000000LL) return 6;
              // A sleeping wait is woken by a write from another thread.
              std::thread writer([k] {
                uint64_t one = 1;
                (void)!write(k, &one, sizeof one);
              });
              int n = uepoll_epoll_wait(ep, &out, 1, 20000);
              writer.join();
              if (n != 1 || out.data.u64 != 3) return 7;
              return 0;
            }),
            0);
}

TEST(BridgeNoPwait2, MixedInstanceReportsBothHalves) {
  EXPECT_EQ(InChild([] {
              int ep = uepoll_epoll_create1(0);
              int k = eventfd(1, EFD_NONBLOCK);         // the kernel's
              int u = uepoll_eventfd(1, EFD_NONBLOCK);  // uepoll's
              if (ep < 0 || k < 0 || u < 0) return 1;
              epoll_event ev{};
              ev.events = EPOLLIN;
              ev.data.u64 = 1;
              if (uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev) != 0) return 2;
              ev.data.u64 = 2;
              if (uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev) != 0) return 3;
              epoll_event out[2] = {};
              if (uepoll_epoll_wait(ep, out, 2, 1000) != 2) return 4;
              if (out[0].data.u64 + out[1].data.u64 != 3) return 5;
              return 0;
            }),
            0);
}

}  // namespace
