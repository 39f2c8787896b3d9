#include "core/fd_table.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>

#include <cassert>
#include <new>

#include "base/mutex.h"

namespace uepoll::impl {

FdTable& FdTable::Get() {
  // Never destroyed: descriptors may be used from other threads' exit paths.
  static FdTable* table = new FdTable();
  return *table;
}

FdTable::Chunk* FdTable::GetChunk(long idx, bool create) {
  long c = idx >> kChunkBits;
  Chunk* chunk = chunks_[c].load(std::memory_order_acquire);
  if (chunk || !create) return chunk;
  auto* fresh = New<Chunk>();
  if (!fresh) return nullptr;
  // Release publishes the zeroed chunk; acquire (on failure) sees the winner.
  if (!chunks_[c].compare_exchange_strong(
          chunk, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
    Delete(fresh);
    return chunk;
  }
  return fresh;
}

std::atomic<uint64_t>* FdTable::Slot(long idx, bool create) {
  Chunk* c = GetChunk(idx, create);
  return c ? &c->slots[idx & (kChunkSize - 1)] : nullptr;
}

void FdTable::WaitForLookups(std::atomic<uint64_t>* s) {
  // Acquire pairs with the release decrement in Lookup: once the count is
  // seen at zero, every lookup that saw the old file holds its reference.
  for (int spins = 0; s->load(std::memory_order_acquire) & kCountMask;
       ++spins) {
    if (spins < 64) {
      CpuRelax();
    } else {
      sched_yield();  // a lookup was preempted inside its window
    }
  }
}

void FdTable::WaitForUsers(std::atomic<uint64_t>* s, uint64_t w) {
  WaitForLookups(s);
  if (w & kBorrowBit) WaitUntilUnborrowed(FileOf(w));
}

std::atomic<uint64_t>* FdTable::SlotOfFd(int fd) {
  if (fd < kBase || long{fd} - kBase >= kCapacity) return nullptr;
  return Slot(long{fd} - kBase, false);
}

FileRef FdTable::Lookup(int fd) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s) return {};
  // Acquire pairs with the release RMW that installed the file.
  uint64_t w = s->fetch_add(kCountOne, std::memory_order_acquire);
  // 16383 lookups of one number in flight at once would carry into the
  // borrowable bit (fd_table.h).
  assert((w & kCountMask) != kCountMask);
  File* f = FileOf(w);
  if (f) f->Ref();
  // Release: our reference is taken before a closer sees the count drop.
  s->fetch_sub(kCountOne, std::memory_order_release);
  return FileRef(f);
}

FileBorrow FdTable::Borrow(int fd) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s) return {};
  // Acquire pairs with the release RMW that installed the file.
  uint64_t w = s->load(std::memory_order_acquire);
  if (w & kBorrowBit) {
    BorrowRecord* rec = MyBorrowRecord();
    int slot = rec ? rec->FreeSlot() : -1;
    if (slot >= 0) {
      File* f = FileOf(w);
      // seq_cst store then seq_cst load, against the closer's seq_cst clear
      // of the slot then seq_cst load of the hazard (WaitUntilUnborrowed):
      // at least one side sees the other's write.
      rec->hazard[slot].store(f, std::memory_order_seq_cst);
      uint64_t again = s->load(std::memory_order_seq_cst);
      // The bit too: the same address may now be a new file that is not an
      // instance, whose closers would not look for hazards.
      if (FileOf(again) == f && (again & kBorrowBit)) {
        // Only now may PinBorrowed (from a signal handler on this thread,
        // say) turn the hazard into a reference.
        std::atomic_signal_fence(std::memory_order_seq_cst);
        rec->valid[slot] = true;
        return FileBorrow(f, rec, slot);
      }
      rec->hazard[slot].store(nullptr, std::memory_order_relaxed);
    }
  }
  FileRef ref = Lookup(fd);
  // A file used by a thread other than its creator is likely to be used
  // by several: from now on its number is borrowed, not counted.
  if (ref && !(w & kBorrowBit) && !ref->created_by_this_thread()) {
    MarkBorrowable(s, ref.get());
  }
  return FileBorrow(std::move(ref));
}

