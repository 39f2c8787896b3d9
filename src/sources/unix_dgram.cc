// Datagram and seqpacket socket pairs: sendmsg and recvmsg as
// unix_dgram_sendmsg, unix_seqpacket_sendmsg and __unix_dgram_recvmsg
// (Linux 6.18) do them. The model is in unix_common.h.
//
// Each send is one message, one Skb (a zero-length message included),
// charged DgramSkbTruesize; it is read whole or truncated (MSG_TRUNC).
// What differs between the two types:
//   - a seqpacket send first reports a pending error (sock_error) and
//     ignores a destination address; a datagram send validates one;
//   - a peer's close shuts a seqpacket socket down (EOF, HUP, EPIPE on
//     send, ECONNRESET if the peer left data unread); a datagram socket
//     learns of it only at its next send, which fails ECONNREFUSED,
//     disconnects it (later sends fail ENOTCONN) and drops what its own
//     queue still held (unix_dgram_disconnected);
//   - shutdown is mirrored on a seqpacket peer only (UnixPair::Shutdown);
//   - a nonblocking receive after SHUT_RD returns 0 (EOF) on a seqpacket
//     socket, EAGAIN on a datagram socket.
// Neither raises SIGPIPE.
#include <errno.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>

#include "sources/io_wait.h"
#include "sources/scm_rights.h"
#include "sources/unix_common.h"
#include "sources/unix_gc.h"

