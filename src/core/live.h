// Live-object accounting for leak checks (uepoll_debug_live_counts).
// Relaxed counters: they are read only when the process is quiescent.
#ifndef UEPOLL_SRC_CORE_LIVE_H_
#define UEPOLL_SRC_CORE_LIVE_H_

#include <atomic>

namespace uepoll::impl {

struct Live {
  static inline std::atomic<long> files{0};
  static inline std::atomic<long> items{0};
  static inline std::atomic<long> descriptors{0};
  static inline std::atomic<long> instances{0};

  static void Inc(std::atomic<long>& c) {
    c.fetch_add(1, std::memory_order_relaxed);
  }
  static void Dec(std::atomic<long>& c) {
    c.fetch_sub(1, std::memory_order_relaxed);
  }
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_LIVE_H_
