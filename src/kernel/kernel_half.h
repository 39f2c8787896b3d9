// KernelHalf: the kernel side of an epoll instance, a kernel epoll at the
// instance's own numbers.
//
// In the default numbering every instance is born with one (its numbers'
// kernel file is a kernel epoll instead of a placeholder, kernel/
// placeholder.h), so that the kernel can hold, watch and nest what user
// space cannot:
//  - the application's kernel descriptors added to the instance: ctl of a
//    kernel descriptor is the kernel's own epoll_ctl on this epoll, with
//    the kernel's semantics and errno order, and the user's epoll_data as
//    given (Ctl);
//  - internal registrations, marked by a cookie in epoll_data (IsInternal):
//    the kernel halves of child instances (so a kernel event below reaches
//    every waiter above through the kernel's own nesting, and the kernel's
//    loop and depth checks see mixed chains), the mirror of a watchable
//    instance (kernel/mirror.h) and the wake token (wake_fd.h);
//  - the instance's sleepers: a waiter of an instance with anything in its
//    kernel half sleeps in epoll_wait on it (Wait), so the kernel's wake-one
//    of its exclusive epoll waiters applies (EPOLLEXCLUSIVE across
//    instances), and a uepoll event wakes it through the token.
// The instance's epoll_data values for the application's descriptors and
// the cookies share one space: a cookie is a random 32-bit key of the
// instance in the high half (top bit set, which neither small integers nor
// user-space pointers have) and an index in the low half; an application
// value equal to a live cookie would be taken for ours (odds 2^-31 for a
// random value, 0 for pointers and small integers).
//
// Numbers. Every operation goes through one number of the instance whose
// kernel file is this epoll (knum_), pinned while it runs (kops_); a close
// or dup2 of that number first moves knum_ to another number of the
// instance and waits for the pinned operations (NumberRemoved), so an
// operation never reaches a number the kernel has handed to someone else.
// A number the application closed with libc close() is noticed when the
// kernel reports it closed (EBADF, POLLNVAL) and dropped (NumberLost). The
// epoll lives exactly as long as the instance's numbers (and a copy held
// for descriptor passing, DupForFlight): closing the last one closes it,
// and a dup of the instance copies it (docs/semantics.md D18).
//
// Thread safety: knum_ and kops_ are atomics; changes of knum_ are
// serialized by kmu_, a leaf lock (taken with nothing else but the number's
// busy bit held, or from a harvest holding no lock). Operations take no
// lock; the kernel serializes them on the epoll.
#ifndef UEPOLL_SRC_KERNEL_KERNEL_HALF_H_
#define UEPOLL_SRC_KERNEL_KERNEL_HALF_H_

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

#include <atomic>
#include <climits>
#include <cstdint>

#include "base/mutex.h"

namespace uepoll::impl {

class File;

class KernelHalf {
 public:
  // Cookie indexes below kFirstChild are fixed; children get the rest.
  static constexpr uint32_t kTokenIndex = 0;
  static constexpr uint32_t kMirrorIndex = 1;
  static constexpr uint32_t kFirstChild = 2;
  // An operation's way of saying "the number I was given is not our epoll".
  static constexpr int kLost = INT_MIN + 1;

  explicit KernelHalf(const File* owner);
  // Closes the copies of a fork child's inherited epoll, if the instance
  // is torn down before its first operation (RebuildInChild).
  ~KernelHalf();
  KernelHalf(const KernelHalf&) = delete;
  KernelHalf& operator=(const KernelHalf&) = delete;

  // A new epoll for an instance's first number (FdTable::Install, kernel
  // numbering), at the lowest free number >= minfd; -errno on failure.
  static int Create(int minfd);

  // --- numbers ---
  // fd now names the instance and its kernel file is this epoll: the
  // operations may use it if they have no number.
  void Adopt(int fd) EXCLUDES(kmu_);
  // fd stops naming the instance (close, dup2 over it); returns once no
  // operation uses it. True if it was the last number.
  bool NumberRemoved(int fd) EXCLUDES(kmu_);
  // Whether fd is the instance's last number with its kernel file (the one
  // the operations use, and no other): a snapshot.
  bool IsLastNumber(int fd) EXCLUDES(kmu_);
  // The kernel reported fd closed: drop it. Not from inside Op.
  void NumberLost(int fd) EXCLUDES(kmu_);
  // The number operations use now, or -1 (for sleep sets: a sleeper must
  // cope with it going away, and AfterSleep reports POLLNVAL).
  int number() const { return knum_.load(std::memory_order_acquire); }

  // Runs fn(k) with k a number of the instance (pinned). If fn returns
  // kLost, k is dropped and fn runs once more with another number. Returns
  // fn's result, or `none` if the instance has no number left.
  template <class Fn>
  int Op(int none, Fn fn) {
    CopyInheritedFirst();
    for (int attempt = 0;; ++attempt) {
      int k, r;
      {
        // Released by a destructor: a cancellation may unwind out of fn
        // (a sleep is a cancellation point, base/cancellable.h).
        InFlight op(&kops_);
        k = knum_.load(std::memory_order_seq_cst);
        r = k < 0 ? none : fn(k);
      }
      if (r != kLost) return r;
      if (attempt > 0) return none;
      NumberLost(k);
    }
  }

  // --- the application's kernel descriptors ---
  // epoll_ctl(op, fd, ev) on the epoll: 0 or -errno. errno is preserved.
  int Ctl(int op, int fd, epoll_event* ev);

  // --- harvests and sleeps ---
  // epoll_pwait2 on the epoll into ev[0..room): internal events included
  // (the caller filters them). timeout null: forever. Returns the count,
  // 0 when the instance has no number, or -EINTR / -EFAULT. errno is
  // preserved.
  int Wait(epoll_event* ev, int room, const timespec* timeout,
           const sigset_t* mask);
  // Whether the epoll is readable now (any ready item, internal included).
  bool Ready();

