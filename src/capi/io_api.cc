// Vectored and socket I/O: uepoll_readv, writev, preadv, pwritev, send,
// recv, sendto, recvfrom, sendmsg, recvmsg. Each checks its arguments in
// the order of the kernel's syscall (fs/read_write.c, net/socket.c) and
// hands the engine an IoIter; a descriptor that is not uepoll's goes to
// libc.
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "capi/iovec_import.h"
#include "capi/user_access.h"
#include "core/fd_table.h"
#include "core/io_iter.h"
#include "kernel/export.h"
#include "sources/scm_rights.h"
#include "sources/unix_common.h"
#include "sources/unix_gc.h"

namespace uepoll::impl {
namespace {

// MSG_CMSG_COMPAT (the kernel's flag for 32-bit callers; not in libc's
// headers): sendmsg and recvmsg refuse it from user space.
constexpr int kMsgCmsgCompat = static_cast<int>(0x80000000u);

// vfs_readv / vfs_writev on a uepoll file: not open for that direction
// (EBADF), no read or write at all (EINVAL: an instance), the array
// (import_iovec), an empty total (0, the file is not called), then the
// file's read_iter / write_iter.
ssize_t VectoredIo(File& f, bool write, const iovec* iov, int iovcnt) {
  uint32_t acc = f.flags() & O_ACCMODE;
  if (acc == (write ? O_RDONLY : O_WRONLY)) return -EBADF;
  if (f.is_epoll()) return -EINVAL;
  // The syscall takes the count as an unsigned long: a negative int is
  // beyond UIO_MAXIOV.
  if (iovcnt < 0 || iovcnt > kUioMaxIov) return -EINVAL;
  ImportedIovec v;
  if (int err = v.Import(iov, iovcnt)) return err;
  if (v.total() == 0) return 0;
  IoIter it = v.iter();
  return write ? f.WriteIter(it) : f.ReadIter(it);
}

// sock_from_file: the uepoll socket behind a descriptor, or -ENOTSOCK.
UnixSocket* SocketOf(File* f) { return AsUnixSocket(f); }

// move_addr_to_kernel's checks (the address is used in place).
int CheckAddrLen(socklen_t len) {
  return static_cast<int>(len) < 0 || len > sizeof(sockaddr_storage) ? -EINVAL
                                                                     : 0;
}

// sendto / send on a uepoll descriptor.
ssize_t SendTo(File* f, const void* buf, size_t len, int flags,
               const sockaddr* addr, socklen_t addrlen) {
  // __sys_sendto: the buffer (import_ubuf) comes before the descriptor.
  if (len > kMaxRwCount) len = kMaxRwCount;
  if (!AccessOk(buf, len)) return -EFAULT;
  UnixSocket* s = SocketOf(f);
  if (!s) return -ENOTSOCK;
  if (addr) {
    if (int err = CheckAddrLen(addrlen)) return err;
    if (addrlen && UserFault(addr)) return -EFAULT;
  } else {
    addrlen = 0;
  }
  iovec seg;
  IoIter it = IoIter::Single(const_cast<void*>(buf), len, seg);
  if (s->nonblock()) flags |= MSG_DONTWAIT;
  SendArgs a{&it, flags, addrlen ? addr : nullptr, addrlen, nullptr, 0};
  return s->SendMsg(a);
}

// recvfrom / recv on a uepoll descriptor.
ssize_t RecvFrom(File* f, void* buf, size_t len, int flags, sockaddr* addr,
                 socklen_t* addrlen) {
  if (len > kMaxRwCount) len = kMaxRwCount;
  if (!AccessOk(buf, len)) return -EFAULT;
  UnixSocket* s = SocketOf(f);
  if (!s) return -ENOTSOCK;
  iovec seg;
  IoIter it = IoIter::Single(buf, len, seg);
  if (s->nonblock()) flags |= MSG_DONTWAIT;
  RecvArgs a{&it, flags, nullptr, 0, 0, addr != nullptr};
  ssize_t r = s->RecvMsg(a);
  if (r >= 0 && addr) {
    // move_addr_to_user, after the data was taken: the length is read
    // (EFAULT), checked (EINVAL when negative), and the name's length, 0
    // for an unbound sender, written back.
    if (UserFault(addrlen)) return -EFAULT;
    socklen_t have;
    std::memcpy(&have, addrlen, sizeof have);
    if (static_cast<int>(have) < 0) return -EINVAL;
    socklen_t zero = 0;
    std::memcpy(addrlen, &zero, sizeof zero);
  }
  return r;
}

// What sendmsg and recvmsg read of a msghdr (copy_msghdr_from_user).
struct Msg {
  msghdr h;
  ImportedIovec iov;
};

int CopyMsghdr(const msghdr* umsg, Msg& m) {
  if (UserFault(umsg) || !AccessOk(umsg, sizeof *umsg)) return -EFAULT;
  std::memcpy(&m.h, umsg, sizeof m.h);
  if (!m.h.msg_name) m.h.msg_namelen = 0;
  if (static_cast<int>(m.h.msg_namelen) < 0) return -EINVAL;
  if (m.h.msg_namelen > sizeof(sockaddr_storage)) {
    m.h.msg_namelen = sizeof(sockaddr_storage);
  }
  if (m.h.msg_iovlen > static_cast<size_t>(kUioMaxIov)) return -EMSGSIZE;
  return m.iov.Import(m.h.msg_iov, static_cast<long>(m.h.msg_iovlen));
}

// net.core.optmem_max, read once: sock_kmalloc refuses a control buffer
// of that size or more (ENOBUFS). A change of the sysctl after the first
// sendmsg with a large control buffer is not seen (docs/semantics.md D26).
size_t OptmemMax() {
  static const size_t value = [] {
    size_t v = 131072;
    int fd = sys::Open("/proc/sys/net/core/optmem_max", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return v;
    char text[32];
    ssize_t n = sys::Read(fd, text, sizeof text - 1);
    sys::Close(fd);
    if (n > 0) {
      text[n] = '\0';
      unsigned long parsed = strtoul(text, nullptr, 10);
      if (parsed) v = parsed;
    }
    return v;
  }();
  return value;
}

// The control buffer of a sendmsg (____sys_sendmsg): ENOBUFS beyond
// INT_MAX or what sock_kmalloc grants, EFAULT when it cannot be read.
int CheckSendControl(const msghdr& h) {
  size_t len = h.msg_controllen;
  if (len == 0) return 0;
  if (len > INT_MAX) return -ENOBUFS;
  constexpr size_t kOnStack = sizeof(cmsghdr) + 20;  // ctl[] in the kernel
  if (len > kOnStack && len >= OptmemMax()) return -ENOBUFS;
  if (UserFault(h.msg_control) || !AccessOk(h.msg_control, len)) {
    return -EFAULT;
  }
  return 0;
}

ssize_t SendMsg(UnixSocket* s, const msghdr* umsg, int flags) {
  Msg m;
  if (int err = CopyMsghdr(umsg, m)) return err;
  if (int err = CheckSendControl(m.h)) return err;
  IoIter it = m.iov.iter();
  if (s->nonblock()) flags |= MSG_DONTWAIT;
  socklen_t namelen = static_cast<socklen_t>(m.h.msg_namelen);
  SendArgs a{&it,
             flags,
             namelen ? static_cast<const sockaddr*>(m.h.msg_name) : nullptr,
             namelen,
             m.h.msg_controllen ? m.h.msg_control : nullptr,
             m.h.msg_controllen};
  ssize_t r = s->SendMsg(a);
  // wait_for_unix_gc: a send that passed descriptors may have completed a
  // cycle of sockets nobody else holds.
  UnixGc::MaybeCollect();
  return r;
}

ssize_t RecvMsg(UnixSocket* s, msghdr* umsg, int flags) {
  Msg m;
  if (int err = CopyMsghdr(umsg, m)) return err;
  IoIter it = m.iov.iter();
  int in_flags = flags;
  if (s->nonblock()) flags |= MSG_DONTWAIT;
  // A control buffer beyond the address space faults on the first write;
  // NULL means none.
  char* control = static_cast<char*>(m.h.msg_control);
  if (control && !AccessOk(control, m.h.msg_controllen)) control = nullptr;
  RecvArgs a{&it,
             flags,
             control,
             control ? m.h.msg_controllen : 0,
             in_flags & MSG_CMSG_CLOEXEC,
             m.h.msg_name != nullptr};
  ssize_t r = s->RecvMsg(a);
  if (r < 0) return r;
  // ____sys_recvmsg: the name's length (0: never bound), then msg_flags
  // and the length of control data written.
  if (m.h.msg_name) umsg->msg_namelen = 0;
  umsg->msg_flags = a.msg_flags;
  umsg->msg_controllen = a.controllen;
  return r;
}

}  // namespace
}  // namespace uepoll::impl

using uepoll::impl::FdTable;
using uepoll::impl::FileBorrow;
using uepoll::impl::ToErrno;
using uepoll::impl::UnixSocket;
namespace sys = uepoll::impl::sys;

extern "C" {

ssize_t uepoll_readv(int fd, const struct iovec* iov, int iovcnt) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Readv(fd, iov, iovcnt);
  return ToErrno(uepoll::impl::VectoredIo(*f.get(), false, iov, iovcnt));
}

ssize_t uepoll_writev(int fd, const struct iovec* iov, int iovcnt) {
  FileBorrow f = FdTable::Get().Borrow(fd);
  if (!f) return sys::Writev(fd, iov, iovcnt);
  return ToErrno(uepoll::impl::VectoredIo(*f.get(), true, iov, iovcnt));
}

// do_preadv: a negative offset first, then the descriptor, then
// FMODE_PREAD: no uepoll object is seekable (pipes, sockets and anonymous
// inodes all fail ESPIPE).
ssize_t uepoll_preadv(int fd, const struct iovec* iov, int iovcnt,
                      off_t offset) {
  if (offset < 0) return ToErrno<ssize_t>(-EINVAL);
  if (!FdTable::Get().IsOpen(fd)) return sys::Preadv(fd, iov, iovcnt, offset);
  return ToErrno<ssize_t>(-ESPIPE);
}

ssize_t uepoll_pwritev(int fd, const struct iovec* iov, int iovcnt,
                       off_t offset) {
  if (offset < 0) return ToErrno<ssize_t>(-EINVAL);
  if (!FdTable::Get().IsOpen(fd)) return sys::Pwritev(fd, iov, iovcnt, offset);
  return ToErrno<ssize_t>(-ESPIPE);
}

ssize_t uepoll_sendto(int sockfd, const void* buf, size_t len, int flags,
                      const struct sockaddr* dest_addr, socklen_t addrlen) {
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Sendto(sockfd, buf, len, flags, dest_addr, addrlen);
  return ToErrno(
      uepoll::impl::SendTo(f.get(), buf, len, flags, dest_addr, addrlen));
}

ssize_t uepoll_send(int sockfd, const void* buf, size_t len, int flags) {
  return uepoll_sendto(sockfd, buf, len, flags, nullptr, 0);
}

ssize_t uepoll_recvfrom(int sockfd, void* buf, size_t len, int flags,
                        struct sockaddr* src_addr, socklen_t* addrlen) {
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Recvfrom(sockfd, buf, len, flags, src_addr, addrlen);
  return ToErrno(
      uepoll::impl::RecvFrom(f.get(), buf, len, flags, src_addr, addrlen));
}

ssize_t uepoll_recv(int sockfd, void* buf, size_t len, int flags) {
  return uepoll_recvfrom(sockfd, buf, len, flags, nullptr, nullptr);
}

ssize_t uepoll_sendmsg(int sockfd, const struct msghdr* msg, int flags) {
  // The syscall forbids the 32-bit control format before anything else.
  if (flags & uepoll::impl::kMsgCmsgCompat) return ToErrno<ssize_t>(-EINVAL);
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) {
    // A uepoll descriptor travels over a kernel socket as the kernel's
    // equivalent object: it is converted first (kernel/export.h; what
    // cannot be is EOPNOTSUPP, docs/semantics.md D27).
    if (int err = uepoll::impl::ExportRights(msg)) {
      return ToErrno<ssize_t>(err);
    }
    return sys::Sendmsg(sockfd, msg, flags);
  }
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno<ssize_t>(-ENOTSOCK);
  return ToErrno(uepoll::impl::SendMsg(s, msg, flags));
}

ssize_t uepoll_recvmsg(int sockfd, struct msghdr* msg, int flags) {
  if (flags & uepoll::impl::kMsgCmsgCompat) return ToErrno<ssize_t>(-EINVAL);
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Recvmsg(sockfd, msg, flags);
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno<ssize_t>(-ENOTSOCK);
  return ToErrno(uepoll::impl::RecvMsg(s, msg, flags));
}

}  // extern "C"
