// Live-object accounting for leak checks (uepoll_debug_live_counts).
//
// Every create and close of a file, descriptor, item or instance counts
// here, so the counters must not be process-wide words: two threads that
// share nothing would still bounce the counters' cache line between their
// CPUs on every operation (the kernel keeps such counts per CPU for the
// same reason). Each thread counts in a slot of its own, on its own cache
// line, written only by that thread; a slot outlives its thread (it is
// handed to the next thread that starts counting) and keeps its counts, so
// the sum over all slots is exact whenever no thread is in the middle of a
// count: uepoll_debug_live_counts reads it when the process is quiescent.
#ifndef UEPOLL_SRC_CORE_LIVE_H_
#define UEPOLL_SRC_CORE_LIVE_H_

#include <atomic>

namespace uepoll::impl {

struct LiveCounts {
  long files = 0, items = 0, descriptors = 0, instances = 0;
};

// One thread's counts. Written by the owning thread only (a plain load and
// store, no read-modify-write), read by Live::Sum from any thread.
struct alignas(64) LiveSlot {
  std::atomic<long> n[4] = {};
  std::atomic<bool> in_use{false};
  LiveSlot* next = nullptr;  // the list of every slot ever made
};

// The calling thread's slot, made or reused on its first count (live.cc).
LiveSlot* AcquireLiveSlot();
inline thread_local LiveSlot* tl_live_slot = nullptr;

struct Live {
  // Which counter: the call sites read Live::Inc(Live::files).
  enum Which { files = 0, items = 1, descriptors = 2, instances = 3 };

  static void Inc(Which w) { Add(w, 1); }
  static void Dec(Which w) { Add(w, -1); }

  // The totals over every slot.
  static LiveCounts Sum();

 private:
  static void Add(Which w, long d) {
    LiveSlot* s = tl_live_slot;
    if (__builtin_expect(!s, 0)) s = AcquireLiveSlot();
    if (__builtin_expect(s != nullptr, 1)) {
      // Only this thread writes the slot: no lock prefix needed. Relaxed:
      // Sum runs when the process is quiescent, after the joins or other
      // synchronization that make these writes visible.
      s->n[w].store(s->n[w].load(std::memory_order_relaxed) + d,
                    std::memory_order_relaxed);
    } else {
      AddShared(w, d);
    }
  }
  // The fallback when a slot cannot be made (no memory, or the thread is
  // exiting): one shared slot, counted with atomic read-modify-writes.
  static void AddShared(Which w, long d);
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_LIVE_H_
