// The release callback of a user object, wherever uepoll runs it: at the
// last close, in a receive that drops the descriptors it cannot deliver,
// and in the in-flight collector (the object travelled over SCM_RIGHTS
// inside a cycle of sockets nobody can reach). The rules say release runs
// with no uepoll lock held and may call uepoll: close, dup, send
// descriptors, create objects. Each test makes a release do one of those
// where it is hardest, and checks that the call completes (a watchdog
// turns a deadlock into a failure), that what it released is gone (the
// leak check after each test) and that a cancellation aimed at the
// releasing thread leaves nothing half done.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "stress/watchdog.h"
#include "support/fixture.h"

namespace uepoll_test {
namespace {

// sendmsg of one byte and `fds` as one SCM_RIGHTS message.
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
  return uepoll_sendmsg(sock, &m, MSG_NOSIGNAL);
}

void Pair(int sv[2]) {
  ASSERT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

// What a release callback does, set by each test.
struct Releaser {
  std::atomic<int> releases{0};
  std::atomic<bool> finished{false};  // the callback ran to its end
  void (*action)(Releaser*) = nullptr;
  int fds[4] = {-1, -1, -1, -1};  // the descriptors the action uses
  int results[4] = {0, 0, 0, 0};
};

uint32_t IdlePoll(void*) { return 0; }
void RunRelease(void* ctx) {
  auto* r = static_cast<Releaser*>(ctx);
  r->releases.fetch_add(1);
  if (r->action) r->action(r);
  r->finished.store(true);
}
const uepoll_obj_ops kOps = {&IdlePoll, nullptr, nullptr, &RunRelease};

int Create(Releaser* r) {
  int fd = uepoll_obj_create(&kOps, r, 0, nullptr);
  EXPECT_GE(fd, 0) << strerror(errno);
  return fd;
}

// A reachable socket in flight for the whole test: with one in flight,
// every close of a socket asks for a collection.
class InFlight {
 public:
  InFlight() {
    Pair(keep_);
    Pair(held_);
    EXPECT_EQ(SendFds(keep_[0], {held_[1]}), 1);
    EXPECT_EQ(uepoll_close(held_[1]), 0);
  }
  ~InFlight() {
    uepoll_close(keep_[0]);
    uepoll_close(keep_[1]);
    uepoll_close(held_[0]);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  int keep_[2];
  int held_[2];
};

// Puts fd in a cycle nobody can reach and closes every number of it: a
// socket sent into its own queue together with fd. The collection runs
// at the close of the socket's last number, the last call here.
void CollectInACycle(int fd) {
  int a[2];
  Pair(a);
  ASSERT_EQ(SendFds(a[0], {a[1], fd}), 1);
  ASSERT_EQ(uepoll_close(fd), 0);
  ASSERT_EQ(uepoll_close(a[0]), 0);
  ASSERT_EQ(uepoll_close(a[1]), 0);  // a[1]: in flight only, in a cycle
}

class UserRelease : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};

// The collector runs the release of an object it frees; the release closes
// a socket, and that close asks for a collection on the same thread.
TEST_F(UserRelease, RunByTheCollectorMayCloseASocket) {
  Watchdog dog("a release run by the collector closing a socket",
               std::chrono::seconds(10));
  InFlight flight;
  Releaser r;
  int victim[2];
  Pair(victim);
  r.fds[0] = victim[0];
  r.action = [](Releaser* self) {
    self->results[0] = uepoll_close(self->fds[0]);
  };
  CollectInACycle(Create(&r));
  EXPECT_EQ(r.releases.load(), 1);
  EXPECT_TRUE(r.finished.load());
  EXPECT_EQ(r.results[0], 0);
  // The other end sees its peer gone.
  char c;
  EXPECT_EQ(uepoll_read(victim[1], &c, 1), 0);
  uepoll_close(victim[1]);
}

// The release's close makes another cycle unreachable: the collection
// asked for from inside the collection is run too, before the outer close
// returns (uepoll collects synchronously, docs/semantics.md D27).
TEST_F(UserRelease, RunByTheCollectorCompletesAnotherCycle) {
  Watchdog dog("a release run by the collector completing another cycle",
               std::chrono::seconds(10));
  InFlight flight;
  // The second cycle: y[1] in its own queue with an object, y[1]'s number
  // still open (so it is reachable) until the first object's release
  // closes it.
  Releaser inner;
  int y[2];
  Pair(y);
  int inner_fd = Create(&inner);
  ASSERT_EQ(SendFds(y[0], {y[1], inner_fd}), 1);
  ASSERT_EQ(uepoll_close(inner_fd), 0);
  ASSERT_EQ(uepoll_close(y[0]), 0);
  EXPECT_EQ(inner.releases.load(), 0);
  Releaser outer;
  outer.fds[0] = y[1];
  outer.action = [](Releaser* self) {
    self->results[0] = uepoll_close(self->fds[0]);
  };
  CollectInACycle(Create(&outer));
  EXPECT_EQ(outer.releases.load(), 1);
  EXPECT_EQ(outer.results[0], 0);
  EXPECT_EQ(inner.releases.load(), 1) << "the second cycle was not collected";
}

// The other calls a release may make from inside the collector: a dup and
// dup2 of a socket, a sendmsg passing descriptors (which itself asks for a
// collection), a new user object created and closed.
TEST_F(UserRelease, RunByTheCollectorMayDupSendAndCreate) {
  Watchdog dog("a release run by the collector that dups, sends, creates",
               std::chrono::seconds(10));
  InFlight flight;
  Releaser r;
  Releaser created;
  int s[2];
  Pair(s);
  r.fds[0] = s[0];
  r.fds[1] = s[1];
  static Releaser* g_created;
  g_created = &created;
  r.action = [](Releaser* self) {
    int d = uepoll_dup(self->fds[0]);
    self->results[0] = d >= 0 ? 0 : -1;
    // dup2 onto the dup: replaces (and releases) nothing but a number.
    self->results[1] = uepoll_dup2(self->fds[1], d) == d ? 0 : -1;
    // The dup (now of s[1]) travels to s[1]'s own queue: a new cycle once
    // s[1]'s last number goes.
    self->results[2] = SendFds(self->fds[0], {d}) == 1 ? 0 : -1;
    uepoll_close(d);
    int o = uepoll_obj_create(&kOps, g_created, 0, nullptr);
    self->results[3] = o >= 0 ? uepoll_close(o) : -1;
  };
  CollectInACycle(Create(&r));
  EXPECT_TRUE(r.finished.load());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.results[i], 0) << i;
  EXPECT_EQ(created.releases.load(), 1);
  // s[1]'s last number: s[1] is now in flight in its own queue only, and
  // collected.
  ASSERT_EQ(uepoll_close(s[1]), 0);
  char c;
  EXPECT_EQ(uepoll_read(s[0], &c, 1), 0) << "s[1] was not freed";
  uepoll_close(s[0]);
}

// A receive with no room for descriptors drops them; the object's release
// runs inside that recvmsg and closes the very socket being received on.
// The receive's own use of that descriptor must not make the close wait
// for this thread.
TEST_F(UserRelease, RunByARecvMayCloseTheSocketItArrivedOn) {
  Watchdog dog("a release closing the socket its recvmsg is using",
               std::chrono::seconds(10));
  int s[2];
  Pair(s);
  // Another thread uses the number too, as a shared one would be.
  std::thread([&] {
    char c;
    uepoll_recv(s[1], &c, 1, MSG_DONTWAIT);
  }).join();
  Releaser r;
  r.fds[0] = s[1];
  r.action = [](Releaser* self) {
    self->results[0] = uepoll_close(self->fds[0]);
  };
  int fd = Create(&r);
  ASSERT_EQ(SendFds(s[0], {fd}), 1);
  ASSERT_EQ(uepoll_close(fd), 0);
  char c;
  iovec io{&c, 1};
  msghdr m{};
  m.msg_iov = &io;
  m.msg_iovlen = 1;  // no control buffer: the descriptor is dropped
  EXPECT_EQ(uepoll_recvmsg(s[1], &m, 0), 1);
  EXPECT_EQ(m.msg_flags & MSG_CTRUNC, MSG_CTRUNC);
  EXPECT_EQ(r.releases.load(), 1);
  EXPECT_EQ(r.results[0], 0);
  EXPECT_EQ(uepoll_read(s[0], &c, 1), 0) << "s[1] was not closed";
  uepoll_close(s[0]);
}

// A cancellation that reaches the releasing thread while the release
// runs (here the release cancels its own thread and then reaches a
// cancellation point) waits until the release has run: the callback
// finishes, the object is freed, and the thread is cancelled at its next
// cancellation point instead. A release is part of a close or a
// collection, which cannot be unwound half way.
void* ReleaseInThread(void* arg) {
  auto* step = reinterpret_cast<void (*)()>(arg);
  step();
#if defined(__SANITIZE_ADDRESS__)
  // As tests/threads/blocked.h: the frames a cancellation unwinds leave
  // their redzones poisoned, which trips ASan's own runtime.
  pthread_attr_t attr;
  void* lo = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &lo, &size);
    pthread_attr_destroy(&attr);
    __asan_unpoison_memory_region(lo, size);
  }
