// AF_UNIX socket pairs: what the three types share (poll, shutdown,
// release, ioctl, the send buffer's charge, queueing with the collector's
// books) and socketpair() itself. See unix_common.h for the model; the
// sends and receives are in unix_stream.cc and unix_dgram.cc.
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "base/sys.h"
#include "core/fd_table.h"
#include "sources/io_wait.h"
#include "sources/scm_rights.h"
#include "sources/socket.h"
#include "sources/unix_common.h"
#include "sources/unix_gc.h"

namespace uepoll::impl {

uint32_t UnixPair::Poll(int me) {
  // unix_poll and unix_dgram_poll give the same answer for a socketpair
  // (no listening state, no peer whose queue limit applies).
  MutexLock l(mu_);
  const Side& s = side_[me];
  uint32_t mask = 0;
  // Exported: the kernel pair reports for it (kernel/export.h).
  if (exported_.load(std::memory_order_relaxed)) return 0;
  if (s.err) mask |= EPOLLERR;
  if (s.shutdown == kShutdownMask) mask |= EPOLLHUP;
  if (s.shutdown & kRcvShutdown) mask |= EPOLLRDHUP | EPOLLIN | EPOLLRDNORM;
  if (!s.rcv.empty()) mask |= EPOLLIN | EPOLLRDNORM;
  // Writable even when the peer has shut down: "prevents stuck sockets".
  if (WritableLocked(s)) {
    mask |= EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;
  } else {
    SetNoSpace(me);  // unix_poll: sk_set_bit(SOCKWQ_ASYNC_NOSPACE)
  }
  return mask;
}

int UnixPair::ChargeForSend(int me, long truesize, bool nonblock,
                            bool partial) {
  int err = 0;
  mu_.Lock();
  for (;;) {
    Side& s = side_[me];
    if (exported_.load(std::memory_order_relaxed)) {
      err = kMovedToKernel;
      break;
    }
    if (s.err) {  // sock_error: report and clear
      err = -s.err;
      s.err = 0;
      break;
    }
    if (s.shutdown & kSendShutdown) {
      err = -EPIPE;
      break;
    }
    if (s.wmem < kSndBuf) {
      s.wmem += truesize;  // skb_set_owner_w
      break;
    }
    SetNoSpace(me);  // sock_alloc_send_pskb, before EAGAIN or the wait
    if (nonblock) {
      err = -EAGAIN;
      break;
    }
    mu_.Unlock();
    int r = WaitForIo(wq_[me], /*exclusive=*/false,
                      partial ? SignalRule::kPartial : SignalRule::kRestartable,
                      [this, me] { return SendReady(me); });
    mu_.Lock();
    // Relock: err, shutdown and the charge are re-tested (here and by the
    // loop), never taken from before the sleep.
    if (r && !(side_[me].wmem < kSndBuf)) {
      err = r;
      break;
    }
  }
  mu_.Unlock();
  return err;
}

void UnixPair::QueueLocked(int to, Skb* skb) {
  side_[to].rcv.PushBack(skb);
  if (skb->fp) UnixGc::Queued(skb->fp, sock_[to]);
}

bool UnixPair::PurgeLocked(int me, SkbQueue& out) {
  Side& s = side_[me];
  Side& other = side_[1 - me];
  bool any = !s.rcv.empty();
  while (Skb* skb = s.rcv.front()) {
    s.rcv.PopFront();
    other.wmem -= skb->truesize;  // sock_wfree
    out.PushBack(skb);
  }
  return any && !other.dead && WritableLocked(other);
}

int UnixPair::Shutdown(int me, int how) {
  if (how < SHUT_RD || how > SHUT_RDWR) return -EINVAL;
  // SHUT_RD -> RCV_SHUTDOWN, SHUT_WR -> SEND_SHUTDOWN, SHUT_RDWR -> both;
  // a connection-based peer gets the mirror image, a datagram peer nothing.
  uint8_t mode = static_cast<uint8_t>(how + 1);
  uint8_t peer_mode = 0;
  if (mode & kRcvShutdown) peer_mode |= kSendShutdown;
  if (mode & kSendShutdown) peer_mode |= kRcvShutdown;
  bool mirror = type_ != SOCK_DGRAM;
  {
    MutexLock l(mu_);
    if (exported_.load(std::memory_order_relaxed)) {
      int r = sys::Shutdown(kfd(me), how);  // kernel/export.h
      return r < 0 ? -errno : 0;
    }
    side_[me].shutdown |= mode;
    if (mirror) side_[1 - me].shutdown |= peer_mode;
  }
  wq_[me].WakeUp(0, 0);  // sk_state_change: wake all, no hint
  if (mirror) {
    bool waited = ReaderWaits(1 - me);
    wq_[1 - me].WakeUp(0, 0);
    // unix_shutdown: the peer's owner hears of the hang-up, or of EOF.
    if (peer_mode == kShutdownMask) {
      AsyncWaitData(1 - me, POLL_HUP, waited);
    } else if (peer_mode & kRcvShutdown) {
      AsyncWaitData(1 - me, POLL_IN, waited);
    }
  }
  return 0;
}

int UnixPair::Ioctl(int me, unsigned long cmd, unsigned long arg) {
  if (exported()) {  // a call in progress at the export
    int r = sys::Ioctl(kfd(me), cmd, arg);
    return r < 0 ? -errno : r;
  }
  int amount = 0;
  switch (cmd) {
    case SIOCOUTQ: {  // sk_wmem_alloc_get
      MutexLock l(mu_);
      amount = static_cast<int>(side_[me].wmem);
      break;
    }
    case SIOCINQ: {  // unix_inq_len
      MutexLock l(mu_);
      const Side& s = side_[me];
      if (type_ == SOCK_DGRAM) {
        // The next datagram only.
        if (Skb* skb = s.rcv.front()) amount = static_cast<int>(skb->len);
      } else {
        long n = 0;
        for (Skb* skb = s.rcv.front(); skb; skb = skb->next) {
          n += skb->len - skb->consumed;
        }
        amount = static_cast<int>(n);
      }
      break;
    }
    case SIOCATMARK:
      // No out-of-band data is ever queued (docs/semantics.md D26), and a
      // stream skb in a queue always has bytes left: never at the mark.
      if (type_ != SOCK_STREAM) return -EOPNOTSUPP;
      amount = 0;
      break;
    default:
      return -ENOTTY;  // -ENOIOCTLCMD
  }
  if (UserFault(reinterpret_cast<void*>(arg))) return -EFAULT;  // put_user
  std::memcpy(reinterpret_cast<void*>(arg), &amount, sizeof amount);
  return 0;
}

void UnixPair::PurgeForGc(int me) {
  SkbQueue purge;
  bool wake_writer;
  {
    MutexLock l(mu_);
    wake_writer = PurgeLocked(me, purge);
  }
  purge.FreeAll();
  if (wake_writer) {
    wq_[1 - me].WakeUp(kWriteSpace, 1);
    AsyncWriteSpace(1 - me);
  }
}

void UnixPair::Release(int me) {
  const int peer = 1 - me;
  DropForward(&kfd_[me]);
  SkbQueue purge;
  bool wake_writer;
  bool notify_peer = false;
  {
    MutexLock l(mu_);
    Side& s = side_[me];
    Side& other = side_[peer];
    s.dead = true;
    s.shutdown = kShutdownMask;
    sock_[me] = nullptr;
    // A datagram peer keeps pointing at us: it learns of the close when it
    // next sends (ECONNREFUSED, unix_dgram_sendmsg).
    if (!other.dead && type_ != SOCK_DGRAM) {
      other.shutdown = kShutdownMask;  // no more writes
      // Unread data the peer sent us: the connection was reset. A first
      // message with nothing left in it (a zero-length seqpacket message)
      // does not count by itself, as the kernel skips an empty head skb
      // (CONFIG_AF_UNIX_OOB); a stream skb in a queue always has bytes.
      Skb* unread = s.rcv.front();
      if (unread && unread->consumed == unread->len) unread = unread->next;
      if (unread) other.err = ECONNRESET;
      notify_peer = true;
    }
    wake_writer = PurgeLocked(me, purge);
  }
  if (notify_peer) {
    bool waited = ReaderWaits(peer);
    wq_[peer].WakeUp(0, 0);  // skpair->sk_state_change
    AsyncWaitData(peer, POLL_HUP, waited);
  }
  purge.FreeAll();
  if (wake_writer) {
    wq_[peer].WakeUp(kWriteSpace, 1);
    AsyncWriteSpace(peer);
  }
  // unix_release_sock runs the collector when sockets are in flight.
  UnixGc::Request();
  if (ends_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

ssize_t UnixSocket::Read(void* buf, size_t count) {
  iovec seg;
  IoIter it = IoIter::Single(buf, count, seg);
  return ReadIter(it);
}

ssize_t UnixSocket::Write(const void* buf, size_t count) {
  iovec seg;
  IoIter it = IoIter::Single(const_cast<void*>(buf), count, seg);
  return WriteIter(it);
}

ssize_t UnixSocket::ReadIter(IoIter& it) {
  // sock_read_iter: "Match SYS5 behaviour": nothing to read into, nothing
  // read (a datagram stays queued).
  if (it.count() == 0) return 0;
  RecvArgs a{&it, nonblock() ? MSG_DONTWAIT : 0, nullptr, 0, 0, false};
  return pair_->Recv(side_, a);
}

ssize_t UnixSocket::WriteIter(IoIter& it) {
  // sock_write_iter: no zero check, so write(fd, buf, 0) sends an empty
  // datagram on a datagram pair.
  SendArgs a{&it, nonblock() ? MSG_DONTWAIT : 0, nullptr, 0, nullptr, 0};
  return pair_->Send(side_, a);
}

void UnixSocket::NumberRemoved(int) {
  if (in_flight_.load(std::memory_order_relaxed)) UnixGc::Request();
}

void UnixSocket::Release() {
  // __fput takes the file off its fasync list before release.
  pair_->fasync_[side_].Clear(this);
  pair_->Release(side_);
  delete this;
}

namespace {

// socketpair() on another family: what its create() says for each type
// with protocol 0, then sock_no_socketpair (EOPNOTSUPP) if it accepted it.
// Measured on the reference machine (Linux 6.18 as configured here, as
// root); a family without an entry has no net_families registration and
// fails EAFNOSUPPORT. Nonzero protocols are not modelled (docs/semantics.md).
struct FamilyTypes {
  int family;
  uint16_t accepted;        // bit t: type t is created (then EOPNOTSUPP)
  uint16_t protonosupport;  // bit t: create() fails EPROTONOSUPPORT
  uint16_t nodev;           // bit t: create() fails ENODEV
};
constexpr uint16_t Bit(int t) { return static_cast<uint16_t>(1u << t); }
constexpr FamilyTypes kOtherFamilies[] = {
    {AF_INET, Bit(SOCK_STREAM) | Bit(SOCK_DGRAM) | Bit(SOCK_PACKET),
     Bit(SOCK_RAW), 0},
    {AF_INET6, Bit(SOCK_STREAM) | Bit(SOCK_DGRAM), Bit(SOCK_RAW), 0},
    {AF_NETLINK, Bit(SOCK_DGRAM) | Bit(SOCK_RAW), 0, 0},
    {AF_PACKET, Bit(SOCK_DGRAM) | Bit(SOCK_RAW) | Bit(SOCK_PACKET), 0, 0},
    {AF_VSOCK, Bit(SOCK_STREAM) | Bit(SOCK_SEQPACKET), 0, Bit(SOCK_DGRAM)},
    {AF_XDP, Bit(SOCK_RAW), 0, 0},
};

int OtherFamilyError(int family, int type) {
  for (const FamilyTypes& f : kOtherFamilies) {
    if (f.family != family) continue;
    if (f.accepted & Bit(type)) return -EOPNOTSUPP;
    if (f.protonosupport & Bit(type)) return -EPROTONOSUPPORT;
    if (f.nodev & Bit(type)) return -ENODEV;
    return -ESOCKTNOSUPPORT;
  }
  return -EAFNOSUPPORT;
}

// sock_create's checks for the pair (__sock_create, unix_create): 0 if a
// pair can be made, else -errno.
int CheckSocketArgs(int domain, int type, int protocol) {
  if (domain < 0 || domain >= AF_MAX) return -EAFNOSUPPORT;
  if (type >= 11) return -EINVAL;  // SOCK_MAX
  if (domain != AF_UNIX) return OtherFamilyError(domain, type);
  // unix_create: the protocol, then the type (SOCK_RAW is taken as
  // SOCK_DGRAM).
  if (protocol != 0 && protocol != PF_UNIX) return -EPROTONOSUPPORT;
  if (type != SOCK_STREAM && type != SOCK_DGRAM && type != SOCK_SEQPACKET &&
      type != SOCK_RAW) {
    return -ESOCKTNOSUPPORT;
  }
  return 0;
}

}  // namespace

int CreateSocketPair(int domain, int type, int protocol, int sv[2]) {
  // __sys_socketpair: the flag bits, the two descriptors (EMFILE), the
  // copy-out of their numbers (EFAULT), and only then sock_create.
  int flags = type & ~0xf;  // ~SOCK_TYPE_MASK
  if (flags & ~(SOCK_CLOEXEC | SOCK_NONBLOCK)) return -EINVAL;
  type &= 0xf;
  FdTable& table = FdTable::Get();
  long idx[2];
  int err = table.Reserve2(idx);
  if (err) return err;
  if (!sv) {
    table.Unreserve2(idx);
    return -EFAULT;
  }
  // Deviation: the kernel stores the numbers in sv here, so a failure
  // below leaves them (closed again) there; uepoll writes sv on success
  // only, so that a failed call changes nothing.
  err = CheckSocketArgs(domain, type, protocol);
  UnixPair* pair = nullptr;
  UnixSocket* a = nullptr;
  UnixSocket* b = nullptr;
  if (!err) {
    pair = new (std::nothrow) UnixPair(type == SOCK_RAW ? SOCK_DGRAM : type);
    uint32_t f_flags = O_RDWR | ((flags & SOCK_NONBLOCK) ? O_NONBLOCK : 0);
    if (pair) a = new (std::nothrow) UnixSocket(pair, 0, f_flags);
    if (a) b = new (std::nothrow) UnixSocket(pair, 1, f_flags);
    if (!b) err = -ENOMEM;
  }
  if (err) {
    table.Unreserve2(idx);
    delete a;
    delete pair;
    return err;
  }
  pair->SetSocket(0, a);
  pair->SetSocket(1, b);
  table.InstallReserved2(idx, a, b, flags & SOCK_CLOEXEC, sv);
  return 0;
}

}  // namespace uepoll::impl
