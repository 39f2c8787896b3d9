// The disjoint numbering's allocator (FdMode::kDisjoint, core/fd_table.h):
// numbers from UEPOLL_FD_BASE, lowest free first, with a bitmap per chunk
// and a lower-bound hint, and no system call. The kernel numbering needs
// none of this: the kernel allocates its numbers.
//
// Thread safety: lock-free; the bitmap words and the hint are atomics, and
// the argument for lowest-free-first under concurrency is at ReserveShared.
//
// Parked numbers. The bitmap word and the hint are written by every
// allocation and free, so two threads that create and close descriptors
// and share nothing else would still move those lines between their CPUs
// at every call (issue 23: 0.70x to 0.91x of one thread's rate at two). A
// thread's close therefore parks the number instead (Park): its bit stays
// set, its parked byte (one per number, a cache line apart from its
// neighbours', Chunk::Pos) says it is free, and the thread's own list
// remembers it. The thread's next create takes it back (ReserveCached)
// without writing any shared word: the lowest free number for a thread
// that makes all its calls itself, since a parked number is taken only
// when it is below the hint (below every free bit) or below what the
// bitmap offers. Another thread's create does not see a number parked by
// this one (docs/semantics.md D5); a dup2 onto it takes it (ClaimParked),
// an allocation that finds the range full takes back every parked number
// first (ReclaimParked), and a thread's exit and fork() release them.
//
// Whoever changes a parked byte from 1 to 0 owns the number: the lists are
// hints, an entry whose byte was taken meanwhile is dropped.
#include <atomic>

#include "base/signal_defer.h"
#include "core/fd_table.h"

namespace uepoll::impl {
namespace {

// Numbers a thread keeps parked at most; a close beyond that frees its
// number as before.
constexpr int kParkMax = 8;

// The calling thread's parked numbers. Trivially destructible (readable
// from other thread_local destructors); `busy` keeps a signal handler's
// close or create on this thread out of a list the interrupted call is
// changing: such a call takes the shared path.
struct ParkList {
  long idx[kParkMax];
  int n;
  bool busy;
  bool armed;   // ParkFlusher's destructor will run
  bool exited;  // the thread is exiting: no more parking
};
thread_local ParkList tl_park;

// Frees the exiting thread's parked numbers.
struct ParkFlusher {
  bool armed = false;
  ~ParkFlusher() {
    tl_park.busy = true;
    FdTable& t = FdTable::Get();
    for (int i = 0; i < tl_park.n; ++i) {
      t.ReleaseParked(tl_park.idx[i]);
    }
    tl_park.n = 0;
    tl_park.exited = true;
  }
};
thread_local ParkFlusher tl_park_flusher;

// Takes the calling thread's list, or false: a handler interrupted a call
// that holds it, the thread is exiting, or its first use is in a signal
// handler (registering the flusher may allocate).
bool EnterParkList() {
  if (tl_park.busy || tl_park.exited) return false;
  if (!tl_park.armed) {
    if (InSignalHandler()) return false;
    tl_park_flusher.armed = true;  // constructs it: its destructor will run
    tl_park.armed = true;
  }
  tl_park.busy = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return true;
}

void LeaveParkList() {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  tl_park.busy = false;
}

void DropEntry(int i) { tl_park.idx[i] = tl_park.idx[--tl_park.n]; }

}  // namespace

void FdTable::Park(long idx) {
  if (!EnterParkList()) {
    Unreserve(idx);
    return;
  }
  if (tl_park.n == kParkMax) {
    LeaveParkList();
    Unreserve(idx);
    return;
  }
  // Release: the close's writes (the cleared slot) come before the
  // number's next owner, whoever claims the byte, uses it.
  GetChunk(idx, false)
      ->parked(idx & (kChunkSize - 1))
      .store(1, std::memory_order_release);
  tl_park.idx[tl_park.n++] = idx;
  LeaveParkList();
}

bool FdTable::ClaimParked(long idx) {
  Chunk* c = GetChunk(idx, false);
  // Acquire: pairs with Park's release.
  return c && c->parked(idx & (kChunkSize - 1))
                      .exchange(0, std::memory_order_acq_rel) == 1;
}

void FdTable::ReleaseParked(long idx) {
  if (ClaimParked(idx)) Unreserve(idx);
}

bool FdTable::ReclaimParked() {
  bool any = false;
  for (long c = 0; c < kMaxChunks; ++c) {
    Chunk* chunk = chunks_[c].load(std::memory_order_acquire);
    if (!chunk) continue;
    for (long i = 0; i < kChunkSize; ++i) {
      if (chunk->parked(i).load(std::memory_order_relaxed) &&
          chunk->parked(i).exchange(0, std::memory_order_acq_rel) == 1) {
        Unreserve(c * kChunkSize + i);
        any = true;
      }
    }
  }
  return any;
}

void FdTable::ForgetParkedInChild() {
  // Only the forking thread exists now: every parked number, its own
  // included, goes back to the bitmap; the entries left in its list fail
  // their claims. (The list itself is left alone: the fork may have come
  // from a signal handler that interrupted this thread's use of it.)
  ReclaimParked();
}

long FdTable::Reserve(long min_idx) {
  if (!EnterParkList()) return ReserveOrReclaim(min_idx);
  long r = ReserveCached(min_idx);
  LeaveParkList();
  return r;
}

long FdTable::ReserveCached(long min_idx) {
  constexpr long kNotYet = -3;
  long lim = limit();
  long cand = kNotYet;  // the bitmap's number, once asked for
  for (;;) {
    int best = -1;
    for (int i = 0; i < tl_park.n; ++i) {
      long v = tl_park.idx[i];
      if (!GetChunk(v, false)
               ->parked(v & (kChunkSize - 1))
               .load(std::memory_order_relaxed)) {
        DropEntry(i--);  // taken since (a dup2, a reclaim)
        continue;
      }
      if (v >= min_idx && v < lim && (best < 0 || v < tl_park.idx[best])) {
        best = i;
      }
    }
    if (best < 0) return cand == kNotYet ? ReserveOrReclaim(min_idx) : cand;
    long c = tl_park.idx[best];
    // Below the hint, c is below every free bit: the lowest free number
    // this thread can see, with no shared word written.
    if (cand == kNotYet && c < hint_.load(std::memory_order_acquire)) {
      DropEntry(best);
      if (ClaimParked(c)) return c;
      continue;  // taken by a dup2 or a reclaim meanwhile
    }
    if (cand == kNotYet) cand = ReserveOrReclaim(min_idx);
    if (cand >= 0 && cand < c) return cand;  // the bitmap's is lower
    DropEntry(best);
    if (ClaimParked(c)) {
      if (cand >= 0) Unreserve(cand);
      return c;
    }
    // Taken meanwhile: the next parked number against the bitmap's
    // (a race; difffuzz seed 2 met the single-thread form of it).
  }
}

long FdTable::ReserveOrReclaim(long min_idx) {
  long r = ReserveShared(min_idx);
  // Full, maybe only of parked numbers: every thread's go back first.
  if (r == -1 && ReclaimParked()) r = ReserveShared(min_idx);
  return r;
}

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
long FdTable::ReserveShared(long min_idx) {
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