#endif
  pthread_testcancel();  // the cancellation held off during the release
  return nullptr;
}

void CancelInRelease(Releaser* self) {
  pthread_cancel(pthread_self());
  pthread_testcancel();
  (void)self;
}

TEST_F(UserRelease, ACancelDuringTheReleaseWaitsForItsEnd) {
  static Releaser r;
  r.releases = 0;
  r.finished = false;
  r.action = &CancelInRelease;
  static int fd;
  fd = Create(&r);
  pthread_t t;
  void (*step)() = [] { uepoll_close(fd); };
  ASSERT_EQ(pthread_create(&t, nullptr, &ReleaseInThread,
                           reinterpret_cast<void*>(step)),
            0);
  void* res = nullptr;
  ASSERT_EQ(pthread_join(t, &res), 0);
  EXPECT_EQ(res, PTHREAD_CANCELED);
  EXPECT_EQ(r.releases.load(), 1);
  EXPECT_TRUE(r.finished.load()) << "the release was cut short";
}

// The same inside the collector: the first release cancels the thread;
// the collection still frees everything in the cycle.
TEST_F(UserRelease, ACancelDuringACollectionWaitsForItsEnd) {
  Watchdog dog("a cancelled collection", std::chrono::seconds(10));
  static Releaser first, second;
  first.releases = second.releases = 0;
  first.finished = second.finished = false;
  first.action = &CancelInRelease;
  second.action = nullptr;
  static int fds[2];
  fds[0] = Create(&first);
  fds[1] = Create(&second);
  pthread_t t;
  void (*step)() = [] {
    int a[2];
    uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, a);
    SendFds(a[0], {a[1], fds[0], fds[1]});
    uepoll_close(fds[0]);
    uepoll_close(fds[1]);
    uepoll_close(a[0]);
    uepoll_close(a[1]);  // collected here
  };
  ASSERT_EQ(pthread_create(&t, nullptr, &ReleaseInThread,
                           reinterpret_cast<void*>(step)),
            0);
  void* res = nullptr;
  ASSERT_EQ(pthread_join(t, &res), 0);
  EXPECT_EQ(res, PTHREAD_CANCELED);
  EXPECT_EQ(first.releases.load(), 1);
  EXPECT_TRUE(first.finished.load());
  EXPECT_EQ(second.releases.load(), 1);
}

