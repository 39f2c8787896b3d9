// Descriptor passing under concurrency: SCM_RIGHTS traffic,
// reachable sockets in flight and unreachable cycles, all at once, so that
// the in-flight collector runs while other threads queue, receive and close
// descriptors. Oracles that cannot heal themselves: every passed pipe must
// deliver exactly the sequence number written into it, every socket that
// travelled must still hold exactly the bytes its peer wrote, blocking
// receives wait kLongWaitMs (reaching it is a lost wakeup), and the
// fixture's leak check after the test proves that every cycle was freed
// (uepoll) while nothing reachable was. Both backends; run under TSan and
// ASan too.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "stress/stress.h"
#include "support/fixture.h"
#include "support/scm.h"

namespace uepoll_test {
namespace {

class ScmStress : public BackendTest {
 protected:
  const char* Name() const {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // sendmsg of 8 bytes (v) and one descriptor.
  ssize_t SendFd(int sock, uint64_t v, int fd) {
    OneFdMsg m(&v, sizeof v, fd);
    return B().sendmsg(sock, m.msg(), MSG_NOSIGNAL);
  }

  // recvmsg of 8 bytes and at most one descriptor (-1 if none came).
  ssize_t RecvFd(int sock, uint64_t* v, int* fd, int flags) {
    OneFdMsg m(v, sizeof *v);
    ssize_t r = B().recvmsg(sock, m.msg(), flags | MSG_CMSG_CLOEXEC);
    *fd = r >= 0 ? m.ReceivedFd() : -1;
    return r;
  }

  // Waits until fd is readable: false after kLongWaitMs (a lost wakeup).
  bool WaitReadable(int fd) {
    pollfd p{fd, POLLIN, 0};
    bool slept_through = false;
    int n =
        TimedWait([&] { return B().poll(&p, 1, kLongWaitMs); }, &slept_through);
    return n == 1 && !slept_through;
  }
};

// Three threads at once:
//  - a sender passes, over a seqpacket pair, the read end of a fresh pipe
//    holding its sequence number, and closes its own ends;
//  - a receiver takes each (blocking recvmsg, bounded by a poll of
//    kLongWaitMs) and reads that exact number from the passed end;
//  - a cycle maker builds unreachable cycles (a datagram socket in its own
//    queue; two stream sockets in each other's), each also holding a
//    reachable socket in flight (passed over a second pair, whose reader
//    checks the bytes it carries), and closes them, so that collections
//    race the traffic and must free the cycles only.
TEST_P(ScmStress, traffic_reachable_sockets_and_cycles_at_once) {
  // The schedule is the only randomness; the seed line is printed as by
  // every stress test.
  (void)StressSeed(Name());
  Budget budget(3000, 4.0);

  int ch[2];  // sender -> receiver: pipes in flight
  ASSERT_EQ(B().socketpair(AF_UNIX, SOCK_SEQPACKET, 0, ch), 0);
  int hub[2];  // cycle maker -> checker: reachable sockets in flight
  ASSERT_EQ(B().socketpair(AF_UNIX, SOCK_DGRAM, 0, hub), 0);

  std::atomic<long> sent{0};
  std::atomic<long> received{0};
  std::atomic<long> hub_sent{0};
  std::atomic<long> hub_received{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> sender_done{false};
  // The last message on each channel: no descriptor, this value.
  constexpr uint64_t kEnd = ~uint64_t{0} - 1;
  std::string why;  // written by the failing thread before `failed`

  auto fail = [&](const std::string& w) {
    bool was = false;
    if (failed.compare_exchange_strong(was, true)) why = w;
  };

  std::thread sender([&] {
    for (uint64_t i = 0; budget.Take() && !failed.load(); ++i) {
      int p[2];
      if (B().pipe2(p, O_CLOEXEC) != 0) return fail("pipe2");
      if (B().write(p[1], &i, sizeof i) != sizeof i) return fail("write");
      if (SendFd(ch[0], i, p[0]) != sizeof i) return fail("sendmsg");
      sent.fetch_add(1);
      B().close(p[0]);
      B().close(p[1]);
    }
    sender_done.store(true);
    if (B().send(ch[0], &kEnd, sizeof kEnd, 0) != sizeof kEnd) fail("end");
  });

  std::thread receiver([&] {
    for (uint64_t want = 0; !failed.load(); ++want) {
      if (!WaitReadable(ch[1])) return fail("receiver: lost wakeup");
      uint64_t v = ~uint64_t{0};
      int fd;
      if (RecvFd(ch[1], &v, &fd, 0) != sizeof v) return fail("recvmsg");
      if (v == kEnd && fd < 0) break;
      if (v != want || fd < 0) return fail("receiver: wrong message");
      uint64_t got = ~uint64_t{0};
      if (B().read(fd, &got, sizeof got) != sizeof got || got != want) {
        return fail("receiver: the passed pipe lost its bytes");
      }
      B().close(fd);
      received.fetch_add(1);
    }
  });

  std::thread maker([&] {
    for (uint64_t i = 0; !sender_done.load() && !failed.load(); ++i) {
      // A reachable socket in flight: x carries i (written by its peer y)
      // and travels over the hub, whose reader is open.
      int xy[2];
      if (B().socketpair(AF_UNIX, SOCK_STREAM, 0, xy) != 0) {
        return fail("socketpair");
      }
      if (B().write(xy[1], &i, sizeof i) != sizeof i) return fail("write");
      B().close(xy[1]);
      if (SendFd(hub[0], i, xy[0]) != sizeof i) return fail("hub sendmsg");
      hub_sent.fetch_add(1);
      B().close(xy[0]);
      // Unreachable: a datagram socket in its own queue...
      int d[2];
      if (B().socketpair(AF_UNIX, SOCK_DGRAM, 0, d) != 0) {
        return fail("socketpair");
      }
      if (SendFd(d[1], i, d[0]) != sizeof i) return fail("self sendmsg");
      B().close(d[0]);
      B().close(d[1]);
      // ... and two stream sockets each in the other's queue.
      int a[2], b[2];
      if (B().socketpair(AF_UNIX, SOCK_STREAM, 0, a) != 0 ||
          B().socketpair(AF_UNIX, SOCK_STREAM, 0, b) != 0) {
        return fail("socketpair");
      }
      if (SendFd(a[1], i, b[0]) != sizeof i ||
          SendFd(b[1], i, a[0]) != sizeof i) {
        return fail("cross sendmsg");
      }
      for (int fd : {a[0], a[1], b[0], b[1]}) B().close(fd);
    }
    if (B().send(hub[0], &kEnd, sizeof kEnd, 0) != sizeof kEnd) fail("end");
  });

  std::thread checker([&] {
    for (uint64_t want = 0; !failed.load(); ++want) {
      if (!WaitReadable(hub[1])) return fail("checker: lost wakeup");
      uint64_t v = ~uint64_t{0};
      int fd;
      if (RecvFd(hub[1], &v, &fd, 0) != sizeof v) return fail("hub recvmsg");
      if (v == kEnd && fd < 0) break;
      if (v != want || fd < 0) return fail("checker: wrong message");
      // The socket came through every collection with its bytes.
      uint64_t got = ~uint64_t{0};
      if (B().read(fd, &got, sizeof got) != sizeof got || got != want) {
        return fail("checker: a reachable socket lost its bytes");
      }
      char c;
      if (B().read(fd, &c, 1) != 0) return fail("checker: no EOF");
      B().close(fd);
      hub_received.fetch_add(1);
    }
  });

  sender.join();
  receiver.join();
  maker.join();
  checker.join();
  EXPECT_FALSE(failed.load()) << why;
  EXPECT_EQ(received.load(), sent.load());
  EXPECT_EQ(hub_received.load(), hub_sent.load());
  EXPECT_GT(sent.load(), 0);
  for (int fd : {ch[0], ch[1], hub[0], hub[1]}) EXPECT_EQ(B().close(fd), 0);
}

UEPOLL_INSTANTIATE_BACKENDS(ScmStress);

}  // namespace
}  // namespace uepoll_test
