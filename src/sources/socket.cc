// Stream socket pairs, as the kernel's net/unix/af_unix.c (Linux 6.18)
// behaves for socketpair(AF_UNIX, SOCK_STREAM).
//
// A UnixPair holds the state of both sockets (the kernel's two struct
// sock) and their two wait queues; each socket is a File (UnixSocket) that
// names its side. Side i's receive queue holds what side 1-i wrote, as a
// list of Skbs, one per chunk of a write (the kernel's sk_buffs). A reader
// drains Skbs in order and may merge several in one read; a partly read Skb
// keeps its place.
//
// Send buffer accounting (the kernel's sk_wmem_alloc against sk_sndbuf):
// each Skb is charged to its writer while it exists, with the truesize the
// kernel would give it (SkbTruesize). A write may queue another Skb while
// the writer's charge is below kSndBuf; the writer is writable (OUT) while
// (charge + 1) * 4 <= kSndBuf. Freeing an Skb (read in full, or purged by
// the reader's close) uncharges it and wakes the writer if now writable.
//
// Thread safety: all per-side state lives in UnixPair::mu_, one mutex for
// the pair, so no lock order between the two sockets is needed (the kernel
// has one unix_state_lock per socket and takes them one at a time). The
// wait queues' locks are never held together with mu_: wakeups are issued
// right after mu_ is released, as the kernel calls sk_data_ready and
// sk_state_change after unix_state_unlock. Blocked readers and writers
// sleep through WaitForIo (io_wait.h).
//
// Invariants (under mu_):
//  - side[i].wmem == the sum of the truesize of every Skb written by side i
//    and not yet freed (queued on side 1-i, or being filled by a write).
//  - An Skb in a queue has consumed < len.
//  - Once a side is released (dead), its shutdown is both bits, its queue is
//    empty, and nothing is queued to it any more.
#include "sources/socket.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/fd_table.h"
#include "core/file.h"
#include "sources/io_wait.h"
#include "sources/socket_skb.h"

namespace uepoll::impl {
namespace {

constexpr uint8_t kRcvShutdown = 1;   // RCV_SHUTDOWN
constexpr uint8_t kSendShutdown = 2;  // SEND_SHUTDOWN
constexpr uint8_t kShutdownMask = 3;  // SHUTDOWN_MASK

constexpr uint32_t kDataReady =
    EPOLLIN | EPOLLPRI | EPOLLRDNORM | EPOLLRDBAND;  // sock_def_readable
constexpr uint32_t kWriteSpace =
    EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;  // unix_write_space

struct Side {
  SkbQueue rcv;          // sk_receive_queue: bytes the peer wrote
  long wmem = 0;         // sk_wmem_alloc - 1: truesize charged to me
  uint8_t shutdown = 0;  // sk_shutdown
  int err = 0;           // sk_err (ECONNRESET), cleared when reported
  bool dead = false;     // released (SOCK_DEAD)
};

class UnixPair {
 public:
  UEPOLL_ALLOCATED_CLASS
  UnixPair() = default;
  UnixPair(const UnixPair&) = delete;
  UnixPair& operator=(const UnixPair&) = delete;

  uint32_t Poll(int me);
  ssize_t Read(int me, void* buf, size_t count, bool nonblock);
  ssize_t Write(int me, const void* buf, size_t count, bool nonblock);
  int Shutdown(int me, int how);
  // unix_release_sock for one side; frees the pair when both are gone.
  void Release(int me);

  WaitQueue wq_[2];  // each socket's sk_wq: its watchers and sleepers

 private:
  static bool WritableLocked(const Side& s) {
    return (s.wmem + 1) * 4 <= kSndBuf;  // unix_writable
  }
  // sock_alloc_send_pskb's wait: may side `me` charge another Skb?
  bool SendReady(int me) EXCLUDES(mu_) {
    MutexLock l(mu_);
    const Side& s = side_[me];
    return s.wmem + 1 < kSndBuf || (s.shutdown & kSendShutdown) || s.err;
  }
  // unix_stream_data_wait: data, an error or EOF.
  bool RecvReady(int me) EXCLUDES(mu_) {
    MutexLock l(mu_);
    const Side& s = side_[me];
    return !s.rcv.empty() || s.err || (s.shutdown & kRcvShutdown);
  }

  // Drops a charge for an Skb that never reached the peer (sock_wfree).
  void UnchargeAndWake(int me, long truesize) EXCLUDES(mu_) {
    bool writable;
    {
      MutexLock l(mu_);
      side_[me].wmem -= truesize;
      writable = WritableLocked(side_[me]);
    }
    if (writable) wq_[me].WakeUp(kWriteSpace, 1);
  }

