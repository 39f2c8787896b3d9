// uepoll_getsockopt, uepoll_setsockopt, uepoll_getsockname,
// uepoll_getpeername on uepoll socket pairs, as net/socket.c and
// net/core/sock.c (Linux 6.18) answer them for a connected AF_UNIX pair;
// ENOTSOCK on any other uepoll object; kernel descriptors go to libc.
//
// Options the pair's state decides are answered here, with the kernel's
// length rules (sk_getsockopt: the length read first, EINVAL if negative,
// the value cut to the length, the length written back): SO_TYPE,
// SO_DOMAIN, SO_PROTOCOL, SO_ERROR, SO_ACCEPTCONN, SO_PEERCRED, SO_PEERNAME,
// SO_PEERGROUPS, SO_PEERPIDFD, SO_COOKIE, SO_MEMINFO, and, until some
// option was set, SO_SNDBUF, SO_RCVBUF, SO_PASSCRED, SO_RCVLOWAT and
// SO_SNDLOWAT (their defaults). Every other option, and every set, is the
// kernel's (sources/unix_sockopt.h): a transient kernel socket of the same
// type, with the options recorded so far, answers it.
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "capi/user_access.h"
#include "core/fd_table.h"
#include "core/inode.h"
#include "core/io_iter.h"
#include "sources/socket_skb.h"
#include "sources/unix_common.h"
#include "sources/unix_sockopt.h"

