// AF_UNIX socket pairs, as the kernel's net/unix/af_unix.c (Linux 6.18)
// behaves for socketpair(AF_UNIX, SOCK_STREAM | SOCK_DGRAM |
// SOCK_SEQPACKET): the state both sockets share, and what each type does
// with it.
//
// A UnixPair holds the state of both sockets (the kernel's two struct
// sock) and their two wait queues; each socket is a File (UnixSocket) that
// names its side. Side i's receive queue holds what side 1-i sent, as a
// list of Skbs: for a stream, one per chunk of a write, which a reader may
// merge; for a datagram or seqpacket pair, one per message, read whole or
// truncated. The code per type: unix_stream.cc (stream send and receive),
// unix_dgram.cc (datagram and seqpacket send and receive); this header and
// unix_pair.cc the rest (poll, shutdown, release, ioctl, creation).
//
// Send buffer accounting (the kernel's sk_wmem_alloc against sk_sndbuf),
// the same for every type: each Skb is charged to its writer while it
// exists, with the truesize the kernel would give it (SkbTruesize for a
// stream chunk, DgramSkbTruesize for a message). A send may charge another
// Skb while the writer's charge is below kSndBuf (a datagram pair has no
// other limit: the peer of a socketpair is connected back to the sender, so
// max_dgram_qlen never applies); the writer is writable (OUT) while
// (charge + 1) * 4 <= kSndBuf. Freeing an Skb (read in full, or purged)
// uncharges it and wakes the writer if now writable.
//
// Descriptors in flight (SCM_RIGHTS, scm_rights.h): an Skb may carry a
// list of files; they stay alive while it does, and the garbage collector
// (unix_gc.h) frees cycles of sockets that only the messages in their own
// queues still hold.
//
// Thread safety: all per-side state lives in UnixPair::mu_, one mutex for
// the pair, so no lock order between the two sockets is needed (the kernel
// has one unix_state_lock per socket and takes them one at a time). The
// wait queues' locks are never held together with mu_: wakeups are issued
// right after mu_ is released, as the kernel calls sk_data_ready and
// sk_state_change after unix_state_unlock. The collector's lock nests
// inside mu_ (UnixGc). Skbs are freed with no lock held. Blocked readers
// and writers sleep through WaitForIo (io_wait.h).
//
// Invariants (under mu_):
//  - side[i].wmem == the sum of the truesize of every Skb written by side i
//    and not yet freed (queued on side 1-i, or being filled by a send).
//  - A stream Skb in a queue has consumed < len.
//  - Once a side is released (dead), its shutdown is both bits, its queue is
//    empty, and nothing is queued to it any more.
//  - A datagram side that is not connected (its peer closed and a send
//    noticed) never becomes connected again.
#ifndef UEPOLL_SRC_SOURCES_UNIX_COMMON_H_
#define UEPOLL_SRC_SOURCES_UNIX_COMMON_H_

#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "base/list.h"
#include "base/mutex.h"
#include "core/file.h"
#include "core/inode.h"
#include "core/io_iter.h"
#include "core/sigio.h"
#include "core/wait_queue.h"
#include "kernel/export.h"
#include "sources/socket_skb.h"

