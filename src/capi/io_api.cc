// Vectored and socket I/O: uepoll_readv, writev, preadv, pwritev, send,
// recv, sendto, recvfrom, sendmsg, recvmsg, sendmmsg, recvmmsg. Each checks
// its arguments in
// the order of the kernel's syscall (fs/read_write.c, net/socket.c) and
// hands the engine an IoIter; a descriptor that is not uepoll's goes to
// libc.
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>

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

// ___sys_sendmsg; *total, when given, is the message's length in bytes
// (sendmmsg stops after a message it sent only part of).
ssize_t SendMsg(UnixSocket* s, const msghdr* umsg, int flags,
                size_t* total = nullptr, bool batch_more = false) {
  Msg m;
  if (int err = CopyMsghdr(umsg, m)) return err;
  if (int err = CheckSendControl(m.h)) return err;
  if (total) *total = m.iov.total();
  IoIter it = m.iov.iter();
  if (s->nonblock()) flags |= MSG_DONTWAIT;
  socklen_t namelen = static_cast<socklen_t>(m.h.msg_namelen);
  SendArgs a{&it,
             flags,
             namelen ? static_cast<const sockaddr*>(m.h.msg_name) : nullptr,
             namelen,
             m.h.msg_controllen ? m.h.msg_control : nullptr,
             m.h.msg_controllen,
             batch_more};
  ssize_t r = s->SendMsg(a);
  // wait_for_unix_gc: a send that passed descriptors may have completed a
  // cycle of sockets nobody else holds.
  UnixGc::MaybeCollect();
  return r;
}

ssize_t RecvMsg(UnixSocket* s, msghdr* umsg, int flags,
                bool batch_more = false) {
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
             m.h.msg_name != nullptr,
             batch_more};
  ssize_t r = s->RecvMsg(a);
  if (r < 0) return r;
  // ____sys_recvmsg: the name's length (0: never bound), then msg_flags
  // and the length of control data written.
  if (m.h.msg_name) umsg->msg_namelen = 0;
  umsg->msg_flags = a.msg_flags;
  umsg->msg_controllen = a.controllen;
  return r;
}

// An entry's message and length, by address: the entry may be a pointer
// the caller made up (NULL, or beyond its array), which the checks of
// CopyMsghdr and PutMsgLen answer EFAULT, and which must not be
// dereferenced to find its fields.
static_assert(offsetof(mmsghdr, msg_hdr) == 0);
msghdr* HdrOf(mmsghdr* entry) { return reinterpret_cast<msghdr*>(entry); }
unsigned int* LenOf(mmsghdr* entry) {
  return reinterpret_cast<unsigned int*>(reinterpret_cast<uintptr_t>(entry) +
                                         offsetof(mmsghdr, msg_len));
}
mmsghdr* Entry(mmsghdr* vec, unsigned int i) {
  return reinterpret_cast<mmsghdr*>(reinterpret_cast<uintptr_t>(vec) +
                                    i * sizeof(mmsghdr));
}

// Where a message's length is written back (put_user of msg_len).
bool PutMsgLen(mmsghdr* entry, ssize_t len) {
  unsigned int* p = LenOf(entry);
  if (UserFault(p) || !AccessOk(p, sizeof *p)) return false;
  unsigned int v = static_cast<unsigned int>(len);
  std::memcpy(p, &v, sizeof v);
  return true;
}

// __sys_sendmmsg after the descriptor's lookup: one sendmsg per entry (with
// the entry's own MSG_EOR), its length written back; it stops at the first
// error, or after a message sent in part. The error is returned only when
// no message went.
int SendMmsg(UnixSocket* s, mmsghdr* vec, unsigned int vlen, int flags) {
  if (vlen > static_cast<unsigned int>(kUioMaxIov)) vlen = kUioMaxIov;
  unsigned int sent = 0;
  ssize_t err = 0;
  while (sent < vlen) {
    mmsghdr* e = Entry(vec, sent);
    int eor = 0;
    if (!UserFault(e) && AccessOk(e, sizeof *e)) {
      int entry_flags;  // the array need not be aligned for the kernel
      std::memcpy(
          &entry_flags,
          reinterpret_cast<const char*>(e) + offsetof(msghdr, msg_flags),
          sizeof entry_flags);
      eor = entry_flags & MSG_EOR;
    }
    size_t total = 0;
    err = SendMsg(s, HdrOf(e), flags | eor, &total, sent > 0);
    if (err < 0) break;
    if (!PutMsgLen(e, err)) {
      err = -EFAULT;
      break;
    }
    ++sent;
    if (static_cast<size_t>(err) < total) break;
    err = 0;
  }
  return sent ? static_cast<int>(sent) : static_cast<int>(err);
}

