// Parker: how a uepoll thread sleeps and is woken.
//
// Two kinds of sleep, chosen per sleep:
//
//  * futex (the default): FUTEX_WAIT on the parker's own state word. No
//    descriptor is involved. Park() always passes a timeout, which is what
//    gives epoll_wait's signal rule: a futex wait with a timeout that a
//    handled signal interrupts fails EINTR whatever SA_RESTART says (the
//    kernel returns -ERESTART_RESTARTBLOCK, restarted only when no handler
//    ran), exactly like epoll_wait. ParkIo() waits without a timeout, which
//    the kernel restarts under SA_RESTART and fails EINTR otherwise: the rule
//    of a blocking read of a kernel pipe.
//  * descriptor (only when the sleep needs the kernel's help): a signal mask
//    to install atomically (epoll_pwait), or kernel descriptors to watch as
//    well (an instance holding kernel descriptors, poll() over kernel
//    descriptors). The thread sleeps in ppoll() on its own kernel epoll
//    instance (pkep_) plus those descriptors. pkep_ watches a private
//    eventfd (efd_) whose count is 1 forever, registered with no events: a
//    waker "arms" it with epoll_ctl(MOD, EPOLLIN), which makes pkep_
//    readable; the sleeper disarms it (MOD, 0) before each sleep (a keeper
//    resting on its lookahead only when a waker may have armed it). A MOD
//    names both numbers and succeeds only while the registration (efd_'s
//    file at efd_'s number, inside pkep_'s file) exists, so neither the
//    waker nor the sleeper ever writes to, reads from or closes a
//    descriptor the application has since closed and reused (closefrom,
//    close_range, a stray close, fork then close): a failed MOD means the
//    descriptors are no longer ours; they are abandoned, never closed, and
//    the next sleep makes new ones.
//
// States of state_ (the protocol of a thread parker):
//   kEmpty       no token, not sleeping
//   kNotified    a wake arrived; the next Park consumes it and returns
//   kParkedFutex the owner is (about to be) asleep on the futex
//   kParkedFd    the owner is (about to be) asleep in ppoll on pkep_
//   kParkedExternal  asleep in a sleep of the caller's (ParkExternal)
// Park:   Empty -> Parked* (or consume Notified), sleep, then -> Empty.
//         A keeper resting on its lookahead goes ParkedFutex -> ParkedFd
//         for that sleep and back (compare-exchanges: a token fails them).
// Unpark: any -> Notified; FUTEX_WAKE if it was ParkedFutex, arm efd_ if it
//         was ParkedFd.
// A wake that lands after the owner already returned leaves a stale futex
// wake or an armed efd_; the next sleep returns early, finds no token and
// sleeps again: spurious wakeups are absorbed here, never seen by callers.
//
// Results are flags, because a sleep can end for more than one reason: a
// thread can be woken (an event was handed to it) and interrupted (a handler
// ran) by the same sleep, and the caller must see both (the wait loops
// harvest once and fail EINTR if nothing was found).
//
// Cancellation: both sleeps are cancellation points (pthread_cancel). The
// sleeping syscall runs with asynchronous cancellation enabled, from a frame
// with nothing to clean up (CancellableFutexWait; a keeper's ppoll when
// it rests on its lookahead likewise), and the ppoll of the
// descriptor sleep is itself one of libc's cancellation points. Everything a
// caller keeps on its stack while sleeping (wait entries, pinned borrows) is
// undone by destructors, so a cancelled thread leaves nothing behind.
//
// fork(): the child's only thread is the forking one, and at the moment the
// child's atfork handler runs, every parker's descriptors are still the ones
// the parent's threads made: the handler closes them all then (the child has
// copies; the parent keeps its own), before the application can close or
// reuse the numbers, and forgets the parkers of threads that do not exist in
// the child.
//
// Timers (docs/design.md, "Timers"): while a timer is armed, one parked
// thread at a time is the *keeper*: it bounds its sleep by the earliest armed
// expiry, published in timer_due_, and on waking there runs what is due
// itself (Timers::run_due), outside the parked state and holding no
// lock, so the expiry costs one wakeup, not the timer thread's and then
// ours. Whether a thread keeps, and what happens when a keeper leaves, is
// the timer module's business (Timers); base/ only calls it, and a
// thread in a process with nothing armed pays one load of timer_due_ per
// sleep. Only a plain futex sleep keeps: a restartable one (ParkIo) with a
// timeout would no longer be restarted after a handler (read()'s signal
// rule), and a descriptor sleep's ppoll has a slack of 0.1% of its timeout
// whatever the thread's. A keeper's futex sleep runs with a timer slack of
// 1 ns (the thread's own is restored after it), as a kernel timerfd has
// none; one that rests on its lookahead (below) needs none.
//
// The lookahead. The kernel programs the CPU's timer device when a timer
// it arms is earlier than every timer pending on that CPU; armed from a
// thread (a futex timeout is armed as the sleep starts) that costs the
// thread a write of the deadline register, which in a virtual machine is
// an exit to the hypervisor (about 10 us of the thread's CPU time on the
// project's VM; BENCHMARKS.md, "Timers"). A kernel timer armed while an
// earlier one is pending costs a plain insertion; when the earlier one
// fires, the interrupt programs the next. So before each bounded sleep a
// keeper arms one of two kernel timerfds of its own at the expiry after
// its bound, which is not the earliest then; by the next sleep that
// timerfd is pending at the new bound, and the futex timeout, armed at the
// same instant or a little later, is not the earliest either. Better
// still, when the expiry after the bound is armed too and proven ours, the
// keeper *rests* on the lookahead (SleepOnLookahead): it sleeps in pkep_,
// where both timerfds are registered edge-triggered, with no timer of its
// own but a backstop behind the next one; the timerfd's own interrupt ends
// the sleep at the bound, with no slack (so no prctl) and on whichever CPU
// the thread now runs. For that sleep the thread is kParkedFd, so a waker
// arms efd_; the sleeper disarms efd_ only when a waker may have armed it
// (efd_armed_). The timerfds are never read: one left armed at a stale
// instant fires once, and its edge is taken by whichever sleep in pkep_
// sees it (SleepFd harvests it, or ppoll would report pkep_ forever).
// Descriptors that cannot be made only turn the lookahead off for the
// thread.
//
// The ring. A keeper whose sleep may end EINTR at a stop (an epoll wait:
// OnStop::kMayInterrupt) does all of the above in its own io_uring
// instead (base/keeper_ring.h, SleepOnRing): the bound and the lookahead
// are two of the ring's timeouts, Unpark's FUTEX_WAKE completes a
// FUTEX_WAIT request on state_, and one io_uring_enter per expiry submits
// the next timeout and sleeps; the ring has no descriptor number to
// prove ours. The timerfds are the way without a ring (poll(), whose
// sleep the kernel restarts after a stop; a kernel that makes none).
//
// Lifetime: a Parker is thread_local. Wakers only call Unpark while holding
// the lock of the queue the owner's wait entry is on; the owner removes its
// entry under that lock before returning, so no Unpark can touch a Parker of
// a thread that has left its wait.
#ifndef UEPOLL_SRC_BASE_PARKER_H_
#define UEPOLL_SRC_BASE_PARKER_H_

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>