void FdTable::MarkBorrowable(std::atomic<uint64_t>* s, File* f) {
  uint64_t w = s->load(std::memory_order_relaxed);
  // An RMW on the slot word, ordered with the closers' clear: if it lands
  // first, the closer sees the bit and scans; if not, it fails here.
  while (FileOf(w) == f && !(w & kBorrowBit) &&
         !s->compare_exchange_weak(w, w | kBorrowBit, std::memory_order_seq_cst,
                                   std::memory_order_relaxed)) {
  }
}

long FdTable::Reserve(long min_idx) {
  long lim = limit();
  long start = min_idx;
  long h = hint_.load(std::memory_order_relaxed);
  if (h > start) start = h;
  for (long idx = start; idx < lim;) {
    Chunk* c = GetChunk(idx, true);
    if (!c) return -2;  // ENOMEM
    long word = (idx & (kChunkSize - 1)) >> 6;
    for (; word < kChunkSize / 64; ++word) {
      uint64_t bits = c->bitmap[word].load(std::memory_order_relaxed);
      long base = (idx & ~long{kChunkSize - 1}) + word * 64;
      // Ignore bits below idx in the first word.
      uint64_t mask =
          idx > base ? ~((uint64_t{1} << (idx - base)) - 1) : ~uint64_t{0};
      while (~bits & mask) {
        int bit = __builtin_ctzll(~bits & mask);
        long cand = base + bit;
        if (cand >= lim) return -1;
        if (c->bitmap[word].compare_exchange_weak(
                bits, bits | (uint64_t{1} << bit), std::memory_order_acq_rel,
                std::memory_order_relaxed)) {
          if (min_idx <= h || h == cand) {
            long expect = h;
            if (cand >= expect)
              hint_.compare_exchange_strong(expect, cand + 1,
                                            std::memory_order_relaxed);
          }
          return cand;
        }
      }
      idx = base + 64;
    }
  }
  return -1;
}

void FdTable::Unreserve(long idx) {
  Chunk* c = GetChunk(idx, false);
  long i = idx & (kChunkSize - 1);
  c->bitmap[i >> 6].fetch_and(~(uint64_t{1} << (i & 63)),
                              std::memory_order_release);
  long h = hint_.load(std::memory_order_relaxed);
  while (idx < h &&
         !hint_.compare_exchange_weak(h, idx, std::memory_order_relaxed)) {
  }
}

int FdTable::Install(File* f, bool cloexec, int minfd) {
  long min_idx = minfd < kBase ? 0 : long{minfd} - kBase;
  if (min_idx >= limit()) return -EINVAL;
  long idx = Reserve(min_idx);
  if (idx == -2) return -ENOMEM;
  if (idx < 0) return -EMFILE;
  // Release publishes the file's construction to lookups. An OR keeps the
  // count of lookups that are probing the empty slot right now.
  Slot(idx, false)->fetch_or(Word(f, cloexec), std::memory_order_release);
  Live::Inc(Live::descriptors);
  return static_cast<int>(idx + kBase);
}

int FdTable::Install2(File* a, File* b, bool cloexec, int fds[2]) {
  long idx[2];
  int err = Reserve2(idx);
  if (err) return err;
  InstallReserved2(idx, a, b, cloexec, fds);
  return 0;
}

int FdTable::Reserve2(long idx[2]) {
  idx[0] = Reserve(0);
  if (idx[0] == -2) return -ENOMEM;
  if (idx[0] < 0) return -EMFILE;
  idx[1] = Reserve(0);
  if (idx[1] < 0) {
    Unreserve(idx[0]);
    return idx[1] == -2 ? -ENOMEM : -EMFILE;
  }
  return 0;
}

void FdTable::InstallReserved2(const long idx[2], File* a, File* b,
                               bool cloexec, int fds[2]) {
  Slot(idx[0], false)->fetch_or(Word(a, cloexec), std::memory_order_release);
  Slot(idx[1], false)->fetch_or(Word(b, cloexec), std::memory_order_release);
  Live::Inc(Live::descriptors);
  Live::Inc(Live::descriptors);
  fds[0] = static_cast<int>(idx[0] + kBase);
  fds[1] = static_cast<int>(idx[1] + kBase);
}

