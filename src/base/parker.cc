#include "base/parker.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "base/cancellable.h"
#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/private_fd.h"
#include "base/sys.h"
#include "base/unlisted_epoll.h"

namespace uepoll::impl {

// Every live Parker, so that the child of a fork() can close the descriptors
// of all of them while the numbers are still theirs (parker.h). Its lock is
// taken by the atfork prepare handler, so no parker is half-registered when
// the child starts.
//
// The walk must come before any thread starts in the child: glibc gives a
// new thread the stack, thread-local Parker included, of a thread that did
// not survive the fork, which would overwrite a parker still listed. An
// atfork child handler that starts a thread (the timer module's) runs this
// one first (Parker::ForkChildFirst); it then does nothing when its own
// turn comes.
struct ParkerRegistry {
  Mutex mu;
  ListNode parkers GUARDED_BY(mu);
  // Set by Prepare, cleared by Parent and by the child's walk.
  bool child_pending GUARDED_BY(mu) = false;

  static ParkerRegistry& Get() {
    // The atfork handlers are registered at the first use. The registry
    // itself is a constant-initialized static, trivially destructible (so
    // still there for threads that exit after static destructors ran),
    // among the other data the handlers write (base/fork_path.h).
    static ParkerRegistry* r = Init();
    return *r;
  }
  // The registry if one was made (null: no parker, and no atfork handler).
  static inline std::atomic<ParkerRegistry*> made{nullptr};

  // Unchecked: atfork handlers lock in one function and unlock in another
  // (Child runs holding mu, and walks parkers, under Prepare's lock).
  static void Child() NO_THREAD_SAFETY_ANALYSIS;

 private:
  static ParkerRegistry* Init();
  static void Prepare() NO_THREAD_SAFETY_ANALYSIS {
    Get().mu.Lock();
    Get().child_pending = true;
  }
  static void Parent() NO_THREAD_SAFETY_ANALYSIS {
    Get().child_pending = false;
    Get().mu.Unlock();
  }
};

namespace {

// The calling thread's parker, once constructed (for the fork child).
thread_local Parker* tl_self = nullptr;

constexpr int64_t kFutexChunkNs = int64_t{3600} * 1000000000;  // 1 hour

// The futex sleep, as a cancellation point (base/cancellable.h). Returns
// the syscall's result, errno preserved.
long CancellableFutexWait(std::atomic<int>* word, int val,
                          const timespec* rel) {
  return CancellableSyscall(
      SYS_futex, reinterpret_cast<long>(reinterpret_cast<int*>(word)),
      FUTEX_WAIT | FUTEX_PRIVATE_FLAG, val, reinterpret_cast<long>(rel), 0, 0);
}

// All waiters: besides the owner's own sleep, a FUTEX_WAIT request of its
// keeper ring may be queued on the word, left from an earlier sleep in the
// ring (SleepOnRing); waking one could wake only that request.
void FutexWake(std::atomic<int>* word) {
  syscall(SYS_futex, reinterpret_cast<int*>(word),
          FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, nullptr, nullptr, 0);
}

// MOD of efd's registration in pkep: the identity check that makes every
// use of the two numbers safe (parker.h). events 0 disarms, EPOLLIN arms.
bool ModWake(int pkep, int efd, uint32_t events) {
  if (pkep < 0 || efd < 0) return false;
  epoll_event ev{};
  ev.events = events;
  return sys::EpollCtl(pkep, EPOLL_CTL_MOD, efd, &ev) == 0;
}

// A keeper's sleep ends at a timer's expiry, which a kernel timerfd meets
// with no slack; the thread's own slack (50 us by default, applied to every
// futex and ppoll timeout) would make each expiry run that much late. It is
// set to 1 ns for that sleep only and restored on every way out (a
// cancellation unwinding the sleep included): the application's value is
// read each time, never cached, so one it sets is never overwritten.
class KeeperSlack {
 public:
  KeeperSlack() {
    int saved = errno;
    long cur = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (cur > 1 && prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0) old_ = cur;
    errno = saved;
  }
  ~KeeperSlack() {
    if (old_ <= 1) return;
    int saved = errno;
    prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_), 0, 0, 0);
    errno = saved;
  }
  KeeperSlack(const KeeperSlack&) = delete;
  KeeperSlack& operator=(const KeeperSlack&) = delete;

 private:
  long old_ = 0;
};

// The relative timeout of one sleep; nullptr for an infinite deadline.
const timespec* SleepTimeout(const Deadline& deadline, timespec* ts) {
  return deadline.RemainingTimespec(ts);
}

