// Helpers shared by the pipe and socket sources: sleeping in a blocking
// read or write, and raising SIGPIPE.
//
// Why not WaitEventLocked: pipes and socket pairs guard their state with
// their own mutex, not with the wait queue's lock_ (a pipe has two queues,
// a socket pair four sides of state across two queues). WaitForIo follows
// the kernel's wait_event_interruptible(): hook the entry on the queue
// first, then test the condition (which takes the object's mutex), then
// sleep. A waker changes the state under that mutex and only then wakes the
// queue, so either the test sees the change or the waker sees the entry.
//
// Thread safety: called with no lock held; ready() takes the object lock.
// The queue lock and the object lock are never held together.
#ifndef UEPOLL_SRC_SOURCES_IO_WAIT_H_
#define UEPOLL_SRC_SOURCES_IO_WAIT_H_

#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include <cstdint>

#include "base/deadline.h"
#include "base/parker.h"
#include "core/borrow.h"
#include "core/io_iter.h"
#include "core/wait_queue.h"

namespace uepoll::impl {

// How a signal ends a sleep, as the kernel's blocking I/O decides it:
//  kRestartable  nothing transferred yet: the kernel returns -ERESTARTSYS,
//                so a handler with SA_RESTART restarts the call (we keep
//                sleeping) and one without makes it fail EINTR.
//  kPartial      the call already moved bytes: any handled signal ends it
//                and the caller returns the partial count.
enum class SignalRule { kRestartable, kPartial };

// Sleeps on q until ready() holds. Returns 0, or -EINTR when a signal ended
// the sleep (by `rule`) and ready() is still false. `exclusive` queues the
// thread as an exclusive waiter (a wake with nr_exclusive 1 picks one).
//
// How an exclusive waiter answers the wakeup that picked it, on each way
// out, is ThreadWaitEntry's rule (core/wait_queue.h): the test consumes
// it; after a signal the entry leaves the queue before the last test; a
// cancellation (pthread_cancel) in the sleep, or in ready() (a user
// object's read callback), hands it to the next exclusive waiter, so that
// a cancelled reader never leaves data behind with the others asleep.
template <class Ready>
int WaitForIo(WaitQueue& q, bool exclusive, SignalRule rule, Ready ready) {
  ThreadWaitEntry w;
  w.entry.kind = WaitKind::kThread;
  w.entry.flags = exclusive ? WaitEntry::kExclusive : 0;
  w.parker = &Parker::Current();
  // The entry lives on this stack: it leaves the queue on every way out.
  // Only an unwinding reaches this with the entry still ours (queued):
  // the returns below leave first.
  struct Unhook {
    WaitQueue& q;
    ThreadWaitEntry& w;
    ~Unhook() { w.Leave(q, /*pass_on=*/true); }
  } unhook{q, w};
  for (;;) {
    {
      MutexLock l(q.lock());
      // A wake unlinks the entry (autoremove); hook it again before the
      // next test so that no wake between the test and the sleep is lost.
      if (!w.entry.node.linked()) w.AddLocked(q);
    }
    if (ready()) break;
    Parker::Result r = rule == SignalRule::kRestartable
                           ? w.parker->ParkIo()
                           : w.parker->Park(Deadline::Infinite(), nullptr);
    if (r & Parker::kInterrupted) {
      // Off the queue, then the last test: a wake that picked us before
      // this is answered by the test, a later one picks another waiter.
      w.Leave(q, /*pass_on=*/false);
      if (!ready()) {
        WaitQueue::RunInterruptedTestHook(&q);
        return -EINTR;
      }
      return 0;
    }
  }
  w.Leave(q, /*pass_on=*/false);
  return 0;
}

// send_sig(SIGPIPE, current, 0): a thread-directed SIGPIPE for the caller.
// Called with no lock held, as the kernel delivers it on return to user
// space: a handler may call back into uepoll, even close the descriptor
// being written, so the write's borrow is pinned first (a closer would
// otherwise wait for this very thread).
inline void RaiseSigpipe() {
  PinBorrowed();
  pthread_kill(pthread_self(), SIGPIPE);
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_IO_WAIT_H_