namespace uepoll::impl {

constexpr uint8_t kRcvShutdown = 1;   // RCV_SHUTDOWN
constexpr uint8_t kSendShutdown = 2;  // SEND_SHUTDOWN
constexpr uint8_t kShutdownMask = 3;  // SHUTDOWN_MASK

constexpr uint32_t kDataReady =
    EPOLLIN | EPOLLPRI | EPOLLRDNORM | EPOLLRDBAND;  // sock_def_readable
constexpr uint32_t kWriteSpace =
    EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND;  // unix_write_space

class ScmFiles;
class UnixSocket;
class SockOpts;  // sources/unix_sockopt.h

// ChargeForSend's answer when the pair was exported meanwhile: the send
// goes on in the kernel (kernel/export.h). Not an errno value.
constexpr int kMovedToKernel = -4096;

// A socket's link in the collector's list of sockets in flight (a
// standard-layout holder, so that the list node leads back to it).
struct GcLink {
  ListNode node;
  UnixSocket* sock;
};

// One sendmsg, as the socket sees it after the C API's checks (the kernel's
// struct msghdr after ____sys_sendmsg).
struct SendArgs {
  IoIter* data;
  int flags;             // MSG_*; MSG_DONTWAIT also for O_NONBLOCK
  const sockaddr* name;  // msg_name, nullptr when namelen is 0
  socklen_t namelen;     // clamped to sizeof(sockaddr_storage)
  const void* control;   // msg_control (already checked), or null
  size_t controllen;
  // A later entry of a sendmmsg: the kernel's -ERESTARTSYS ends the batch
  // instead of restarting, so any handled signal ends the wait (-EINTR).
  bool batch_more = false;
};

// One recvmsg (the kernel's struct msghdr in ____sys_recvmsg).
struct RecvArgs {
  IoIter* data;
  int flags;          // MSG_*; MSG_DONTWAIT also for O_NONBLOCK
  char* control;      // msg_control, or nullptr
  size_t controllen;  // in: its size; out: the bytes written
  int msg_flags;      // out: MSG_TRUNC, MSG_CTRUNC, MSG_CMSG_CLOEXEC
  bool want_name;     // msg_name given: its length comes back as 0 (a
                      // socketpair's sockets are never bound)
  // A later entry of a recvmmsg: the kernel's -ERESTARTSYS ends the batch
  // instead of restarting, so any handled signal ends the wait (-EINTR).
  bool batch_more = false;
};

struct Side {
  SkbQueue rcv;           // sk_receive_queue: what the peer sent
  long wmem = 0;          // sk_wmem_alloc - 1: truesize charged to me
  uint8_t shutdown = 0;   // sk_shutdown
  int err = 0;            // sk_err (ECONNRESET), cleared when reported
  bool dead = false;      // released (SOCK_DEAD)
  bool connected = true;  // unix_peer(sk) != NULL (datagram pairs only)
};

class UnixPair {
 public:
  UEPOLL_ALLOCATED_CLASS
  explicit UnixPair(int type) : type_(type) {}
  UnixPair(const UnixPair&) = delete;
  UnixPair& operator=(const UnixPair&) = delete;

  int type() const { return type_; }
  bool stream() const { return type_ == SOCK_STREAM; }

  uint32_t Poll(int me) EXCLUDES(mu_);
  // sendmsg / recvmsg of side `me`: a count or -errno. read and write are
  // these with no flags and no control messages.
  // (An exported pair's calls go to the kernel: the flag sits beside
  // type_, which every call reads anyway.)
  ssize_t Send(int me, SendArgs& a) EXCLUDES(mu_) {
    if (exported_.load(std::memory_order_relaxed)) return ForwardSend(me, a);
    return stream() ? StreamSend(me, a) : MsgSend(me, a);
  }
  ssize_t Recv(int me, RecvArgs& a) EXCLUDES(mu_) {
    if (exported_.load(std::memory_order_relaxed)) return ForwardRecv(me, a);
    return stream() ? StreamRecv(me, a) : MsgRecv(me, a);
  }
  int Shutdown(int me, int how) EXCLUDES(mu_);
  // unix_ioctl: SIOCINQ (FIONREAD), SIOCOUTQ, SIOCATMARK.
  int Ioctl(int me, unsigned long cmd, unsigned long arg) EXCLUDES(mu_);
  // The garbage collector found side `me` unreachable: drop what its
  // receive queue holds (unix_gc's hitlist).
  void PurgeForGc(int me) EXCLUDES(mu_);
  // unix_release_sock for one side; frees the pair when both are gone.
  void Release(int me) EXCLUDES(mu_);

  void SetSocket(int me, UnixSocket* s) EXCLUDES(mu_) {
    MutexLock l(mu_);
    sock_[me] = s;
  }

  // What getsockopt and getpeername read of the pair (capi/sockopt_api.cc).
  // sock_error: side `me`'s pending error, cleared (SO_ERROR).
  int TakeError(int me) EXCLUDES(mu_);
  // recvmmsg keeps an error met after some messages as side `me`'s pending
  // error (WRITE_ONCE of sk_err): no wakeup, as in the kernel.
  void StashError(int me, int err) EXCLUDES(mu_);
  // unix_peer(sk) != NULL: a datagram socket that learnt its peer is gone
  // is no longer connected; a stream or seqpacket socket always is.
  bool Connected(int me) EXCLUDES(mu_);
  // sk_wmem_alloc_get of side `me` (SO_MEMINFO, SIOCOUTQ).
  long WmemAlloc(int me) EXCLUDES(mu_);
  // SO_PEERCRED of both sockets (init_peercred at socketpair): the
  // creator's process and ids, taken the first time anyone asks.
  ucred PeerCred() EXCLUDES(mu_);

  // --- export (kernel/export.h; unix_export.cc) ---
  // Moves both sockets' state into a new kernel socket pair and makes this
  // one a shell whose calls go there. 0 or -errno (nothing changed).
  int Kernelize(ExportSession& s) EXCLUDES(mu_);
  bool exported() const { return exported_.load(std::memory_order_acquire); }
  // Side me's forward descriptor: valid while side me's socket is alive.
  int kfd(int me) const { return kfd_[me].get(); }

