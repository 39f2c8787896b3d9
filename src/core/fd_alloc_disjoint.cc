// The disjoint numbering's allocator (FdMode::kDisjoint, core/fd_table.h):
// numbers from UEPOLL_FD_BASE, lowest free first, with a bitmap per chunk
// and a lower-bound hint, and no system call. The kernel numbering needs
// none of this: the kernel allocates its numbers.
//
// Thread safety: lock-free; the bitmap words and the hint are atomics, and
// the argument for lowest-free-first under concurrency is at Reserve.
#include <atomic>

#include "core/fd_table.h"

namespace uepoll::impl {

// Lowest free index >= min_idx. The hint is a lower bound of the free
// indices that a free (Unreserve) only lowers and an allocation raises only
// from the value it started from (a CAS): a free that happened meanwhile
// keeps it low. An allocation that relied on the hint checks it again after
// taking its bit: if a number below its starting point was freed since, it
// gives its bit back and starts over, so the number it returns was the
// lowest free one at some instant of the call
// (BridgeFdRace.AllocationsRacingAscendingFreesLeaveNoHole, disjoint build).
//
// A free at or above the starting point does not lower the hint, and the
// scan may already have passed it: after raising the hint over [h, cand),
// the allocation looks at those bits again and lowers the hint to any that
// came free. The free clears its bit, then reads the hint; the allocation
// raises the hint, then reads the bits (all seq_cst): whichever comes
// second sees the other's write, so no freed number is left below the hint.
long FdTable::Reserve(long min_idx) {
  long lim = limit();
  for (;;) {
    long h = hint_.load(std::memory_order_acquire);
    long start = min_idx > h ? min_idx : h;
    long cand = -1;
    for (long idx = start; idx < lim && cand < 0;) {
      Chunk* c = GetChunk(idx, true);
      if (!c) return -2;  // ENOMEM
      long word = (idx & (kChunkSize - 1)) >> 6;
      for (; word < kChunkSize / 64 && cand < 0; ++word) {
        uint64_t bits = c->bitmap[word].load(std::memory_order_relaxed);
        long base = (idx & ~long{kChunkSize - 1}) + word * 64;
        // Ignore bits below idx in the first word.
        uint64_t mask =
            idx > base ? ~((uint64_t{1} << (idx - base)) - 1) : ~uint64_t{0};
        while (~bits & mask) {
          int bit = __builtin_ctzll(~bits & mask);
          if (base + bit >= lim) return -1;
          if (c->bitmap[word].compare_exchange_weak(
                  bits, bits | (uint64_t{1} << bit), std::memory_order_acq_rel,
                  std::memory_order_relaxed)) {
            cand = base + bit;
            break;
          }
        }
        idx = base + 64;
      }
    }
    if (cand < 0) return -1;
    if (min_idx > h) return cand;  // the hint played no part
    if (hint_.load(std::memory_order_acquire) < h) {
      Unreserve(cand);  // a lower number came free meanwhile
      continue;
    }
    long expect = h;
    // seq_cst: pairs with Unreserve's bit clear and hint load (above).
    if (hint_.compare_exchange_strong(expect, cand + 1,
                                      std::memory_order_seq_cst,
                                      std::memory_order_relaxed) &&
        cand > h) {
      long hole = FirstFree(h, cand);
      if (hole >= 0) LowerHint(hole);
    }
    return cand;
  }
}

long FdTable::FirstFree(long lo, long hi) {
  for (long idx = lo; idx < hi;) {
    Chunk* c = GetChunk(idx, false);
    long base =
        (idx & ~long{kChunkSize - 1}) + ((idx & (kChunkSize - 1)) >> 6) * 64;
    if (!c) return idx;  // never allocated: all free
    // seq_cst: pairs with Unreserve (see Reserve).
    uint64_t bits = c->bitmap[(idx & (kChunkSize - 1)) >> 6].load(
        std::memory_order_seq_cst);
    uint64_t mask =
        idx > base ? ~((uint64_t{1} << (idx - base)) - 1) : ~uint64_t{0};
    if (uint64_t free_bits = ~bits & mask) {
      long f = base + __builtin_ctzll(free_bits);
      return f < hi ? f : -1;
    }
    idx = base + 64;
  }
  return -1;
}

void FdTable::LowerHint(long idx) {
  long h = hint_.load(std::memory_order_seq_cst);
  while (idx < h &&
         !hint_.compare_exchange_weak(h, idx, std::memory_order_seq_cst,
                                      std::memory_order_seq_cst)) {
  }
}

void FdTable::Unreserve(long idx) {
  Chunk* c = GetChunk(idx, false);
  long i = idx & (kChunkSize - 1);
  // seq_cst: the bit is clear before the hint is read, against an
  // allocation that raises the hint and then reads the bits (Reserve).
  c->bitmap[i >> 6].fetch_and(~(uint64_t{1} << (i & 63)),
                              std::memory_order_seq_cst);
  LowerHint(idx);
}

}  // namespace uepoll::impl
