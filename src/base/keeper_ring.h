// KeeperRing: a timer keeper's io_uring, its sleep and its lookahead in
// one system call per expiry (docs/design.md, "The keeper's ring").
//
// A keeper (base/parker.h, "Timers") sleeps until the earliest expiry and
// keeps a kernel timer armed at the expiry after it, so that its next sleep
// is ended by a timer that was not the CPU's earliest when armed (a VM exit
// avoided). With kernel timerfds that took four system calls per expiry:
// the sleep, the arming, and two epoll_ctl MODs proving the timerfds still
// ours (a number the application closed and reused must never be armed:
// semantics.md D19). Here the two timers are io_uring timeouts and the
// sleep is the same io_uring_enter that submits the next one:
//
//  * No number to prove. The ring's descriptor is registered with the
//    thread (IORING_REGISTER_RING_FDS) and closed at once: the ring is
//    reached by its index in the thread's own table, which no close(),
//    closefrom() or dup2() of the application can reach, and its timeouts
//    are requests, not descriptors.
//  * The wakeup. A FUTEX_WAIT request on the parker's state word, so
//    Unpark's FUTEX_WAKE ends the sleep as it ends a futex sleep.
//  * Completions run in the keeper (IORING_SETUP_DEFER_TASKRUN, with
//    SINGLE_ISSUER: the ring is the thread's own): a timeout that fires
//    while the thread does something else costs it nothing until its next
//    sleep in the ring.
//  * fork(): the mappings are MADV_DONTFORK and a child's thread has no
//    registered ring, so the child forgets the ring (Forget) and makes a
//    new one if it keeps.
//
// Only the owner thread uses a KeeperRing; nothing here is shared.
#ifndef UEPOLL_SRC_BASE_KEEPER_RING_H_
#define UEPOLL_SRC_BASE_KEEPER_RING_H_

#include <linux/io_uring.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

namespace uepoll::impl {

class KeeperRing {
 public:
  KeeperRing() = default;
  ~KeeperRing() { Close(); }
  KeeperRing(const KeeperRing&) = delete;
  KeeperRing& operator=(const KeeperRing&) = delete;

  // Whether keepers may use rings in this process: not when
  // UEPOLL_KEEPER_RING=0, nor once a ring could not be made (no io_uring,
  // a seccomp filter, a kernel without the FUTEX_WAIT request: before 6.7).
  static bool Allowed();
  // For tests: turn rings off (false) or back on (true: a kernel that
  // refuses one turns them off again). Returns whether they were allowed.
  static bool SetAllowedForTest(bool on);

  bool open() const { return sq_ != nullptr; }
  const void* mapping() const { return sq_; }
  // Makes the ring. false: none (Allowed() is false from then on if the
  // kernel refused).
  bool Open();
  // Unmaps the ring; the thread's registration goes with the thread.
  void Close();
  // In a fork child: the mappings were not copied and the thread has no
  // registered ring; drop the pointers, unmap nothing.
  void Forget();
  // The process whose thread made the ring (getpid() at Open; 0: none).
  // A vfork child shares its parent's memory, this object included, but
  // not the parent thread's registration (SleepOnRing).
  pid_t owner() const { return owner_pid_; }

  // Queue requests for the next Enter (at most kMaxQueued before it).
  // A pure timeout at the absolute CLOCK_MONOTONIC instant at_ns.
  void QueueTimeout(uint64_t tag, int64_t at_ns);
  // Moves the pending timeout queued with `tag` to at_ns, rearmed from
  // this CPU; only a failure posts a completion (tag 0: the timeout had
  // fired, and its own completion, with `tag`, comes as well).
  void QueueTimeoutUpdate(uint64_t tag, int64_t at_ns);
  // FUTEX_WAIT on a private 32-bit word while it holds `expected`.
  void QueueFutexWait(uint64_t tag, const std::atomic<int>* word, int expected);
  static constexpr unsigned kMaxQueued = 8;

  // Submits what is queued and sleeps until a completion is posted (a
  // cancellation point, base/cancellable.h). -1 with errno on failure,
  // else the count submitted. A signal that ends the sleep after a
  // submission is not reported as EINTR by the kernel: it returns the
  // count, with no completion posted.
  long Enter();
  // After an Enter that failed (nothing was submitted: the kernel returns
  // an error only when it took no entry), takes back what it had queued,
  // leaving the ring as it was before those Queue calls.
  void Unqueue();

  // Calls f(tag, res) for each posted completion, and consumes them.
  template <class F>
  void Reap(F f) {
    unsigned head = *cq_head_;
    unsigned tail = __atomic_load_n(cq_tail_, __ATOMIC_ACQUIRE);
    for (; head != tail; ++head) {
      const io_uring_cqe& c = cqes_[head & cq_mask_];
      f(c.user_data, c.res);
    }
    __atomic_store_n(cq_head_, head, __ATOMIC_RELEASE);
  }

 private:
  // The next entry, cleared; Push() hands it to the kernel's side.
  io_uring_sqe* NextSqe();
  void Push();
  // A timespec for the entry being queued (read by the kernel at submission).
  __kernel_timespec* StampTs(int64_t at_ns);

  static inline std::atomic<int> allowed_{-1};  // -1 unknown, 0 no, 1 yes

  int index_ = -1;  // in the thread's registered rings
  void* sq_ = nullptr;
  size_t sq_len_ = 0;
  void* cq_ = nullptr;  // sq_ when the kernel maps both as one
  size_t cq_len_ = 0;
  io_uring_sqe* sqes_ = nullptr;
  size_t sqes_len_ = 0;
  unsigned* sq_tail_ = nullptr;
  unsigned* sq_array_ = nullptr;
  unsigned sq_mask_ = 0;
  unsigned* cq_head_ = nullptr;
  unsigned* cq_tail_ = nullptr;
  unsigned cq_mask_ = 0;
  io_uring_cqe* cqes_ = nullptr;
  unsigned queued_ = 0;
  pid_t owner_pid_ = 0;
  // Timeouts are read by the kernel when submitted: one per queued entry.
  __kernel_timespec ts_[kMaxQueued] = {};
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_KEEPER_RING_H_
