// libc close() of a uepoll number (docs/semantics.md D16). What uepoll
// promises:
// - the kernel frees the number (the placeholder, or an instance's kernel
//   epoll), but uepoll still maps it to its object: uepoll calls on it
//   reach the object, until uepoll_close of the number;
// - or until the kernel hands the number out again to a uepoll create or
//   dup: the object left behind (the orphan) is then released, as its
//   close would have been;
// - uepoll_close after the libc close closes the object and whatever the
//   kernel now has at that number: a double close, as with any library
//   that owns a descriptor.
// Every test ends with no uepoll object, item or descriptor left.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "conformance/helpers.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

uepoll_live_counts Counts() {
  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  return c;
}
bool KernelOpen(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

class BridgeLibcClose : public ::testing::Test {
 protected:
  int Keep(int fd) {
    EXPECT_GE(fd, 0) << strerror(errno);
    if (fd >= 0) fds_.insert(fd);
    return fd;
  }
  void Drop(int fd) { fds_.erase(fd); }
  void TearDown() override {
    for (int fd : fds_) uepoll_close(fd);
    fds_.clear();
    ExpectNoUepollLeaks();
  }
  std::set<int> fds_;
};

TEST_F(BridgeLibcClose, TheNumberStillNamesTheObjectUntilUepollClose) {
  int u = uepoll_eventfd(5, EFD_NONBLOCK);
  ASSERT_GE(u, 0);
  ASSERT_EQ(::close(u), 0);  // the placeholder
  EXPECT_FALSE(KernelOpen(u));
  EXPECT_TRUE(uepoll_is_uepoll_fd(u));
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(u, &v, 8), 8);
  EXPECT_EQ(v, 5u);
  EXPECT_EQ(Counts().files, 1);
  EXPECT_EQ(uepoll_close(u), 0);
  EXPECT_FALSE(uepoll_is_uepoll_fd(u));
  EXPECT_ERRNO(uepoll_close(u), EBADF);
}

// A pipe end closed with libc: the object lives on, so its peer sees no
// hang-up until uepoll_close.
TEST_F(BridgeLibcClose, PeerSeesNoHangupUntilUepollClose) {
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
  Keep(p[1]);
  ASSERT_EQ(::close(p[0]), 0);
  EXPECT_EQ(uepoll_write(p[1], "x", 1), 1) << "the reader still exists";
  pollfd pf{p[1], POLLOUT, 0};
  EXPECT_EQ(uepoll_poll(&pf, 1, 0), 1);
  EXPECT_EQ(pf.revents, POLLOUT);
  ASSERT_EQ(uepoll_close(p[0]), 0);
  EXPECT_EQ(uepoll_poll(&pf, 1, 0), 1);
  EXPECT_EQ(pf.revents, POLLOUT | POLLERR);
}

// The kernel hands the number to a uepoll create: the orphan is released
// (a pipe's read end: the writer sees EPIPE), and the number names the new
// object alone.
TEST_F(BridgeLibcClose, AUepollCreateAtTheNumberReleasesTheOrphan) {
  int p[2];
  ASSERT_EQ(uepoll_pipe2(p, O_NONBLOCK), 0);
  Keep(p[1]);
  ASSERT_EQ(uepoll_write(p[1], "x", 1), 1);
  long files = Counts().files;
  ASSERT_EQ(::close(p[0]), 0);
  int e = Keep(uepoll_eventfd(9, EFD_NONBLOCK));
  ASSERT_EQ(e, p[0]) << "the lowest free number";
  EXPECT_EQ(Counts().files, files) << "one released, one created";
  EXPECT_EQ(Counts().descriptors, 2);
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(e, &v, 8), 8);
  EXPECT_EQ(v, 9u);
  EXPECT_TRUE(
      RaisesSigpipe([&] { EXPECT_ERRNO(uepoll_write(p[1], "x", 1), EPIPE); }));
}

