#include "base/keeper_ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <atomic>

#include "base/cancellable.h"
#include "base/env.h"
#include "base/sys.h"

// Newer than the C library's headers on Debian 12 (Linux 6.1): the values
// of Linux's ABI.
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif
#define UEPOLL_IORING_OP_FUTEX_WAIT 51  // Linux 6.7
#define UEPOLL_FUTEX2_SIZE_U32 0x02
#define UEPOLL_FUTEX2_PRIVATE 128  // FUTEX_PRIVATE_FLAG

namespace uepoll::impl {

bool KeeperRing::Allowed() {
  int a = allowed_.load(std::memory_order_relaxed);
  if (a < 0) {
    // base/env.h; where it cannot tell yet, the default, asked again.
    char env[4];
    int found = uepoll_env_get("UEPOLL_KEEPER_RING", env, sizeof env);
    a = found > 0 && strcmp(env, "0") == 0 ? 0 : 1;
    if (found == -1) return a == 1;
    int unknown = -1;
    if (!allowed_.compare_exchange_strong(unknown, a,
                                          std::memory_order_relaxed)) {
      a = unknown;
    }
  }
  return a == 1;
}

bool KeeperRing::SetAllowedForTest(bool on) {
  bool was = Allowed();
  allowed_.store(on ? 1 : 0, std::memory_order_relaxed);
  return was;
}

bool KeeperRing::Open() {
  if (open()) return true;
  if (!Allowed()) return false;
  io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  long fd = sys::Syscall(SYS_io_uring_setup, kMaxQueued,
                         reinterpret_cast<long>(&p), 0, 0, 0, 0);
  bool refused =
      fd < 0 && errno != EMFILE && errno != ENFILE && errno != ENOMEM;
  bool ok = fd >= 0;
  // Every request this ring makes must exist in this kernel: asked by the
  // first ring of the process (a refusal turns rings off for all).
  static std::atomic<bool> ops_supported{false};
  if (ok && !ops_supported.load(std::memory_order_relaxed)) {
    constexpr unsigned kOps = 64;
    alignas(io_uring_probe) unsigned char
        buf[sizeof(io_uring_probe) + kOps * sizeof(io_uring_probe_op)];
    memset(buf, 0, sizeof buf);
    auto* probe = reinterpret_cast<io_uring_probe*>(buf);
    ok = sys::Syscall(SYS_io_uring_register, fd, IORING_REGISTER_PROBE,
                      reinterpret_cast<long>(probe), kOps, 0, 0) == 0;
    for (unsigned op :
         {unsigned{IORING_OP_TIMEOUT}, unsigned{IORING_OP_TIMEOUT_REMOVE},
          unsigned{UEPOLL_IORING_OP_FUTEX_WAIT}}) {
      ok = ok && op <= probe->last_op &&
           (probe->ops[op].flags & IO_URING_OP_SUPPORTED);
    }
    refused = !ok;
    if (ok) ops_supported.store(true, std::memory_order_relaxed);
  }
  if (ok) {
    sq_len_ = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    cq_len_ = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
    bool single = p.features & IORING_FEAT_SINGLE_MMAP;
    if (single && cq_len_ > sq_len_) sq_len_ = cq_len_;
    void* sq = mmap(nullptr, sq_len_, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, static_cast<int>(fd),
                    IORING_OFF_SQ_RING);
    void* cq = single || sq == MAP_FAILED
                   ? sq
                   : mmap(nullptr, cq_len_, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_POPULATE, static_cast<int>(fd),
                          IORING_OFF_CQ_RING);
    sqes_len_ = p.sq_entries * sizeof(io_uring_sqe);
    void* sqes = sq == MAP_FAILED || cq == MAP_FAILED
                     ? MAP_FAILED
                     : mmap(nullptr, sqes_len_, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_POPULATE, static_cast<int>(fd),
                            IORING_OFF_SQES);
    // The thread's own registration, so the descriptor can go at once.
    io_uring_rsrc_update up;
    memset(&up, 0, sizeof up);
    up.offset = ~0U;
    up.data = static_cast<uint64_t>(fd);
    ok = sqes != MAP_FAILED && madvise(sq, sq_len_, MADV_DONTFORK) == 0 &&
         (single || madvise(cq, cq_len_, MADV_DONTFORK) == 0) &&
         madvise(sqes, sqes_len_, MADV_DONTFORK) == 0 &&
         sys::Syscall(SYS_io_uring_register, fd, IORING_REGISTER_RING_FDS,
                      reinterpret_cast<long>(&up), 1, 0, 0) == 1;
    if (ok) {
      index_ = static_cast<int>(up.offset);
      sq_ = sq;
      cq_ = cq;
      sqes_ = static_cast<io_uring_sqe*>(sqes);
      auto* s = static_cast<unsigned char*>(sq);
      auto* c = static_cast<unsigned char*>(cq);
      sq_tail_ = reinterpret_cast<unsigned*>(s + p.sq_off.tail);
      sq_array_ = reinterpret_cast<unsigned*>(s + p.sq_off.array);
      sq_mask_ = *reinterpret_cast<unsigned*>(s + p.sq_off.ring_mask);
      cq_head_ = reinterpret_cast<unsigned*>(c + p.cq_off.head);
      cq_tail_ = reinterpret_cast<unsigned*>(c + p.cq_off.tail);
      cq_mask_ = *reinterpret_cast<unsigned*>(c + p.cq_off.ring_mask);
      cqes_ = reinterpret_cast<io_uring_cqe*>(c + p.cq_off.cqes);
      queued_ = 0;
      owner_pid_ =
          static_cast<pid_t>(sys::Syscall(SYS_getpid, 0, 0, 0, 0, 0, 0));
    } else {
      if (sqes != MAP_FAILED) munmap(sqes, sqes_len_);
      if (cq != MAP_FAILED && cq != sq) munmap(cq, cq_len_);
      if (sq != MAP_FAILED) munmap(sq, sq_len_);
    }
  }
  if (fd >= 0) sys::Close(static_cast<int>(fd));
  if (refused) allowed_.store(0, std::memory_order_relaxed);
  return ok;
}

void KeeperRing::Close() {
  if (!open()) return;
  if (sqes_) munmap(sqes_, sqes_len_);
  if (cq_ != sq_) munmap(cq_, cq_len_);
  munmap(sq_, sq_len_);
  Forget();
}

void KeeperRing::Forget() {
  sq_ = cq_ = nullptr;
  sqes_ = nullptr;
  index_ = -1;
  queued_ = 0;
  owner_pid_ = 0;
}

void KeeperRing::Unqueue() {
  __atomic_store_n(sq_tail_, *sq_tail_ - queued_, __ATOMIC_RELEASE);
  queued_ = 0;
}

__kernel_timespec* KeeperRing::StampTs(int64_t at_ns) {
  __kernel_timespec& ts = ts_[queued_ % kMaxQueued];
  ts.tv_sec = at_ns / 1000000000;
  ts.tv_nsec = at_ns % 1000000000;
  return &ts;
}

void KeeperRing::Push() {
  __atomic_store_n(sq_tail_, *sq_tail_ + 1, __ATOMIC_RELEASE);
  ++queued_;
}

io_uring_sqe* KeeperRing::NextSqe() {
  unsigned tail = *sq_tail_;
  unsigned i = tail & sq_mask_;
  io_uring_sqe* e = &sqes_[i];
  memset(e, 0, sizeof *e);
  sq_array_[i] = i;
  return e;
}

void KeeperRing::QueueTimeout(uint64_t tag, int64_t at_ns) {
  __kernel_timespec* ts = StampTs(at_ns);
  io_uring_sqe* e = NextSqe();
  e->opcode = IORING_OP_TIMEOUT;
  e->fd = -1;
  e->addr = reinterpret_cast<uint64_t>(ts);
  e->len = 1;
  e->off = 0;  // a pure timeout, not a count of completions
  e->timeout_flags = IORING_TIMEOUT_ABS;  // CLOCK_MONOTONIC
  e->user_data = tag;
  Push();
}

void KeeperRing::QueueTimeoutUpdate(uint64_t tag, int64_t at_ns) {
  __kernel_timespec* ts = StampTs(at_ns);
  io_uring_sqe* e = NextSqe();
  e->opcode = IORING_OP_TIMEOUT_REMOVE;
  e->fd = -1;
  e->addr = tag;
  e->addr2 = reinterpret_cast<uint64_t>(ts);
  e->timeout_flags = IORING_TIMEOUT_UPDATE | IORING_TIMEOUT_ABS;
  e->flags = IOSQE_CQE_SKIP_SUCCESS;
  e->user_data = 0;
  Push();
}

void KeeperRing::QueueFutexWait(uint64_t tag, const std::atomic<int>* word,
                                int expected) {
  io_uring_sqe* e = NextSqe();
  e->opcode = UEPOLL_IORING_OP_FUTEX_WAIT;
  e->fd = UEPOLL_FUTEX2_SIZE_U32 | UEPOLL_FUTEX2_PRIVATE;
  e->addr = reinterpret_cast<uint64_t>(word);
  e->addr2 = static_cast<uint32_t>(expected);
  e->addr3 = FUTEX_BITSET_MATCH_ANY;
  e->user_data = tag;
  Push();
}

long KeeperRing::Enter() {
  unsigned n = queued_;
  queued_ = 0;
  long r = CancellableSyscall(
      SYS_io_uring_enter, index_, n, 1,
      IORING_ENTER_GETEVENTS | IORING_ENTER_REGISTERED_RING, 0, 0);
  if (r < 0) queued_ = n;  // none was taken (Unqueue)
  return r;
}

}  // namespace uepoll::impl
