// Mask mode (the vpoll model) against kernel objects in the same states.
//
// A script drives a kernel object (a pipe end, a socket of a pair) through
// state changes, and a uepoll mask-mode object through the matching mask
// changes: the bits the kernel object's poll gains or loses, added with the
// kernel's wakeup (ADDEVENTS) or removed without one (DELEVENTS). After
// every step both are observed the same ways, and the two logs must be
// equal:
//
//   lt  --> e_lt  <- obj   (every readiness bit, level-triggered)
//   et  --> e_et  <- obj   (the same, edge-triggered)
//   os  --> e_os  <- obj   (the same, one-shot, re-armed after a report)
//   out --> e_out <- e_in <- obj   (outer edge-triggered, inner LT)
//   poll() of obj for every bit
//
// Then focused tests of what has no kernel analogue: the API's errors, the
// bits the owner sets being seen exactly (PRI, ERR, HUP, RDHUP together),
// DELEVENTS waking nobody, wakeups across threads.
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "conformance/helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

constexpr uint32_t kAllBits = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDNORM |
                              EPOLLWRNORM | EPOLLRDBAND | EPOLLWRBAND |
                              EPOLLRDHUP;

// One observation of an object after a step.
struct Obs {
  std::vector<Ev> lt, et, os, nested;
  short poll = 0;
  bool operator==(const Obs& o) const {
    return lt == o.lt && et == o.et && os == o.os && nested == o.nested &&
           poll == o.poll;
  }
};
std::ostream& operator<<(std::ostream& s, const std::vector<Ev>& v) {
  s << "[";
  for (const Ev& e : v) s << e << " ";
  return s << "]";
}
std::ostream& operator<<(std::ostream& s, const Obs& o) {
  return s << "lt=" << o.lt << " et=" << o.et << " os=" << o.os
           << " nested=" << o.nested << " poll=0x" << std::hex << o.poll
           << std::dec;
}

// Watches one object on one backend the five ways above.
class Observer {
 public:
  Observer(const Backend& b, int fd) : b_(b), fd_(fd) {
    e_lt_ = b.epoll_create1(0);
    e_et_ = b.epoll_create1(0);
    e_os_ = b.epoll_create1(0);
    e_in_ = b.epoll_create1(0);
    e_out_ = b.epoll_create1(0);
    Add(e_lt_, fd, kAllBits, 1);
    Add(e_et_, fd, kAllBits | EPOLLET, 2);
    Add(e_os_, fd, kAllBits | EPOLLONESHOT, 3);
    Add(e_in_, fd, kAllBits, 4);
    Add(e_out_, e_in_, EPOLLIN | EPOLLET, 5);
  }
  ~Observer() {
    for (int e : {e_out_, e_in_, e_os_, e_et_, e_lt_}) b_.close(e);
  }
  Obs Look() {
    Obs o;
    o.lt = Harvest(e_lt_);
    o.et = Harvest(e_et_);
    o.os = Harvest(e_os_);
    if (!o.os.empty()) {
      epoll_event ev{};
      ev.events = kAllBits | EPOLLONESHOT;
      ev.data.u64 = 3;
      EXPECT_EQ(b_.epoll_ctl(e_os_, EPOLL_CTL_MOD, fd_, &ev), 0);
    }
    o.nested = Harvest(e_out_);
    struct pollfd p {};
    p.fd = fd_;
    p.events = POLLIN | POLLPRI | POLLOUT | POLLRDNORM | POLLRDBAND |
               POLLWRNORM | POLLWRBAND | POLLRDHUP;
    EXPECT_EQ(b_.poll(&p, 1, 0) >= 0, true);
    o.poll = p.revents;
    return o;
  }

 private:
  void Add(int ep, int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    EXPECT_EQ(b_.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0) << strerror(errno);
  }
  std::vector<Ev> Harvest(int ep) {
    epoll_event evs[8];
    int n = b_.epoll_wait(ep, evs, 8, 0);
    std::vector<Ev> out;
    for (int i = 0; i < n; ++i) out.push_back({evs[i].events, evs[i].data.u64});
    return out;
  }
  const Backend& b_;
  int fd_;
  int e_lt_, e_et_, e_os_, e_in_, e_out_;
};

// A step: what happens to the kernel object, and the mask change that
// mirrors it on the uepoll object (op 0: the mask does not change).
struct Step {
  const char* what;
  std::function<void()> kernel;
  int op;
  uint32_t events;
};

// Runs the script on both and compares the observations step by step.
void RunScript(int kernel_fd, uint32_t initial_mask,
               const std::vector<Step>& steps) {
  int vfd = uepoll_vpoll_create(initial_mask, O_NONBLOCK);
  ASSERT_GE(vfd, 0);
  {
    Observer k(KernelBackend(), kernel_fd), u(UepollBackend(), vfd);
    EXPECT_EQ(k.Look(), u.Look()) << "after ADD";
    for (const Step& s : steps) {
      s.kernel();
      if (s.op) {
        ASSERT_EQ(uepoll_vpoll_ctl(vfd, s.op, s.events), 0);
      }
      Obs ko = k.Look(), uo = u.Look();
      EXPECT_EQ(ko, uo) << "after " << s.what;
      // And looked at again with nothing new: only LT items report.
      EXPECT_EQ(k.Look(), u.Look()) << "again after " << s.what;
    }
  }
  uepoll_close(vfd);
  ExpectNoUepollLeaks();
}