// The same through each way the kernel can hand the number back to
// uepoll: a dup of a uepoll object, a dup or F_DUPFD of a kernel one, an
// instance create, a pipe.
TEST_F(BridgeLibcClose, EveryUepollCallThatTakesTheNumberReleasesTheOrphan) {
  int src = Keep(uepoll_eventfd(1, EFD_NONBLOCK));
  int k = ::eventfd(2, EFD_NONBLOCK);
  ASSERT_GE(k, 0);
  struct Way {
    const char* what;
    std::function<int()> take;
    bool uepoll_object;
  };
  std::vector<Way> ways = {
      {"uepoll_dup of a uepoll fd", [&] { return uepoll_dup(src); }, true},
      {"uepoll_dup of a kernel fd", [&] { return uepoll_dup(k); }, false},
      {"F_DUPFD of a kernel fd", [&] { return uepoll_fcntl(k, F_DUPFD, 0); },
       false},
      {"epoll_create1", [] { return uepoll_epoll_create1(0); }, true},
      {"pipe2",
       [] {
         int p[2];
         if (uepoll_pipe2(p, 0) != 0) return -1;
         uepoll_close(p[1]);
         return p[0];
       },
       true},
  };
  for (const Way& w : ways) {
    SCOPED_TRACE(w.what);
    // An orphan with an item in an instance: its release removes the item.
    int ep = Keep(uepoll_epoll_create1(0));
    int orphan = uepoll_eventfd(1, EFD_NONBLOCK);
    ASSERT_GE(orphan, 0);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, orphan, &ev), 0);
    ASSERT_EQ(::close(orphan), 0);
    EXPECT_EQ(Counts().items, 1);
    int got = w.take();
    ASSERT_EQ(got, orphan) << "the lowest free number";
    EXPECT_EQ(Counts().items, 0) << "the orphan's item went with it";
    EXPECT_EQ(uepoll_is_uepoll_fd(got) != 0, w.uepoll_object);
    epoll_event out[1];
    EXPECT_EQ(uepoll_epoll_wait(ep, out, 1, 0), 0);
    EXPECT_EQ(uepoll_close(got), 0);
    EXPECT_FALSE(KernelOpen(got));
    ASSERT_EQ(uepoll_close(ep), 0);
    Drop(ep);
  }
  ::close(k);
}

// A dup2 of a number whose kernel file libc closed gives newfd a fresh
// placeholder (kernel/placeholder.h, CopyPlaceholderTo). When newfd is the
// lowest free number, that placeholder is made at newfd itself: newfd then
// already holds it (there was once a dup3 of newfd onto itself, EINVAL).
// The same happens when a close races the dup2 (StressClose.
// CloseRacesWaitCtlAndWrites saw dup2 fail with EINVAL, which the kernel's
// dup2 never gives).
TEST_F(BridgeLibcClose, Dup2OfALibcClosedNumberOntoTheLowestFreeNumber) {
  int low = uepoll_eventfd(0, EFD_NONBLOCK);
  int u = Keep(uepoll_eventfd(5, EFD_NONBLOCK));
  ASSERT_GE(low, 0);
  ASSERT_LT(low, u);
  ASSERT_EQ(uepoll_close(low), 0);  // the lowest free number
  ASSERT_EQ(::close(u), 0);         // u's placeholder
  ASSERT_EQ(uepoll_dup2(u, low), low) << strerror(errno);
  Keep(low);
  EXPECT_TRUE(KernelOpen(low)) << "a placeholder at the new number";
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(low, &v, 8), 8) << "the object, through the dup";
  EXPECT_EQ(v, 5u);
  EXPECT_EQ(Counts().files, 1);
  EXPECT_EQ(Counts().descriptors, 2);
}

// A dup (or F_DUPFD) of a libc-closed number gives a new number naming the
// object, as a dup of any number that names it: the number itself is not
// free for uepoll, though the kernel has nothing there. The new number's
// placeholder was once made at the lowest free kernel number, the dup's
// own argument, and the dup returned that same number (so closing the
// original, as after any dup, closed the object).
TEST_F(BridgeLibcClose, ADupOfALibcClosedNumberIsAnotherNumber) {
  int u = Keep(uepoll_eventfd(5, EFD_NONBLOCK));
  ASSERT_EQ(::close(u), 0);  // u is now the lowest free kernel number
  for (int by_fcntl = 0; by_fcntl < 2; ++by_fcntl) {
    SCOPED_TRACE(by_fcntl ? "fcntl F_DUPFD" : "dup");
    int d = by_fcntl ? uepoll_fcntl(u, F_DUPFD, 0) : uepoll_dup(u);
    ASSERT_GE(d, 0) << strerror(errno);
    Keep(d);
    EXPECT_NE(d, u);
    EXPECT_TRUE(KernelOpen(d)) << "the new number's placeholder";
    EXPECT_FALSE(KernelOpen(u)) << "the dup left the closed number as it was";
    uint64_t v = 0;
    EXPECT_EQ(uepoll_read(d, &v, 8), 8);
    EXPECT_EQ(v, 5u);
    ASSERT_EQ(uepoll_write(d, &v, 8), 8);  // for the next round
    EXPECT_EQ(uepoll_close(d), 0);
    Drop(d);
  }
  EXPECT_EQ(Counts().files, 1);
  EXPECT_EQ(Counts().descriptors, 1);
}