// do_recvmmsg after the descriptor's lookup. The socket's pending error
// comes first; then one recvmsg per entry, its length written back.
// MSG_WAITFORONE makes the calls after the first message nonblocking; the
// timeout is looked at only between messages (a call blocked for the next
// one waits for it however long that takes, as in the kernel), and is
// updated to the time left. An error after some messages is kept as the
// socket's pending error (reported by the next call, or SO_ERROR), except
// EAGAIN; the call returns the messages it got.
int RecvMmsg(UnixSocket* s, mmsghdr* vec, unsigned int vlen, int flags,
             const timespec* end, timespec* left) {
  if (!(flags & MSG_ERRQUEUE)) {
    if (int pending = s->pair()->TakeError(s->side())) return -pending;
  }
  // No cap on vlen here: only sendmmsg's is UIO_MAXIOV.
  unsigned int got = 0;
  ssize_t err = 0;
  while (got < vlen) {
    mmsghdr* e = Entry(vec, got);
    err = RecvMsg(s, HdrOf(e), flags & ~MSG_WAITFORONE, got > 0);
    if (err < 0) break;
    if (!PutMsgLen(e, err)) {
      err = -EFAULT;
      break;
    }
    ++got;
    // RecvMsg wrote the entry's msg_flags back.
    int msg_flags;
    std::memcpy(&msg_flags,
                reinterpret_cast<const char*>(e) + offsetof(msghdr, msg_flags),
                sizeof msg_flags);
    err = 0;
    if (flags & MSG_WAITFORONE) flags |= MSG_DONTWAIT;
    if (end) {
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      // timespec64_sub, normalized: both are at or after the epoch of the
      // monotonic clock, so neither part overflows.
      timespec d{end->tv_sec - now.tv_sec, end->tv_nsec - now.tv_nsec};
      if (d.tv_nsec < 0) {
        d.tv_nsec += 1000000000L;
        --d.tv_sec;
      }
      if (d.tv_sec < 0 || (d.tv_sec == 0 && d.tv_nsec == 0)) {
        *left = timespec{0, 0};
        break;
      }
      *left = d;
    }
    if (msg_flags & MSG_OOB) break;
  }
  if (got == 0) return static_cast<int>(err);
  if (err != 0 && err != -EAGAIN) {
    // A signal in the wait for a later message: the kernel keeps its
    // internal restart code, which the next call (or SO_ERROR) reports as
    // errno 512, as it is.
    constexpr int kErestartsys = 512;
    int keep = err == -EINTR ? kErestartsys : static_cast<int>(-err);
    s->pair()->StashError(s->side(), keep);
  }
  return static_cast<int>(got);
}

// poll_select_set_timeout: the instant a recvmmsg timeout ends, on the
// monotonic clock (zero for a zero timeout; saturated far in the future).
int RecvmmsgEnd(const timespec& t, timespec* end) {
  if (t.tv_sec < 0 || t.tv_nsec < 0 || t.tv_nsec >= 1000000000L) {
    return -EINVAL;
  }
  if (t.tv_sec == 0 && t.tv_nsec == 0) {
    *end = timespec{0, 0};
    return 0;
  }
  // timespec64_add_safe: the sum, or {TIME64_MAX, 0} when the seconds
  // overflow (the nanoseconds' carry included).
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long nsec = now.tv_nsec + t.tv_nsec;
  time_t carry = nsec >= 1000000000L ? 1 : 0;
  if (carry) nsec -= 1000000000L;
  constexpr time_t kMax = std::numeric_limits<time_t>::max();
  if (t.tv_sec > kMax - now.tv_sec - carry) {
    *end = timespec{kMax, 0};
    return 0;
  }
  *end = timespec{now.tv_sec + t.tv_sec + carry, nsec};
  return 0;
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

int uepoll_sendmmsg(int sockfd, struct mmsghdr* msgvec, unsigned int vlen,
                    int flags) {
  if (flags & uepoll::impl::kMsgCmsgCompat) return ToErrno(-EINVAL);
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) {
    // Each message's uepoll descriptors are converted first, as for
    // sendmsg; a message whose cannot be ends the batch before it (and
    // fails the call when it is the first).
    // An entry that cannot be read is left to the kernel to fail.
    // __sys_sendmmsg sends at most UIO_MAXIOV messages.
    if (vlen > static_cast<unsigned int>(uepoll::impl::kUioMaxIov)) {
      vlen = uepoll::impl::kUioMaxIov;
    }
    unsigned int n = vlen;
    for (unsigned int i = 0; i < vlen; ++i) {
      mmsghdr* e = uepoll::impl::Entry(msgvec, i);
      if (uepoll::impl::UserFault(e) || !uepoll::impl::AccessOk(e, sizeof *e)) {
        break;
      }
      if (int err = uepoll::impl::ExportRights(uepoll::impl::HdrOf(e))) {
        if (i == 0) return ToErrno(err);
        n = i;
        break;
      }
    }
    return sys::Sendmmsg(sockfd, msgvec, n, flags);
  }
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno(-ENOTSOCK);
  return ToErrno(uepoll::impl::SendMmsg(s, msgvec, vlen, flags));
}

int uepoll_recvmmsg(int sockfd, struct mmsghdr* msgvec, unsigned int vlen,
                    int flags, struct timespec* timeout) {
  if (flags & uepoll::impl::kMsgCmsgCompat) return ToErrno(-EINVAL);
  // __sys_recvmmsg: the timeout is read before anything else is looked at.
  timespec t{};
  if (timeout) {
    if (uepoll::impl::UserFault(timeout) ||
        !uepoll::impl::AccessOk(timeout, sizeof *timeout)) {
      return ToErrno(-EFAULT);
    }
    std::memcpy(&t, timeout, sizeof t);
  }
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Recvmmsg(sockfd, msgvec, vlen, flags, timeout);
  timespec end{};
  if (timeout) {
    if (int err = uepoll::impl::RecvmmsgEnd(t, &end)) return ToErrno(err);
  }
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno(-ENOTSOCK);
  timespec left = t;
  int r = uepoll::impl::RecvMmsg(s, msgvec, vlen, flags,
                                 timeout ? &end : nullptr, &left);
  if (r > 0 && timeout) std::memcpy(timeout, &left, sizeof left);
  return ToErrno(r);
}

}  // extern "C"
