#include "base/alloc.h"

namespace uepoll::impl {

void* AllocateSlow(size_t n) noexcept {
  g_alloc_count.fetch_add(1, std::memory_order_relaxed);
  long c = g_alloc_fail_countdown.load(std::memory_order_relaxed);
  while (c > 0) {
    if (g_alloc_fail_countdown.compare_exchange_weak(
            c, c - 1, std::memory_order_relaxed)) {
      if (c == 1) return nullptr;  // the injected failure
      break;
    }
  }
  return ::operator new(n, std::nothrow);
}

}  // namespace uepoll::impl