  // --- internal registrations (cookies) ---
  uint64_t Cookie(uint32_t index) const { return key_ | index; }
  bool IsInternal(uint64_t data) const {
    return (data & 0xffffffff00000000ULL) == key_;
  }
  static uint32_t IndexOf(uint64_t cookie) {
    return static_cast<uint32_t>(cookie);
  }
  // epoll_ctl of our own descriptor fd (a child's epoll, the mirror, the
  // wake eventfd) with a cookie: 0 or -errno.
  int CtlInternal(int op, int fd, uint64_t cookie, uint32_t events);

  // A close-on-exec copy of the epoll at a private number, for a message
  // carrying the instance in flight (sources/scm_rights.h); -1 if none.
  int DupForFlight();

  // In a fork child (the kernel half is shared with the parent there):
  // makes a new epoll and installs it at every number of the instance in
  // place of the old. If copy, the application descriptors registered in
  // the old one are copied into it at the instance's first operation in
  // the child (CopyInheritedFirst), not here: most children exec or exit
  // without one, and the copy costs a read of /proc/self/fdinfo and two
  // system calls per registration (BENCHMARKS.md, "What a fork costs a
  // process that holds the engine"). Until then two close-on-exec copies
  // of the old epoll are kept at private numbers; the two must still name
  // one file when the copy is made (closefrom() in the child may have
  // closed them, and the numbers may name the application's files since).
  // Internal registrations are left to the caller. 0 or -errno (the old
  // one is kept). Only from the atfork child handler.
  int RebuildInChild(bool copy);

  // In a fork child, for an instance that keeps the shared epoll (left as
  // it was at the fork): forgets a copy still pending from the parent
  // process's own fork, which would go into the shared epoll.
  void DropInheritedInChild();

  // Makes the copy RebuildInChild left for the first operation, if one is
  // pending. Every operation calls it (Op); so must a path that hands the
  // epoll's number to the kernel without an operation (a sleep set).
  void CopyInheritedFirst() {
    if (inherited_.load(std::memory_order_acquire) >= 0) [[unlikely]] {
      CopyInherited();
    }
  }

  // In a fork child, from the atfork child handler: forgets the operations
  // other threads of the parent had in flight (a waiter asleep in the
  // epoll, say): they never end here, and a close of the instance's number
  // would wait for them forever (NumberRemoved). The forking thread's own,
  // when a signal handler that interrupted one forked, stay counted.
  void ForgetOtherThreadsOps();

  // For the lock order's declarations only: a leaf, taken under an
  // instance's lock_ (LOCKING, epoll/eventpoll.h).
  Mutex& number_lock() RETURN_CAPABILITY(kmu_) { return kmu_; }

 private:
  // The operations the calling thread has in flight, innermost last (a
  // signal handler may start one inside another), so that a fork child
  // knows which of a count are its own (ForgetOtherThreadsOps). Slots at
  // and above depth are null; deeper than kSlots are counted, not named.
  struct ThreadOps {
    static constexpr int kSlots = 4;
    std::atomic<int>* ops[kSlots];
    int depth;
  };
  static __thread ThreadOps t_ops __attribute__((tls_model("initial-exec")));

  // One operation in flight on knum_, for its scope. The thread's record
  // is written after the count goes up and cleared before it goes down: a
  // fork from a signal handler in between finds an operation counted and
  // not named, and the child's count is at worst one too low for it (the
  // interrupted operation then ends below zero there, which NumberRemoved
  // takes as none), never too high (a wait that would never end).
  class InFlight {
   public:
    explicit InFlight(std::atomic<int>* ops) : ops_(ops) {
      // seq_cst, against NumberRemoved's store of knum_ then load of kops_.
      ops_->fetch_add(1, std::memory_order_seq_cst);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      slot_ = t_ops.depth++;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (slot_ < ThreadOps::kSlots) t_ops.ops[slot_] = ops_;
    }
    ~InFlight() {
      if (slot_ < ThreadOps::kSlots) t_ops.ops[slot_] = nullptr;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      --t_ops.depth;
      std::atomic_signal_fence(std::memory_order_seq_cst);
      ops_->fetch_sub(1, std::memory_order_release);
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    std::atomic<int>* ops_;
    int slot_;
  };

  // Another number of the instance that still holds a kernel file, or -1.
  int OtherNumber(int fd) REQUIRES(kmu_);

  // Adds every application registration of the epoll `from` (one of our
  // numbers) to the epoll `into`, where the same number still names the
  // file registered (kcmp).
  void CopyRegistrations(int from, int into);
  // The copy of CopyInheritedFirst, under imu_.
  void CopyInherited() EXCLUDES(imu_);
  // Forgets the copies of the inherited epoll, closing them if they are
  // still ours (both numbers name one file).
  void DropInheritedLocked() REQUIRES(imu_);

  const File* owner_;
  const uint64_t key_;
  Mutex kmu_;  // serializes changes of knum_
  // A number of the instance whose kernel file is the epoll, or -1.
  std::atomic<int> knum_{-1};
  // Operations in flight on knum_ (Op).
  std::atomic<int> kops_{0};
  // In a fork child until the first operation: two private numbers of the
  // epoll inherited from the parent, whose registrations are still to be
  // copied (RebuildInChild); -1 otherwise. Written under imu_, a leaf
  // (taken by an operation under any of the instance's locks).
  Mutex imu_;
  std::atomic<int> inherited_{-1};
  int inherited2_ GUARDED_BY(imu_) = -1;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_KERNEL_HALF_H_
