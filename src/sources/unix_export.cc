// A uepoll socket pair turned into the kernel's (kernel/export.h): a
// kernel socketpair of the same type holding the same queued data, in
// order and with the same message boundaries, the descriptors in flight
// (uepoll files among them converted first), each side's shutdown state,
// O_NONBLOCK, a pending ECONNRESET, and a released side closed.
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

#include <cstring>

#include "base/sys.h"
#include "kernel/export.h"
#include "sources/scm_rights.h"
#include "sources/unix_common.h"

namespace uepoll::impl {
namespace {

// A send on the new kernel pair that must not block: the kernel charges
// the same truesize as uepoll did (socket_skb.h), so the queue fits in the
// default buffer; if the model ever falls short, the sender's buffer grows
// (SO_SNDBUFFORCE as root, else up to net.core.wmem_max), never the data.
int SendAll(int fd, msghdr& m, size_t len, bool stream) {
  for (int grow = 0;;) {
    ssize_t r = sys::Sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r >= 0 && static_cast<size_t>(r) == len) return 0;
    if (r >= 0 && stream && r > 0) {
      // The rest, without the descriptors (they went with the first byte).
      m.msg_control = nullptr;
      m.msg_controllen = 0;
      m.msg_iov->iov_base = static_cast<char*>(m.msg_iov->iov_base) + r;
      m.msg_iov->iov_len -= static_cast<size_t>(r);
      len -= static_cast<size_t>(r);
      continue;
    }
    if (r >= 0 || errno != EAGAIN || grow++ == 4) return r < 0 ? -errno : -EIO;
    int size = 0;
    socklen_t sl = sizeof size;
    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &sl);
    size *= 2;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof size) != 0) {
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    }
  }
}

}  // namespace

int UnixPair::SendQueued(int from, int to, const int k[2], ExportSession& s) {
  for (Skb* skb = side_[to].rcv.front(); skb; skb = skb->next) {
    int fds[ScmFiles::kMaxFd];
    int nfds = 0;
    if (skb->fp) {
      for (int i = 0; i < skb->fp->count(); ++i) {
        const ScmFiles::Entry& e = skb->fp->at(i);
        int fd = e.file ? s.KernelFdFor(e.file) : e.kfd;
        if (fd < 0) return fd;
        fds[nfds++] = fd;
      }
    }
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof fds)];
    iovec iov{skb->data() + skb->consumed, skb->len - skb->consumed};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (nfds) {
      m.msg_control = ctl;
      m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
      cmsghdr* h = CMSG_FIRSTHDR(&m);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(nfds * sizeof(int));
      std::memcpy(CMSG_DATA(h), fds, nfds * sizeof(int));
    }
    if (int err = SendAll(k[from], m, iov.iov_len, stream())) return err;
  }
  return 0;
}

int UnixPair::FinishKernel(int k[2]) {
  const bool dgram = type_ == SOCK_DGRAM;
  for (int i = 0; i < 2; ++i) {
    const Side& s = side_[i];
    const Side& other = side_[1 - i];
    if (s.dead) continue;
    // A pending ECONNRESET: the kernel sets it when the peer goes with
    // data unread, so leave it a byte before it goes (below).
    if (!dgram && other.dead && s.err == ECONNRESET &&
        sys::Sendto(k[i], "", 1, MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0) !=
            1) {
      return -errno;
    }
    // Each side's shutdown bits. A connection's are mirrored (RCV here is
    // SEND there), so SHUT_RD and SHUT_WR here rebuild both sides; a
    // released peer's close sets them all anyway.
    int r = 0;
    if (dgram) {
      if (s.shutdown) r = sys::Shutdown(k[i], s.shutdown - 1);
    } else if (!other.dead) {
      if (s.shutdown & kRcvShutdown) r |= sys::Shutdown(k[i], SHUT_RD);
      if (s.shutdown & kSendShutdown) r |= sys::Shutdown(k[i], SHUT_WR);
    }
    if (r < 0) return -errno;
    if (sock_[i] &&
        sys::Fcntl(k[i], F_SETFL, sock_[i]->flags() & (O_NONBLOCK | O_ASYNC)) <
            0) {
      return -errno;
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (!side_[i].dead) continue;
    sys::Close(k[i]);
    k[i] = -1;
  }
  // A datagram socket that already learnt its peer is gone: one send
  // makes the kernel's learn it too (later sends fail ENOTCONN; its queue,
  // empty since then, is purged).
  for (int i = 0; i < 2; ++i) {
    if (dgram && !side_[i].dead && !side_[i].connected) {
      sys::Sendto(k[i], "", 0, MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
    }
  }
  return 0;
}

int UnixPair::Kernelize(ExportSession& s) {
  if (int err = s.Reserve(2)) return err;
  int k[2];
  if (KernelSocketpair(AF_UNIX, type_ | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, k) <
      0) {
    return -errno;
  }
  SkbQueue purge[2];
  File* socks[2] = {nullptr, nullptr};
  int kfds[2] = {-1, -1};
  {
    MutexLock l(mu_);
    if (exported_.load(std::memory_order_relaxed)) {
      sys::Close(k[0]);
      sys::Close(k[1]);
    } else {
      // Messages in our own queues may carry our own sockets.
      for (int i = 0; i < 2; ++i) {
        if (sock_[i]) s.Provisional(sock_[i], k[i]);
      }
      int err = 0;
      for (int to = 0; to < 2 && !err; ++to) {
        if (!side_[to].dead) err = SendQueued(1 - to, to, k, s);
      }
      if (!err) err = FinishKernel(k);
      for (int i = 0; i < 2; ++i) {
        if (sock_[i]) s.Forget(sock_[i]);
      }
      if (err) {
        for (int fd : k) {
          if (fd >= 0) sys::Close(fd);
        }
        return err;
      }
      // The data is the kernel's now: the queues are freed (their
      // descriptors' references dropped) once mu_ is released.
      for (int i = 0; i < 2; ++i) {
        purge[i].Splice(side_[i].rcv);
        side_[i].wmem = 0;
      }
      AdoptForward(&kfd_[0], k[0]);
      AdoptForward(&kfd_[1], k[1]);
      exported_.store(true, std::memory_order_release);
    }
    for (int i = 0; i < 2; ++i) {
      if (sock_[i] && kfd_[i].get() >= 0 && sock_[i]->TryRef()) {
        socks[i] = sock_[i];
        kfds[i] = kfd_[i].get();
      }
    }
  }
  for (SkbQueue& q : purge) q.FreeAll();
  for (int i = 0; i < 2; ++i) {
    if (socks[i]) s.Add(socks[i], kfds[i]);
  }
  return 0;
}

ssize_t UnixPair::ForwardSend(int me, SendArgs& a) {
  return ForwardSendmsg(kfd(me), *a.data, a.flags, a.name, a.namelen, a.control,
                        a.controllen);
}

ssize_t UnixPair::ForwardRecv(int me, RecvArgs& a) {
  return ForwardRecvmsg(kfd(me), *a.data, a.flags, a.control, &a.controllen,
                        &a.msg_flags);
}

}  // namespace uepoll::impl