// uepoll_close of an instance whose kernel half libc closed: the close
// puts a placeholder at the number before it clears the slot (an
// instance's number must not hold a kernel epoll that a kernel wait could
// sleep on), and that placeholder is made at the number itself when the
// number is the lowest free one. It must stay there until the close has
// waited out the calls still using the instance: the number freed then
// (it was once, by closing the placeholder at once) would be given to the
// next open, which the close's final close of the number then closed.
//
//   C: epoll_ctl(ep, ADD, obj), blocked in obj's poll callback
//   X: uepoll_close(ep), waiting for C's call to end
//   main: ::eventfd() while X waits; then lets C go
//
// The poll callback waits on the test's own flag, as it may wait on an
// application lock (uepoll.h's callback rules), never on a uepoll call.
TEST_F(BridgeLibcClose, CloseOfAnInstanceKeepsItsNumberUntilItsCallsEnd) {
  int ep = uepoll_epoll_create1(0);
  ASSERT_GE(ep, 0);
  struct Gate {
    std::atomic<bool> entered{false}, open{false};
  } gate;
  static const uepoll_obj_ops ops = {[](void* ctx) -> uint32_t {
                                       auto* g = static_cast<Gate*>(ctx);
                                       g->entered.store(true);
                                       while (!g->open.load())
                                         std::this_thread::yield();
                                       return 0;
                                     },
                                     nullptr, nullptr, nullptr};
  uepoll_obj* obj = nullptr;
  int u = Keep(uepoll_obj_create(&ops, &gate, 0, &obj));
  ASSERT_NE(obj, nullptr);
  ASSERT_EQ(::close(ep), 0);  // the kernel half: ep is the lowest free number
  std::thread c([&] {
    epoll_event ev{};
    ev.events = EPOLLIN;
    EXPECT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
  });
  auto wait_for = [](const std::function<bool()>& done) {
    for (int i = 0; i < 10000000 && !done(); ++i) std::this_thread::yield();
    return done();
  };
  bool ctl_in_poll = wait_for([&] { return gate.entered.load(); });
  std::thread x([&] { EXPECT_EQ(uepoll_close(ep), 0); });
  // The slot is cleared after the placeholder is in; X then waits for C.
  bool cleared =
      ctl_in_poll && wait_for([&] { return !uepoll_is_uepoll_fd(ep); });
  int k = ::eventfd(0, EFD_CLOEXEC);
  gate.open.store(true);
  c.join();
  x.join();
  ASSERT_TRUE(ctl_in_poll);
  ASSERT_TRUE(cleared);
  ASSERT_GE(k, 0);
  EXPECT_NE(k, ep) << "the number was free while the close still held it";
  EXPECT_TRUE(KernelOpen(k)) << "the close closed the next open's descriptor";
  ::close(k);
  uepoll_obj_put(obj);
}

// A libc open takes the number: uepoll still maps it to the orphan, so a
// uepoll call on it reaches the orphan, and uepoll_close closes both (the
// application closed a number it did not own: a double close).
TEST_F(BridgeLibcClose, UepollCloseAfterLibcCloseIsADoubleClose) {
  int u = uepoll_eventfd(3, EFD_NONBLOCK);
  ASSERT_GE(u, 0);
  ASSERT_EQ(::close(u), 0);
  int k = ::eventfd(4, EFD_NONBLOCK);
  ASSERT_EQ(k, u);
  EXPECT_TRUE(uepoll_is_uepoll_fd(u));
  uint64_t v = 0;
  EXPECT_EQ(uepoll_read(u, &v, 8), 8);
  EXPECT_EQ(v, 3u) << "the orphan's count";
  EXPECT_EQ(::read(k, &v, 8), 8);
  EXPECT_EQ(v, 4u) << "the kernel's own";
  EXPECT_EQ(uepoll_close(u), 0);
  EXPECT_FALSE(uepoll_is_uepoll_fd(u));
  EXPECT_FALSE(KernelOpen(k)) << "the kernel eventfd was closed too";
}