UEPOLL_FORK_DATA constinit ParkerRegistry g_registry;

}  // namespace

ParkerRegistry* ParkerRegistry::Init() {
  ParkerRegistry* r = &g_registry;
  pthread_atfork(Prepare, Parent, Child);
  made.store(r, std::memory_order_release);
  return r;
}

UEPOLL_FORK_PATH void Parker::ForkChildFirst() {
  if (ParkerRegistry::made.load(std::memory_order_acquire)) {
    ParkerRegistry::Child();
  }
}

UEPOLL_FORK_PATH void ParkerRegistry::Child() {
  ParkerRegistry& r = Get();
  if (!r.child_pending) return;  // done already, by ForkChildFirst
  r.child_pending = false;
  // Only the forking thread exists here, and no application code has run
  // since fork(): every number below is still the one its parker made, a
  // copy the child owns. Close them all; the parkers of threads that do not
  // exist in the child are forgotten (their memory is never used again).
  for (ListNode* n = r.parkers.next; n != &r.parkers; n = n->next) {
    Parker* p = UEPOLL_CONTAINER_OF(n, Parker, registry_node_);
    int ep = p->pkep_.exchange(-1, std::memory_order_relaxed);
    int ef = p->efd_.exchange(-1, std::memory_order_relaxed);
    if (ep >= 0) sys::Close(ep);
    if (ef >= 0) sys::Close(ef);
    for (int i = 0; i < 2; ++i) {
      if (p->ltfd_[i] >= 0) sys::Close(p->ltfd_[i]);
      p->ltfd_[i] = -1;
      p->larmed_[i] = 0;
    }
    // Not copied (MADV_DONTFORK), and no thread of the child has it
    // registered (keeper_ring.h).
    p->ring_.Forget();
    p->rtag_[0] = p->rtag_[1] = 0;
    p->rfutex_ = false;
    p->ring_busy_ = false;
  }
  r.parkers.Reset();
  if (tl_self) {
    tl_self->registry_node_.Reset();
    r.parkers.PushBack(&tl_self->registry_node_);
  }
  r.mu.Unlock();
}

bool Parker::AnyOtherParked(const Parker* except) {
  ParkerRegistry& r = ParkerRegistry::Get();
  MutexLock l(r.mu);
  for (ListNode* n = r.parkers.next; n != &r.parkers; n = n->next) {
    Parker* p = UEPOLL_CONTAINER_OF(n, Parker, registry_node_);
    if (p == except) continue;
    // seq_cst: pairs with the parking exchange in ParkLoop (parker.h,
    // PublishTimerDue).
    if (p->state_.load(std::memory_order_seq_cst) < 0) return true;
  }
  return false;
}

Parker& Parker::Current() {
  thread_local Parker parker;
  return parker;
}

Parker::Parker() {
  ParkerRegistry& r = ParkerRegistry::Get();
  MutexLock l(r.mu);
  r.parkers.PushBack(&registry_node_);
  tl_self = this;
}

Parker::~Parker() {
  {
    ParkerRegistry& r = ParkerRegistry::Get();
    MutexLock l(r.mu);
    registry_node_.Unlink();
  }
  tl_self = nullptr;
  int ep = pkep_.load(std::memory_order_relaxed);
  int ef = efd_.load(std::memory_order_relaxed);
  // Close them only if they are still ours (parker.h).
  for (int i = 0; i < 2; ++i) {
    if (ltfd_[i] >= 0 && ModWake(ep, ltfd_[i], 0)) sys::Close(ltfd_[i]);
  }
  if (ModWake(ep, ef, 0)) {
    sys::Close(ep);
    sys::Close(ef);
  }
}

