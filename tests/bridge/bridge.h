// Shared scaffolding for the kernel-bridge suites: kernel objects made with
// libc (eventfd, pipe, AF_UNIX socket pair, timerfd, a TCP connection on
// loopback), put into instances of either backend. On the kernel backend
// the instance is a kernel epoll; on uepoll it is a uepoll instance, which
// then holds kernel descriptors. The sources are the kernel's on both
// sides, so one set of expectations serves both.
//
// Kernel descriptors are closed with libc close() at the end of each test
// (before the backend's own descriptors and the leak check).
#ifndef UEPOLL_TESTS_BRIDGE_BRIDGE_H_
#define UEPOLL_TESTS_BRIDGE_BRIDGE_H_

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "conformance/helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {

// The kinds of kernel source every scenario runs on.
enum class Kind { kEventfd, kPipe, kSocketPair, kTimerfd, kTcp };
inline constexpr Kind kAllKinds[] = {
    Kind::kEventfd, Kind::kPipe, Kind::kSocketPair, Kind::kTimerfd, Kind::kTcp};

inline const char* KindName(Kind k) {
  switch (k) {
    case Kind::kEventfd:
      return "eventfd";
    case Kind::kPipe:
      return "pipe";
    case Kind::kSocketPair:
      return "socketpair";
    case Kind::kTimerfd:
      return "timerfd";
    case Kind::kTcp:
      return "tcp";
  }
  return "?";
}

// One kernel source: `fd` is the descriptor watched (the read side), `peer`
// the descriptor that makes it readable (pipe write end, the other socket),
// or -1 (eventfd, timerfd: written or armed through fd itself).
struct Src {
  Kind kind;
  int fd = -1;
  int peer = -1;
};

// What libc poll() reports for a kernel descriptor right now.
inline short KernelPollMask(int fd, short events) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, 0) == 1 ? p.revents : 0;
}

// Waits (bounded) until the kernel reports `bits` on fd: loopback TCP and
// timer expiry complete asynchronously, and each test synchronizes on the
// condition itself.
inline bool KernelReaches(int fd, short bits) {
  return Eventually([&] { return (KernelPollMask(fd, bits) & bits) == bits; });
}

class BridgeTest : public ConformanceTest {
 protected:
  // Kernel descriptors, closed with libc at TearDown unless closed first.
  int KTrack(int fd) {
    EXPECT_GE(fd, 0) << strerror(errno);
    if (fd >= 0) kfds_.insert(fd);
    return fd;
  }
  int KClose(int fd) {
    kfds_.erase(fd);
    return ::close(fd);
  }
  void KForget(int fd) { kfds_.erase(fd); }

  int KEventfd(unsigned int init = 0, int flags = EFD_NONBLOCK) {
    return KTrack(::eventfd(init, flags));
  }
  int KEpoll() { return KTrack(::epoll_create1(0)); }
  void KPipe(int p[2], int flags = O_NONBLOCK) {
    ASSERT_EQ(::pipe2(p, flags), 0) << strerror(errno);
    KTrack(p[0]);
    KTrack(p[1]);
  }
  void KSocketPair(int sv[2], int flags = SOCK_NONBLOCK) {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | flags, 0, sv), 0)
        << strerror(errno);
    KTrack(sv[0]);
    KTrack(sv[1]);
  }
  int KTimerfd() {
    return KTrack(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK));
  }
  // A listening TCP socket on 127.0.0.1, an ephemeral port.
  int KListener() {
    int l = KTrack(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
        << strerror(errno);
    EXPECT_EQ(::listen(l, 64), 0) << strerror(errno);
    return l;
  }
  // A connected loopback TCP pair: c (client) and s (accepted), both
  // non-blocking, Nagle off so that small writes go out at once.
  void KTcp(int* c, int* s) {
    int l = KListener();
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
    *c = KTrack(::socket(AF_INET, SOCK_STREAM, 0));
    ASSERT_EQ(::connect(*c, reinterpret_cast<sockaddr*>(&a), len), 0)
        << strerror(errno);
    ASSERT_TRUE(KernelReaches(l, POLLIN));
    *s = KTrack(::accept4(l, nullptr, nullptr, SOCK_NONBLOCK));
    ASSERT_GE(*s, 0);
    int fl = ::fcntl(*c, F_GETFL);
    ASSERT_EQ(::fcntl(*c, F_SETFL, fl | O_NONBLOCK), 0);
    int one = 1;
    ::setsockopt(*c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(*s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    KClose(l);
  }

  Src MakeSrc(Kind k) {
    Src s{k};
    int two[2] = {-1, -1};
    switch (k) {
      case Kind::kEventfd:
        s.fd = KEventfd();
        break;
      case Kind::kPipe:
        KPipe(two);
        s.fd = two[0];
        s.peer = two[1];
        break;
      case Kind::kSocketPair:
        KSocketPair(two);
        s.fd = two[0];
        s.peer = two[1];
        break;
      case Kind::kTimerfd:
        s.fd = KTimerfd();
        break;
      case Kind::kTcp:
        KTcp(&s.peer, &s.fd);
        break;
    }
    return s;
  }

  // Makes src readable by one new event (a write, a byte, a timer expiry)
  // and waits until the kernel says so.
  void Fire(const Src& s) {
    uint64_t one = 1;
    switch (s.kind) {
      case Kind::kEventfd:
        ASSERT_EQ(::write(s.fd, &one, 8), 8);
        break;
      case Kind::kPipe:
      case Kind::kSocketPair:
      case Kind::kTcp:
        ASSERT_EQ(::write(s.peer, "x", 1), 1) << strerror(errno);
        break;
      case Kind::kTimerfd: {
        itimerspec t{};
        t.it_value.tv_nsec = 1;  // expires at once
        ASSERT_EQ(::timerfd_settime(s.fd, 0, &t, nullptr), 0);
        break;
      }
    }
    ASSERT_TRUE(KernelReaches(s.fd, POLLIN)) << KindName(s.kind);
  }

  // Reads everything readable from src: afterwards it is not readable.
  void Drain(const Src& s) {
    char buf[4096];
    while (::read(s.fd, buf, sizeof buf) > 0) {
    }
    EXPECT_EQ(KernelPollMask(s.fd, POLLIN) & POLLIN, 0) << KindName(s.kind);
  }

  // Adds one to a kernel eventfd's count.
  static void KSignal(int efd) {
    uint64_t one = 1;
    ASSERT_EQ(::write(efd, &one, sizeof one), 8) << strerror(errno);
  }

  // The sources that have a peer which can hang up.
  static bool HasPeer(Kind k) {
    return k == Kind::kPipe || k == Kind::kSocketPair || k == Kind::kTcp;
  }

  void TearDown() override {
    for (int fd : kfds_) ::close(fd);
    kfds_.clear();
    ConformanceTest::TearDown();
  }

 private:
  std::set<int> kfds_;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_BRIDGE_BRIDGE_H_