  WaitQueue wq_[2];  // each socket's sk_wq: its watchers and sleepers
  // Each socket's wq->fasync_list (core/sigio.h).
  FasyncSlot fasync_[2];

 private:
  static bool WritableLocked(const Side& s) {
    return (s.wmem + 1) * 4 <= kSndBuf;  // unix_writable
  }
  // sock_alloc_send_pskb's wait: may side `me` charge another Skb?
  bool SendReady(int me) EXCLUDES(mu_) {
    MutexLock l(mu_);
    const Side& s = side_[me];
    return s.wmem < kSndBuf || (s.shutdown & kSendShutdown) || s.err ||
           exported_.load(std::memory_order_relaxed);
  }
  // unix_stream_data_wait / __skb_wait_for_more_packets: data, an error
  // or EOF.
  bool RecvReady(int me) EXCLUDES(mu_) {
    MutexLock l(mu_);
    const Side& s = side_[me];
    return !s.rcv.empty() || s.err || (s.shutdown & kRcvShutdown) ||
           exported_.load(std::memory_order_relaxed);
  }
  // Drops a charge for an Skb that never reached the peer (sock_wfree).
  void UnchargeAndWake(int me, long truesize) EXCLUDES(mu_) {
    bool writable;
    {
      MutexLock l(mu_);
      side_[me].wmem -= truesize;
      writable = WritableLocked(side_[me]);
    }
    if (writable) {
      wq_[me].WakeUp(kWriteSpace, 1);
      AsyncWriteSpace(me);
    }
  }
  // sock_alloc_send_pskb: waits until side `me` may charge `truesize`
  // more, then charges it. 0, or -errno (the pending error, EPIPE after
  // SEND_SHUTDOWN, EAGAIN, EINTR / the rule's restart), or kMovedToKernel.
  int ChargeForSend(int me, long truesize, bool nonblock, bool partial)
      EXCLUDES(mu_);
  // Queues skb on side `to` (the peer of the sender), with its descriptors
  // handed to the garbage collector's books.
  void QueueLocked(int to, Skb* skb) REQUIRES(mu_);
  // sock_wake_async's three cases, after the matching wakeup and with no
  // lock held: data arrived for side `to` (SOCK_WAKE_WAITD: not while a
  // stream reader of it waits for data), side `to` became writable after
  // it found no room (SOCK_WAKE_SPACE), and a close or shutdown by the
  // peer (SOCK_WAKE_WAITD with POLL_HUP or POLL_IN).
  //
  // SOCKWQ_ASYNC_WAITDATA is read before the wakeup (ReaderWaits) and
  // acted on after it (AsyncWaitData): a reader the wakeup lets run
  // clears it at once, and the data was its, not the owner's. Reading it
  // after the change made under mu_ is enough: a reader counts itself
  // before it tests the queue under mu_.
  bool ReaderWaits(int to) const {
    return waitdata_[to].load(std::memory_order_relaxed) != 0;
  }
  void AsyncWaitData(int to, int band, bool reader_waited) {
    if (!reader_waited) fasync_[to].Kill(band);
  }
  void AsyncWriteSpace(int to) {
    if (fasync_[to].armed() &&
        nospace_[to].exchange(false, std::memory_order_relaxed)) {
      fasync_[to].Kill(POLL_OUT);
    }
  }
  // SOCKWQ_ASYNC_NOSPACE: side `me` found no room to send (or was polled
  // while not writable).
  void SetNoSpace(int me) {
    if (!nospace_[me].load(std::memory_order_relaxed)) {
      nospace_[me].store(true, std::memory_order_relaxed);
    }
  }
  // Takes every Skb off side `me`'s queue into `out`, uncharging the
  // writer; returns whether the writer should be woken.
  bool PurgeLocked(int me, SkbQueue& out) REQUIRES(mu_);

  // An exported pair's send and receive, through side me's forward
  // descriptor (no lock held).
  ssize_t ForwardSend(int me, SendArgs& a);
  ssize_t ForwardRecv(int me, RecvArgs& a);
  // unix_export.cc: Kernelize's parts, under mu_.
  int SendQueued(int from, int to, const int k[2], ExportSession& s)
      REQUIRES(mu_);
  int FinishKernel(int k[2]) REQUIRES(mu_);

  // unix_stream.cc
  ssize_t StreamSend(int me, SendArgs& a) EXCLUDES(mu_);
  ssize_t StreamRecv(int me, RecvArgs& a) EXCLUDES(mu_);
  // unix_dgram.cc (SOCK_DGRAM and SOCK_SEQPACKET)
  ssize_t MsgSend(int me, SendArgs& a) EXCLUDES(mu_);
  ssize_t MsgRecv(int me, RecvArgs& a) EXCLUDES(mu_);

