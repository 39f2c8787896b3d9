// One message carrying one descriptor in SCM_RIGHTS, for the tests that
// pass descriptors: the msghdr they give to sendmsg and recvmsg of either
// backend (or of the kernel directly), built in one place.
#ifndef UEPOLL_TESTS_SUPPORT_SCM_H_
#define UEPOLL_TESTS_SUPPORT_SCM_H_

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>

namespace uepoll_test {

class OneFdMsg {
 public:
  // `len` bytes at `data`, and with fd >= 0 that descriptor in one
  // SCM_RIGHTS message; with fd < 0, room to receive one.
  OneFdMsg(void* data, size_t len, int fd = -1) : io_{data, len} {
    m_.msg_iov = &io_;
    m_.msg_iovlen = 1;
    m_.msg_control = ctl_;
    m_.msg_controllen = sizeof ctl_;
    if (fd < 0) return;
    cmsghdr* c = CMSG_FIRSTHDR(&m_);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  // msg() points into the object.
  OneFdMsg(const OneFdMsg&) = delete;
  OneFdMsg& operator=(const OneFdMsg&) = delete;

  msghdr* msg() { return &m_; }
  // The descriptor a recvmsg into msg() delivered, or -1 if none came.
  int ReceivedFd() const {
    if (m_.msg_controllen < CMSG_LEN(sizeof(int))) return -1;
    const cmsghdr* c = CMSG_FIRSTHDR(&m_);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      return -1;
    }
    int fd;
    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
  }

 private:
  iovec io_;
  alignas(cmsghdr) char ctl_[CMSG_SPACE(sizeof(int))] = {};
  msghdr m_{};
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SUPPORT_SCM_H_
