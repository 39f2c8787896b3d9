// uepoll's own kernel timerfd, which detects clock steps for
// TFD_TIMER_CANCEL_ON_SET timers, survives the application closing its
// number and reusing it: uepoll must then neither read nor close the
// application's file (a read would consume the application's data). Its
// read(2) and close(2) are cancellation points, which the calls that use
// it (settime, epoll_ctl, fork) are not: a thread with a cancel pending
// goes through them as on the kernel.
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
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

class ClockDetectorCancel : public BackendTest {};

// settime with TFD_TIMER_CANCEL_ON_SET (which makes and reads the
// detector) and epoll_ctl's first poll of such a timer (which reads it)
// on a thread with a cancel pending: neither is a cancellation point, so
// both return and the thread is cancelled at its next one.
TEST_P(ClockDetectorCancel, NoCancellationPointInSettimeOrCtl) {
  // Everything the thread uses lives here, not in its frame: a cancelled
  // thread's frame is unwound without ASan unpoisoning it.
  struct Ctx {
    const Backend* b;
    int t = -1, ep = -1;
    int set = -2, ctl = -2, get = -2;
    itimerspec far{}, cur{};
    epoll_event ev{};
  } ctx{&B()};
  ctx.t = Track(B().timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK));
  ASSERT_GE(ctx.t, 0);
  ctx.ep = Epoll();
  auto fn = +[](void* arg) -> void* {
    auto* c = static_cast<Ctx*>(arg);
    pthread_cancel(pthread_self());  // pending: deferred cancellation
    c->far.it_value.tv_sec = time(nullptr) + 3600;
    c->set = c->b->timerfd_settime(
        c->t, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &c->far, nullptr);
    c->ev.events = EPOLLIN;
    c->ctl = c->b->epoll_ctl(c->ep, EPOLL_CTL_ADD, c->t, &c->ev);
    c->get = c->b->timerfd_gettime(c->t, &c->cur);
    pthread_testcancel();
    return nullptr;
  };
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, nullptr, fn, &ctx), 0);
  void* ret = nullptr;
  ASSERT_EQ(pthread_join(th, &ret), 0);
  EXPECT_EQ(ret, PTHREAD_CANCELED);
  EXPECT_EQ(ctx.set, 0) << "cancelled inside timerfd_settime";
  EXPECT_EQ(ctx.ctl, 0) << "cancelled inside epoll_ctl";
  EXPECT_EQ(ctx.get, 0);
}

UEPOLL_INSTANTIATE_BACKENDS(ClockDetectorCancel);

// fork() on a thread with a cancel pending, once the detector exists: its
// child handler closes the child's copy, and close(2) would act on the
// cancel the child inherited, ending the child's only thread inside fork()
// (status 0) instead of returning there. The timer is disarmed first, so
// that the child starts no timer thread (which would keep a child whose
// thread was cancelled alive, and which ThreadSanitizer refuses in the
// child of a threaded process).
TEST(ClockDetector, ForkWithACancelPendingReturnsInTheChild) {
  struct Ctx {  // not in the thread's frame: see above
    int t = -1;
    int status = -1;
    int st = 0;
  } ctx;
  ctx.t = uepoll_timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
  ASSERT_GE(ctx.t, 0);
  ASSERT_EQ(ArmCancelOnSet(ctx.t), 0);  // makes the detector's timerfd
  itimerspec zero{};
  ASSERT_EQ(uepoll_timerfd_settime(ctx.t, 0, &zero, nullptr), 0);
  auto fn = +[](void* arg) -> void* {
    auto* c = static_cast<Ctx*>(arg);
    pthread_cancel(pthread_self());
    pid_t pid = fork();
    if (pid == 0) {
      pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
      _exit(42);
    }
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
    // Bounded, whatever keeps a child alive: it is killed then.
    for (int i = 0; pid > 0 && i < 10000; ++i) {
      if (waitpid(pid, &c->st, WNOHANG) == pid) {
        c->status = c->st;
        break;
      }
      usleep(1000);
    }
    if (pid > 0 && c->status == -1) {
      kill(pid, SIGKILL);
      waitpid(pid, &c->st, 0);
    }
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, nullptr);
    pthread_testcancel();
    return nullptr;
  };
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, nullptr, fn, &ctx), 0);
  void* ret = nullptr;
  ASSERT_EQ(pthread_join(th, &ret), 0);
  EXPECT_EQ(ret, PTHREAD_CANCELED);
  ASSERT_NE(ctx.status, -1) << "the child was cancelled inside fork()";
  ASSERT_TRUE(WIFEXITED(ctx.status)) << ctx.status;
  EXPECT_EQ(WEXITSTATUS(ctx.status), 42)
      << "the child was cancelled inside fork()";
  EXPECT_EQ(uepoll_close(ctx.t), 0);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