void FdTable::Unreserve2(const long idx[2]) {
  Unreserve(idx[1]);
  Unreserve(idx[0]);
}

int FdTable::Close(int fd) {
  if (fd < kBase || long{fd} - kBase >= kCapacity) return -EBADF;
  long idx = long{fd} - kBase;
  std::atomic<uint64_t>* s = Slot(idx, false);
  if (!s) return -EBADF;
  // seq_cst: see Borrow.
  uint64_t w = s->fetch_and(kCountMask, std::memory_order_seq_cst);
  File* f = FileOf(w);
  if (!f) return -EBADF;
  WaitForUsers(s, w);
  Unreserve(idx);  // only now may the number be reused
  Live::Dec(Live::descriptors);
  f->Unref();  // the slot's reference
  return 0;
}

int FdTable::Dup(int oldfd, int minfd, bool cloexec) {
  FileRef f = Lookup(oldfd);
  if (!f) return -EBADF;
  int r = Install(f.get(), cloexec, minfd);
  if (r >= 0) f.release();  // the new slot owns that reference now
  return r;
}

int FdTable::Dup3(int oldfd, int newfd, int flags, bool is_dup2) {
  if (!is_dup2 && (flags & ~O_CLOEXEC)) return -EINVAL;
  if (!is_dup2 && oldfd == newfd) return -EINVAL;
  if (newfd < kBase || long{newfd} - kBase >= limit()) {
    // The kernel checks newfd against RLIMIT_NOFILE first (EBADF), but a
    // bad oldfd with dup2(fd, fd) is EBADF too; same errno either way.
    return -EBADF;
  }
  FileRef f = Lookup(oldfd);
  if (!f) return -EBADF;
  if (is_dup2 && oldfd == newfd) return newfd;
  long idx = long{newfd} - kBase;
  Chunk* c = GetChunk(idx, true);
  if (!c) return -ENOMEM;
  long i = idx & (kChunkSize - 1);
  bool cloexec = flags & O_CLOEXEC;
  uint64_t bit = uint64_t{1} << (i & 63);
  std::atomic<uint64_t>* s = &c->slots[i];
  uint64_t prev = c->bitmap[i >> 6].fetch_or(bit, std::memory_order_acq_rel);
  if (!(prev & bit)) {
    s->fetch_or(Word(f.release(), cloexec), std::memory_order_release);
    Live::Inc(Live::descriptors);
    return newfd;
  }
  uint64_t w = s->load(std::memory_order_relaxed);
  do {
    // Allocated by another thread and not yet installed (or being closed).
    if (!FileOf(w)) return -EBUSY;
  } while (!s->compare_exchange_weak(
      w, (w & kCountMask) | Word(f.get(), cloexec), std::memory_order_seq_cst,
      std::memory_order_relaxed));
  f.release();  // the slot's reference now
  WaitForUsers(s, w);
  FileOf(w)->Unref();
  return newfd;
}

int FdTable::GetFdFlags(int fd) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s) return -EBADF;
  uint64_t w = s->load(std::memory_order_acquire);
  if (!FileOf(w)) return -EBADF;
  return (w & kCloexecBit) ? FD_CLOEXEC : 0;
}

int FdTable::SetFdFlags(int fd, long arg) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s) return -EBADF;
  uint64_t w = s->load(std::memory_order_relaxed);
  uint64_t want;
  do {
    if (!FileOf(w)) return -EBADF;
    want = (arg & FD_CLOEXEC) ? (w | kCloexecBit) : (w & ~kCloexecBit);
  } while (!s->compare_exchange_weak(w, want, std::memory_order_acq_rel,
                                     std::memory_order_relaxed));
  return 0;
}

long FdTable::SetLimit(long limit) {
  if (limit < 1 || limit > kCapacity) return -EINVAL;
  return limit_.exchange(limit, std::memory_order_relaxed);
}

}  // namespace uepoll::impl
