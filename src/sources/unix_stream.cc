// Stream socket pairs: sendmsg and recvmsg as unix_stream_sendmsg and
// unix_stream_read_generic (Linux 6.18) do them. The model is in
// unix_common.h.
//
// A send cuts the data into Skbs of at most kMaxSkbPayload bytes, charging
// each before it is filled; the descriptors of an SCM_RIGHTS message ride
// on the first one. A receive merges consecutive Skbs until the buffer is
// full (or, with MSG_WAITALL, waits for more), but stops after an Skb that
// carried descriptors, so that each batch of descriptors arrives with the
// bytes that were sent with it.
#include <errno.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "sources/io_wait.h"
#include "sources/scm_rights.h"
#include "sources/unix_common.h"
#include "sources/unix_gc.h"

namespace uepoll::impl {

ssize_t UnixPair::StreamSend(int me, SendArgs& a) {
  ScmFiles* fp = nullptr;
  int err = ScmSend(a.control, a.controllen, &fp);
  if (err) return err;
  IoIter& in = *a.data;
  const size_t count = in.count();
  const bool nonblock = a.flags & MSG_DONTWAIT;
  const int peer = 1 - me;
  bool passed_fds = fp != nullptr;
  size_t sent = 0;
  bool sigpipe = false;
  if (a.flags & MSG_OOB) {
    // The kernel queues one out-of-band byte (CONFIG_AF_UNIX_OOB);
    // uepoll has no out-of-band data (docs/semantics.md D26).
    err = -EOPNOTSUPP;
  } else if (a.namelen) {
    err = -EISCONN;  // a pair's sockets are always connected
  } else {
    MutexLock l(mu_);
    if (side_[me].shutdown & kSendShutdown) {
      err = -EPIPE;  // even a send of 0 bytes
      sigpipe = !(a.flags & MSG_NOSIGNAL);
    }
  }
  while (!err && sent < count) {
    // Keep two messages in the pipe, and at most one page-order-3 frag
    // plus a head per Skb.
    size_t size = std::min(count - sent, kMaxSkbPayload);
    long truesize = SkbTruesize(size);
    // sock_alloc_send_pskb: its EPIPE (a shutdown while we waited) raises
    // no signal.
    err = ChargeForSend(me, truesize, nonblock, sent != 0 || a.batch_more);
    if (err) break;
    // Allocate and fill outside mu_, so that the peer never waits for the
    // allocator, as the kernel copies into the skb before taking the
    // peer's state lock.
    Skb* skb = Skb::Alloc(size, truesize);
    if (!skb) {
      UnchargeAndWake(me, truesize);
      err = -ENOMEM;
      break;
    }
    // Only the first Skb carries the descriptors.
    skb->fp = fp;
    fp = nullptr;
    if (in.CopyFrom(skb->data(), size) != size) {  // the copy-in faults
      Skb::Free(skb);
      UnchargeAndWake(me, truesize);
      err = -EFAULT;
      break;
    }
    mu_.Lock();
    // Relock: the peer's state is re-tested (it may have closed or shut
    // down while we allocated), as unix_stream_sendmsg does under the
    // peer's lock. Our own err/shutdown are not: the kernel checks them
    // only in sock_alloc_send_pskb, before the copy, as we did. The wake
    // below is unconditional, so no wake decision can be stale.
    if (exported_.load(std::memory_order_relaxed)) {
      // Exported while we filled the chunk: it goes to the kernel pair,
      // with the descriptors of the message if it is the first one, and
      // so does the rest (kernel/export.h).
      mu_.Unlock();
      iovec seg;
      IoIter chunk = IoIter::Single(skb->data(), size, seg);
      SendArgs first = a;
      first.data = &chunk;
      if (sent) first.control = nullptr, first.controllen = 0;
      ssize_t r = ForwardSend(me, first);
      Skb::Free(skb);
      if (r < 0) {
        err = static_cast<int>(r);
        break;
      }
      sent += static_cast<size_t>(r);
      if (in.count()) {
        SendArgs rest = a;
        rest.control = nullptr;
        rest.controllen = 0;
        r = ForwardSend(me, rest);
        if (r > 0) sent += static_cast<size_t>(r);
      }
      break;
    }
    Side& other = side_[peer];
    if (other.dead || (other.shutdown & kRcvShutdown)) {
      mu_.Unlock();
      Skb::Free(skb);
      UnchargeAndWake(me, truesize);
      sigpipe = sent == 0 && !(a.flags & MSG_NOSIGNAL);
      err = -EPIPE;
      break;
    }
    QueueLocked(peer, skb);
    mu_.Unlock();
    bool waited = ReaderWaits(peer);
    wq_[peer].WakeUp(kDataReady, 1);  // sk_data_ready
    AsyncWaitData(peer, POLL_IN, waited);
    sent += size;
  }
  // A send of 0 bytes, or one that failed before its first Skb, passes no
  // descriptors.
  if (fp) DestroyScmFiles(fp);
  // Exported while we waited for room: the kernel pair takes the send.
  if (err == kMovedToKernel && !sent) return ForwardSend(me, a);
  if (sigpipe) RaiseSigpipe();
  if (passed_fds) UnixGc::Request();  // wait_for_unix_gc
  return sent ? static_cast<ssize_t>(sent) : err;
}

ssize_t UnixPair::StreamRecv(int me, RecvArgs& a) {
  // Without out-of-band data, MSG_OOB finds none (unix_stream_recv_urg).
  if (a.flags & MSG_OOB) return -EINVAL;
  IoIter& out = *a.data;
  const size_t size = out.count();
  const bool nonblock = a.flags & MSG_DONTWAIT;
  const bool peek = a.flags & MSG_PEEK;
  // sock_rcvlowat: the whole buffer with MSG_WAITALL, else one byte.
  const size_t target = (a.flags & MSG_WAITALL) && size ? size : 1;
  const int peer = 1 - me;
  size_t copied = 0;
  int err = 0;
  ScmFiles* fp = nullptr;  // descriptors for this receive
  SkbQueue done;           // fully read Skbs, freed after mu_ is released
  bool wake_writer = false;
  mu_.Lock();
  Skb* skb = side_[me].rcv.front();
  for (;;) {
    Side& s = side_[me];
    if (exported_.load(std::memory_order_relaxed)) {
      // Exported while we slept: the kernel pair has the rest.
      if (copied) break;
      mu_.Unlock();
      return ForwardRecv(me, a);
    }
    if (!skb) {
      if (copied >= target) break;
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
      int r;
      {
        // unix_stream_data_wait: SOCKWQ_ASYNC_WAITDATA while asleep, on
        // every way out (a cancelled sleep unwinds through here).
        struct WaitData {
          std::atomic<int>& n;
          explicit WaitData(std::atomic<int>& c) : n(c) {
            n.fetch_add(1, std::memory_order_relaxed);
          }
          ~WaitData() { n.fetch_sub(1, std::memory_order_relaxed); }
        } waiting(waitdata_[me]);
        r = WaitForIo(wq_[me], /*exclusive=*/false,
                      copied || a.batch_more ? SignalRule::kPartial
                                             : SignalRule::kRestartable,
                      [this, me] { return RecvReady(me); });
      }
      mu_.Lock();
      // Relock: the queue is read again from its head; err and shutdown
      // are re-tested by the loop. Only a non-peeking receive waits with
      // bytes copied, and it consumed them, so the head is new data.
      if (r) {
        err = r;
        break;
      }
      skb = side_[me].rcv.front();
      continue;
    }
    size_t chunk = std::min<size_t>(skb->len - skb->consumed, size - copied);
    if (out.CopyTo(skb->data() + skb->consumed, chunk) != chunk) {
      // The copy-out faults: nothing of this Skb is consumed.
      if (!copied) err = -EFAULT;
      break;
    }
    copied += chunk;
    if (!peek) {
      skb->consumed += static_cast<uint32_t>(chunk);
      if (skb->fp) {  // unix_detach_fds, even after a partial read
        fp = skb->fp;
        skb->fp = nullptr;
        UnixGc::Dequeued(fp);
      }
      if (skb->consumed < skb->len) break;  // the caller's buffer is full
      s.rcv.PopFront();
      side_[peer].wmem -= skb->truesize;  // sock_wfree
      done.PushBack(skb);
      wake_writer = true;
      if (fp) break;
      if (copied == size) break;
      skb = s.rcv.front();
    } else {
      // A peek copies descriptors and stops at them; it never waits for
      // more once it copied something, and (as the kernel) it moves on
      // to the next Skb even when the buffer is full, so the descriptors
      // of the Skb right after the last byte peeked come along.
      if (skb->fp) {
        fp = ScmClone(*skb->fp);
        break;
      }
      skb = skb->next;
      if (!skb) break;
    }
  }
  // unix_write_space: wake the writer only if it is writable now.
  wake_writer = wake_writer && WritableLocked(side_[peer]);
  mu_.Unlock();
  done.FreeAll();
  if (wake_writer) {
    wq_[peer].WakeUp(kWriteSpace, 1);
    AsyncWriteSpace(peer);
  }
  // Descriptors fill the control buffer; without any, none of it is used.
  if (fp) {
    ScmRecv(a, fp);
  } else {
    a.controllen = 0;
  }
  return copied ? static_cast<ssize_t>(copied) : err;
}

}  // namespace uepoll::impl
