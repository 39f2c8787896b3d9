// uepoll's own kernel timerfd, which detects clock steps for
// TFD_TIMER_CANCEL_ON_SET timers, survives the application closing its
// number and reusing it: uepoll must then neither read nor close the
// application's file (a read would consume the application's data).
#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <climits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

// The kernel timerfds of the process (uepoll's timerfds are placeholders,
// so in this test the only one is the detector's).
std::vector<int> KernelTimerfds() {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string path = std::string("/proc/self/fd/") + e->d_name;
    char link[256];
    ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    if (std::string(link) == "anon_inode:[timerfd]")
      out.push_back(atoi(e->d_name));
  }
  closedir(d);
  return out;
}

int ArmCancelOnSet(int tfd) {
  itimerspec far{};
  far.it_value.tv_sec = time(nullptr) + 3600;
  return uepoll_timerfd_settime(
      tfd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &far, nullptr);
}

TEST(ClockDetector, a_reused_number_is_neither_read_nor_closed) {
  int t = uepoll_timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
  ASSERT_GE(t, 0);
  ASSERT_EQ(ArmCancelOnSet(t), 0);  // makes the detector's timerfd
  std::vector<int> det = KernelTimerfds();
  ASSERT_EQ(det.size(), 1u) << "the detector's timerfd was not found";
  // The application closes the number (as closefrom would) and a pipe of
  // its own takes it, with data in it.
  ASSERT_EQ(::close(det[0]), 0);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  int rd = p[0] == det[0] ? p[0] : ::dup2(p[0], det[0]);
  ASSERT_EQ(rd, det[0]);
  ASSERT_EQ(::write(p[1], "12345678", 8), 8);
  // A disarm and a re-arm make uepoll consult the detector again.
  itimerspec zero{};
  ASSERT_EQ(uepoll_timerfd_settime(t, 0, &zero, nullptr), 0);
  ASSERT_EQ(ArmCancelOnSet(t), 0);
  int avail = -1;
  ASSERT_EQ(::ioctl(rd, FIONREAD, &avail), 0);
  EXPECT_EQ(avail, 8) << "uepoll read the application's pipe";
  EXPECT_GE(::fcntl(rd, F_GETFD), 0) << "uepoll closed the application's pipe";
  ::close(p[0]);
  ::close(p[1]);
  if (rd != p[0]) ::close(rd);
  EXPECT_EQ(uepoll_close(t), 0);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
