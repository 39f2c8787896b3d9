// A Boost.Asio io_context drives uepoll objects through one watchable
// uepoll instance.
//
// uepoll_epoll_make_watchable makes the instance's own number readable to
// the kernel exactly while the instance has events, so Asio can wait for
// it like for any descriptor: posix::stream_descriptor::async_wait(
// wait_read). Two rules:
//  - Asio's reactor is edge-triggered: each completion harvests until
//    uepoll_epoll_wait returns 0, so that the next event is a new edge;
//  - the number belongs to uepoll: release() it from the stream_descriptor
//    before that is destroyed (its destructor would close it), then
//    uepoll_close it.
//
// Here: a thread writes numbered messages into a uepoll socket pair; the
// handler checks every one arrives once, in order, and the program exits 0.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <cstdio>
#include <thread>

#include <uepoll/uepoll.h>

namespace asio = boost::asio;

constexpr uint64_t kMessages = 10000;

struct Bridge {
  asio::posix::stream_descriptor watch;  // the instance's number
  int ep, sock;
  uint64_t next = 0;  // the next message number expected
  bool bad = false;

  void Arm() {
    watch.async_wait(asio::posix::stream_descriptor::wait_read,
                     [this](const boost::system::error_code& ec) {
                       if (!ec && Harvest()) Arm();  // else run() returns
                     });
  }
  // False once everything arrived (or something went wrong).
  bool Harvest() {
    epoll_event ev[16];
    int n;
    while ((n = uepoll_epoll_wait(ep, ev, 16, 0)) > 0) {
      uint64_t msg[64];
      ssize_t r = uepoll_read(sock, msg, sizeof msg);
      // A stream may split a message: keep whole ones only (8-byte
      // messages never split in practice; a real program would buffer).
      for (ssize_t k = 0; k < r / 8; ++k) bad |= msg[k] != next++;
      bad |= r <= 0 || r % 8 != 0;
    }
    bad |= n < 0;
    return !bad && next < kMessages;
  }
};

int main() {
  int ep = uepoll_epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0 || uepoll_epoll_make_watchable(ep) < 0) return 1;
  int sv[2];
  if (uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return 1;
  uepoll_fcntl(sv[0], F_SETFL, O_NONBLOCK);  // the loop never blocks
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = sv[0];
  uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);

  asio::io_context io;
  Bridge b{asio::posix::stream_descriptor(io, ep), ep, sv[0]};
  b.Arm();
  bool write_failed = false;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kMessages && !write_failed; ++i)
      write_failed = uepoll_write(sv[1], &i, sizeof i) != sizeof i;
  });
  io.run();  // until the handler stops re-arming
  producer.join();
  b.watch.release();  // the number is uepoll's: do not let Asio close it

  uepoll_close(sv[0]);
  uepoll_close(sv[1]);
  uepoll_close(ep);
  bool ok = !b.bad && !write_failed && b.next == kMessages;
  std::printf("asio_bridge: %llu messages%s\n",
              static_cast<unsigned long long>(b.next), ok ? "" : ", FAILED");
  return ok ? 0 : 1;
}
