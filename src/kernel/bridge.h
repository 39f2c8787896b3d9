// Bridge: how the kernel readiness of an epoll instance's kernel half
// reaches the instance's uepoll watchers (parent instances, poll()).
//
// An instance that holds kernel descriptors keeps them in a kernel epoll
// instance of its own (epoll/eventpoll.h, "kernel half"). A thread waiting
// on that instance directly sleeps on that kernel epoll too. But a parent
// instance's waiter knows nothing of its children's kernel halves, and the
// kernel fires no uepoll callback. So the kernel half of every instance
// that is itself watched by a uepoll instance is registered, edge-triggered,
// in one process-wide kernel epoll, the bridge. A thread whose wait could
// depend on such a child (Eventpoll::kernel_below_) also sleeps on the
// bridge; when it becomes readable, the thread reaps it and, for each
// instance whose kernel half had a new event, calls its ready() hook, which
// wakes the instance's watchers exactly as a uepoll source's wakeup would
// (one edge per kernel event, as the kernel's own nested epoll delivers).
//
// The bridge descriptor is the library's own. It holds a sentinel eventfd
// registration, and every use is preceded by a MOD of that registration,
// which succeeds only while the number still names the bridge (the same
// identity check as base/parker.h): a bridge closed by the application
// (closefrom) is abandoned, never touched, and made anew. The registrations
// it held are lost with it: nested instances no longer propagate their
// kernel readiness after that (docs/semantics.md).
//
// Thread safety: one mutex guards the registry and the descriptor. Lock
// order: NestingLock (g_nested) before it; ready() hooks run under it and
// may take wait-queue and instance locks; nothing takes it while holding
// one of those.
#ifndef UEPOLL_SRC_KERNEL_BRIDGE_H_
#define UEPOLL_SRC_KERNEL_BRIDGE_H_

#include <cstdint>

namespace uepoll::impl {

class Bridge {
 public:
  using ReadyFn = void (*)(void* ctx);

  // Registers the kernel epoll at kfd; ready(ctx) runs for each of its new
  // events. Returns a handle (>= 0) or -errno.
  static int Register(int kfd, ReadyFn ready, void* ctx);
  // After Unregister returns, ready(ctx) of that handle is not running and
  // will not run.
  static void Unregister(int handle);
  // The bridge's descriptor for a sleep set, or -1 if there is none.
  static int Fd();
  // Runs the ready hooks of every registration with a new event.
  static void Reap();
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_BRIDGE_H_