#include <atomic>
#include <cstdint>

#include "base/deadline.h"
#include "base/keeper_ring.h"
#include "base/list.h"

namespace uepoll::impl {

class Parker {
 public:
  // Why a sleep ended; any combination may be set.
  using Result = unsigned;
  static constexpr Result kWoken = 1;        // Unpark() handed a token
  static constexpr Result kTimedOut = 2;     // the deadline passed
  static constexpr Result kInterrupted = 4;  // a handled signal (by the
                                             // rules of the sleep kind)
  static constexpr Result kKernelReady = 8;  // an extra kernel descriptor

  // The calling thread's parker.
  static Parker& Current();

  // What a stop and continue with no handler (SIGSTOP, then SIGCONT) does
  // to a sleep: the kernel restarts poll() and a futex sleep (kWaitOn),
  // and ends epoll_wait with EINTR (kMayInterrupt: the caller accepts
  // that, so a keeper may sleep in its ring, whose sleep ends so).
  enum class OnStop { kWaitOn, kMayInterrupt };

  // Sleeps until Unpark, the deadline, a handled signal (epoll_wait's rule:
  // never restarted) or, if kfds is given, until one of the kernel
  // descriptors kfds[1..nkfds) is ready (their revents are filled in).
  // kfds[0] is reserved for the parker's own descriptor. With mask, it is
  // installed atomically for the sleep, as ppoll and epoll_pwait do.
  Result Park(const Deadline& deadline, const sigset_t* mask,
              pollfd* kfds = nullptr, nfds_t nkfds = 0,
              OnStop on_stop = OnStop::kWaitOn);

