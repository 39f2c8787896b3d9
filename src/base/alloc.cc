#include "base/alloc.h"

namespace uepoll::impl {

namespace {

// Counts the allocation; true if it is the one to fail.
bool InjectFailureNow() noexcept {
  g_alloc_count.fetch_add(1, std::memory_order_relaxed);
  long c = g_alloc_fail_countdown.load(std::memory_order_relaxed);
  while (c > 0) {
    if (g_alloc_fail_countdown.compare_exchange_weak(
            c, c - 1, std::memory_order_relaxed)) {
      return c == 1;  // the injected failure
    }
  }
  return false;
}

}  // namespace

void* AllocateSlow(size_t n) noexcept {
  if (g_alloc_fail_countdown.load(std::memory_order_relaxed) != 0 &&
      InjectFailureNow()) {
    return nullptr;
  }
  if (InSignalHandler()) {
    if (void* p = HandlerArena::Allocate(n)) return p;
  }
  return ::operator new(n, std::nothrow);
}

}  // namespace uepoll::impl