constexpr int kAdd = UEPOLL_VPOLL_ADDEVENTS;
constexpr int kDel = UEPOLL_VPOLL_DELEVENTS;
constexpr uint32_t kIn = EPOLLIN | EPOLLRDNORM;
constexpr uint32_t kOut = EPOLLOUT | EPOLLWRNORM;

void Write(int fd, size_t n) {
  std::vector<char> buf(n, 'x');
  ASSERT_EQ(::write(fd, buf.data(), n), ssize_t(n));
}
void Drain(int fd) {
  char buf[65536];
  while (::read(fd, buf, sizeof buf) > 0) {
  }
}

TEST(MaskModeVsKernel, PipeReadEnd) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_NONBLOCK), 0);
  RunScript(p[0], 0,
            {
                {"a write", [&] { Write(p[1], 1); }, kAdd, kIn},
                {"a second write", [&] { Write(p[1], 1); }, kAdd, kIn},
                {"a drain", [&] { Drain(p[0]); }, kDel, kIn},
                {"a write", [&] { Write(p[1], 3); }, kAdd, kIn},
                {"the writer's close", [&] { ::close(p[1]); }, kAdd, EPOLLHUP},
                {"a drain", [&] { Drain(p[0]); }, kDel, kIn},
            });
  ::close(p[0]);
}

TEST(MaskModeVsKernel, PipeWriteEnd) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_NONBLOCK), 0);
  RunScript(p[1], kOut,
            {
                {"a write", [&] { Write(p[1], 10); }, 0, 0},
                {"filling the pipe",
                 [&] {
                   while (::write(p[1], "x", 1) == 1) {
                   }
                 },
                 kDel, kOut},
                {"the reader's drain", [&] { Drain(p[0]); }, kAdd, kOut},
                {"the reader's close", [&] { ::close(p[0]); }, kAdd, EPOLLERR},
            });
  ::close(p[1]);
}

TEST(MaskModeVsKernel, StreamSocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  RunScript(sv[0], kOut | EPOLLWRBAND,
            {
                {"the peer's write", [&] { Write(sv[1], 5); }, kAdd, kIn},
                {"a drain", [&] { Drain(sv[0]); }, kDel, kIn},
                {"the peer's shutdown(SHUT_WR)",
                 [&] { ::shutdown(sv[1], SHUT_WR); }, kAdd, kIn | EPOLLRDHUP},
                {"the peer's close", [&] { ::close(sv[1]); }, kAdd, EPOLLHUP},
            });
  ::close(sv[0]);
}

// --- what has no kernel analogue -------------------------------------------

class MaskMode : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};

TEST_F(MaskMode, WatchersSeeExactlyTheBitsSet) {
  constexpr uint32_t kBits = EPOLLIN | EPOLLPRI | EPOLLERR | EPOLLHUP |
                             EPOLLRDHUP | EPOLLRDBAND | EPOLLMSG;
  int v = uepoll_vpoll_create(kBits, 0);
  ASSERT_GE(v, 0);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLRDBAND | EPOLLMSG;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, v, &ev), 0);
  epoll_event out{};
  ASSERT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 1);
  EXPECT_EQ(out.events, kBits);
  struct pollfd p {};
  p.fd = v;
  p.events = POLLIN | POLLPRI | POLLRDHUP;
  ASSERT_EQ(uepoll_poll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents, POLLIN | POLLPRI | POLLRDHUP | POLLERR | POLLHUP);
  uepoll_close(ep);
  uepoll_close(v);
}

TEST_F(MaskMode, SetReplacesAndDelWakesNobody) {
  int v = uepoll_vpoll_create(0, 0);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, v, &ev), 0);
  epoll_event out{};
  EXPECT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 0);
  ASSERT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_SETEVENTS, EPOLLIN | EPOLLOUT), 0);
  ASSERT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 1);
  EXPECT_EQ(out.events, uint32_t(EPOLLIN | EPOLLOUT));
  // Removing a bit is no event: no edge.
  ASSERT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_DELEVENTS, EPOLLIN), 0);
  EXPECT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 0);
  // SET with the same bits is an event (like a write to a readable pipe).
  ASSERT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_SETEVENTS, EPOLLOUT), 0);
  ASSERT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 1);
  EXPECT_EQ(out.events, uint32_t(EPOLLOUT));
  // SET to nothing wakes nobody.
  ASSERT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_SETEVENTS, 0), 0);
  EXPECT_EQ(uepoll_epoll_wait(ep, &out, 1, 0), 0);
  uepoll_close(ep);
  uepoll_close(v);
}