// The instance's own number, holding its kernel epoll, closed with libc:
// the kernel half dies with it (its registrations with it); the uepoll
// half keeps working, waits still sleep, and uepoll_close finishes it.
TEST_F(BridgeLibcClose, AMixedInstanceClosedWithLibcKeepsItsUepollHalf) {
  int ep = Keep(uepoll_epoll_create1(0));
  int k = ::eventfd(0, EFD_NONBLOCK);
  int u = Keep(uepoll_eventfd(0, EFD_NONBLOCK));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 1;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev), 0);
  ev.data.u64 = 2;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, u, &ev), 0);
  ASSERT_EQ(::close(ep), 0);
  uint64_t one = 1;
  ASSERT_EQ(::write(k, &one, 8), 8);
  epoll_event out[2];
  errno = 1234;
  EXPECT_EQ(uepoll_epoll_wait(ep, out, 2, 0), 0)
      << "the kernel registrations died with the kernel epoll";
  EXPECT_EQ(errno, 1234) << "untouched on success";
  // A blocked wait sleeps (it does not spin on the dead number) and is
  // woken by the uepoll half.
  Waiter w(
      [ep](epoll_event* e) { return uepoll_epoll_wait(ep, e, 2, kWaitMs); });
  ASSERT_TRUE(w.Parked()) << "the wait did not sleep";
  ASSERT_TRUE(w.Parked()) << "the wait did not stay asleep";
  std::thread writer([u] {
    uint64_t v = 1;
    (void)uepoll_write(u, &v, 8);
  });
  writer.join();
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 2u);
  // poll() of it sleeps too.
  ASSERT_EQ(uepoll_read(u, &one, 8), 8);
  Waiter pw([ep](epoll_event*) {
    pollfd p{ep, POLLIN, 0};
    return uepoll_poll(&p, 1, kWaitMs);
  });
  ASSERT_TRUE(pw.Parked()) << "poll() did not sleep";
  ASSERT_EQ(uepoll_write(u, &one, 8), 8);
  ASSERT_TRUE(pw.WaitDone());
  EXPECT_EQ(pw.result(), 1);
  EXPECT_EQ(uepoll_close(ep), 0);
  Drop(ep);
  ::close(k);
}

// A dup of the instance keeps the kernel half alive: closing the other
// number with libc loses nothing.
TEST_F(BridgeLibcClose, ADupKeepsAMixedInstancesKernelHalf) {
  int ep = Keep(uepoll_epoll_create1(0));
  int d = Keep(uepoll_dup(ep));
  int k = ::eventfd(0, EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 1;
  ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, k, &ev), 0);
  ASSERT_EQ(::close(ep), 0);
  uint64_t one = 1;
  ASSERT_EQ(::write(k, &one, 8), 8);
  epoll_event out[2];
  ASSERT_EQ(uepoll_epoll_wait(d, out, 2, 0), 1);
  EXPECT_EQ(out[0].data.u64, 1u);
  ASSERT_EQ(uepoll_epoll_wait(ep, out, 2, 0), 1) << "through the orphan";
  ASSERT_EQ(::read(k, &one, 8), 8);
  Waiter w([d](epoll_event* e) { return uepoll_epoll_wait(d, e, 2, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(::write(k, &one, 8), 8);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(uepoll_close(ep), 0);
  Drop(ep);
  ::close(k);
}

// Everything closed with libc, then with uepoll: nothing is left.
TEST_F(BridgeLibcClose, LibcThenUepollCloseOfEveryKindLeaksNothing) {
  int p[2], sv[2];
  ASSERT_EQ(uepoll_pipe2(p, 0), 0);
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  int e = uepoll_eventfd(0, 0);
  int ep = uepoll_epoll_create1(0);
  int inner = uepoll_epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  for (int fd : {p[0], sv[0], e, inner}) {
    ASSERT_EQ(uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
  }
  ASSERT_EQ(uepoll_epoll_ctl(inner, EPOLL_CTL_ADD, sv[1], &ev), 0);
  std::vector<int> all = {p[0], p[1], sv[0], sv[1], e, ep, inner};
  for (int fd : all) ASSERT_EQ(::close(fd), 0);
  uepoll_live_counts c = Counts();
  EXPECT_EQ(c.descriptors, 7);
  EXPECT_EQ(c.items, 5);
  for (int fd : all) EXPECT_EQ(uepoll_close(fd), 0);
}

}  // namespace
}  // namespace uepoll_test
