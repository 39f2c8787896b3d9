// Watchable instances: a uepoll instance that the kernel's epoll, poll(),
// select(), and so any event loop (libuv, Asio, libevent, libev, a loop of
// the application's own) can watch through the instance's own number.
//
// The instance's numbers are its kernel half (kernel/kernel_half.h), a
// kernel epoll, which the kernel reports readable exactly while it has a
// ready item. Its kernel descriptors are such items already, and so are the
// kernel halves of the instances nested in it (a kernel event below makes
// the number readable with no uepoll thread running). The uepoll half is
// mirrored by one more item (kernel/mirror.h): armed while the uepoll half
// has events, disarmed otherwise. So the number is readable exactly while
// the instance has events, which is the kernel's rule for an epoll
// descriptor.
//
// Arming happens when the ready list goes from empty to non-empty (a
// wakeup callback, an ADD or MOD that finds the source ready), disarming at
// the end of a harvest or poll that leaves it empty: one syscall to disarm,
// two (the MOD, the write) to arm, none per event. A harvest that returns
// nothing while events arrived behind its scan arms again even if the
// mirror is armed: the watcher was just told "nothing" and an edge-
// triggered one waits for the next edge
// (Watchable.an_event_behind_an_empty_harvest_gets_an_edge). An item
// that went idle without a harvest leaves the mirror armed until the next
// harvest: one spurious wakeup of a watcher, which then harvests nothing
// and disarms it. Harvests drop the mirror's events (its cookie), and do
// not count them against maxevents (kernel_side.cc, SendKernelEvents).
//
// Instances that are not watchable pay one load of watchable_ on the slow
// path of a wakeup and at the end of a harvest.
#include <errno.h>

#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {

int Eventpoll::MakeWatchable() {
  if (FdTable::Get().mode() == FdMode::kDisjoint) return -EPERM;  // D5
  // A kernel loop never enters uepoll to run what is due: from now on the
  // timer thread wakes for every expiry (docs/design.md, "Timers").
  TimerQueue::Get().RequireExact();
  if (int r = mirror_.Make(khalf_); r < 0) return r;
  // Release: a harvest that sees watchable_ sees the mirror.
  bool was = watchable_.exchange(true, std::memory_order_acq_rel);
  if (!was) {
    BecomeMixed(/*kernel_fds=*/false);
    // Waiters asleep in the kernel half would arm a token there, which the
    // kernel loops now watching would see: they sleep another way.
    WakeAllToResleep();
  }
  SyncMirror();  // events may be waiting already
  return 0;
}

void Eventpoll::SyncMirror(bool edge_if_ready) {
  mirror_.Sync(khalf_, edge_if_ready, [&]() {
    // The truth now, not what the caller saw: of two threads that change
    // the ready list and then sync, the later sync applies the later state.
    MutexLock l(lock_);
    return EventsAvailableLocked();
  });
}

}  // namespace uepoll::impl