// A socket's close purges its queue: one message holds an object whose
// release cancels the thread, then a kernel descriptor, whose duplicate
// the purge closes with libc's close(), a cancellation point. The purge
// must finish (the duplicate closed, nothing leaked) before the
// cancellation is acted on.
TEST_F(UserRelease, ACancelDuringAPurgeWaitsForItsEnd) {
  static Releaser r;
  r.releases = 0;
  r.finished = false;
  r.action = [](Releaser*) { pthread_cancel(pthread_self()); };
  static int k[2];
  ASSERT_EQ(::pipe2(k, O_CLOEXEC | O_NONBLOCK), 0);
  pthread_t t;
  void (*step)() = [] {
    int s[2];
    uepoll_socketpair(AF_UNIX, SOCK_STREAM, 0, s);
    int fd = uepoll_obj_create(&kOps, &r, 0, nullptr);
    SendFds(s[0], {fd, k[0]});
    uepoll_close(fd);
    ::close(k[0]);
    uepoll_close(s[0]);
    uepoll_close(s[1]);  // purges the message: the release, then k[0]'s dup
  };
  ASSERT_EQ(pthread_create(&t, nullptr, &ReleaseInThread,
                           reinterpret_cast<void*>(step)),
            0);
  void* res = nullptr;
  ASSERT_EQ(pthread_join(t, &res), 0);
  EXPECT_EQ(res, PTHREAD_CANCELED);
  EXPECT_EQ(r.releases.load(), 1);
  // Every read end of the kernel pipe is closed: the duplicate too.
  pollfd p{k[1], POLLOUT, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 1);
  EXPECT_TRUE(p.revents & POLLERR) << "the duplicate in flight was not closed";
  ::close(k[1]);
}

