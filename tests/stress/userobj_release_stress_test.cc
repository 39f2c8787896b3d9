// User objects' callbacks under concurrency (uepoll only: the kernel has no
// user objects).
//
// CloseRacesCallbacks: threads poll, harvest and read an object while
// another closes it; no callback may run after its release, and release
// runs exactly once.
//
// CollectionsRunReleasesThatCallUepoll: several threads each build cycles of
// sockets in flight holding user objects whose release callbacks close
// sockets, dup them and pass descriptors (so releases run inside
// collections, ask for collections, and race other threads' collections),
// while another thread keeps reachable sockets in flight. Every object
// must be released exactly once, nothing may deadlock (a watchdog), and
// the leak check after the test proves that every cycle was freed.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "stress/stress.h"
#include "stress/watchdog.h"
#include "support/fixture.h"

// The close racing calls on the same number is the behaviour under test:
// uepoll's own libc calls on that number (a call that found no uepoll
// object goes to libc; the close closes the placeholder) race in TSan's
// model of descriptors, as in stress_close_test.cc, and are suppressed by
// their uepoll::impl::sys frame, which makes no memory access of its own.
extern "C" const char* __tsan_default_suppressions() {
  return "race:uepoll::impl::sys::\n";
}

namespace uepoll_test {
namespace {

ssize_t SendFds(int sock, const std::vector<int>& fds) {
  std::vector<char> ctl(CMSG_SPACE(fds.size() * sizeof(int)), 0);
  char byte = 'x';
  iovec io{&byte, 1};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;
  m.msg_control = ctl.data();
  m.msg_controllen = ctl.size();
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  return uepoll_sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

struct Counted {
  std::atomic<bool> released{false};
  std::atomic<int> releases{0};
  std::atomic<int> after_release{0};  // callbacks that ran after it
  // For the collector test: what the release does.
  int kind = 0;
  int fds[2] = {-1, -1};
};

uint32_t CountedPoll(void* ctx) {
  auto* c = static_cast<Counted*>(ctx);
  if (c->released.load()) c->after_release.fetch_add(1);
  return EPOLLIN;
}
ssize_t CountedRead(void* ctx, void* buf, size_t) {
  auto* c = static_cast<Counted*>(ctx);
  if (c->released.load()) c->after_release.fetch_add(1);
  std::memcpy(buf, "c", 1);
  return 1;
}
void CountedRelease(void* ctx) {
  auto* c = static_cast<Counted*>(ctx);
  c->released.store(true);
  c->releases.fetch_add(1);
  switch (c->kind) {
    case 1:  // close a socket (a collection is asked for)
      uepoll_close(c->fds[0]);
      break;
    case 2: {  // dup and close it, pass a descriptor, close the rest
      int d = uepoll_dup(c->fds[0]);
      if (d >= 0) {
        SendFds(c->fds[1], {d});  // into fds[0]'s queue: a cycle to come
        uepoll_close(d);
      }
      uepoll_close(c->fds[0]);
      break;
    }
    default:
      break;
  }
  if (c->kind != 0) uepoll_close(c->fds[1]);
}
const uepoll_obj_ops kOps = {&CountedPoll, &CountedRead, nullptr,
                             &CountedRelease};

class UserObjStress : public ::testing::Test {
 protected:
  const char* Name() const {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override { ExpectNoUepollLeaks(); }
};

TEST_F(UserObjStress, CloseRacesCallbacks) {
  std::mt19937_64 rng(StressSeed(Name()));
  Budget budget(400, 3.0);
  Watchdog dog("close racing user-object callbacks", std::chrono::seconds(60));
  std::vector<std::unique_ptr<Counted>> all;
  while (budget.Take()) {
    all.push_back(std::make_unique<Counted>());
    Counted* c = all.back().get();
    int fd = uepoll_obj_create(&kOps, c, O_NONBLOCK, nullptr);
    ASSERT_GE(fd, 0);
    int ep = uepoll_epoll_create1(0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
    std::atomic<bool> stop{false};
    std::vector<std::thread> th;
    th.emplace_back([&] {
      epoll_event out[2];
      while (!stop.load()) uepoll_epoll_wait(ep, out, 2, 0);
    });
    th.emplace_back([&] {
      while (!stop.load()) {
        pollfd p{fd, POLLIN, 0};
        uepoll_poll(&p, 1, 0);
      }
    });
    th.emplace_back([&] {
      char b;
      while (!stop.load()) uepoll_read(fd, &b, 1);
    });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    // The close races every call above; the number may be handed out
    // again at once (the calls then reach another file, or none).
    ASSERT_EQ(uepoll_close(fd), 0);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 100));
    stop = true;
    for (auto& t : th) t.join();
    uepoll_close(ep);
    EXPECT_EQ(c->releases.load(), 1);
    EXPECT_EQ(c->after_release.load(), 0) << "a callback ran after release";
  }
}

TEST_F(UserObjStress, CollectionsRunReleasesThatCallUepoll) {
  const uint64_t seed = StressSeed(Name());
  Budget budget(3000, 3.0);
  Watchdog dog("collections running releases that call uepoll",
               std::chrono::seconds(60));
  std::atomic<long> created{0};
  std::vector<std::unique_ptr<Counted>> all[3];
  std::vector<std::thread> th;
  // Reachable sockets in flight, always: every close asks for collections.
  std::atomic<bool> stop{false};
  th.emplace_back([&] {
    int keep[2];
    ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, keep), 0);
    while (!stop.load()) {
      int p[2];
      if (uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, p) != 0) continue;
      SendFds(keep[0], {p[1]});
      uepoll_close(p[1]);
      uepoll_close(p[0]);
      char b;
      iovec io{&b, 1};
      alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
      msghdr m{};
      m.msg_iov = &io;
      m.msg_iovlen = 1;
      m.msg_control = ctl;
      m.msg_controllen = sizeof ctl;
      if (uepoll_recvmsg(keep[1], &m, MSG_DONTWAIT) == 1 &&
          m.msg_controllen >= sizeof(cmsghdr)) {
        int got;
        std::memcpy(&got, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof got);
        uepoll_close(got);
      }
    }
    uepoll_close(keep[0]);
    uepoll_close(keep[1]);
  });
  std::vector<std::thread> builders;
  for (int w = 0; w < 3; ++w) {
    builders.emplace_back([&, w] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(w));
      while (budget.Take()) {
        all[w].push_back(std::make_unique<Counted>());
        Counted* c = all[w].back().get();
        c->kind = static_cast<int>(rng() % 3);
        if (c->kind != 0) {
          int s[2];
          if (uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0) {
            c->kind = 0;
          } else {
            c->fds[0] = s[0];
            c->fds[1] = s[1];
          }
        }
        int fd = uepoll_obj_create(&kOps, c, O_NONBLOCK, nullptr);
        if (fd < 0) {
          if (c->kind != 0) {
            uepoll_close(c->fds[0]);
            uepoll_close(c->fds[1]);
          }
          all[w].pop_back();
          continue;
        }
        created.fetch_add(1);
        // A cycle: a[1] in its own queue with the object.
        int a[2];
        if (uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, a) != 0) {
          uepoll_close(fd);
          continue;
        }
        SendFds(a[0], {a[1], fd});
        uepoll_close(fd);
        if (rng() & 1) {
          uepoll_close(a[0]);
          uepoll_close(a[1]);
        } else {
          uepoll_close(a[1]);
          uepoll_close(a[0]);
        }
      }
    });
  }
  for (auto& t : builders) t.join();
  stop = true;
  for (auto& t : th) t.join();
  // One last release of a socket: a last collection for anything a
  // concurrent one left (a cycle completed while another thread marked).
  int p[2];
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
  uepoll_close(p[0]);
  uepoll_close(p[1]);
  long released = 0;
  for (auto& v : all) {
    for (auto& c : v) {
      EXPECT_EQ(c->releases.load(), 1);
      released += c->releases.load();
    }
  }
  EXPECT_EQ(released, created.load());
  std::printf("[stress] %ld objects released through collections\n", released);
}

}  // namespace
}  // namespace uepoll_test