bool Parker::EnsureLookahead() {
  if (ltfd_[0] >= 0) return true;
  if (lookahead_off_) return false;
  if (!EnsureFds()) {
    lookahead_off_ = true;
    return false;
  }
  int ep = pkep_.load(std::memory_order_relaxed);
  int made[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    made[i] = MovePrivateFd(
        sys::TimerfdCreate(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
    epoll_event ev{};
    ev.events = kLookaheadEvents;
    if (made[i] < 0 || sys::EpollCtl(ep, EPOLL_CTL_ADD, made[i], &ev) != 0) {
      for (int k = 0; k <= i; ++k) {
        if (made[k] >= 0) sys::Close(made[k]);
      }
      lookahead_off_ = true;
      return false;
    }
  }
  for (int i = 0; i < 2; ++i) {
    ltfd_[i] = made[i];
    larmed_[i] = 0;
  }
  return true;
}

bool Parker::ArmLookahead(int slot, int64_t at, int cpu) {
  // The MOD proves the number still holds our timerfd inside our epoll
  // (parker.h): a number the application closed and reused is not armed
  // (but one it reuses between the MOD and the arming is: D19).
  if (!ModLookahead(slot)) {
    AbandonFds();  // not ours any more: forget them all, never close
    return false;
  }
  itimerspec v{};
  v.it_value.tv_sec = static_cast<time_t>(at / 1000000000);
  v.it_value.tv_nsec = static_cast<long>(at % 1000000000);
  larmed_[slot] = 0;
  lcpu_[slot] = cpu;
  if (sys::TimerfdSettime(ltfd_[slot], TFD_TIMER_ABSTIME, &v, nullptr) != 0) {
    return false;
  }
  larmed_[slot] = at;
  return true;
}

bool Parker::ModLookahead(int slot) {
  epoll_event ev{};
  ev.events = kLookaheadEvents;
  return sys::EpollCtl(pkep_.load(std::memory_order_relaxed), EPOLL_CTL_MOD,
                       ltfd_[slot], &ev) == 0;
}

Parker::LookaheadAt Parker::Lookahead(int64_t bound, int64_t after, bool rest) {
  int pending = larmed_[0] == bound ? 0 : larmed_[1] == bound ? 1 : -1;
  bool has_after = after != INT64_MAX && after > bound;
  bool after_armed = has_after && (larmed_[0] == after || larmed_[1] == after);
  if (has_after && !after_armed && EnsureLookahead()) {
    // Keep the one pending at `bound` (armed by the sleep before); of two
    // others, rearm the older.
    int slot = pending >= 0 ? 1 - pending : (larmed_[0] <= larmed_[1] ? 0 : 1);
    // The new one goes on this CPU's queue. One pending at `bound` on
    // another CPU's (the thread moved since the sleep before) would wake
    // the thread over there, where the next sleep arms the other one, and
    // so on: every expiry a migration, and every arming the earliest timer
    // of its CPU, so a device write. Arm it again here first, at the same
    // instant (one write, once).
    int cpu = sched_getcpu();
    if (pending >= 0 && cpu >= 0 && lcpu_[pending] != cpu &&
        !ArmLookahead(pending, bound, cpu)) {
      pending = -1;
      if (ltfd_[0] < 0) return kNothingAtBound;  // abandoned
    }
    after_armed = ArmLookahead(slot, after, cpu);
    if (ltfd_[0] < 0) return kNothingAtBound;  // abandoned, `pending` too
  }
  if (pending < 0) return kNothingAtBound;
  // Not checked for a futex sleep: a timerfd at `bound` that is no longer
  // ours only means the futex's own timer programs the device.
  if (!rest || !after_armed) return kPendingAtBound;
  // The sleep will rest on it: it must be ours, or nothing would end the
  // sleep at `bound`.
  if (!ModLookahead(pending)) {
    AbandonFds();
    return kNothingAtBound;
  }
  return kOursAtBound;
}

unsigned Parker::SleepOnLookahead(int64_t bound_ns, int64_t backstop_ns) {
  ++sleeps_;
  int ep = pkep_.load(std::memory_order_relaxed);
  int ef = efd_.load(std::memory_order_relaxed);
  // A waker armed efd_ since its last disarm (or may have): disarm it, or
  // pkep_ would report it at once. Before the state says kParkedFd: a
  // waker that sees that state arms efd_ after this, so its arming is
  // never undone here (one still in flight from an earlier sleep only
  // ends this one early, and the flag is set again below).
  if (efd_armed_.exchange(false, std::memory_order_relaxed) &&
      !ModWake(ep, ef, 0)) {
    AbandonFds();  // still kParkedFutex: no waker uses them for us
    return 0;
  }
  // Wakers arm efd_ from here on (seq_cst, as the parking exchange: a
  // waker either sees this state or left a token that fails it).
  int expected = kParkedFutex;
  if (!state_.compare_exchange_strong(expected, kParkedFd,
                                      std::memory_order_seq_cst)) {
    return 0;  // a token: the loop takes it
  }
  unsigned r = 0;
  // At most an hour (the loop sleeps again).
  int64_t left = Deadline::At(backstop_ns).RemainingNs();
  if (left > kFutexChunkNs) left = kFutexChunkNs;
  timespec ts{static_cast<time_t>(left / 1000000000),
              static_cast<long>(left % 1000000000)};
  pollfd pfd{ep, POLLIN, 0};
  // ppoll, as the descriptor sleep: the kernel restarts it after a stop
  // and continue, or a signal whose handler did not run, as it does the
  // futex sleep (semantics.md D6 (c)), and a handled signal ends it with
  // EINTR whatever SA_RESTART says, Park's rule. The raw call made a
  // cancellation point as the futex sleep is (base/cancellable.h), not
  // libc's: ThreadSanitizer, unwound out of its interceptor by a
  // cancellation, misses the thread's later lock operations.
  long n = CancellableSyscall(SYS_ppoll, reinterpret_cast<long>(&pfd), 1,
                              reinterpret_cast<long>(&ts), 0,
                              static_cast<long>(sizeof(uint64_t)), 0);
  if (n < 0) {
    r = errno == EINTR ? kInterrupted : kLost;
  } else if (n > 0 && (pfd.revents & POLLNVAL)) {
    r = kLost;
  } else if (Deadline::At(bound_ns).Expired()) {
    // The timerfd's edge stays queued in pkep_ until the slot is armed
    // again (the next Lookahead arms this one at the expiry after next),
    // which drops it; SleepFd takes any left.
    r = kTimedOut;
  } else if (n > 0) {
    // Readable before the bound: efd_, armed by a waker (whose token the
    // loop takes) or left armed by one of an earlier sleep.
    efd_armed_.store(true, std::memory_order_relaxed);
  }
  // Back to the futex's state; fails only for a token, which the loop
  // takes: its waker saw kParkedFd, so it arms efd_ (or has).
  expected = kParkedFd;
  if (!state_.compare_exchange_strong(expected, kParkedFutex,
                                      std::memory_order_seq_cst)) {
    efd_armed_.store(true, std::memory_order_relaxed);
  }
  if (r & kLost) {
    // Not ours any more (closed and reused, or an epoll that fails): forget
    // them, never close; the loop sleeps on the futex from here.
    AbandonFds();
    r = 0;
  }
  return r;
}

void Parker::ArmRing(int slot, int64_t at, int cpu) {
  if (rtag_[slot]) {
    // Pending: moved, and rearmed from this CPU. Had it fired meanwhile,
    // the update fails and the timeout's completion frees the slot.
    ring_.QueueTimeoutUpdate(rtag_[slot], at);
  } else {
    rtag_[slot] = rnext_tag_++;
    ring_.QueueTimeout(rtag_[slot], at);
  }
  rat_[slot] = at;
  rcpu_[slot] = cpu;
}

bool Parker::ReapRing(uint64_t watch, bool* fired) {
  bool any = false;
  ring_.Reap([&](uint64_t tag, int res) {
    any = true;
    if (tag == kRingFutexTag) {
      rfutex_ = false;
      return;
    }
    if (fired && tag == watch && res == -ETIME) *fired = true;
    // A timeout that fired (or an update's failure, tag 0: the timeout's
    // own completion comes too). A tag of a slot since rearmed as a new
    // timeout matches nothing.
    for (int i = 0; i < 2; ++i) {
      if (tag != 0 && rtag_[i] == tag) rtag_[i] = 0;
    }
  });
  return any;
}

unsigned Parker::SleepOnRing(int64_t bound, int64_t after) {
  // A handler's sleep nested in one of ours leaves the ring to it.
  if (ring_off_ || ring_busy_ || !KeeperRing::Allowed()) return kRetry;
  if (!ring_.open()) {
    if (!ring_.Open()) {
      ring_off_ = true;
      return kRetry;
    }
    rtag_[0] = rtag_[1] = 0;
    rfutex_ = false;
  }
  ReapRing();
  // What this sleep changes in the slots, for a vfork child to put back.
  const uint64_t was_tag[2] = {rtag_[0], rtag_[1]};
  const int64_t was_at[2] = {rat_[0], rat_[1]};
  const int was_cpu[2] = {rcpu_[0], rcpu_[1]};
  const bool was_futex = rfutex_;
  auto slot_at = [&](int64_t at) {
    return rtag_[0] && rat_[0] == at ? 0 : rtag_[1] && rat_[1] == at ? 1 : -1;
  };
  bool has_after = after != INT64_MAX && after > bound;
  // The timeout at the bound ends the sleep: armed by the sleep before as
  // its lookahead (then it was not the earliest timer of the CPU), or now.
  // Pending on another CPU's queue (the thread moved since), it is moved
  // here: its interrupt wakes the thread on that CPU, where the next
  // lookahead would be armed, and so on, one migration per expiry
  // (docs/design.md, "The lookahead follows the thread").
  int cpu = sched_getcpu();
  int b = slot_at(bound);
  if (b >= 0 && cpu >= 0 && rcpu_[b] != cpu) ArmRing(b, bound, cpu);
  if (b < 0) {
    // Not the one pending at `after`; else a free one; else (two stale:
    // the keeper woke early twice) the older.
    int a = has_after ? slot_at(after) : -1;
    if (a >= 0) {
      b = 1 - a;
    } else if (!rtag_[0] || !rtag_[1]) {
      b = rtag_[0] ? 1 : 0;
    } else {
      b = rat_[0] <= rat_[1] ? 0 : 1;
    }
    ArmRing(b, bound, cpu);
  }
  if (has_after && slot_at(after) < 0) ArmRing(1 - b, after, cpu);
  const uint64_t bound_tag = rtag_[b];
  // Unpark's FUTEX_WAKE completes it (or, had a token come already, it
  // fails at once: the word is no longer kParkedFutex).
  if (!rfutex_) {
    ring_.QueueFutexWait(kRingFutexTag, &state_, kParkedFutex);
    rfutex_ = true;
  }
  ++sleeps_;
  ++ring_sleeps_;
  // Set across the sleep, where a handler runs. Not reset by a
  // cancellation, which ends the thread: this frame keeps nothing to
  // clean up (base/cancellable.h).
  ring_busy_ = true;
  long n = ring_.Enter();
  ring_busy_ = false;
  if (n < 0 && errno != EINTR) {
    // Not usable from here. Asked only on this path, which has already
    // paid a failed system call: whose ring is it?
    auto pid_of = [](long nr) {
      return static_cast<pid_t>(sys::Syscall(nr, 0, 0, 0, 0, 0, 0));
    };
    pid_t self = pid_of(SYS_getpid);
    pid_t owner = ring_.owner();
    if (self != owner && owner == pid_of(SYS_getppid)) {
      // A vfork child, on its parent's memory and so on the Parker of the
      // parent's thread, whose ring is registered with that thread alone.
      // The ring stays the parent's, as the parent left it: take back what
      // this sleep queued (the kernel took none) and its slots, and sleep
      // without it (every keeper sleep of the child comes here).
      ring_.Unqueue();
      for (int i = 0; i < 2; ++i) {
        rtag_[i] = was_tag[i];
        rat_[i] = was_at[i];
        rcpu_[i] = was_cpu[i];
      }
      rfutex_ = was_futex;
      return kRetry;
    }
    // Forget it, never unmap (the mappings may be another process's), and
    // keep without it. A ring of this process failed: no ring on this
    // thread again. One a vfork child made in the memory it shared (this
    // thread had none then) was never registered here: this thread may
    // make its own at its next sleep.
    ring_.Forget();
    rtag_[0] = rtag_[1] = 0;
    rfutex_ = false;
    if (self == owner) ring_off_ = true;
    return kRetry;
  }
  // The sleep waits for one completion: none means a signal ended it
  // (after a submission the kernel returns the count, not EINTR), a
  // handled one or a stop, as epoll_wait's sleep. The bound's timeout
  // expired: the bound has passed (an ABS timeout on CLOCK_MONOTONIC never
  // completes early), no clock read needed.
  bool fired = false;
  unsigned r = ReapRing(bound_tag, &fired) && n >= 0 ? 0 : kInterrupted;
  if (fired || Deadline::At(bound).Expired()) r |= kTimedOut;
  return r;
}

unsigned Parker::SleepFutexUntil(int64_t at_ns) {
  ++sleeps_;
  timespec ts{static_cast<time_t>(at_ns / 1000000000),
              static_cast<long>(at_ns % 1000000000)};
  long r = CancellableSyscall(
      SYS_futex, reinterpret_cast<long>(reinterpret_cast<int*>(&state_)),
      FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, kParkedFutex,
      reinterpret_cast<long>(&ts), 0,
      static_cast<long>(FUTEX_BITSET_MATCH_ANY));
  if (r == 0) return 0;
  switch (errno) {
    case EINTR:
      return kInterrupted;
    case ETIMEDOUT:
      return Deadline::At(at_ns).Expired() ? kTimedOut : 0;
    default:
      return 0;
  }
}

bool Parker::EnsureFds() {
  if (pkep_.load(std::memory_order_relaxed) >= 0) return true;
  // Count 1 forever: readable at all times; the registration's events
  // decide whether pkep_ reports it.
  int ef = MovePrivateFd(sys::Eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK));
  if (ef < 0) return false;
  int ep;
  {
    UnlistedEpolls::Scope unlisted;
    ep = MovePrivateFd(sys::EpollCreate1(EPOLL_CLOEXEC));
  }
  epoll_event ev{};  // no events: disarmed
  if (ep < 0 || sys::EpollCtl(ep, EPOLL_CTL_ADD, ef, &ev) != 0) {
    if (ep >= 0) sys::Close(ep);
    sys::Close(ef);
    return false;
  }
  efd_.store(ef, std::memory_order_relaxed);
  pkep_.store(ep, std::memory_order_relaxed);
  return true;
}

void Parker::AbandonFds() {
  pkep_.store(-1, std::memory_order_relaxed);
  efd_.store(-1, std::memory_order_relaxed);
  // The lookahead's timerfds are registered in that epoll: they go with it
  // (a new epoll would never prove them ours).
  ltfd_[0] = ltfd_[1] = -1;
  larmed_[0] = larmed_[1] = 0;
}

unsigned Parker::SleepFutex(const Deadline& deadline, bool restartable) {
  ++sleeps_;
  timespec ts;
  const timespec* rel = nullptr;
  if (!restartable) {
    // Always a timeout (epoll_wait's EINTR rule, parker.h); an infinite
    // deadline sleeps in long chunks.
    if (deadline.is_infinite()) {
      ts.tv_sec = kFutexChunkNs / 1000000000;
      ts.tv_nsec = 0;
      rel = &ts;
    } else {
      rel = SleepTimeout(deadline, &ts);
    }
  }
  int parked = kParkedFutex;
  long r = CancellableFutexWait(&state_, parked, rel);
  if (r == 0) return 0;  // woken (or spurious): the loop checks the token
  switch (errno) {
    case EINTR:
      return kInterrupted;
    case ETIMEDOUT:
      return deadline.Expired() ? kTimedOut : 0;
    default:  // EAGAIN: the word changed, a token arrived
      return 0;
  }
}

unsigned Parker::SleepFd(const Deadline& deadline, const sigset_t* mask,
                         pollfd* kfds, nfds_t nkfds) {
  ++sleeps_;
  int ep = pkep_.load(std::memory_order_relaxed);
  // Disarm, which also proves the numbers are still ours.
  efd_armed_.store(false, std::memory_order_relaxed);
  if (!ModWake(ep, efd_.load(std::memory_order_relaxed), 0)) return kRetry;
  // A waker that armed before the disarm left its token in state_.
  if (state_.load(std::memory_order_acquire) == kNotified) return 0;
  pollfd own;
  pollfd* fds = kfds ? kfds : &own;
  nfds_t n = kfds ? nkfds : 1;
  fds[0].fd = ep;
  fds[0].events = POLLIN;
  fds[0].revents = 0;
  timespec ts;
  // ppoll is one of libc's cancellation points, never restarted after a
  // handler, and installs the mask atomically.
  int r = sys::Ppoll(fds, n, SleepTimeout(deadline, &ts), mask);
  if (r > 0) {
    if (fds[0].revents & POLLNVAL) return kRetry;
    unsigned res = 0;
    for (nfds_t i = 1; i < n; ++i) {
      if (fds[i].revents) res |= kKernelReady;
    }
    if (!res && state_.load(std::memory_order_acquire) != kNotified) {
      // No token: a lookahead timerfd fired (one armed at an instant no
      // longer an expiry). Its edge stays queued in pkep_, which ppoll
      // would report forever: take it, once a MOD proved the numbers
      // still ours (the application may have closed and reused them
      // during the sleep; an epoll of its own would lose events here).
      if (!ModWake(ep, efd_.load(std::memory_order_relaxed), 0)) {
        return kRetry;
      }
      // The raw call: libc's epoll_wait is a cancellation point, and this
      // one does not sleep.
      epoll_event evs[3];
      sys::Syscall(SYS_epoll_pwait, ep, reinterpret_cast<long>(evs), 3, 0, 0,
                   static_cast<long>(sizeof(uint64_t)));
    }
    return res;  // 0: only ours is ready, the loop checks the token
  }
  if (r == 0) return kTimedOut;
  // EINTR, or a failure that would repeat (ENOMEM, EINVAL): end the wait.
  return kInterrupted;
}

// No descriptor could be made (semantics.md D7). A mask is then installed
// around a futex sleep, which leaves a window where a signal the mask
// unblocks is handled before the sleep starts; kernel descriptors are
// polled with a short timeout, the one place uepoll polls.
unsigned Parker::SleepDegraded(const Deadline& deadline, const sigset_t* mask,
                               pollfd* kfds, nfds_t nkfds) {
  if (kfds && nkfds > 1) {
    constexpr int64_t kPollNs = 1000000;  // 1 ms
    int64_t left = deadline.is_infinite() ? kPollNs : deadline.RemainingNs();
    if (left > kPollNs) left = kPollNs;
    timespec ts{static_cast<time_t>(left / 1000000000),
                static_cast<long>(left % 1000000000)};
    int r = sys::Ppoll(kfds + 1, nkfds - 1, &ts, mask);
    if (r > 0) return kKernelReady;
    if (r < 0) return kInterrupted;
    return deadline.Expired() ? kTimedOut : 0;
  }
  sigset_t old;
  if (mask) pthread_sigmask(SIG_SETMASK, mask, &old);
  unsigned r = SleepFutex(deadline, false);
  if (mask) pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return r;
}

// The protocol every sleep shares: publish the parked state (or take a
// token that is already there), sleep with sleep_once() until a real token,
// the deadline, a signal or a ready kernel descriptor, then leave the parked
// state, reporting a token that raced with the other reasons as well.
//
// While a timer is armed, each round first asks the timer module whether
// this thread keeps (parker.h, "Timers"); a keeper sleeps no later than the
// earliest expiry and, woken there, leaves the parked state, runs what is
// due (a wakeup it causes for itself is then a plain token, no syscall),
// and parks again unless that handed it a token.
template <class SleepOnce>
Parker::Result Parker::ParkLoop(int parked_state, const Deadline& deadline,
                                bool can_keep, SleepOnce sleep_once,
                                OnStop on_stop) {
  int saved_errno = errno;
  // acq_rel: the acquire half pairs with Unpark's release (what the waker
  // wrote before waking us is visible once we see its token); the release
  // half publishes pkep_/efd_ to a waker that sees kParkedFd. seq_cst as
  // well: it precedes our load of timer_due_, against a resigning keeper's
  // scan (AnyOtherParked).
  if (state_.exchange(parked_state, std::memory_order_seq_cst) == kNotified) {
    state_.store(kEmpty, std::memory_order_relaxed);
    errno = saved_errno;
    return kWoken;
  }
  // Leaves the parked state, and gives up keeping, on every way out (a
  // cancellation unwinding through here included).
  struct Unparked {
    std::atomic<int>* state;
    bool keeper = false;
    ~Unparked() {
      if (state) state->exchange(kEmpty, std::memory_order_acquire);
      if (keeper) timers_.load(std::memory_order_acquire)->resign();
    }
  } unparked{&state_};
  if (void (*hook)() = before_sleep_.load(std::memory_order_relaxed)) hook();
  Result result = 0;
  bool woken = false;
  for (;;) {
    // One load when nothing is armed; Timers exists once anything was. A
    // keeper asks even then: its last expiry ran (or was disarmed), and
    // Cover lets it go, or it would stay the keeper of a bound long past,
    // covering the next arm that nobody then wakes for.
    Deadline bound = deadline;
    bool bounded = false;
    int64_t after = INT64_MAX;
    const Timers* timers = nullptr;
    if (TimerDue() != INT64_MAX || unparked.keeper) {
      timers = timers_.load(std::memory_order_acquire);
      int64_t at =
          timers->cover(deadline.at_ns(), can_keep, &unparked.keeper, &after);
      if (at < deadline.at_ns()) {
        bound = Deadline::At(at);
        bounded = true;
      }
    }
    unsigned r;
    if (!bounded) {
      r = sleep_once(bound);
    } else if (bound.Expired()) {
      r = kTimedOut;
    } else if (unparked.keeper && on_stop == OnStop::kMayInterrupt &&
               !((r = SleepOnRing(bound.at_ns(), after)) & kRetry)) {
      // Slept in its ring: one system call for the sleep and the next
      // lookahead, and no descriptor to prove ours (base/keeper_ring.h).
    } else {
      // Only a keeper is bounded (cover), and only a futex sleep keeps.
      // The backstop ends a sleep on the lookahead if the application
      // closes both its timerfds meanwhile (the one at `after` ends it if
      // only the one at the bound is gone); behind that one, it is never
      // the CPU's earliest timer.
      int64_t backstop =
          after < INT64_MAX - kBackstopNs ? after + kBackstopNs : INT64_MAX;
      LookaheadAt la = unparked.keeper ? Lookahead(bound.at_ns(), after,
                                                   deadline.at_ns() > backstop)
                                       : kNothingAtBound;
      if (la == kOursAtBound) {
        // The timerfd ends the sleep at the bound, with no slack and from
        // its own interrupt, on whichever CPU the thread now runs.
        r = SleepOnLookahead(bound.at_ns(), backstop);
      } else {
        // The slack stays: the pending timer may be on another CPU's queue
        // (the thread moved since it armed it), where its interrupt does
        // not end our futex's timer.
        KeeperSlack slack;
        // Pending at the bound: the futex's timer, at that very instant
        // (not a relative timeout, which the kernel adds to a later
        // "now"), goes behind it and programs nothing.
        r = la == kPendingAtBound ? SleepFutexUntil(bound.at_ns())
                                  : sleep_once(bound);
      }
    }
    if (bounded && (r & kTimedOut)) {
      // Our bound (the caller's deadline may have come too): run what is
      // due, outside the parked state (an Unpark then only leaves a token),
      // holding no lock.
      if (!deadline.Expired()) r &= ~kTimedOut;
      woken = state_.exchange(kEmpty, std::memory_order_acquire) == kNotified;
      timers->run_due();
      if (!woken && !r) {
        // Park again, unless a token came meanwhile (maybe from run_due).
        if (state_.exchange(parked_state, std::memory_order_seq_cst) !=
            kNotified) {
          continue;
        }
        woken = true;
      }
      if (state_.exchange(kEmpty, std::memory_order_acquire) == kNotified) {
        woken = true;
      }
      unparked.state = nullptr;
      result = r;
      break;
    }
    if (r) {
      result = r;
      break;
    }
    // Woken through the futex or the descriptor: a real token, or a stale
    // wake of an earlier sleep.
    if (state_.load(std::memory_order_acquire) == kNotified) break;
    if (deadline.Expired()) {
      result = kTimedOut;
      break;
    }
  }
  if (unparked.state) {
    unparked.state = nullptr;
    if (state_.exchange(kEmpty, std::memory_order_acquire) == kNotified) {
      woken = true;
    }
  }
  if (unparked.keeper) {
    unparked.keeper = false;
    timers_.load(std::memory_order_acquire)->resign();
  }
  if (woken) result |= kWoken;
  errno = saved_errno;
  return result;
}

Parker::Result Parker::Park(const Deadline& deadline, const sigset_t* mask,
                            pollfd* kfds, nfds_t nkfds, OnStop on_stop) {
  if (!mask && !(kfds && nkfds > 1)) {
    return ParkLoop(
        kParkedFutex, deadline, true,
        [&](const Deadline& until) { return SleepFutex(until, false); },
        on_stop);
  }
  for (;;) {
    if (!EnsureFds()) {
      return ParkLoop(kParkedFutex, deadline, false,
                      [&](const Deadline& until) {
                        return SleepDegraded(until, mask, kfds, nkfds);
                      });
    }
    // Never keeps: ppoll's timeout has a slack of 0.1% of the time left
    // whatever the thread's own (select_estimate_accuracy), 1 ms on an
    // expiry 1 s away, where a kernel timerfd has none.
    Result r = ParkLoop(kParkedFd, deadline, false, [&](const Deadline& until) {
      return SleepFd(until, mask, kfds, nkfds);
    });
    if (!(r & kRetry)) return r;
    if (r & kWoken) return kWoken;
    // The numbers are no longer ours: forget them (never close) and sleep
    // again with new ones. We left the parked state first, so no waker is
    // using the old numbers for us any more.
    AbandonFds();
  }
}

Parker::Result Parker::ParkExternal(const Deadline& deadline,
                                    unsigned (*sleep)(void*, const Deadline&),
                                    void* ctx) {
  return ParkLoop(kParkedExternal, deadline, false,
                  [&](const Deadline& until) { return sleep(ctx, until); });
}

Parker::Result Parker::ParkIo() {
  // Never keeps: a keeper's sleep has a timeout, which a handler would end
  // with EINTR whatever SA_RESTART says (parker.h, "Timers").
  return ParkLoop(
      kParkedFutex, Deadline::Infinite(), false,
      [&](const Deadline& until) { return SleepFutex(until, true); });
}

void Parker::Unpark() {
  // Release pairs with the acquire in ParkLoop; acquire pairs with its
  // release, so that pkep_/efd_ are the sleeper's when we see kParkedFd.
  int prev = state_.exchange(kNotified, std::memory_order_acq_rel);
  if (prev == kParkedFutex) {
    FutexWake(&state_);
  } else if (prev == kParkedFd) {
    int saved_errno = errno;
    // Before the MOD: the sleeper disarms what this flag says may be armed.
    efd_armed_.store(true, std::memory_order_relaxed);
    // Fails only if the application closed or replaced our descriptors
    // while this thread sleeps (semantics.md D7): nothing of theirs is
    // touched, and the sleeper ends at its deadline or a signal.
    ModWake(pkep_.load(std::memory_order_relaxed),
            efd_.load(std::memory_order_relaxed), EPOLLIN);
    errno = saved_errno;
  }
}

}  // namespace uepoll::impl