namespace uepoll::impl {
namespace {

// SO_* numbers glibc 2.36's headers may lack.
constexpr int kSoPeerGroups = 59;
constexpr int kSoPeerPidfd = 77;
constexpr int kSoCookie = 57;
constexpr int kSoMeminfo = 55;
constexpr long kRcvBuf = 212992;  // net.core.rmem_default, as kSndBuf

// Socket filters hold a pointer to the caller's program: they are checked
// by the kernel but never recorded (nor applied: D4).
bool IsFilter(int level, int name) {
  if (level != SOL_SOCKET) return false;
  switch (name) {
    case SO_ATTACH_FILTER:
    case SO_DETACH_FILTER:
    case SO_ATTACH_BPF:
    case SO_ATTACH_REUSEPORT_CBPF:
    case SO_ATTACH_REUSEPORT_EBPF:
    case 68:  // SO_DETACH_REUSEPORT_BPF
      return true;
    default:
      return false;
  }
}

// A transient kernel socket of s's type with s's options set again, or
// -errno (EMFILE at the descriptor limit: D4).
int ReplaySocket(UnixSocket* s) {
  int fd = sys::Socket(AF_UNIX, s->type() | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (SockOpts* o = s->opts()) {
    o->ForEach([fd](int level, int name, const void* v, socklen_t len) {
      sys::Setsockopt(fd, level, name, v, len);
    });
  }
  return fd;
}

// getsockopt on the replayed socket, straight into the caller's buffers:
// the kernel's errno and length rules.
int KernelGet(UnixSocket* s, int level, int name, void* val, socklen_t* len) {
  int fd = ReplaySocket(s);
  if (fd < 0) return fd;
  int r = sys::Getsockopt(fd, level, name, val, len) == 0 ? 0 : -errno;
  sys::Close(fd);
  return r;
}

// The tail of sk_getsockopt for a value of lv bytes.
int CopyOut(const void* v, socklen_t lv, void* val, socklen_t* lenp, int len) {
  if (len > static_cast<int>(lv)) len = static_cast<int>(lv);
  if (len > 0 && (UserFault(val) || !AccessOk(val, len))) return -EFAULT;
  if (len > 0) std::memcpy(val, v, static_cast<size_t>(len));
  auto out = static_cast<socklen_t>(len);
  std::memcpy(lenp, &out, sizeof out);
  return 0;
}

int CopyInt(int v, void* val, socklen_t* lenp, int len) {
  return CopyOut(&v, sizeof v, val, lenp, len);
}

// SO_PEERGROUPS: the creator's supplementary groups (read when asked).
int PeerGroups(void* val, socklen_t* lenp, int len) {
  int n = getgroups(0, nullptr);
  if (n < 0) return -errno;
  gid_t stack_groups[64];
  gid_t* groups = stack_groups;
  if (n > 64) {
    groups = NewArray<gid_t>(static_cast<size_t>(n));
    if (!groups) return -ENOMEM;
  }
  int got = n ? getgroups(n, groups) : 0;
  int r = 0;
  int need = got * static_cast<int>(sizeof(gid_t));
  if (got < 0) {
    r = -errno;
  } else if (len < need) {
    auto out = static_cast<socklen_t>(need);
    std::memcpy(lenp, &out, sizeof out);
    r = -ERANGE;
  } else {
    r = CopyOut(groups, static_cast<socklen_t>(need), val, lenp, need);
  }
  if (groups != stack_groups) DeleteArray(groups);
  return r;
}

// SO_PEERPIDFD: a new pidfd of the creator, installed even when none of it
// is copied out (len 0), as the kernel does.
int PeerPidfd(UnixSocket* s, void* val, socklen_t* lenp, int len) {
  ucred c = s->pair()->PeerCred();
  long pidfd = sys::Syscall(SYS_pidfd_open, c.pid, 0, 0, 0, 0, 0);
  if (pidfd < 0) return -errno;
  int v = static_cast<int>(pidfd);
  if (len > static_cast<int>(sizeof v)) len = sizeof v;
  if (len > 0 && (UserFault(val) || !AccessOk(val, len))) {
    sys::Close(v);
    return -EFAULT;
  }
  return CopyOut(&v, sizeof v, val, lenp, len);
}

int GetSockOpt(UnixSocket* s, int level, int name, void* val, socklen_t* lenp) {
  if (level != SOL_SOCKET) return KernelGet(s, level, name, val, lenp);
  if (UserFault(lenp)) return -EFAULT;
  int len;
  std::memcpy(&len, lenp, sizeof len);
  if (len < 0) return -EINVAL;
  UnixPair* pair = s->pair();
  // The buffer sizes and flags an option set may have changed.
  bool defaults = s->opts() == nullptr;
  switch (name) {
    case SO_TYPE:
      return CopyInt(s->type(), val, lenp, len);
    case SO_DOMAIN:
      return CopyInt(AF_UNIX, val, lenp, len);
    case SO_PROTOCOL:  // unix_create1 never records the protocol
    case SO_ACCEPTCONN:
      return CopyInt(0, val, lenp, len);
    case SO_ERROR:
      return CopyInt(pair->TakeError(s->side()), val, lenp, len);
    case SO_PEERCRED: {
      ucred c = pair->PeerCred();
      return CopyOut(&c, sizeof c, val, lenp, len);
    }
    case kSoPeerGroups:
      return PeerGroups(val, lenp, len);
    case kSoPeerPidfd:
      return PeerPidfd(s, val, lenp, len);
    case kSoCookie: {
      if (len < static_cast<int>(sizeof(uint64_t))) return -EINVAL;
      // sock_gen_cookie: unique and never 0; uepoll's is the socket's
      // inode number (D4).
      uint64_t cookie = InodeNumber(s->Inode());
      return CopyOut(&cookie, sizeof cookie, val, lenp, len);
    }
    case SO_PEERNAME: {
      // The peer's address (unnamed: the family alone); a length beyond it
      // is EINVAL here, unlike the other options.
      if (!pair->Connected(s->side())) return -ENOTCONN;
      sa_family_t family = AF_UNIX;
      if (len > static_cast<int>(sizeof family)) return -EINVAL;
      return CopyOut(&family, sizeof family, val, lenp, len);
    }
    case SO_SNDBUF:
      if (defaults) return CopyInt(static_cast<int>(kSndBuf), val, lenp, len);
      break;
    case SO_RCVBUF:
      if (defaults) return CopyInt(static_cast<int>(kRcvBuf), val, lenp, len);
      break;
    case SO_PASSCRED:
      if (defaults) return CopyInt(0, val, lenp, len);
      break;
    case SO_RCVLOWAT:
    case SO_SNDLOWAT:
      if (defaults) return CopyInt(1, val, lenp, len);
      break;
    default:
      break;
  }
  if (name == kSoMeminfo) {
    // sk_get_meminfo: the buffer sizes as the options left them, and the
    // send charge; a socket pair queues nothing else.
    uint32_t mem[9] = {};
    int sndbuf = static_cast<int>(kSndBuf);
    int rcvbuf = static_cast<int>(kRcvBuf);
    if (!defaults) {
      socklen_t l = sizeof(int);
      if (int err = KernelGet(s, SOL_SOCKET, SO_SNDBUF, &sndbuf, &l)) {
        return err;
      }
      l = sizeof(int);
      if (int err = KernelGet(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &l)) {
        return err;
      }
    }
    mem[1] = static_cast<uint32_t>(rcvbuf);
    mem[2] = static_cast<uint32_t>(pair->WmemAlloc(s->side()));
    mem[3] = static_cast<uint32_t>(sndbuf);
    return CopyOut(mem, sizeof mem, val, lenp, len);
  }
  return KernelGet(s, level, name, val, lenp);
}

int SetSockOpt(UnixSocket* s, int level, int name, const void* val,
               socklen_t len) {
  int fd = ReplaySocket(s);
  if (fd < 0) return fd;
  int r = sys::Setsockopt(fd, level, name, val, len) == 0 ? 0 : -errno;
  sys::Close(fd);
  if (r || IsFilter(level, name)) return r;
  SockOpts* o = s->MakeOpts();
  if (!o) return -ENOMEM;
  return o->Record(level, name, val, len);
}

// move_addr_to_user for an unnamed AF_UNIX address (just the family): the
// full length is written back before the address is copied.
int UnnamedAddress(sockaddr* addr, socklen_t* lenp) {
  if (UserFault(lenp)) return -EFAULT;
  int len;
  std::memcpy(&len, lenp, sizeof len);
  constexpr int klen = sizeof(sa_family_t);
  if (len > klen) len = klen;
  if (len >= 0) {
    socklen_t out = klen;
    std::memcpy(lenp, &out, sizeof out);
  }
  if (len) {
    if (len < 0) return -EINVAL;
    if (UserFault(addr)) return -EFAULT;
    sa_family_t family = AF_UNIX;
    std::memcpy(addr, &family, static_cast<size_t>(len));
  }
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

int uepoll_getsockopt(int sockfd, int level, int optname, void* optval,
                      socklen_t* optlen) {
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Getsockopt(sockfd, level, optname, optval, optlen);
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno(-ENOTSOCK);
  int saved = errno;
  int r = uepoll::impl::GetSockOpt(s, level, optname, optval, optlen);
  errno = saved;
  return ToErrno(r);
}

int uepoll_setsockopt(int sockfd, int level, int optname, const void* optval,
                      socklen_t optlen) {
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Setsockopt(sockfd, level, optname, optval, optlen);
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno(-ENOTSOCK);
  int saved = errno;
  int r = uepoll::impl::SetSockOpt(s, level, optname, optval, optlen);
  errno = saved;
  return ToErrno(r);
}

int uepoll_getsockname(int sockfd, struct sockaddr* addr, socklen_t* addrlen) {
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Getsockname(sockfd, addr, addrlen);
  if (!uepoll::impl::AsUnixSocket(f.get())) return ToErrno(-ENOTSOCK);
  return ToErrno(uepoll::impl::UnnamedAddress(addr, addrlen));
}

int uepoll_getpeername(int sockfd, struct sockaddr* addr, socklen_t* addrlen) {
  FileBorrow f = FdTable::Get().Borrow(sockfd);
  if (!f) return sys::Getpeername(sockfd, addr, addrlen);
  UnixSocket* s = uepoll::impl::AsUnixSocket(f.get());
  if (!s) return ToErrno(-ENOTSOCK);
  // unix_getname(peer): a datagram socket whose peer is gone for good.
  if (!s->pair()->Connected(s->side())) return ToErrno(-ENOTCONN);
  return ToErrno(uepoll::impl::UnnamedAddress(addr, addrlen));
}

}  // extern "C"