// An object whose release blocks until another thread has run a
// collection of its own: that thread waits for the release to begin,
// collects `other` in a cycle, and only then lets the release return.
class CollectionDuringARelease {
 public:
  CollectionDuringARelease() {
    done_ = false;
    blocking.action = [](Releaser*) {
      while (!done_.load()) std::this_thread::yield();
    };
    thread_ = std::thread([this] {
      while (blocking.releases.load() == 0) std::this_thread::yield();
      CollectInACycle(Create(&other));
      done_ = true;
    });
  }
  ~CollectionDuringARelease() { Join(); }
  CollectionDuringARelease(const CollectionDuringARelease&) = delete;
  CollectionDuringARelease& operator=(const CollectionDuringARelease&) = delete;
  void Join() {
    if (thread_.joinable()) thread_.join();
  }

  Releaser blocking;  // create it, and let a collection release it
  Releaser other;     // the other thread's object

 private:
  static inline std::atomic<bool> done_{false};
  std::thread thread_;
};

// Another thread's collection runs while a release of this one blocks
// (here: waits for that other thread to have collected). Releases run
// with no collector lock held, so neither waits for the other.
TEST_F(UserRelease, ABlockingReleaseDoesNotStopOtherCollections) {
  Watchdog dog("collections on two threads, one release blocking",
               std::chrono::seconds(10));
  InFlight flight;
  CollectionDuringARelease c;
  CollectInACycle(Create(&c.blocking));
  c.Join();
  EXPECT_EQ(c.other.releases.load(), 1);
  EXPECT_TRUE(c.blocking.finished.load());
}

// A collection's garbage list survives another collection that runs
// while the first one's purge waits in a release. Two sockets in each
// other's queues, a1 in flight first: the purge starts with b1, whose
// queue holds a1 and the blocking object. While the release waits, b1 is
// still in flight (in a1's queue, not purged yet) with the first
// collection's reference on it: the second collection takes it as a root
// of its marking. Were the first collection's list linked through the
// marking's own field, that marking would cut it after b1: a1 never
// purged, both sockets leaked (the leak check after the test).
TEST_F(UserRelease, ACollectionDuringAPurgeLeavesItsGarbageListWhole) {
  Watchdog dog("a collection inside another's purge", std::chrono::seconds(10));
  InFlight flight;
  CollectionDuringARelease c;
  int a[2], b[2];
  Pair(a);
  Pair(b);
  int obj = Create(&c.blocking);
  ASSERT_EQ(SendFds(b[0], {a[1], obj}), 1);  // a1 in flight first, in b1
  ASSERT_EQ(SendFds(a[0], {b[1]}), 1);       // then b1, in a1's queue
  ASSERT_EQ(uepoll_close(obj), 0);
  ASSERT_EQ(uepoll_close(a[0]), 0);
  ASSERT_EQ(uepoll_close(b[0]), 0);
  ASSERT_EQ(uepoll_close(a[1]), 0);
  ASSERT_EQ(uepoll_close(b[1]), 0);  // the cycle is garbage: collected here
  c.Join();
  EXPECT_EQ(c.blocking.releases.load(), 1);
  EXPECT_TRUE(c.blocking.finished.load());
  EXPECT_EQ(c.other.releases.load(), 1);
}

}  // namespace
}  // namespace uepoll_test
