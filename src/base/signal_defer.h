// signal_defer: signal handlers that may call uepoll.
//
// A uepoll lock is a user-space lock: a handler that runs on a thread
// holding one and then takes it again (the self-pipe trick: asyncio's,
// libuv's, libevent's handler writes to a uepoll socket the interrupted
// thread was polling) waits for itself forever. The kernel has no such
// window: a system call is atomic with respect to handlers.
//
// So each thread counts the uepoll locks it holds (Mutex counts itself,
// base/mutex.h), and a handler installed through uepoll_sigaction
// (capi/signal_api.cc; the interposer's sigaction and signal) is put off
// while the count is not zero: its trampoline adds the signal to the
// interrupted context's mask and queues it again to this thread, with its
// siginfo, so the kernel keeps it pending. When the count falls back to
// zero the thread unblocks what it put off, and the kernel runs the
// handler there, with a real context, its own mask and flags. The fast
// path is a thread-local increment and decrement; system calls happen only
// for a signal that arrived inside a critical section.
//
// Locks are never held across a sleep (docs/design.md, "How a waiter
// sleeps"), so a handler never waits for a blocked call: it runs during
// the sleep, and EINTR is as before (docs/semantics.md D6, D11).
#ifndef UEPOLL_SRC_BASE_SIGNAL_DEFER_H_
#define UEPOLL_SRC_BASE_SIGNAL_DEFER_H_

#include <stdint.h>

#include <atomic>

namespace uepoll::impl {

struct SignalDeferState {
  int depth;          // uepoll locks this thread holds
  uint64_t deferred;  // bit s-1: signal s put off (blocked, queued again)
  // The frame of the innermost Trampoline running a handler on this
  // thread, or 0: allocations deeper than it come from the handler arena
  // (base/handler_arena.h).
  uintptr_t handler_frame;
};

// initial-exec: one %fs-relative access, and nothing for the loader to
// allocate on a thread's first use (a handler may be that first use). 24
// bytes fit the static TLS that glibc keeps for a dlopen'ed library.
// __thread, not thread_local: a C++ thread_local defined in another file
// is reached through its TLS wrapper function (a call on every Lock and
// Unlock); __thread has constant initialization, so the access is inline.
extern __thread SignalDeferState t_signal_defer
    __attribute__((tls_model("initial-exec")));

// Unblocks the signals this thread put off; the kernel delivers them
// before it returns (signal_defer.cc).
void ReleaseDeferredSignals();

inline void EnterSignalCritical() {
  ++t_signal_defer.depth;
  // Same-thread ordering only: a handler must see the count before the
  // lock is taken.
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

#ifndef NDEBUG
// A lock released by another thread than its taker would unbalance both
// threads' counts: debug builds abort on the one that falls below zero.
[[noreturn]] void ReportSignalDepthUnderflow();
#endif

inline void LeaveSignalCritical() {
  std::atomic_signal_fence(std::memory_order_seq_cst);
#ifndef NDEBUG
  if (t_signal_defer.depth <= 0) ReportSignalDepthUnderflow();
#endif
  if (--t_signal_defer.depth == 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (t_signal_defer.deferred != 0) [[unlikely]]
      ReleaseDeferredSignals();
  }
}

inline bool InSignalCritical() { return t_signal_defer.depth != 0; }

// For tests (tests/threads/signal_defer_test.cc): called by the trampoline
// of a delivery with SA_RESETHAND after it read the action and before it
// resets it (capi/signal_api.cc); nullptr: none.
void SetSignalResetHookForTest(void (*hook)(int sig));

// Whether this thread is running a handler that Trampoline called: the
// caller's frame is deeper than Trampoline's (a handler that left by
// siglongjmp left its record behind, and the frames it went back to are
// shallower; base/handler_arena.h).
[[gnu::always_inline]] inline bool InSignalHandler() {
  uintptr_t h = t_signal_defer.handler_frame;
  return h != 0 && reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < h;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_SIGNAL_DEFER_H_
