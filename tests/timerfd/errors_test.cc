// timerfd's errors, in the kernel's order (fs/timerfd.c): create checks its
// flags and clock together, then CAP_WAKE_ALARM; settime copies the new
// value in (EFAULT), checks flags and values (EINVAL), the descriptor
// (EBADF), its kind (EINVAL), then CAP_WAKE_ALARM; gettime checks the
// descriptor and its kind before the copy out.
//
//   call      case                                  errno
//   create    unknown flag                           EINVAL
//   create    clock not in {RT, MONO, BOOT, RT_ALARM, BOOT_ALARM}   EINVAL
//   create    alarm clock without CAP_WAKE_ALARM     EPERM
//   settime   new_value NULL (whatever else is bad)  EFAULT
//   settime   unknown flag, tv_nsec >= 1e9 or < 0,
//             tv_sec < 0 (value or interval)         EINVAL (before EBADF)
//   settime   closed descriptor                      EBADF
//   settime   eventfd, epoll instance                EINVAL
//   settime   alarm timer without CAP_WAKE_ALARM     EPERM
//   gettime   closed descriptor (curr NULL too)      EBADF
//   gettime   not a timerfd                          EINVAL
//   gettime   curr_value NULL                        EFAULT
//   read      count < 8                              EINVAL
//   write     any                                    EINVAL
// A kernel timerfd given to uepoll's calls is the kernel's to answer, and
// so is any other kernel file (EINVAL): KernelDescriptors*.
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "timerfd/timerfd_test.h"

namespace uepoll_test {
namespace {

class TimerfdErrors : public TimerfdTest {};

TEST_P(TimerfdErrors, CreateRejectsUnknownFlags) {
  EXPECT_ERRNO(B().timerfd_create(CLOCK_MONOTONIC, 1), EINVAL);
  EXPECT_ERRNO(B().timerfd_create(CLOCK_MONOTONIC, TFD_TIMER_ABSTIME), EINVAL);
  EXPECT_ERRNO(B().timerfd_create(CLOCK_MONOTONIC, O_RDWR), EINVAL);
  EXPECT_ERRNO(B().timerfd_create(CLOCK_MONOTONIC, -1), EINVAL);
}

TEST_P(TimerfdErrors, CreateRejectsOtherClocks) {
  for (int c : {-1, CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID,
                CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE,
                CLOCK_MONOTONIC_COARSE, CLOCK_TAI, 10, 12, 100}) {
    SCOPED_TRACE(c);
    EXPECT_ERRNO(B().timerfd_create(c, 0), EINVAL);
  }
}

TEST_P(TimerfdErrors, BadFlagsWinOverBadClock) {
  // One check covers both: EINVAL either way, and never EPERM.
  EXPECT_ERRNO(B().timerfd_create(CLOCK_BOOTTIME_ALARM, 1), EINVAL);
  EXPECT_ERRNO(B().timerfd_create(-1, 1), EINVAL);
}

TEST_P(TimerfdErrors, CreateAcceptsEveryFlagCombination) {
  for (int c : {CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME}) {
    for (int f : {0, int(TFD_NONBLOCK), int(TFD_CLOEXEC),
                  int(TFD_NONBLOCK | TFD_CLOEXEC)}) {
      int fd = Timerfd(c, f);
      EXPECT_EQ(B().fcntl(fd, F_GETFL, 0), O_RDWR | (f & TFD_NONBLOCK));
      EXPECT_EQ(B().fcntl(fd, F_GETFD, 0), (f & TFD_CLOEXEC) ? FD_CLOEXEC : 0);
      Close(fd);
    }
  }
}

// Capabilities are per thread, and the kernel checks the calling thread's:
// dropping CAP_WAKE_ALARM from this thread's effective set (the test runs
// in its own process) gives the unprivileged case on both backends.
bool SetWakeAlarm(bool on) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  uint32_t bit = 1u << (CAP_WAKE_ALARM % 32);
  if (on) {
    data[CAP_WAKE_ALARM / 32].effective |= bit;
  } else {
    data[CAP_WAKE_ALARM / 32].effective &= ~bit;
  }
  return syscall(SYS_capset, &hdr, data) == 0;
}

bool HaveWakeAlarm() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return data[CAP_WAKE_ALARM / 32].effective & (1u << (CAP_WAKE_ALARM % 32));
}