  // Sleeps until Unpark or a handled signal, with blocking read()'s
  // restart semantics: kInterrupted only for handlers without SA_RESTART.
  Result ParkIo();

  void Unpark();

  // A sleep the caller makes itself, with the protocol of Park (the
  // before-sleep hook, the timer module's cover, never keeping, a token
  // left by Unpark() ending it): sleep(ctx, until) sleeps at most until
  // `until` and returns why it ended (kKernelReady, kTimedOut,
  // kInterrupted; 0 to be called again). The epoll layer sleeps in
  // epoll_wait on an instance's kernel half this way; Unpark() of such a
  // sleeper only leaves a token (its waker wakes it through the kernel).
  Result ParkExternal(const Deadline& deadline,
                      unsigned (*sleep)(void* ctx, const Deadline& until),
                      void* ctx);

  // Runs before every sleep in the kernel, on the sleeping thread. The
  // epoll layer installs PinBorrowed there (core/borrow.cc) the first time
  // a thread borrows a file, so that no closer waits for a thread that
  // sleeps; base/ itself knows nothing of files.
  static void SetBeforeSleep(void (*hook)()) {
    before_sleep_.store(hook, std::memory_order_relaxed);
  }

  // How sleeps take part in expiring timers (parker.h, "Timers"), installed
  // by the timer module before it first publishes a deadline.
  struct Timers {
    // The calling thread is parked with its own deadline (CLOCK_MONOTONIC
    // ns, INT64_MAX for none); *keeper says whether it keeps already. Makes
    // it keep (or not) and returns the instant it must wake at to run
    // what is due (INT64_MAX: no bound); *after: the next expiry after
    // that instant, known or expected (an interval timer's next period),
    // where a keeper arms its lookahead (INT64_MAX: none).
    int64_t (*cover)(int64_t deadline_ns, bool can_keep, bool* keeper,
                     int64_t* after);
    // The keeper left its sleep for good.
    void (*resign)();
    // Runs every expiry that is due. Called with no lock held.
    void (*run_due)();
  };
  static void SetTimers(const Timers* t) {
    timers_.store(t, std::memory_order_release);  // pairs with ParkLoop
  }
  // The earliest armed expiry (CLOCK_MONOTONIC ns), INT64_MAX when nothing
  // is armed. Written by the timer module under its lock. seq_cst, as are
  // the parking exchange and AnyOtherParked's loads: a thread that parks
  // and then loads INT64_MAX here (so never asks cover) loaded it before
  // the publication of the next arming, which precedes any later keeper's
  // resignation and its scan, so that scan sees the thread parked.
  static void PublishTimerDue(int64_t due_ns) {
    timer_due_.store(due_ns, std::memory_order_seq_cst);
  }
  static int64_t TimerDue() {
    return timer_due_.load(std::memory_order_seq_cst);
  }
  // For an atfork child handler that starts a thread (the timer
  // module's): runs the parkers' own child handler first, while the
  // memory of the parent's other threads is still theirs (parker.cc,
  // ParkerRegistry). Idempotent per fork.
  static void ForkChildFirst();
  // Whether a thread other than the caller is parked now (a resigning
  // keeper asks; the caller itself is not parked at that point), `except`'s
  // not counted (the timer thread asks about all but the keeper's).
  static bool AnyOtherParked(const Parker* except = nullptr);