namespace uepoll::impl {
namespace {

// unix_validate_addr, then what unix_find_other would find: no uepoll
// socket has a name, so a valid address names no socket uepoll can reach
// (docs/semantics.md D26): ENOENT for a pathname, ECONNREFUSED for an
// abstract name, as when nothing is bound there.
int CheckDestination(const sockaddr* name, socklen_t namelen) {
  if (namelen <= offsetof(sockaddr_un, sun_path) ||
      namelen > sizeof(sockaddr_un) || name->sa_family != AF_UNIX) {
    return -EINVAL;
  }
  const auto* un = reinterpret_cast<const sockaddr_un*>(name);
  return un->sun_path[0] ? -ENOENT : -ECONNREFUSED;
}

}  // namespace

ssize_t UnixPair::MsgSend(int me, SendArgs& a) {
  const bool seq = type_ == SOCK_SEQPACKET;
  const int peer = 1 - me;
  if (seq) {
    // unix_seqpacket_sendmsg: a pending error first (and cleared); a pair
    // is always established; the address is ignored.
    MutexLock l(mu_);
    if (int e = side_[me].err) {
      side_[me].err = 0;
      return -e;
    }
  }
  socklen_t namelen = seq ? 0 : a.namelen;
  ScmFiles* fp = nullptr;
  int err = ScmSend(a.control, a.controllen, &fp);
  if (err) return err;
  bool passed_fds = fp != nullptr;
  IoIter& in = *a.data;
  const size_t len = in.count();
  long truesize = DgramSkbTruesize(len);
  Skb* skb = nullptr;
  if (a.flags & MSG_OOB) {
    err = -EOPNOTSUPP;
  } else if (namelen && CheckDestination(a.name, namelen) == -EINVAL) {
    err = -EINVAL;
  } else if (len > static_cast<size_t>(kSndBuf - 32)) {
    err = -EMSGSIZE;
  } else {
    err = ChargeForSend(me, truesize, a.flags & MSG_DONTWAIT, a.batch_more);
    if (!err) {
      skb = Skb::Alloc(len, truesize);
      if (!skb) {
        UnchargeAndWake(me, truesize);
        err = -ENOMEM;
      }
    }
  }
  if (skb) {
    skb->fp = fp;
    fp = nullptr;
    if (in.CopyFrom(skb->data(), len) != len) err = -EFAULT;
  }
  bool queued = false;
  SkbQueue dropped;  // our own queue, purged by a disconnect
  if (skb && !err) {
    if (namelen) {
      err = CheckDestination(a.name, namelen);
    } else {
      MutexLock l(mu_);
      Side& s = side_[me];
      Side& other = side_[peer];
      if (!s.connected) {
        err = -ENOTCONN;
      } else if (other.dead) {
        if (seq) {
          err = -EPIPE;
        } else {
          // unix_dgram_disconnected: the peer is gone for good.
          // What it sent us is dropped; its charge goes with it (nobody
          // waits for the dead peer's room).
          s.connected = false;
          PurgeLocked(me, dropped);
          err = -ECONNREFUSED;
        }
      } else if (other.shutdown & kRcvShutdown) {
        err = -EPIPE;
      } else if (exported_.load(std::memory_order_relaxed)) {
        err = kMovedToKernel;  // the message goes to the kernel, below
      } else {
        QueueLocked(peer, skb);
        queued = true;
      }
    }
  }
  if (err == kMovedToKernel) {
    // Exported meanwhile (kernel/export.h): the message as copied, or as
    // the caller has it if nothing was copied yet.
    SendArgs moved = a;
    iovec seg;
    IoIter copy = IoIter::Single(skb ? skb->data() : nullptr, len, seg);
    if (skb) moved.data = &copy;
    ssize_t r = ForwardSend(me, moved);
    // Its descriptors went from a.control, as the caller numbers them.
    if (skb) Skb::Free(skb);
    if (fp) DestroyScmFiles(fp);
    return r;
  }
  if (queued) {
    bool waited = ReaderWaits(peer);
    wq_[peer].WakeUp(kDataReady, 1);  // sk_data_ready
    AsyncWaitData(peer, POLL_IN, waited);
  } else if (skb) {
    Skb::Free(skb);
    UnchargeAndWake(me, truesize);
  }
  dropped.FreeAll();
  if (fp) DestroyScmFiles(fp);
  if (passed_fds) UnixGc::Request();
  return queued ? static_cast<ssize_t>(len) : err;
}

ssize_t UnixPair::MsgRecv(int me, RecvArgs& a) {
  if (a.flags & MSG_OOB) return -EOPNOTSUPP;
  const bool seq = type_ == SOCK_SEQPACKET;
  const bool peek = a.flags & MSG_PEEK;
  const bool nonblock = a.flags & MSG_DONTWAIT;
  const int peer = 1 - me;
  int err = 0;
  Skb* skb = nullptr;
  mu_.Lock();
  for (;;) {
    Side& s = side_[me];
    if (exported_.load(std::memory_order_relaxed)) {  // kernel/export.h
      mu_.Unlock();
      return ForwardRecv(me, a);
    }
    // __skb_try_recv_datagram: a pending error before any message.
    if (s.err) {
      err = -s.err;
      s.err = 0;
      break;
    }
    skb = s.rcv.front();
    if (skb) {
      if (!peek) s.rcv.PopFront();
      break;
    }
    if (nonblock) {
      // "Signal EOF on disconnected non-blocking SEQPACKET socket."
      err = seq && (s.shutdown & kRcvShutdown) ? 0 : -EAGAIN;
      break;
    }
    // __skb_wait_for_more_packets: EOF ends a blocking receive.
    if (s.shutdown & kRcvShutdown) break;
    mu_.Unlock();
    // Receivers wait exclusively: one message wakes one of them.
    int r = WaitForIo(
        wq_[me], /*exclusive=*/true,
        a.batch_more ? SignalRule::kPartial : SignalRule::kRestartable,
        [this, me] { return RecvReady(me); });
    mu_.Lock();
    // Relock: the error, the queue and the shutdown are all re-read.
    if (r) {
      err = r;
      break;
    }
  }
  if (!skb) {
    mu_.Unlock();
    // End of stream (0) writes back like a receive that found a message
    // without descriptors: no control data (____sys_recvmsg's
    // msg_controllen is what scm_recv wrote, nothing here).
    a.controllen = 0;
    return err;
  }
  IoIter& out = *a.data;
  size_t size = out.count();
  if (size > skb->len) {
    size = skb->len;
  } else if (size < skb->len) {
    a.msg_flags |= MSG_TRUNC;
  }
  ScmFiles* fp = nullptr;
  ssize_t ret;
  if (out.CopyTo(skb->data(), size) != size) {
    // The message was already taken off the queue: it is lost, with its
    // descriptors (a peek leaves it).
    ret = -EFAULT;
  } else {
    ret = (a.flags & MSG_TRUNC) ? static_cast<ssize_t>(skb->len)
                                : static_cast<ssize_t>(size);
    if (skb->fp) {
      if (!peek) {
        fp = skb->fp;  // unix_detach_fds
        skb->fp = nullptr;
        UnixGc::Dequeued(fp);
      } else {
        fp = ScmClone(*skb->fp);  // unix_peek_fds
      }
    }
  }
  bool wake_writer = false;
  if (!peek) {
    side_[peer].wmem -= skb->truesize;  // sock_wfree
    wake_writer = WritableLocked(side_[peer]);
  }
  mu_.Unlock();
  if (!peek) Skb::Free(skb);
  if (wake_writer) {
    wq_[peer].WakeUp(kWriteSpace, 1);
    AsyncWriteSpace(peer);
  }
  if (fp) {
    ScmRecv(a, fp);
  } else {
    a.controllen = 0;
  }
  return ret;
}

}  // namespace uepoll::impl