  Mutex mu_;  // both sockets' unix_state_lock
  Side side_[2] GUARDED_BY(mu_);
  std::atomic<int> ends_{2};
};

uint32_t UnixPair::Poll(int me) {
  MutexLock l(mu_);
  const Side& s = side_[me];
  uint32_t mask = 0;
  if (s.err) mask |= EPOLLERR;
  if (s.shutdown == kShutdownMask) mask |= EPOLLHUP;
  if (s.shutdown & kRcvShutdown) mask |= EPOLLRDHUP | EPOLLIN | EPOLLRDNORM;
  if (!s.rcv.empty()) mask |= EPOLLIN | EPOLLRDNORM;
  // Writable even when the peer has shut down: "prevents stuck sockets".
  if (WritableLocked(s)) mask |= EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;
  return mask;
}

ssize_t UnixPair::Read(int me, void* buf, size_t count, bool nonblock) {
  if (count == 0) return 0;  // sock_read_iter: "Match SYS5 behaviour"
  char* out = static_cast<char*>(buf);
  const int peer = 1 - me;
  size_t copied = 0;
  int err = 0;
  SkbQueue done;  // fully read Skbs, freed after mu_ is released
  bool wake_writer = false;
  mu_.Lock();
  for (;;) {
    Side& s = side_[me];
    Skb* skb = s.rcv.front();
    if (!skb) {
      // The target (SO_RCVLOWAT) is 1 byte: any data ends the read.
      if (copied) break;
      // "POSIX 1003.1g mandates this order": error, then EOF.
      if (s.err) {
        err = -s.err;
        s.err = 0;
        break;
      }
      if (s.shutdown & kRcvShutdown) break;
      if (nonblock) {
        err = -EAGAIN;
        break;
      }
      mu_.Unlock();
      int r = WaitForIo(wq_[me], /*exclusive=*/false, SignalRule::kRestartable,
                        [this, me] { return RecvReady(me); });
      if (r) return r;
      mu_.Lock();
      // Relock: the loop re-reads the queue, err and shutdown; nothing was
      // copied before the sleep, so wake_writer is still false.
      continue;
    }
    if (UserFault(out + copied)) {  // the copy-out faults: nothing consumed
      err = -EFAULT;
      break;
    }
    size_t chunk = std::min<size_t>(skb->len - skb->consumed, count - copied);
    std::memcpy(out + copied, skb->data() + skb->consumed, chunk);
    skb->consumed += static_cast<uint32_t>(chunk);
    copied += chunk;
    if (skb->consumed < skb->len) break;  // the caller's buffer is full
    s.rcv.PopFront();
    side_[peer].wmem -= skb->truesize;  // sock_wfree
    done.PushBack(skb);
    wake_writer = true;
    if (copied == count) break;
  }
  // unix_write_space: wake the writer only if it is writable now.
  wake_writer = wake_writer && WritableLocked(side_[peer]);
  mu_.Unlock();
  done.FreeAll();
  if (wake_writer) wq_[peer].WakeUp(kWriteSpace, 1);
  return copied ? static_cast<ssize_t>(copied) : err;
}

ssize_t UnixPair::Write(int me, const void* buf, size_t count, bool nonblock) {
  const char* in = static_cast<const char*>(buf);
  const int peer = 1 - me;
  size_t sent = 0;
  int err = 0;
  bool sigpipe = false;
  {
    MutexLock l(mu_);
    if (side_[me].shutdown & kSendShutdown) {
      err = -EPIPE;
      sigpipe = true;
      count = 0;  // skip the loop; even a write of 0 bytes fails here
    }
  }
  while (sent < count) {
    // Keep two messages in the pipe, and at most one page-order-3 frag
    // plus a head per Skb (unix_stream_sendmsg).
    size_t size = std::min(count - sent, kMaxSkbPayload);
    long truesize = SkbTruesize(size);
    // sock_alloc_send_pskb: wait until the charge is below the send buffer.
    mu_.Lock();
    for (;;) {
      Side& s = side_[me];
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
      if (nonblock) {
        err = -EAGAIN;
        break;
      }
      mu_.Unlock();
      int r = WaitForIo(wq_[me], /*exclusive=*/false,
                        sent ? SignalRule::kPartial : SignalRule::kRestartable,
                        [this, me] { return SendReady(me); });
      mu_.Lock();
      // Relock: err, shutdown and the charge are re-tested (here and by
      // the loop), never taken from before the sleep.
      if (r && !(side_[me].wmem < kSndBuf)) {
        err = r;
        break;
      }
    }
    mu_.Unlock();
    if (err) break;
    // Allocate and fill outside mu_, so that the peer never waits for the
    // allocator, as the kernel copies into the skb before taking the peer's
    // state lock.
    Skb* skb = Skb::Alloc(size, truesize);
    if (!skb) {
      UnchargeAndWake(me, truesize);
      err = -ENOMEM;
      break;
    }
    if (UserFault(in + sent)) {  // the copy-in faults: nothing queued
      Skb::Free(skb);
      UnchargeAndWake(me, truesize);
      err = -EFAULT;
      break;
    }
    std::memcpy(skb->data(), in + sent, size);
    mu_.Lock();
    // Relock: the peer's state is re-tested (it may have closed or shut
    // down while we allocated), as unix_stream_sendmsg does under the
    // peer's lock. Our own err/shutdown are not: the kernel checks them
    // only in sock_alloc_send_pskb, before the copy, as we did. The wake
    // below is unconditional, so no wake decision can be stale.
    Side& other = side_[peer];
    if (other.dead || (other.shutdown & kRcvShutdown)) {
      mu_.Unlock();
      Skb::Free(skb);
      UnchargeAndWake(me, truesize);
      sigpipe = sent == 0;
      err = -EPIPE;
      break;
    }
    other.rcv.PushBack(skb);
    mu_.Unlock();
    wq_[peer].WakeUp(kDataReady, 1);  // sk_data_ready
    sent += size;
  }
  if (sigpipe) RaiseSigpipe();
  return sent ? static_cast<ssize_t>(sent) : err;
}

int UnixPair::Shutdown(int me, int how) {
  if (how < SHUT_RD || how > SHUT_RDWR) return -EINVAL;
  // SHUT_RD -> RCV_SHUTDOWN, SHUT_WR -> SEND_SHUTDOWN, SHUT_RDWR -> both;
  // the peer gets the mirror image.
  uint8_t mode = static_cast<uint8_t>(how + 1);
  uint8_t peer_mode = 0;
  if (mode & kRcvShutdown) peer_mode |= kSendShutdown;
  if (mode & kSendShutdown) peer_mode |= kRcvShutdown;
  {
    MutexLock l(mu_);
    side_[me].shutdown |= mode;
    side_[1 - me].shutdown |= peer_mode;
  }
  wq_[me].WakeUp(0, 0);  // sk_state_change: wake all, no hint
  wq_[1 - me].WakeUp(0, 0);
  return 0;
}

void UnixPair::Release(int me) {
  const int peer = 1 - me;
  SkbQueue purge;
  bool wake_writer;
  {
    MutexLock l(mu_);
    Side& s = side_[me];
    Side& other = side_[peer];
    s.dead = true;
    s.shutdown = kShutdownMask;
    if (!other.dead) {
      other.shutdown = kShutdownMask;  // no more writes
      // Unread data the peer sent us: the connection was reset.
      if (!s.rcv.empty()) other.err = ECONNRESET;
    }
    wake_writer = !s.rcv.empty();
    while (Skb* skb = s.rcv.front()) {
      s.rcv.PopFront();
      other.wmem -= skb->truesize;
      purge.PushBack(skb);
    }
    wake_writer = wake_writer && !other.dead && WritableLocked(other);
  }
  wq_[peer].WakeUp(0, 0);  // skpair->sk_state_change
  purge.FreeAll();
  if (wake_writer) wq_[peer].WakeUp(kWriteSpace, 1);
  if (ends_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

class UnixSocket final : public File {
 public:
  UnixSocket(UnixPair* pair, int side, uint32_t f_flags)
      : File(FileKind::kSocket, f_flags), pair_(pair), side_(side) {}

  uint32_t Poll(int) override { return pair_->Poll(side_); }
  WaitQueue& PollQueue() override { return pair_->wq_[side_]; }
  ssize_t Read(void* buf, size_t count) override {
    return pair_->Read(side_, buf, count, nonblock());
  }
  ssize_t Write(const void* buf, size_t count) override {
    return pair_->Write(side_, buf, count, nonblock());
  }
  int Shutdown(int how) override { return pair_->Shutdown(side_, how); }

 protected:
  void Release() override {
    pair_->Release(side_);
    delete this;
  }

 private:
  UnixPair* const pair_;  // shared; freed by the last socket's Release()
  const int side_;
};

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
// stream pair can be made, else -errno.
int CheckSocketArgs(int domain, int type, int protocol) {
  if (domain < 0 || domain >= AF_MAX) return -EAFNOSUPPORT;
  if (type >= 11) return -EINVAL;  // SOCK_MAX
  if (domain != AF_UNIX) return OtherFamilyError(domain, type);
  // unix_create: the protocol, then the type.
  if (protocol != 0 && protocol != PF_UNIX) return -EPROTONOSUPPORT;
  if (type == SOCK_DGRAM || type == SOCK_SEQPACKET || type == SOCK_RAW) {
    return -EOPNOTSUPP;  // deviation: uepoll has stream pairs only
  }
  if (type != SOCK_STREAM) return -ESOCKTNOSUPPORT;
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
    pair = new (std::nothrow) UnixPair;
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
  table.InstallReserved2(idx, a, b, flags & SOCK_CLOEXEC, sv);
  return 0;
}

}  // namespace uepoll::impl
