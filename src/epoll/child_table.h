// ChildTable: the items of an instance whose targets are instances, by the
// cookie of their registration in the kernel half (kernel/kernel_half.h).
//
// A nested ADD registers the child's kernel epoll in the parent's with a
// cookie; when the parent's kernel half reports that cookie (the child's
// kernel side had an event), the parent looks the item up here and runs
// its wakeup callback, as the child's own wakeup would. A cookie's index is
// a slot number and a generation: an event that was queued in the kernel
// before its item was removed names a slot whose generation has moved on,
// and is dropped.
//
// Thread safety: the owner's mtx_ guards everything (the class does not
// know the lock; Eventpoll declares the member GUARDED_BY). Growth
// allocates outside the lock: Spare() is a racy peek the caller makes
// before locking, Grow() swaps a prepared array in under the lock.
#ifndef UEPOLL_SRC_EPOLL_CHILD_TABLE_H_
#define UEPOLL_SRC_EPOLL_CHILD_TABLE_H_

#include <atomic>
#include <cstdint>

#include "base/alloc.h"
#include "epoll/item.h"
#include "kernel/kernel_half.h"

namespace uepoll::impl {

class ChildTable {
 public:
  struct Slot {
    EpItem* epi = nullptr;  // nullptr: free
    uint32_t gen = 0;
  };
  static constexpr uint32_t kSlotBits = 20;
  static constexpr uint32_t kMaxSlots = uint32_t{1} << kSlotBits;

  ChildTable() = default;
  ~ChildTable() { DeleteArray(slots_); }
  ChildTable(const ChildTable&) = delete;
  ChildTable& operator=(const ChildTable&) = delete;

  // The capacity an ADD should allocate before locking, or 0 if the table
  // has room (a peek; checked again by Grow).
  uint32_t WantCapacity() const {
    uint32_t cap = cap_.load(std::memory_order_relaxed);
    if (used_.load(std::memory_order_relaxed) + KernelHalf::kFirstChild < cap) {
      return 0;
    }
    uint32_t c = cap ? cap * 2 : 8;
    return c > kMaxSlots ? kMaxSlots : c;
  }
  // Installs `fresh` (capacity n, from NewArray) if the table still needs
  // it; returns the array the caller frees after unlocking (the old one,
  // or `fresh` itself when not needed).
  Slot* Grow(Slot* fresh, uint32_t n) {
    uint32_t cap = cap_.load(std::memory_order_relaxed);
    if (!fresh || n <= cap) return fresh;
    for (uint32_t i = 0; i < cap; ++i) fresh[i] = slots_[i];
    Slot* old = slots_;
    slots_ = fresh;
    cap_.store(n, std::memory_order_relaxed);
    return old;
  }
  // The cookie index for epi, or 0 when the table is full (ENOMEM).
  uint32_t Add(EpItem* epi) {
    for (uint32_t i = KernelHalf::kFirstChild; i < cap(); ++i) {
      if (!slots_[i].epi) {
        slots_[i].epi = epi;
        uint32_t g =
            (slots_[i].gen + 1) & ((uint32_t{1} << (32 - kSlotBits)) - 1);
        slots_[i].gen = g ? g : 1;  // never 0: indexes 0 and 1 are fixed
        used_.store(used_.load(std::memory_order_relaxed) + 1,
                    std::memory_order_relaxed);
        return (slots_[i].gen << kSlotBits) | i;
      }
    }
    return 0;
  }
  // The cookie index of epi (0 if it has none); frees its slot.
  uint32_t Remove(EpItem* epi) {
    for (uint32_t i = KernelHalf::kFirstChild; i < cap(); ++i) {
      if (slots_[i].epi == epi) {
        slots_[i].epi = nullptr;
        used_.store(used_.load(std::memory_order_relaxed) - 1,
                    std::memory_order_relaxed);
        return (slots_[i].gen << kSlotBits) | i;
      }
    }
    return 0;
  }
  // The cookie index of epi, or 0.
  uint32_t IndexOf(const EpItem* epi) const {
    for (uint32_t i = KernelHalf::kFirstChild; i < cap(); ++i) {
      if (slots_[i].epi == epi) return (slots_[i].gen << kSlotBits) | i;
    }
    return 0;
  }
  // The item a cookie index names, or nullptr (stale or never ours).
  EpItem* Find(uint32_t index) const {
    uint32_t i = index & (kMaxSlots - 1);
    if (i < KernelHalf::kFirstChild || i >= cap()) return nullptr;
    const Slot& s = slots_[i];
    return s.epi && s.gen == (index >> kSlotBits) ? s.epi : nullptr;
  }
  template <class Fn>
  void ForEach(Fn fn) const {
    for (uint32_t i = KernelHalf::kFirstChild; i < cap(); ++i) {
      if (slots_[i].epi) fn(slots_[i].epi, (slots_[i].gen << kSlotBits) | i);
    }
  }
  bool empty() const { return used_.load(std::memory_order_relaxed) == 0; }

 private:
  uint32_t cap() const { return cap_.load(std::memory_order_relaxed); }

  Slot* slots_ = nullptr;
  // Written under the instance's mtx_; atomics only for WantCapacity's
  // peek before mtx_ is taken (under TSan:
  // Stress.RacingNestedAddsNeverLeaveACycleOrAnOverlongChain).
  std::atomic<uint32_t> cap_{0};
  std::atomic<uint32_t> used_{0};
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_EPOLL_CHILD_TABLE_H_