TEST_F(MaskMode, Errors) {
  EXPECT_EQ(uepoll_vpoll_create(EPOLLET, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_vpoll_create(EPOLLIN | EPOLLONESHOT, 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_vpoll_create(uint32_t(POLLNVAL), 0), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_vpoll_create(0, O_RDWR), -1);
  EXPECT_EQ(errno, EINVAL);
  int v = uepoll_vpoll_create(EPOLLIN, O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(v, 0);
  EXPECT_EQ(uepoll_fcntl(v, F_GETFL), O_RDWR | O_NONBLOCK);
  EXPECT_EQ(uepoll_fcntl(v, F_GETFD), FD_CLOEXEC);
  EXPECT_EQ(uepoll_vpoll_ctl(v, 0, EPOLLIN), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_vpoll_ctl(v, 4, EPOLLIN), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_ADDEVENTS, EPOLLEXCLUSIVE), -1);
  EXPECT_EQ(errno, EINVAL);
  int efd = uepoll_eventfd(0, 0);
  EXPECT_EQ(uepoll_vpoll_ctl(efd, UEPOLL_VPOLL_ADDEVENTS, EPOLLIN), -1);
  EXPECT_EQ(errno, EINVAL);
  uepoll_close(efd);
  EXPECT_EQ(uepoll_vpoll_ctl(UepollBackend().closed_fd, UEPOLL_VPOLL_ADDEVENTS,
                             EPOLLIN),
            -1);
  EXPECT_EQ(errno, EBADF);
  // A kernel descriptor is open, and no mask-mode object.
  int kp[2];
  ASSERT_EQ(::pipe(kp), 0);
  EXPECT_EQ(uepoll_vpoll_ctl(kp[0], UEPOLL_VPOLL_ADDEVENTS, EPOLLIN), -1);
  EXPECT_EQ(errno, EINVAL);
  ::close(kp[0]);
  ::close(kp[1]);
  char c;
  EXPECT_EQ(uepoll_read(v, &c, 1), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(uepoll_write(v, &c, 1), -1);
  EXPECT_EQ(errno, EINVAL);
  // A failed ctl changed nothing.
  struct pollfd p {};
  p.fd = v;
  p.events = POLLIN | POLLOUT;
  EXPECT_EQ(uepoll_poll(&p, 1, 0), 1);
  EXPECT_EQ(p.revents, POLLIN);
  uepoll_close(v);
}

TEST_F(MaskMode, AddFromAnotherThreadWakesASleepingWaiter) {
  int v = uepoll_vpoll_create(0, 0);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLPRI;
  ev.data.u64 = 11;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, v, &ev), 0);
  Waiter w([&](epoll_event* evs) {
    return uepoll_epoll_wait(ep, evs, Waiter::kEvents, kWaitMs);
  });
  ASSERT_TRUE(w.Parked());
  // A bit the waiter does not want: it stays asleep.
  ASSERT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_ADDEVENTS, EPOLLOUT), 0);
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_ADDEVENTS, EPOLLPRI), 0);
  ASSERT_TRUE(w.WaitDone());
  ASSERT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).events, uint32_t(EPOLLPRI));
  EXPECT_EQ(w.event(0).data.u64, 11u);
  uepoll_close(ep);
  uepoll_close(v);
}

// Many threads toggle bits while a waiter harvests edges: every ADD of IN
// after a DEL is an edge, and the waiter counts the rounds exactly.
TEST_F(MaskMode, HandOffRoundsAcrossThreadsAreExact) {
  constexpr int kRounds = 3000;
  int v = uepoll_vpoll_create(0, 0);
  int ep = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, v, &ev), 0);
  int back = uepoll_vpoll_create(0, 0);
  int ep_back = uepoll_epoll_create1(0);
  ASSERT_EQ(uepoll_epoll_ctl(ep_back, EPOLL_CTL_ADD, back, &ev), 0);
  std::thread producer([&] {
    epoll_event out;
    for (int i = 0; i < kRounds; ++i) {
      uepoll_vpoll_ctl(v, UEPOLL_VPOLL_ADDEVENTS, EPOLLIN);
      // Wait for the consumer's acknowledgement before the next round.
      if (uepoll_epoll_wait(ep_back, &out, 1, kWaitMs) != 1) return;
    }
  });
  int rounds = 0;
  epoll_event out;
  while (rounds < kRounds) {
    int n = uepoll_epoll_wait(ep, &out, 1, kWaitMs);
    EXPECT_EQ(n, 1) << "lost a wakeup after " << rounds;
    if (n != 1) break;
    EXPECT_EQ(uepoll_vpoll_ctl(v, UEPOLL_VPOLL_DELEVENTS, EPOLLIN), 0);
    ++rounds;
    EXPECT_EQ(uepoll_vpoll_ctl(back, UEPOLL_VPOLL_ADDEVENTS, EPOLLIN), 0);
  }
  producer.join();
  EXPECT_EQ(rounds, kRounds);
  for (int fd : {ep, v, ep_back, back}) uepoll_close(fd);
}

}  // namespace
}  // namespace uepoll_test
