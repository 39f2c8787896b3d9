#include "timer/timer_queue.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>

#include <cassert>
#include <new>

#include "base/alloc.h"
#include "base/fork_path.h"

namespace uepoll::impl {

// Beside the fork handlers: the child's handler calls it.
UEPOLL_FORK_PATH TimerQueue& TimerQueue::Get() {
  // Never destroyed: the detached timer thread may still run while static
  // destructors do at exit. Its storage is static, among the other data
  // the fork handlers write (base/fork_path.h: on the heap it was a page
  // of its own, copied at every fork by the parent and by the child),
  // and on cache lines of its own.
  alignas(64) UEPOLL_FORK_DATA static unsigned char
      storage[(sizeof(TimerQueue) + 63) / 64 * 64];
  static_assert(alignof(TimerQueue) <= 64);
  static TimerQueue* q = new (storage) TimerQueue();
  return *q;
}

namespace {

int64_t CoverHook(int64_t deadline_ns, bool can_keep, bool* keeper,
                  int64_t* after) {
  return TimerQueue::Get().Cover(deadline_ns, can_keep, keeper, after);
}
void ResignHook() { TimerQueue::Get().Resign(); }
void RunDueHook() { TimerQueue::Get().RunDue(); }
constexpr Parker::Timers kParkerHooks = {&CoverHook, &ResignHook, &RunDueHook};

}  // namespace

TimerQueue::TimerQueue() {
  pthread_atfork(&TimerQueue::ForkPrepare, &TimerQueue::ForkParent,
                 &TimerQueue::ForkChild);
  // Before anything is armed, hence before any deadline is published.
  Parker::SetTimers(&kParkerHooks);
}

// --- capacity --------------------------------------------------------------

int TimerQueue::Reserve(unsigned bases) {
  unsigned done = 0;
  for (int b = 0; b < kNumTimerBases; ++b) {
    if (!(bases & (1u << b))) continue;
    for (;;) {
      uint32_t want;
      {
        MutexLock l(mu_);
        Heap& h = heaps_[b];
        if (h.reserved < h.cap) {
          ++h.reserved;
          break;
        }
        want = h.cap ? h.cap * 2 : 64;
      }
      // Allocated outside mu_ (seed 003); whoever grows first wins, and the
      // loop re-decides under the lock.
      auto* fresh = static_cast<Entry*>(
          AllocateLine(sizeof(Entry) * (size_t{want} + kPad)));
      if (!fresh) {
        Unreserve(done);
        return -ENOMEM;
      }
      Entry* old = nullptr;
      {
        MutexLock l(mu_);
        Heap& h = heaps_[b];
        if (h.cap < want) {
          for (uint32_t i = 0; i < h.size; ++i) fresh[i + kPad] = h.at(i);
          old = h.v;
          h.v = fresh;
          h.cap = want;
          fresh = nullptr;
        }
      }
      if (old) DeallocateLine(old);
      if (fresh) DeallocateLine(fresh);
    }
    done |= 1u << b;
  }
  return 0;
}

void TimerQueue::Unreserve(unsigned bases) {
  MutexLock l(mu_);
  for (int b = 0; b < kNumTimerBases; ++b) {
    if (bases & (1u << b)) {
      assert(heaps_[b].reserved > heaps_[b].size);
      --heaps_[b].reserved;
    }
  }
}

// --- the heaps -------------------------------------------------------------

void TimerQueue::SiftUp(Heap& h, uint32_t i, Entry e) {
  while (i > 0) {
    uint32_t parent = (i - 1) / kArity;
    if (h.at(parent).expires <= e.expires) break;
    Place(h, i, h.at(parent));
    i = parent;
  }
  Place(h, i, e);
}

void TimerQueue::SiftDown(Heap& h, uint32_t i, Entry e) {
  for (;;) {
    uint32_t first = kArity * i + 1;
    if (first >= h.size) break;
    uint32_t last = first + kArity < h.size ? first + kArity : h.size;
    uint32_t c = first;
    for (uint32_t k = first + 1; k < last; ++k) {
      if (h.at(k).expires < h.at(c).expires) c = k;
    }
    if (e.expires <= h.at(c).expires) break;
    Place(h, i, h.at(c));
    i = c;
  }
  Place(h, i, e);
}

void TimerQueue::InsertLocked(Heap& h, TimerNode* n, int64_t expires) {
  // Reservations guarantee the room: every owner that can be on this heap
  // reserved a slot in it when it was created.
  assert(h.size < h.cap);
  SiftUp(h, h.size++, Entry{expires, n});
  ++armed_;
}

void TimerQueue::RemoveLocked(TimerNode* n) {
  Heap& h = heaps_[static_cast<int>(n->base)];
  uint32_t i = n->index;
  n->index = TimerNode::kNotQueued;
  --armed_;
  Entry last = h.at(--h.size);
  if (i == h.size) return;
  // The last entry fills the hole; it may belong above or below it.
  if (i > 0 && h.at((i - 1) / kArity).expires > last.expires) {
    SiftUp(h, i, last);
  } else {
    SiftDown(h, i, last);
  }
}

void TimerQueue::Arm(TimerNode* n, TimerBase base, int64_t expires,
                     int64_t period) {
  bool kick = false;
  bool start = false;
  {
    MutexLock l(mu_);
    if (n->index != TimerNode::kNotQueued) RemoveLocked(n);
    n->base = base;
    n->period = period;
    Heap& h = heaps_[static_cast<int>(base)];
    InsertLocked(h, n, expires);
    PublishLocked();
    start = !started_;
    // A new earliest expiry: wake the thread if it sleeps past it and no
    // keeper wakes for it (a keeper that sleeps past it is not told: the
    // thread takes this one). Not while a keeper is away (LapsedLocked):
    // nobody sleeps then, and whoever enters uepoll next runs it.
    if (n->index == 0 && !CoveredLocked(earliest_) && !LapsedLocked()) {
      kick = KickLocked(earliest_);
    } else if (n->index == 0 && keeper_ && !alone_ && sleeping_ &&
               sleep_until_ == kNsMax && !LapsedLocked()) {
      // Covered, but the thread went to sleep with no timeout for an empty
      // heap, without a scan: a thread parked then (which asked no Cover)
      // may wait for this one. The thread decides again, scanning.
      kick = KickLocked(0);
    }
  }
  if (kick) futex_.Wake();
  // Normally the arming call started the thread already (EnsureThread);
  // this covers a child of fork() whose restart failed.
  if (start) (void)EnsureThread();
}

void TimerQueue::Disarm(TimerNode* n) {
  MutexLock l(mu_);
  // No kick: a thread that wakes for a timer that is gone just sleeps again.
  if (n->index != TimerNode::kNotQueued) {
    RemoveLocked(n);
    PublishLocked();
  }
}

void TimerQueue::Cancel(TimerNode* n) {
  // hrtimer_cancel's loop: a fire in progress may arm the node again (the
  // owner re-decides under its own lock, and a timerfd re-armed later
  // than the expiry being run goes back on the queue), so taking it off
  // once and waiting is not enough: once the fire has returned, take it
  // off again. Done when it is off the heap and not firing, both seen
  // under mu_: a fire starts only by a pop under mu_ of a queued node.
  for (;;) {
    {
      MutexLock l(mu_);
      if (n->index != TimerNode::kNotQueued) {
        RemoveLocked(n);
        PublishLocked();
      }
      // acquire: pairs with the release that ends the fire, so that what
      // the fire did (its re-arm, under mu_ as well) is seen.
      if (!n->firing.load(std::memory_order_acquire)) return;
    }
    // A fire is a few lock operations and wakeups; yield rather than
    // spin, as the thread running it may need this core.
    while (n->firing.load(std::memory_order_acquire)) sched_yield();
  }
}

long TimerQueue::armed() {
  MutexLock l(mu_);
  return armed_;
}

bool TimerQueue::thread_started() {
  MutexLock l(mu_);
  return started_;
}

bool TimerQueue::has_keeper() {
  MutexLock l(mu_);
  return keeper_;
}

bool TimerQueue::thread_dormant() {
  MutexLock l(mu_);
  return sleeping_ && dormant_;
}

int64_t TimerQueue::keeper_bound() {
  MutexLock l(mu_);
  return keeper_ ? keeper_bound_ : kNsMax;
}

bool TimerQueue::keeper_stalled() {
  MutexLock l(mu_);
  return keeper_ && keeper_stalled_;
}

bool TimerQueue::thread_sleeps_unbounded() {
  MutexLock l(mu_);
  return sleeping_ && sleep_until_ == kNsMax;
}

// --- sleeps folded into expiries -------------------------------------------

bool TimerQueue::KickLocked(int64_t at) {
  if (!sleeping_ || at >= sleep_until_) return false;
  sleep_until_ = at;
  dormant_ = false;
  alone_ = false;
  futex_.Bump();
  return true;
}

int64_t TimerQueue::Cover(int64_t deadline_ns, bool can_keep, bool* keeper,
                          int64_t* after) {
  bool kick = false;
  int64_t bound = kNsMax;
  *after = kNsMax;
  {
    MutexLock l(mu_);
    int64_t d = earliest_;
    if (d != kNsMax && can_keep && !exact_ && (*keeper || !keeper_)) {
      // Keeps even when its own deadline comes first: it then wakes
      // earlier than keeper_bound_, and resigns (which hands over).
      const Parker* self = &Parker::Current();
      if (!keeper_ || keeper_id_ != self) ++park_gen_;
      keeper_id_ = self;
      keeper_ = true;
      keeper_bound_ = d;
      keeper_stalled_ = false;  // it is back, or a new one
      *keeper = true;
      bound = d;
      *after = NextAfterLocked(d);
      // The timer thread sleeps for an expiry this keeper now covers: it
      // decided while nobody kept (typically just after the keeper's last
      // wake, while that thread harvested). Left alone it wakes with the
      // keeper at that expiry, finds the keeper harvesting again, and the
      // two wake together at every expiry from then on. Woken now, it
      // decides while this thread keeps, and goes dormant. Once per
      // expiry: a keeper that leaves its sleep before the thread decided
      // (a busy loop) must not cost a kick per sleep.
      if (sleeping_ && !dormant_ && sleep_until_ != kNsMax &&
          dormant_kick_for_ != d) {
        dormant_kick_for_ = d;
        kick = KickLocked(0);
      }
    } else {
      if (*keeper) {  // exact_ came, or nothing is armed any more
        keeper_ = false;
        keeper_id_ = nullptr;
        keeper_bound_ = kNsMax;
        keeper_stalled_ = false;
        *keeper = false;
      }
      // Another parked thread: the timer thread's scan (Run) is stale.
      ++park_gen_;
      if (keeper_ && !keeper_stalled_ && keeper_id_ == &Parker::Current()) {
        // The keeper's own thread parks, not as the keeper: a signal
        // handler runs on it during its sleep and waits in uepoll. The
        // keeper is held until that handler returns: it covers nothing
        // (the scan skips the keeper's parker, so no backstop would ever
        // see this wait), and the timer thread serves the expiries.
        keeper_stalled_ = true;
      }
      // This thread is parked and keeps nothing: a lapse ends here
      // (LapsedLocked), and if a timer is armed, someone must wake for it.
      if (LapsedLocked()) {
        dormant_ = false;
        PublishLocked();
      }
      if (d != kNsMax && !CoveredLocked(d)) {
        kick = KickLocked(d);
      } else if (keeper_ && sleeping_ && sleep_until_ == kNsMax) {
        // A keeper, and the timer thread sleeps with no backstop (it found
        // the keeper alone, or slept through a lapse or an empty heap).
        // This thread may now wait for an expiry the keeper holds: wake
        // the timer thread to decide again, with a backstop.
        kick = KickLocked(0);
      }
    }
    (void)deadline_ns;
  }
  if (kick) futex_.Wake();
  return bound;
}

void TimerQueue::Resign() {
  bool exact;
  {
    MutexLock l(mu_);
    keeper_ = false;
    keeper_id_ = nullptr;
    keeper_bound_ = kNsMax;
    keeper_stalled_ = false;
    ++park_gen_;
    // Awake, the thread decides again (with no keeper: it sleeps until the
    // earliest expiry); not dormant and not sleeping past the earliest
    // expiry, it wakes for it anyway.
    if (!sleeping_) return;
    bool uncovered = earliest_ != kNsMax && earliest_ < sleep_until_;
    if (!dormant_ && !uncovered) return;
    // Lapsed (LapsedLocked): with nothing armed, publish so that every
    // thread that parks from now on asks Cover.
    if (dormant_) PublishLocked();
    exact = exact_;
  }
  // Without a parked thread (nor a kernel loop watching), whatever is due
  // is run by the next thread that enters uepoll to look (RunDueTimers) or
  // sleep (Cover), before it looks or sleeps: nobody can see the expiry
  // late. A thread that parked before it could see this keeper gone (its
  // Cover found it keeping, or it saw nothing armed) is parked now: the scan
  // finds it, as its parking exchange precedes its Cover's lock of mu_, or
  // the publication it saw not yet, both of which precede this scan.
  if (!exact && !Parker::AnyOtherParked()) return;
  bool kick = false;
  {
    MutexLock l(mu_);
    if (!keeper_) {
      if (dormant_) {
        dormant_ = false;  // no lapse: someone may wait
        PublishLocked();
      }
      if (earliest_ != kNsMax) kick = KickLocked(earliest_);
    }
  }
  if (kick) futex_.Wake();
}

void TimerQueue::RequireExact() {
  bool kick;
  {
    MutexLock l(mu_);
    exact_ = true;
    kick = KickLocked(earliest_);
  }
  if (kick) futex_.Wake();
}

void TimerQueue::FireBatch(const Due* batch, int n) {
  for (int i = 0; i < n; ++i) {
    TimerNode* t = batch[i].node;
    if (auto hook = fire_hook_.load(std::memory_order_acquire)) hook(t);
    t->ops->fire(t, batch[i].base, batch[i].now);
    // release: the owner's Cancel may free it once it sees false.
    t->firing.store(false, std::memory_order_release);
  }
}

void TimerQueue::RunDue() {
  // An expiry is never cancelled halfway, as the kernel's interrupt is not:
  // a fire's wakeups can reach a cancellation point (a watchable
  // instance's kernel eventfd is written with write(2)), and a keeper, or
  // any caller of RunDueTimers, may have a cancel pending. Unwinding there
  // would leave fire_mu_ held and the node marked firing for good, and the
  // owner's state half-changed. Deferred cancellation acts at the caller's
  // next cancellation point instead (TimerRace.CancelledWhileRunningExpiries).
  int cancel_state;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
  for (;;) {
    Due batch[kBatch];
    int n;
    fire_mu_.Lock();
    {
      MutexLock l(mu_);
      n = CollectDueLocked(batch);
    }
    FireBatch(batch, n);
    fire_mu_.Unlock();
    if (n < kBatch) break;
  }
  pthread_setcancelstate(cancel_state, nullptr);
}

// --- the thread ------------------------------------------------------------

int TimerQueue::EnsureThread() {
  {
    MutexLock l(mu_);
    if (started_) return 0;
    started_ = true;  // claimed: only one caller creates it
  }
  int err = StartThread();
  if (err) {
    MutexLock l(mu_);
    started_ = false;
    return -ENOMEM;
  }
  return 0;
}

int TimerQueue::StartThread() {
  pthread_attr_t attr;
  if (int err = pthread_attr_init(&attr)) return err;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The thread inherits the creator's mask: block everything around the
  // creation, so that no handler ever runs on it and process-directed
  // signals go to the application's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t tid;
  int err = pthread_create(&tid, &attr, &TimerQueue::ThreadMain, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (!err) pthread_setname_np(tid, "uepoll-timer");
  return err;
}

void* TimerQueue::ThreadMain(void* arg) {
  // Expiries are exact instants, like a timerfd's hrtimer: no slack.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  static_cast<TimerQueue*>(arg)->Run();
  return nullptr;
}

int TimerQueue::CollectDueLocked(Due* batch) {
  int n = 0;
  for (int b = 0; b < kNumTimerBases; ++b) {
    Heap& h = heaps_[b];
    if (h.size == 0) continue;
    int64_t now = ClockNowNs(static_cast<TimerBase>(b));
    while (h.size > 0 && h.at(0).expires <= now && n < kBatch) {
      TimerNode* t = h.at(0).node;
      RemoveLocked(t);
      t->firing.store(true, std::memory_order_relaxed);
      batch[n++] = {t, static_cast<TimerBase>(b), now};
    }
  }
  PublishLocked();
  return n;
}

// Beside the fork handlers: the child's handler calls it.
UEPOLL_FORK_PATH void TimerQueue::PublishLocked() {
  int64_t earliest = kNsMax;
  int64_t mono_now = 0;
  for (int b = 0; b < kNumTimerBases; ++b) {
    Heap& h = heaps_[b];
    if (h.size == 0) continue;
    int64_t at = h.at(0).expires;
    if (b != static_cast<int>(TimerBase::kMonotonic) && at != kNsMax) {
      // Converted at the current offset between the clocks. A step of the
      // realtime clock after this is seen at the next conversion (a wakeup
      // of whoever sleeps for it, docs/semantics.md).
      int64_t now = ClockNowNs(static_cast<TimerBase>(b));
      if (!mono_now) mono_now = ClockNowNs(TimerBase::kMonotonic);
      at = AddNsSat(mono_now, at > now ? at - now : 0);
    }
    if (at < earliest) earliest = at;
  }
  earliest_ = earliest;
  // Lapsed with nothing armed: not "nothing armed" for parking threads,
  // which must keep asking Cover (LapsedLocked). Never due (RunDueTimers).
  int64_t due =
      earliest == kNsMax && (LapsedLocked() || alone_) ? kNsMax - 1 : earliest;
  if (Parker::TimerDue() != due) {
    // A thread that loads "nothing armed" parks without asking Cover: a
    // scan of the parkers made before this publication no longer stands
    // for it (Run), since only the count says so.
    if (due == kNsMax) ++park_gen_;
    Parker::PublishTimerDue(due);
  }
}

int64_t TimerQueue::NextAfterLocked(int64_t at) {
  // The second-earliest entry of a min-heap is one of the root's children;
  // an entry at the same instant as `at` is no lookahead (the kernel timer
  // for `at` serves both), so it is skipped, and deeper ones not searched.
  Heap& h = heaps_[static_cast<int>(TimerBase::kMonotonic)];
  int64_t best = kNsMax;
  uint32_t last = h.size < kArity + 1 ? h.size : kArity + 1;
  for (uint32_t i = 0; i < last; ++i) {
    int64_t e = h.at(i).expires;
    if (e > at && e < best) best = e;
  }
  // The timer at `at` itself, if its owner queues it again a period later
  // (an interval timerfd read in time): with nothing else armed, that is
  // the next expiry, and a lookahead there keeps the sleep for it from
  // programming the timer device (a single periodic timer).
  if (h.size > 0 && h.at(0).expires == at) {
    int64_t p = h.at(0).node->period;
    if (p > 0 && at < kNsMax - p && at + p < best) best = at + p;
  }
  return best;
}

void TimerQueue::Run() {
  // park_gen_ when a scan last found no thread parked but the keeper
  // (kNoScan: none did since).
  constexpr uint64_t kNoScan = ~uint64_t{0};
  uint64_t alone_at = kNoScan;
  bool scanned = false;  // one scan per wake: a busy count does not spin
  for (;;) {
    Due batch[kBatch];
    int n;
    int64_t sleep_until = kNsMax;
    uint32_t seen = 0;
    bool scan = false;
    uint64_t scan_gen = 0;
    const Parker* keeper = nullptr;
    fire_mu_.Lock();
    {
      MutexLock l(mu_);
      // Woken at a keeper's backstop (below) after that keeper left with
      // nobody parked: the lapse goes on (LapsedLocked), nobody waits.
      bool lapsed = LapsedLocked();
      sleeping_ = false;
      alone_ = false;
      if (!lapsed) dormant_ = false;
      int64_t now = ClockNowNs(TimerBase::kMonotonic);
      // A keeper that neither ran what was due at its bound nor slept
      // again within the grace after it is held up: a signal handler runs
      // on it (the kernel runs handlers before the sleep returns, where
      // uepoll cannot see them) or it is not scheduled. No kernel expiry
      // waits for a thread: until it is back (Cover, Resign), it covers
      // nothing and this thread wakes for every expiry.
      if (keeper_ && !keeper_stalled_ &&
          AddNsSat(keeper_bound_, kKeeperGraceNs) <= now) {
        keeper_stalled_ = true;
      }
      // Nothing to run in a lapse: nobody waits, and whoever looks next
      // runs what is due first.
      n = lapsed ? 0 : CollectDueLocked(batch);
      if (n == 0) {
        // Decided under mu_, with the word read under mu_: an Arm, Cover or
        // Resign after this point bumps the word and the sleep below
        // returns at once. A keeper covering the earliest expiry wakes for
        // it, so the thread need not, except to check, a grace after the
        // keeper's bound, that the keeper did (the backstop: one wakeup
        // per grace at most, however many expiries the keeper runs).
        sleeping_ = true;
        if (lapsed) {
          sleep_until = kNsMax;
        } else if (earliest_ != kNsMax && CoveredLocked(earliest_)) {
          dormant_ = true;
          if (alone_at == park_gen_ && scanned) {
            // No thread but the keeper is parked, and none has asked
            // Cover since the scan that found so: nobody but the keeper
            // can wait for an expiry, and a handler that holds it holds
            // its own wait too. No backstop (a lapse's reasoning); the
            // next thread that parks kicks (Cover, alone_).
            sleep_until = kNsMax;
            alone_ = true;
          } else {
            sleep_until = AddNsSat(keeper_bound_ > now ? keeper_bound_ : now,
                                   kKeeperGraceNs);
            scan = true;
            scan_gen = park_gen_;
            keeper = keeper_id_;
          }
        } else {
          sleep_until = earliest_;
        }
        sleep_until_ = sleep_until;
        seen = futex_.Load();
      }
    }
    FireBatch(batch, n);
    fire_mu_.Unlock();
    // The scan, outside mu_ (the registry's lock is taken before mu_ at a
    // fork). A thread that parks after the scan's load of its state asks
    // Cover after it: before the decision again (park_gen_ moved: the
    // backstop stays and the scan is redone) or after it (it finds no
    // backstop and kicks).
    if (scan && !scanned && !Parker::AnyOtherParked(keeper)) {
      alone_at = scan_gen;
      scanned = true;
      continue;  // decide again: with park_gen_ unmoved, no backstop
    }
    scanned = false;
    if (n == 0) futex_.Wait(seen, sleep_until);
  }
}

// --- fork ------------------------------------------------------------------

// The prepare handler waits for the current batch of fires, so the timer
// thread holds no owner's lock (and mu_ is free) at the fork: the child,
// which has no timer thread, can use every timer and take every lock.
// Unchecked: atfork handlers lock in one function and unlock in another.
UEPOLL_FORK_PATH void TimerQueue::ForkPrepare() NO_THREAD_SAFETY_ANALYSIS {
  TimerQueue& q = Get();
  q.fire_mu_.Lock();
  q.mu_.Lock();
}

// Unchecked: it releases the locks ForkPrepare took.
UEPOLL_FORK_PATH void TimerQueue::ForkParent() NO_THREAD_SAFETY_ANALYSIS {
  TimerQueue& q = Get();
  q.mu_.Unlock();
  q.fire_mu_.Unlock();
}

// Unchecked: it runs holding the locks ForkPrepare took, and releases them.
UEPOLL_FORK_PATH void TimerQueue::ForkChild() NO_THREAD_SAFETY_ANALYSIS {
  TimerQueue& q = Get();
  // The child's copies of armed timers stay armed (docs/semantics.md D12:
  // objects are copied), but the thread did not survive: start a new one
  // if anything is armed, so that a waiter in the child is still woken.
  q.started_ = false;
  q.sleeping_ = false;
  q.dormant_ = false;
  q.keeper_ = false;  // its thread does not exist here
  q.keeper_id_ = nullptr;
  q.alone_ = false;
  q.keeper_bound_ = kNsMax;
  q.keeper_stalled_ = false;
  q.dormant_kick_for_ = kNsMax;
  q.PublishLocked();
  q.sleep_until_ = kNsMax;
  q.futex_.Reset();
  bool any = q.armed_ > 0;
  q.mu_.Unlock();
  q.fire_mu_.Unlock();
  // The new thread may get the stack of a parent thread that did not
  // survive: the parkers' child handler must have run (base/parker.h).
  if (any) {
    Parker::ForkChildFirst();
    (void)q.EnsureThread();
  }
}

}  // namespace uepoll::impl