TEST_P(TimerfdErrors, AlarmClocksNeedWakeAlarm) {
  if (HaveWakeAlarm()) {
    int a = Timerfd(CLOCK_REALTIME_ALARM, TFD_NONBLOCK);
    int b = Timerfd(CLOCK_BOOTTIME_ALARM, TFD_NONBLOCK);
    // Armed far away, so nothing fires; settime is allowed too.
    Arm(a, 3600 * kSec);
    Arm(b, 3600 * kSec);
    ASSERT_TRUE(SetWakeAlarm(false));
    itimerspec v = Spec(kSec), old;
    EXPECT_ERRNO(B().timerfd_settime(a, 0, &v, &old), EPERM);
    EXPECT_ERRNO(B().timerfd_settime(b, 0, &v, &old), EPERM);
    // gettime asks for no capability.
    EXPECT_GT(Ns(Get(b).it_value), 3000 * kSec);
  }
  SetWakeAlarm(false);
  ASSERT_FALSE(HaveWakeAlarm());
  EXPECT_ERRNO(B().timerfd_create(CLOCK_REALTIME_ALARM, 0), EPERM);
  EXPECT_ERRNO(B().timerfd_create(CLOCK_BOOTTIME_ALARM, TFD_NONBLOCK), EPERM);
}

TEST_P(TimerfdErrors, SettimeNullValueIsEfaultFirst) {
  int fd = Timerfd();
  itimerspec old;
  EXPECT_ERRNO(B().timerfd_settime(fd, 0, nullptr, &old), EFAULT);
  EXPECT_ERRNO(B().timerfd_settime(fd, 99, nullptr, nullptr), EFAULT);
  EXPECT_ERRNO(B().timerfd_settime(B().closed_fd, 99, nullptr, nullptr),
               EFAULT);
}

TEST_P(TimerfdErrors, SettimeBadFlagsOrValuesAreEinvalBeforeEbadf) {
  itimerspec ok = Spec(kSec);
  EXPECT_ERRNO(B().timerfd_settime(B().closed_fd, 4, &ok, nullptr), EINVAL);
  EXPECT_ERRNO(B().timerfd_settime(B().closed_fd, TFD_NONBLOCK, &ok, nullptr),
               EINVAL);
  itimerspec bad[] = {Spec(0), Spec(0), Spec(0), Spec(0), Spec(0), Spec(0)};
  bad[0].it_value.tv_nsec = 1000000000;
  bad[1].it_value.tv_nsec = -1;
  bad[2].it_value.tv_sec = -1;
  bad[3].it_interval.tv_nsec = 1000000000;
  bad[4].it_interval.tv_nsec = -1;
  bad[5].it_interval.tv_sec = -1;
  int fd = Timerfd();
  for (const itimerspec& b : bad) {
    EXPECT_ERRNO(B().timerfd_settime(B().closed_fd, 0, &b, nullptr), EINVAL);
    EXPECT_ERRNO(B().timerfd_settime(fd, 0, &b, nullptr), EINVAL);
    EXPECT_ERRNO(B().timerfd_settime(fd, TFD_TIMER_ABSTIME, &b, nullptr),
                 EINVAL);
  }
  // Nothing was armed by the failures.
  EXPECT_EQ(Ns(Get(fd).it_value), 0);
  EXPECT_EQ(Ns(Get(fd).it_interval), 0);
}

TEST_P(TimerfdErrors, SettimeLargestValidValuesAreAccepted) {
  int fd = Timerfd();
  itimerspec v;
  v.it_value.tv_sec = 0;
  v.it_value.tv_nsec = 999999999;
  v.it_interval.tv_sec = 0;
  v.it_interval.tv_nsec = 999999999;
  EXPECT_EQ(B().timerfd_settime(fd, 0, &v, nullptr), 0);
  Arm(fd, 0);
}

TEST_P(TimerfdErrors, SettimeOnClosedDescriptorIsEbadf) {
  itimerspec v = Spec(kSec);
  EXPECT_ERRNO(B().timerfd_settime(B().closed_fd, 0, &v, nullptr), EBADF);
  EXPECT_ERRNO(B().timerfd_settime(-1, 0, &v, nullptr), EBADF);
}

TEST_P(TimerfdErrors, SettimeOnOtherKindsIsEinval) {
  itimerspec v = Spec(kSec);
  int efd = Eventfd();
  int ep = Epoll();
  int p[2];
  Pipe(p);
  for (int fd : {efd, ep, p[0], p[1]}) {
    EXPECT_ERRNO(B().timerfd_settime(fd, 0, &v, nullptr), EINVAL);
    itimerspec cur;
    EXPECT_ERRNO(B().timerfd_gettime(fd, &cur), EINVAL);
  }
}