  const int type_;
  // Set under mu_ by Kernelize, never cleared: the queues are empty from
  // then on and every call goes to the kernel pair through kfd_ (-1 for a
  // side that was released), each closed by its socket's release.
  std::atomic<bool> exported_{false};
  Mutex mu_;  // both sockets' unix_state_lock
  Side side_[2] GUARDED_BY(mu_);
  // The sockets, for the collector's books (the receiving socket of each
  // queued descriptor list); a side's pointer is cleared at its release.
  UnixSocket* sock_[2] GUARDED_BY(mu_) = {nullptr, nullptr};
  std::atomic<int> ends_{2};
  // SOCKWQ_ASYNC_WAITDATA, as a count: stream readers of each side asleep
  // waiting for data. SOCKWQ_ASYNC_NOSPACE of each side. Both are hints
  // for the signal-driven mode only.
  std::atomic<int> waitdata_[2] = {0, 0};
  std::atomic<bool> nospace_[2] = {false, false};
  // PeerCred's answer, once taken (cred_set_ published with release).
  ucred cred_ GUARDED_BY(mu_) = {0, 0, 0};
  bool cred_set_ GUARDED_BY(mu_) = false;

  ForwardFd kfd_[2];  // see exported_
};

// One socket of a pair.
class UnixSocket final : public File {
 public:
  UnixSocket(UnixPair* pair, int side, uint32_t f_flags)
      : File(FileKind::kSocket, f_flags), pair_(pair), side_(side) {
    gc_.link.sock = this;
  }
  ~UnixSocket() override;  // sources/unix_sockopt.cc

  uint32_t Poll(int) override { return pair_->Poll(side_); }
  WaitQueue& PollQueue() override { return pair_->wq_[side_]; }
  ssize_t Read(void* buf, size_t count) override;
  ssize_t Write(const void* buf, size_t count) override;
  ssize_t ReadIter(IoIter& it) override;
  ssize_t WriteIter(IoIter& it) override;
  int Shutdown(int how) override { return pair_->Shutdown(side_, how); }
  int Ioctl(unsigned long cmd, unsigned long arg) override {
    return pair_->Ioctl(side_, cmd, arg);
  }
  // sock_fasync: the socket's own fasync list.
  int Fasync(int fd, bool on) override {
    return pair_->fasync_[side_].Set(this, fd, on);
  }
  int FasyncFd() override { return pair_->fasync_[side_].Fd(this); }
  InodeIdentity* Inode() override { return &identity_; }
  // A number of a socket that is itself in flight went away: its last
  // reference from outside the messages may be gone (UnixGc).
  void NumberRemoved(int fd) override;

  ssize_t SendMsg(SendArgs& a) { return pair_->Send(side_, a); }
  ssize_t RecvMsg(RecvArgs& a) { return pair_->Recv(side_, a); }
  int type() const { return pair_->type(); }
  UnixPair* pair() const { return pair_; }
  int side() const { return side_; }
  void PurgeForGc() { pair_->PurgeForGc(side_); }
  // The options setsockopt set on this socket (sources/unix_sockopt.h):
  // nullptr until the first; made once, freed with the socket.
  SockOpts* opts() const { return opts_.load(std::memory_order_acquire); }
  SockOpts* MakeOpts();

  // The garbage collector's books (unix_gc.cc), under its lock, except
  // next_hit.
  struct Gc {
    int inflight = 0;  // references to this socket in queued lists
    ListNode queued;   // the lists queued on this socket's receive queue
    GcLink link;       // in the collector's list of sockets in flight
    int refs = 0;      // during a marking: inflight not yet explained
    bool candidate = false;
    bool alive = false;
    UnixSocket* next_mark = nullptr;  // a marking's stack
    // The hitlist of the collection that chose this socket as garbage:
    // written under the lock when it takes its extra reference, then read
    // by that collection alone (the reference keeps every other marking
    // from choosing the socket again: it is no candidate while held).
    UnixSocket* next_hit = nullptr;
  } gc_;
  // gc_.inflight != 0, readable without the collector's lock (a hint).
  std::atomic<bool> in_flight_{false};

 protected:
  void Release() override;

 private:
  UnixPair* const pair_;  // shared; freed by the last socket's Release()
  const int side_;
  InodeIdentity identity_;  // fstat's inode (sockfs: one per socket)
  std::atomic<SockOpts*> opts_{nullptr};  // see opts()
};

// f as a uepoll socket, or nullptr if it is another kind of file.
inline UnixSocket* AsUnixSocket(File* f) {
  return f && f->kind() == FileKind::kSocket ? static_cast<UnixSocket*>(f)
                                             : nullptr;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_UNIX_COMMON_H_
