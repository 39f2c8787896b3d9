// handler_arena: memory for allocations made inside a signal handler.
//
// A handler installed through uepoll_sigaction may write to a uepoll pipe
// or socket (the self-pipe trick; base/signal_defer.h), and such a write
// allocates: a socket's message (Skb), a pipe's page. malloc is not
// async-signal-safe: a handler that lands while its thread is inside
// malloc or free, and allocates there again, corrupts the heap (glibc's
// per-thread cache) or waits for an arena lock its own thread holds. The
// kernel's write() has no such window.
//
// So Allocate() (base/alloc.h) serves a thread that is running a handler
// from this arena: blocks of two sizes (a small one for messages and
// their kind, one that holds a pipe page) carved from one mapping, made
// with mmap on the first such allocation, and kept on lock-free free
// lists; every operation is a compare-and-swap, safe in any handler and
// from any thread. Deallocate() recognizes an arena block by its address
// (one subtraction and comparison) and returns it, whichever thread frees
// it (a reader frees the message a handler wrote).
//
// A request larger than the large block, or one that finds its size's
// blocks all in use, falls back to malloc: the behaviour without the arena,
// never a failure that the handler would not have had otherwise.
//
// "Running a handler" is Trampoline's frame (capi/signal_api.cc) recorded
// in t_signal_defer.handler_frame: a frame deeper on the stack than the
// one recorded is inside it. A handler that leaves by siglongjmp leaves
// the record behind; frames shallower than it (the same stack, back in
// the code that was interrupted) are then outside again, and on another
// stack (an alternate signal stack left behind) the thread may use arena
// blocks until they run out, then malloc: nothing worse than without it.
#ifndef UEPOLL_SRC_BASE_HANDLER_ARENA_H_
#define UEPOLL_SRC_BASE_HANDLER_ARENA_H_

#include <stddef.h>
#include <stdint.h>

#include <atomic>

namespace uepoll::impl {

class HandlerArena {
 public:
  static constexpr size_t kSmallBlock = 256;
  static constexpr size_t kLargeBlock = 4096 + 128;  // a pipe page and more
  static constexpr size_t kSmallCount = 256;
  static constexpr size_t kLargeCount = 64;
  static constexpr size_t kSmallBytes = kSmallBlock * kSmallCount;
  static constexpr size_t kBytes = kSmallBytes + kLargeBlock * kLargeCount;

  // A block of at least n bytes, or nullptr (too large, none free, or the
  // mapping could not be made): the caller then uses malloc.
  static void* Allocate(size_t n) noexcept;
  // Whether p is an arena block.
  static bool Owns(const void* p) noexcept {
    return reinterpret_cast<uintptr_t>(p) -
               base_.load(std::memory_order_relaxed) <
           kBytes;
  }
  // Returns an arena block (Owns(p)).
  static void Free(void* p) noexcept;

  // Blocks handed out and not yet freed (tests).
  static long InUse() noexcept {
    return in_use_.load(std::memory_order_relaxed);
  }

 private:
  // No mapping yet: a base that no user-space pointer is within kBytes of
  // (pointers are below 2^63; p - base wraps to at least 2 * kBytes).
  static constexpr uintptr_t kNoBase = ~uintptr_t{0} - 2 * kBytes + 1;
  static std::atomic<uintptr_t> base_;
  static std::atomic<long> in_use_;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_HANDLER_ARENA_H_