TEST_P(TimerfdErrors, GettimeOrder) {
  EXPECT_ERRNO(B().timerfd_gettime(B().closed_fd, nullptr), EBADF);
  int efd = Eventfd();
  EXPECT_ERRNO(B().timerfd_gettime(efd, nullptr), EINVAL);
  int fd = Timerfd();
  EXPECT_ERRNO(B().timerfd_gettime(fd, nullptr), EFAULT);
}

TEST_P(TimerfdErrors, ShortReadIsEinvalEvenWhenExpired) {
  int fd = Timerfd();
  Arm(fd, 1 * kMs);
  ASSERT_TRUE(WaitReadable(fd));
  char buf[8];
  EXPECT_ERRNO(B().read(fd, buf, 7), EINVAL);
  EXPECT_ERRNO(B().read(fd, buf, 0), EINVAL);
  EXPECT_EQ(Ticks(fd), 1u);  // nothing consumed
}

TEST_P(TimerfdErrors, ShortReadIsEinvalBeforeEagain) {
  int fd = Timerfd();
  char buf[4];
  EXPECT_ERRNO(B().read(fd, buf, sizeof buf), EINVAL);
  uint64_t v;
  EXPECT_ERRNO(B().read(fd, &v, sizeof v), EAGAIN);
}

TEST_P(TimerfdErrors, WriteIsEinval) {
  int fd = Timerfd();
  uint64_t v = 1;
  EXPECT_ERRNO(B().write(fd, &v, sizeof v), EINVAL);
}

TEST_P(TimerfdErrors, FailedSettimeLeavesOldValueUntouched) {
  int fd = Timerfd();
  Arm(fd, 3600 * kSec);
  itimerspec bad = Spec(0);
  bad.it_value.tv_nsec = -5;
  itimerspec old = Spec(7, 7);
  EXPECT_ERRNO(B().timerfd_settime(fd, 0, &bad, &old), EINVAL);
  EXPECT_EQ(Ns(old.it_value), 7);
  EXPECT_EQ(Ns(old.it_interval), 7);
  EXPECT_GT(Ns(Get(fd).it_value), 3500 * kSec);
}

// settime and gettime of a kernel timerfd (made by the kernel whatever the
// backend: a program renamed onto uepoll, or interposed with
// UEPOLL_INTERPOSE=epoll,eventfd, holds such timers) behave as the
// kernel's, arming and reading included.
TEST_P(TimerfdErrors, KernelDescriptorsKernelTimerfdWorks) {
  int k = Track(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK));
  ASSERT_GE(k, 0);
  itimerspec v = Spec(3600 * kSec), old = Spec(7, 7);
  ASSERT_EQ(B().timerfd_settime(k, 0, &v, &old), 0) << strerror(errno);
  EXPECT_EQ(Ns(old.it_value), 0);
  EXPECT_EQ(Ns(old.it_interval), 0);
  itimerspec cur{};
  ASSERT_EQ(B().timerfd_gettime(k, &cur), 0) << strerror(errno);
  EXPECT_GT(Ns(cur.it_value), 3500 * kSec);
  EXPECT_ERRNO(B().timerfd_gettime(k, nullptr), EFAULT);
  v = Spec(1 * kMs);
  ASSERT_EQ(B().timerfd_settime(k, 0, &v, &old), 0);
  EXPECT_GT(Ns(old.it_value), 3500 * kSec);
  ASSERT_TRUE(WaitReadable(k));
  EXPECT_EQ(Ticks(k), 1u);
  // The kernel's flags and value checks, then its answers.
  EXPECT_ERRNO(B().timerfd_settime(k, 0, nullptr, nullptr), EFAULT);
  EXPECT_ERRNO(B().timerfd_settime(k, 0x40, &v, nullptr), EINVAL);
}

TEST_P(TimerfdErrors, KernelDescriptorsOtherFilesAreEinval) {
  int m = Track(::memfd_create("timerfd-errors", MFD_CLOEXEC));  // regular
  ASSERT_GE(m, 0);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Track(p[0]);
  Track(p[1]);
  itimerspec v = Spec(kSec), cur;
  for (int fd : {m, p[0]}) {
    EXPECT_ERRNO(B().timerfd_settime(fd, 0, &v, nullptr), EINVAL);
    EXPECT_ERRNO(B().timerfd_gettime(fd, &cur), EINVAL);
  }
}

UEPOLL_INSTANTIATE_BACKENDS(TimerfdErrors);

}  // namespace
}  // namespace uepoll_test
