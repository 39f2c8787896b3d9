// Allocation: every allocation the engine makes goes through Allocate(), so
// that (1) failure is always a nullptr that becomes ENOMEM, never an
// exception through the C API, and (2) tests can inject a failure at the
// Nth allocation (uepoll_debug_fail_alloc) to prove that every failing call
// changes nothing and leaks nothing.
#ifndef UEPOLL_SRC_BASE_ALLOC_H_
#define UEPOLL_SRC_BASE_ALLOC_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "base/handler_arena.h"
#include "base/signal_defer.h"

namespace uepoll::impl {

// Countdown to an injected failure: 0 = off; n > 0 = the nth allocation
// from now fails (and the countdown switches off).
inline std::atomic<long> g_alloc_fail_countdown{0};
// How many allocations were made (for tests that enumerate the sites).
inline std::atomic<long> g_alloc_count{0};

// Failure injection, and allocations inside a signal handler (from
// base/handler_arena.h where it can).
void* AllocateSlow(size_t n) noexcept;

inline void* Allocate(size_t n) noexcept {
  if (g_alloc_fail_countdown.load(std::memory_order_relaxed) != 0 ||
      t_signal_defer.handler_frame != 0) [[unlikely]] {
    return AllocateSlow(n);
  }
  return ::operator new(n, std::nothrow);
}
inline void Deallocate(void* p) noexcept {
  // Nothing to free calls nothing: operator delete and free are two more
  // code pages for a fork child on its way to exec (ExportAll's session).
  if (p == nullptr) return;
  if (HandlerArena::Owns(p)) [[unlikely]] {
    HandlerArena::Free(p);
    return;
  }
  ::operator delete(p);
}

// Cache-line-aligned memory, for objects that lay their fields out on lines
// of their own (Eventpoll): malloc's 16-byte alignment would let a hot
// line straddle two. Same accounting and failure injection as Allocate.
//
// Not an aligned operator new: glibc serves that with memalign, which
// carves a larger chunk, frees the remainder and bypasses the per-thread
// cache (738 of the ~2960 instructions of an eventfd create/ADD/close
// cycle; bench/FINDINGS_DRAFT.md). Instead one ordinary allocation a line
// larger, aligned by hand, with malloc's pointer kept in the word below
// the object.
inline constexpr size_t kCacheLine = 64;
inline void* AlignToLine(void* raw) noexcept {
  if (!raw) return nullptr;
  uintptr_t a = (reinterpret_cast<uintptr_t>(raw) + kCacheLine) &
                ~uintptr_t{kCacheLine - 1};
  // raw is at least 16-byte aligned, so 16 to 64 bytes lie below a.
  reinterpret_cast<void**>(a)[-1] = raw;
  return reinterpret_cast<void*>(a);
}
inline void* AllocateLine(size_t n) noexcept {
  return AlignToLine(Allocate(n + kCacheLine));
}
inline void DeallocateLine(void* p) noexcept {
  if (p) Deallocate(static_cast<void**>(p)[-1]);
}

template <class T, class... Args>
T* New(Args&&... args) noexcept {
  void* p = Allocate(sizeof(T));
  if (!p) return nullptr;
  return new (p) T(std::forward<Args>(args)...);
}
template <class T>
void Delete(T* p) noexcept {
  if (!p) return;
  p->~T();
  Deallocate(p);
}
// A value-initialized array of trivially destructible T.
template <class T>
T* NewArray(size_t n) noexcept {
  void* p = Allocate(sizeof(T) * n);
  if (!p) return nullptr;
  return new (p) T[n]();
}
template <class T>
void DeleteArray(T* p) noexcept {
  Deallocate(p);
}

// Frees an object of n bytes. Debug builds poison it first: code that
// still follows a pointer to it (a reference dropped once too often, a
// list that outlived its members) reads 0xdb...db, a wild pointer that
// faults where a release build would read stale memory quietly. ASan
// reports the same either way; this is for the Debug builds the mutation
// check (tools/mutants) and most test runs use.
inline void PoisonFreed(void* p, size_t n) noexcept {
#ifndef NDEBUG
  if (p) std::memset(p, 0xdb, n);
#else
  (void)p;
  (void)n;
#endif
}
inline void DeallocatePoisoned(void* p, size_t n) noexcept {
  PoisonFreed(p, n);
  Deallocate(p);
}
// The same for memory from AllocateLine.
inline void DeallocateLinePoisoned(void* p, size_t n) noexcept {
  PoisonFreed(p, n);
  DeallocateLine(p);
}

// For classes with virtual destructors freed by `delete this`: route their
// operator new/delete through Allocate. The sized delete gets the size of
// the object's own class (the virtual destructor passes it).
#define UEPOLL_ALLOCATED_CLASS                                          \
  static void* operator new(size_t n, const std::nothrow_t&) noexcept { \
    return ::uepoll::impl::Allocate(n);                                 \
  }                                                                     \
  static void operator delete(void* p, size_t n) noexcept {             \
    ::uepoll::impl::DeallocatePoisoned(p, n);                           \
  }

// The same for over-aligned classes (alignas(kCacheLine) members), freed
// poisoned as well. Only the sized aligned delete is declared: where a
// class declares both, a delete expression picks the unsized one.
#define UEPOLL_LINE_ALLOCATED_CLASS                                           \
  static void* operator new(size_t n, std::align_val_t,                       \
                            const std::nothrow_t&) noexcept {                 \
    return ::uepoll::impl::AllocateLine(n);                                   \
  }                                                                           \
  static void operator delete(void* p, size_t n, std::align_val_t) noexcept { \
    ::uepoll::impl::DeallocateLinePoisoned(p, n);                             \
  }                                                                           \
  static void operator delete(void* p, std::align_val_t,                      \
                              const std::nothrow_t&) noexcept {               \
    ::uepoll::impl::DeallocateLine(p);                                        \
  }

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_ALLOC_H_
