// Helpers for the I/O-surface suites (vectored I/O, socket calls, datagram
// and seqpacket pairs, descriptor passing, select, ioctl): iovec and
// msghdr builders over the backend's calls, so one body runs on the kernel
// and on uepoll.
#ifndef UEPOLL_TESTS_CONFORMANCE_IO_HELPERS_H_
#define UEPOLL_TESTS_CONFORMANCE_IO_HELPERS_H_

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "conformance/helpers.h"

namespace uepoll_test {

// What one recvmsg gave back.
struct Received {
  ssize_t r = -1;
  int err = 0;  // errno when r < 0
  std::string data;
  int msg_flags = 0;
  size_t controllen = 0;
  std::vector<int> fds;  // the SCM_RIGHTS descriptors received
};

class IoTest : public ConformanceTest {
 protected:
  // A socket pair of `type` (SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET),
  // tracked for closing.
  void Pair(int sv[2], int type, int flags = 0) {
    ASSERT_EQ(B().socketpair(AF_UNIX, type | flags, 0, sv), 0)
        << strerror(errno);
    Track(sv[0]);
    Track(sv[1]);
  }
  // A pipe of the kernel's on both backends (uepoll passes it to libc).
  void KernelPipe(int p[2], int flags = 0) {
    ASSERT_EQ(::pipe2(p, flags), 0);
    Track(p[0]);
    Track(p[1]);
  }

  ssize_t Send(int fd, const std::string& s, int flags = 0) {
    return B().send(fd, s.data(), s.size(), flags);
  }
  std::string Recv(int fd, size_t n, int flags = 0) {
    std::string s(n, '\0');
    ssize_t r = B().recv(fd, s.data(), n, flags);
    s.resize(r < 0 ? 0 : static_cast<size_t>(std::min<ssize_t>(r, n)));
    return s;
  }
  ssize_t WriteStr(int fd, const std::string& s) {
    return B().write(fd, s.data(), s.size());
  }
  std::string ReadStr(int fd, size_t n) {
    std::string s(n, '\0');
    ssize_t r = B().read(fd, s.data(), n);
    s.resize(r < 0 ? 0 : static_cast<size_t>(r));
    return s;
  }

  // sendmsg of `data` with `fds` as one SCM_RIGHTS message.
  ssize_t SendFds(int fd, const std::string& data, const std::vector<int>& fds,
                  int flags = 0) {
    std::vector<char> ctl(CMSG_SPACE(fds.size() * sizeof(int)));
    msghdr m{};
    iovec io{const_cast<char*>(data.data()), data.size()};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    if (!fds.empty()) {
      m.msg_control = ctl.data();
      m.msg_controllen = ctl.size();
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    return B().sendmsg(fd, &m, flags);
  }
  // sendmsg with a raw control buffer.
  ssize_t SendControl(int fd, const std::string& data,
                      const std::vector<char>& ctl, int flags = 0) {
    msghdr m{};
    iovec io{const_cast<char*>(data.data()), data.size()};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl.empty() ? nullptr : const_cast<char*>(ctl.data());
    m.msg_controllen = ctl.size();
    return B().sendmsg(fd, &m, flags);
  }
  // One control message for SendControl: a header claiming cmsg_len, then
  // len bytes of payload, in a buffer of CMSG_SPACE(len) bytes.
  static std::vector<char> Cmsg(int level, int type, const void* data,
                                size_t len, size_t cmsg_len) {
    std::vector<char> v(CMSG_SPACE(len));
    cmsghdr h{};
    h.cmsg_len = cmsg_len;
    h.cmsg_level = level;
    h.cmsg_type = type;
    std::memcpy(v.data(), &h, sizeof h);
    if (len) std::memcpy(v.data() + sizeof h, data, len);
    return v;
  }

  // recvmsg into n bytes and a control buffer of `ctl_room` bytes (none
  // when 0 and `null_control`); collects and tracks received descriptors.
  Received RecvFds(int fd, size_t n, size_t ctl_room, int flags = 0,
                   bool null_control = false) {
    Received out;
    std::string buf(n, '\0');
    std::vector<char> ctl(ctl_room + 64, '\x55');
    msghdr m{};
    iovec io{buf.data(), n};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = null_control ? nullptr : ctl.data();
    m.msg_controllen = ctl_room;
    m.msg_flags = 0x7fff0000;  // must be overwritten
    errno = 0;
    out.r = B().recvmsg(fd, &m, flags);
    out.err = errno;
    if (out.r < 0) return out;
    out.data.assign(buf.data(),
                    std::min<size_t>(static_cast<size_t>(out.r), n));
    out.msg_flags = m.msg_flags;
    out.controllen = m.msg_controllen;
    if (!null_control && m.msg_controllen >= sizeof(cmsghdr)) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
          int f;
          std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
          out.fds.push_back(Track(f));
        }
      }
    }
    return out;
  }

  // Whether fd reports `events` within ms (poll through the backend).
  short PollFor(int fd, short events, int ms) {
    pollfd p{fd, events, 0};
    int n = B().poll(&p, 1, ms);
    return n > 0 ? p.revents : 0;
  }
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_CONFORMANCE_IO_HELPERS_H_