  // For tests: whether the calling thread holds kernel descriptors for
  // descriptor sleeps, and which (-1 when not).
  int DebugEpollFd() const { return pkep_.load(std::memory_order_relaxed); }
  int DebugEventFd() const { return efd_.load(std::memory_order_relaxed); }
  // For tests, on the owner: the keeper's lookahead timerfd i (0 or 1) and
  // the instant it was last armed at (-1 and 0 when none).
  int DebugLookaheadFd(int i) const { return ltfd_[i]; }
  int64_t DebugLookaheadAt(int i) const { return larmed_[i]; }
  int DebugLookaheadCpu(int i) const { return lcpu_[i]; }
  // For tests, on the owner: whether it has a keeper ring, and the instant
  // ring timeout i is pending at (0: none).
  bool DebugRingOpen() const { return ring_.open(); }
  // Which ring (its mapping's address; nullptr: none), to tell one ring
  // from another made after it.
  const void* DebugRingMapping() const { return ring_.mapping(); }
  int64_t DebugRingAt(int i) const { return rtag_[i] ? rat_[i] : 0; }
  int DebugRingCpu(int i) const { return rcpu_[i]; }
  uint64_t DebugRingSleeps() const { return ring_sleeps_; }
  bool DebugRingFutexPending() const { return rfutex_; }
  // For tests, on the owner: how many sleeps it has made in the kernel.
  uint64_t DebugSleeps() const { return sleeps_; }
  // For tests, from any thread: whether the owner sleeps in pkep_ now.
  bool DebugParkedFd() const {
    return state_.load(std::memory_order_relaxed) == kParkedFd;
  }

  Parker();
  ~Parker();
  Parker(const Parker&) = delete;
  Parker& operator=(const Parker&) = delete;

 private:
  friend struct ParkerRegistry;

  static constexpr int kEmpty = 0;
  static constexpr int kNotified = 1;
  static constexpr int kParkedFutex = -1;
  static constexpr int kParkedFd = -2;
  static constexpr int kParkedExternal = -3;

  // What one sleep of the loop reported; kRetry: the descriptors were
  // found not to be ours, make new ones and start again. kLost: the same,
  // found by a keeper's sleep on its lookahead (SleepOnLookahead handles
  // it itself).
  static constexpr unsigned kRetry = 0x100;
  static constexpr unsigned kLost = 0x200;
  // The user_data of the keeper ring's FUTEX_WAIT request (timeouts take
  // 2 and up; 0 is a failed update's).
  static constexpr uint64_t kRingFutexTag = 1;

  // The lookahead's timerfds in pkep_: edge-triggered, so that each expiry
  // is reported once (they are never read).
  static constexpr uint32_t kLookaheadEvents = EPOLLIN | EPOLLET;
  // How long after the next expiry a sleep on the lookahead ends anyway.
  static constexpr int64_t kBackstopNs = 1000000;  // 1 ms

  // Makes the descriptors of a descriptor sleep (again after a failure:
  // descriptors may have been freed since). false: they could not be made
  // (out of kernel descriptors): the sleep degrades (semantics.md D7).
  bool EnsureFds();
  // Forgets the descriptors without closing them (they are not ours now),
  // the lookahead's with them.
  void AbandonFds();
  // The keeper's kernel lookahead ("Timers" above): a keeper about to sleep
  // until `bound` makes sure a kernel timer of its own is armed at `after`,
  // the next expiry, while an earlier one (its futex's, or a lookahead
  // armed at `bound` by the sleep before) is pending ("The lookahead"
  // above says why). Says what is at `bound`: nothing of ours; a timerfd
  // armed there (unless the application closed it); or, when `rest` asks
  // and `after` is armed too, a timerfd proven ours just now, which the
  // sleep can rest on (SleepOnLookahead).
  enum LookaheadAt { kNothingAtBound, kPendingAtBound, kOursAtBound };
  LookaheadAt Lookahead(int64_t bound, int64_t after, bool rest);
  // Arms lookahead slot `slot` at the absolute instant `at`, once a MOD
  // proved it ours (false: not armed; abandoned if not ours).
  bool ArmLookahead(int slot, int64_t at, int cpu);
  bool ModLookahead(int slot);
  // The keeper's sleep in its ring (base/keeper_ring.h) until `bound`, with
  // a timeout of the ring pending at `after` as the lookahead; ended by
  // that bound (kTimedOut), Unpark (0, the loop takes the token) or a
  // signal (kInterrupted, a stop and continue included). kRetry: no ring
  // (none can be made, or it failed): the caller sleeps another way.
  unsigned SleepOnRing(int64_t bound, int64_t after);
  // Takes the ring's completions: a fired timeout frees its slot, the
  // futex request's ends it. Whether there was any.
  // `fired` (if not null) is set when the timeout tagged `watch` completed
  // because it expired.
  bool ReapRing(uint64_t watch = 0, bool* fired = nullptr);
  // Arms ring slot `slot` at `at` from this CPU (a new timeout, or the
  // pending one moved).
  void ArmRing(int slot, int64_t at, int cpu);
  // The keeper's futex sleep until an absolute CLOCK_MONOTONIC instant.
  unsigned SleepFutexUntil(int64_t at_ns);
  // The keeper's sleep in pkep_, ended by the lookahead's timerfd at
  // bound_ns (kTimedOut), a waker's arming of efd_, a handled signal, or
  // backstop_ns. The thread is kParkedFd for its length.
  unsigned SleepOnLookahead(int64_t bound_ns, int64_t backstop_ns);
  bool EnsureLookahead();
  unsigned SleepFutex(const Deadline& deadline, bool restartable);
  unsigned SleepFd(const Deadline& deadline, const sigset_t* mask, pollfd* kfds,
                   nfds_t nkfds);
  unsigned SleepDegraded(const Deadline& deadline, const sigset_t* mask,
                         pollfd* kfds, nfds_t nkfds);
  template <class SleepOnce>
  Result ParkLoop(int parked_state, const Deadline& deadline, bool can_keep,
                  SleepOnce sleep_once, OnStop on_stop = OnStop::kWaitOn);

  // Relaxed: a thread that has something to pin installed the hook itself,
  // before its own sleep.
  static inline std::atomic<void (*)()> before_sleep_{nullptr};
  static inline std::atomic<const Timers*> timers_{nullptr};
  static inline std::atomic<int64_t> timer_due_{INT64_MAX};
  // The futex word; a waker's exchange here publishes everything it wrote
  // before waking us (acq_rel on both sides).
  std::atomic<int> state_{kEmpty};
  // Descriptors of the descriptor sleep, or -1. Written by the owner only
  // while not parked in a descriptor sleep (a keeper's lookahead makes them
  // while parked on the futex, where no waker reads them); read by a waker
  // that saw kParkedFd, after its acq_rel exchange of state_ (which the
  // owner's parking exchange released), hence relaxed.
  std::atomic<int> pkep_{-1};
  std::atomic<int> efd_{-1};
  // Whether a waker may have armed efd_ since the owner last disarmed it:
  // set by Unpark before its MOD (and by a resting owner when pkep_ was
  // readable before its bound, or a token came), cleared by the owner as
  // it disarms. A sleep on the lookahead
  // disarms only then, so a keeper that no other thread wakes pays no MOD
  // for efd_. Relaxed: a stale false costs one early return of that
  // sleep, which then sets it.
  std::atomic<bool> efd_armed_{false};
  // The lookahead's two kernel timerfds (-1: none yet), registered in
  // pkep_ (kLookaheadEvents) so that a MOD proves each is still ours before
  // it is armed or slept on, and the instant each was last armed at (0:
  // not armed). Used by the owner only (and by the fork child's handler,
  // which closes them).
  int ltfd_[2] = {-1, -1};
  int64_t larmed_[2] = {0, 0};
  // The CPU each was last armed from (-1: unknown). The kernel queues a
  // timer on the CPU that arms it, and its interrupt wakes the sleeper
  // there (Lookahead keeps the two on one CPU).
  int lcpu_[2] = {-1, -1};
  bool lookahead_off_ = false;  // could not be made: keep without it
  // The keeper's ring (SleepOnRing), made by the first keeper sleep that
  // may use it. Its two timeout slots: the tag each was queued with (0:
  // none pending; a tag is never reused), the instant and the CPU it was
  // armed at; whether the FUTEX_WAIT request on state_ is pending. Owner
  // only (the fork child's handler forgets the ring).
  KeeperRing ring_;
  uint64_t rtag_[2] = {0, 0};
  int64_t rat_[2] = {0, 0};
  int rcpu_[2] = {-1, -1};
  bool rfutex_ = false;
  uint64_t rnext_tag_ = 2;    // 0: a failed update; 1: the futex request
  bool ring_off_ = false;     // failed on this thread: keep without it
  bool ring_busy_ = false;    // a sleep in it is under way (a handler's
                              // nested sleep does not use it)
  uint64_t ring_sleeps_ = 0;  // for tests
  uint64_t sleeps_ = 0;       // sleeps in the kernel, for tests
  ListNode registry_node_;    // in ParkerRegistry, for fork()
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_PARKER_H_
