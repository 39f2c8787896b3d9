#include "core/fd_table.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <cassert>
#include <new>

#include "base/mutex.h"
#include "kernel/placeholder.h"
#include "base/sys.h"

namespace uepoll::impl {
namespace {

constexpr int kModeDisjointBit = 1;
constexpr int kModeLatchedBit = 2;

// A slot's busy owner or a lookup in its window was preempted: spin a
// little, then give the core away (2 cores, maybe dozens of threads).
void Backoff(int spins) {
  if (spins < 64) {
    CpuRelax();
  } else {
    sched_yield();
  }
}

}  // namespace

FdTable& FdTable::Get() {
  // Never destroyed: descriptors may be used from other threads' exit paths.
  static FdTable* table = new FdTable();
  return *table;
}

// fork(): counted lookups and close/dup2 steps that other parent threads
// were in at the fork never finish in the child, where those threads do not
// exist; a closer would wait for them forever. Drop them. (Borrows are
// dropped by core/borrow.cc's own handler.)
void FdTable::ForkChild() {
  FdTable& t = Get();
  for (long c = 0; c < kMaxChunks; ++c) {
    Chunk* chunk = t.chunks_[c].load(std::memory_order_relaxed);
    if (!chunk) continue;
    for (auto& slot : chunk->slots) {
      slot.fetch_and(~(kCountMask | kBusyBit), std::memory_order_relaxed);
    }
  }
}

FdTable::FdTable() {
  pthread_atfork(nullptr, nullptr, ForkChild);
  const char* env = getenv("UEPOLL_FD_MODE");
  if (env && strcmp(env, "disjoint") == 0) {
    mode_.store(kModeDisjointBit, std::memory_order_relaxed);
  }
}

int FdTable::SetMode(int mode) {
  if (mode != static_cast<int>(FdMode::kKernel) &&
      mode != static_cast<int>(FdMode::kDisjoint)) {
    return -EINVAL;
  }
  int want = mode == static_cast<int>(FdMode::kDisjoint) ? kModeDisjointBit : 0;
  int s = mode_.load(std::memory_order_relaxed);
  for (;;) {
    if ((s & kModeDisjointBit) == want) return 0;
    if (s & kModeLatchedBit) return -EBUSY;
    if (mode_.compare_exchange_weak(s, want, std::memory_order_relaxed)) {
      return 0;
    }
  }
}

void FdTable::LatchMode() {
  // Read first: after the first creation this line is only ever read.
  if (!(mode_.load(std::memory_order_relaxed) & kModeLatchedBit)) {
    mode_.fetch_or(kModeLatchedBit, std::memory_order_relaxed);
  }
}

long FdTable::Index(int fd) const {
  if ((mode_.load(std::memory_order_relaxed) & kModeDisjointBit) == 0) {
    return fd >= 0 && fd < kCapacity ? long{fd} : -1;
  }
  return fd >= kBase && long{fd} - kBase < kCapacity ? long{fd} - kBase : -1;
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

std::atomic<uint64_t>* FdTable::SlotOfFd(int fd) {
  long idx = Index(fd);
  return idx < 0 ? nullptr : Slot(idx, false);
}

bool FdTable::IsOpen(int fd) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  return s && FileOf(s->load(std::memory_order_acquire)) != nullptr;
}

bool FdTable::MarkShared(std::atomic<uint64_t>* s, File* f) {
  uint64_t w = s->load(std::memory_order_relaxed);
  // An RMW on the slot word, ordered with the closers' clear: if it lands
  // first, the closer sees the bit and scans every record; if not, it
  // fails here and the borrow is abandoned.
  for (;;) {
    if (FileOf(w) != f) return false;
    if (w & kSharedBit) return true;
    if (s->compare_exchange_weak(w, w | kSharedBit, std::memory_order_seq_cst,
                                 std::memory_order_relaxed)) {
      return true;
    }
  }
}

FileBorrow FdTable::Borrow(int fd) {
  long idx = Index(fd);
  if (idx < 0) return {};
  Chunk* c = GetChunk(idx, false);
  if (!c) return {};
  long i = idx & (kChunkSize - 1);
  std::atomic<uint64_t>* s = &c->slots[i];
  BorrowRecord* rec = MyBorrowRecord();
  int hs = rec ? rec->FreeSlot() : -1;
  for (int attempt = 0; hs >= 0 && attempt < 8; ++attempt) {
    // Acquire pairs with the release that published the file.
    uint64_t w = s->load(std::memory_order_acquire);
    File* f = FileOf(w);
    if (!f) return {};
    // seq_cst store then seq_cst load, against the closer's seq_cst clear
    // of the slot then seq_cst load of the hazard (WaitUntilUnborrowed*):
    // at least one side sees the other's write.
    rec->hazard[hs].store(f, std::memory_order_seq_cst);
    uint64_t again = s->load(std::memory_order_seq_cst);
    if (FileOf(again) == f) {
      // A borrower other than the slot's owner makes the slot shared
      // first, so that its closer scans every record, not just the
      // owner's. owners[] is type-stable and read after validation, so
      // it is the owner of this installation or the slot has changed
      // (and the CAS in MarkShared fails).
      bool ok = (again & kSharedBit) ||
                c->owners[i].load(std::memory_order_acquire) == rec ||
                MarkShared(s, f);
      if (ok) {
        // Only now may PinBorrowed (from a signal handler on this thread,
        // say) turn the hazard into a reference.
        std::atomic_signal_fence(std::memory_order_seq_cst);
        rec->valid[hs] = true;
        return FileBorrow(f, rec, hs);
      }
    }
    // The slot changed under us (a close or dup2): look again.
    rec->hazard[hs].store(nullptr, std::memory_order_relaxed);
  }
  // No free hazard slot (nested calls from signal handlers) or a number
  // changing continuously: a counted lookup.
  // Acquire pairs with the release RMW that installed the file.
  uint64_t w = s->fetch_add(kCountOne, std::memory_order_acquire);
  // 8191 counted lookups of one number in flight at once would carry into
  // the busy bit.
  assert((w & kCountMask) != kCountMask);
  File* f = FileOf(w);
  if (f) f->Ref();
  // Release: our reference is taken before a closer sees the count drop.
  s->fetch_sub(kCountOne, std::memory_order_release);
  return FileBorrow(FileRef(f));
}

FileRef FdTable::Lookup(int fd) {
  FileBorrow b = Borrow(fd);
  if (!b) return {};
  b->Ref();  // safe: the borrow keeps the slot's reference alive
  return FileRef(b.get());
}

uint64_t FdTable::AcquireBusy(std::atomic<uint64_t>* s) {
  uint64_t w = s->load(std::memory_order_relaxed);
  for (int spins = 0;; ++spins) {
    if (!(w & kBusyBit)) {
      // seq_cst: the busy owner's view of the word (its file, shared bit)
      // is the one every later borrower's validation is ordered against.
      if (s->compare_exchange_weak(w, w | kBusyBit, std::memory_order_seq_cst,
                                   std::memory_order_relaxed)) {
        return w;
      }
      continue;
    }
    // Another close or dup2 of this number is finishing (its kernel side
    // too): the kernel would have serialized the two calls, so wait.
    Backoff(spins);
    w = s->load(std::memory_order_relaxed);
  }
}

void FdTable::WaitForUsers(long idx, std::atomic<uint64_t>* s, uint64_t w) {
  // Acquire pairs with the release decrement of counted lookups: once the
  // count is seen at zero, every one that saw the old file holds its
  // reference.
  for (int spins = 0; s->load(std::memory_order_acquire) & kCountMask;
       ++spins) {
    Backoff(spins);
  }
  File* f = FileOf(w);
  if (w & kSharedBit) {
    WaitUntilUnborrowed(f);
  } else {
    // Only the owner's record can hold a borrow through this slot. The
    // busy bit keeps owners[] from changing under us.
    WaitUntilUnborrowedIn(f, Owner(idx)->load(std::memory_order_relaxed));
  }
}

File* FdTable::Evict(long idx, std::atomic<uint64_t>* s, uint64_t w) {
  // The orphan's number was closed in the kernel behind uepoll's back:
  // finish the close the kernel already did (docs/semantics.md D16).
  WaitForUsers(idx, s, w | kSharedBit);  // its owner is unknown: scan all
  FileOf(w)->NumberRemoved(FdOf(idx));
  Live::Dec(Live::descriptors);
  return FileOf(w);  // the caller drops the slot's reference, not busy
}

void FdTable::Publish(long idx, File* f, bool cloexec) {
  Chunk* c = GetChunk(idx, false);
  long i = idx & (kChunkSize - 1);
  std::atomic<uint64_t>* s = &c->slots[i];
  BorrowRecord* me = MyBorrowRecord();
  File* orphan = nullptr;
  uint64_t w = s->load(std::memory_order_acquire);
  for (int spins = 0;; ++spins) {
    if (w & kBusyBit) {
      // The previous holder's close is finishing after the kernel already
      // reused the number for us.
      Backoff(spins);
      w = s->load(std::memory_order_acquire);
      continue;
    }
    if (FileOf(w)) {
      // An orphan (kKernel: the kernel gave us a number this table still
      // records): take the slot, evict it, then publish below.
      if (!s->compare_exchange_weak(w, (w & kCountMask) | kBusyBit,
                                    std::memory_order_seq_cst,
                                    std::memory_order_relaxed)) {
        continue;
      }
      orphan = Evict(idx, s, w);
      w = s->load(std::memory_order_relaxed);
    }
    c->owners[i].store(me, std::memory_order_relaxed);
    // Release publishes the file's construction (and the owner) to
    // lookups; the count of lookups probing the empty slot is kept.
    // seq_cst: against an instance gaining a kernel half (File::
    // set_many_numbers, ForEachNumberOf), which must see this number or be
    // seen by NumberAdded.
    if (s->compare_exchange_weak(w, (w & kCountMask) | Word(f, cloexec),
                                 std::memory_order_seq_cst,
                                 std::memory_order_relaxed)) {
      if (orphan) orphan->Unref();
      return;
    }
  }
}

int FdTable::Install(File* f, bool cloexec, int minfd) {
  LatchMode();
  if (mode() == FdMode::kKernel) {
    int fd = MakePlaceholder(minfd);
    if (fd < 0) return fd;
    if (fd >= kCapacity || !GetChunk(fd, true)) {
      sys::Close(fd);
      return fd >= kCapacity ? -EMFILE : -ENOMEM;
    }
    Publish(fd, f, cloexec);
    Live::Inc(Live::descriptors);
    return fd;
  }
  long min_idx = minfd < kBase ? 0 : long{minfd} - kBase;
  if (min_idx >= limit()) return -EINVAL;
  long idx = Reserve(min_idx);
  if (idx == -2) return -ENOMEM;
  if (idx < 0) return -EMFILE;
  Publish(idx, f, cloexec);
  Live::Inc(Live::descriptors);
  return FdOf(idx);
}

int FdTable::Reserve2(long idx[2]) {
  LatchMode();
  if (mode() == FdMode::kKernel) {
    int a = MakePlaceholder(0);
    if (a < 0) return a;
    int b = MakePlaceholder(0);
    if (b < 0 || a >= kCapacity || b >= kCapacity || !GetChunk(a, true) ||
        !GetChunk(b, true)) {
      sys::Close(a);
      if (b < 0) return b;
      sys::Close(b);
      return a >= kCapacity || b >= kCapacity ? -EMFILE : -ENOMEM;
    }
    idx[0] = a;
    idx[1] = b;
    return 0;
  }
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
  Publish(idx[0], a, cloexec);
  Publish(idx[1], b, cloexec);
  Live::Inc(Live::descriptors);
  Live::Inc(Live::descriptors);
  fds[0] = FdOf(idx[0]);
  fds[1] = FdOf(idx[1]);
}

void FdTable::Unreserve2(const long idx[2]) {
  if (mode() == FdMode::kKernel) {
    sys::Close(static_cast<int>(idx[1]));
    sys::Close(static_cast<int>(idx[0]));
    return;
  }
  Unreserve(idx[1]);
  Unreserve(idx[0]);
}

int FdTable::Close(int fd) {
  long idx = Index(fd);
  if (idx < 0) return -EBADF;
  std::atomic<uint64_t>* s = Slot(idx, false);
  if (!s) return -EBADF;
  uint64_t w = AcquireBusy(s);
  File* f = FileOf(w);
  if (!f) {
    s->fetch_and(~kBusyBit, std::memory_order_release);
    return -EBADF;
  }
  // seq_cst: see Borrow. New lookups find nothing from here on; the busy
  // bit stays until the kernel's side is closed too. The word this returns,
  // not w, says whether the slot became shared: a borrower may have set the
  // bit after we took the busy bit, while the file was still in the word.
  w = s->fetch_and(kCountMask | kBusyBit, std::memory_order_seq_cst);
  WaitForUsers(idx, s, w);
  if (mode() == FdMode::kKernel) {
    f->NumberRemoved(fd);
    // The placeholder (or the instance's kernel epoll). Only now may the
    // kernel hand the number out again; a new owner's Publish waits for the
    // busy bit below.
    sys::Close(fd);
  } else {
    Unreserve(idx);
  }
  s->fetch_and(~kBusyBit, std::memory_order_release);
  Live::Dec(Live::descriptors);
  f->Unref();  // the slot's reference
  return 0;
}

int FdTable::Dup(int oldfd, int minfd, bool cloexec) {
  FileRef f = Lookup(oldfd);
  if (!f) return -EBADF;
  LatchMode();
  if (mode() == FdMode::kKernel) {
    // A copy of oldfd's kernel file: an instance's kernel epoll follows
    // its dups (epoll/kernel_half.h).
    int fd = CopyPlaceholder(oldfd, minfd);
    if (fd < 0) return fd;
    if (fd >= kCapacity || !GetChunk(fd, true)) {
      sys::Close(fd);
      return fd >= kCapacity ? -EMFILE : -ENOMEM;
    }
    f->set_many_numbers();
    // The new slot's reference. Ours (f) is kept until NumberAdded has
    // returned: once published, the number can be closed by another
    // thread, and the slot's reference dropped with it.
    File* file = f.get();
    file->Ref();
    Publish(fd, file, cloexec);
    Live::Inc(Live::descriptors);
    file->NumberAdded(fd, oldfd);
    return fd;
  }
  f->set_many_numbers();
  int r = Install(f.get(), cloexec, minfd);
  if (r >= 0) f.release();  // the new slot owns that reference now
  return r;
}

int FdTable::SetKernelFile(int fd, File* f, int src) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s) return -EBADF;
  uint64_t w = AcquireBusy(s);
  int r = FileOf(w) == f ? CopyPlaceholderTo(src, fd) : -EBADF;
  s->fetch_and(~kBusyBit, std::memory_order_release);
  return r;
}

int FdTable::Dup3(int oldfd, int newfd, int flags, bool is_dup2) {
  if (!is_dup2 && (flags & ~O_CLOEXEC)) return -EINVAL;
  if (!is_dup2 && oldfd == newfd) return -EINVAL;
  bool cloexec = flags & O_CLOEXEC;
  FileRef f = Lookup(oldfd);
  long nidx = Index(newfd);
  std::atomic<uint64_t>* s = nidx >= 0 ? Slot(nidx, bool{f}) : nullptr;
  auto kernel_dup = [&] {
    int r = is_dup2 ? sys::Dup2(oldfd, newfd) : sys::Dup3(oldfd, newfd, flags);
    return r < 0 ? -errno : r;
  };

  if (!f) {
    // oldfd is the kernel's (or nothing: the kernel says EBADF).
    if (!s) return kernel_dup();
    uint64_t w = AcquireBusy(s);
    File* old = FileOf(w);
    if (old && mode() == FdMode::kKernel) old->NumberRemoved(newfd);
    int r = kernel_dup();
    if (r < 0 || !old) {
      s->fetch_and(~kBusyBit, std::memory_order_release);
      return r;
    }
    // A kernel file replaced the uepoll object at newfd (kKernel only:
    // in kDisjoint the kernel refused newfd). Lookups see the old object
    // until this clear, then the kernel's file.
    w = s->fetch_and(kCountMask | kBusyBit, std::memory_order_seq_cst);
    WaitForUsers(nidx, s, w);
    s->fetch_and(~kBusyBit, std::memory_order_release);
    Live::Dec(Live::descriptors);
    old->Unref();
    return newfd;
  }

  if (is_dup2 && oldfd == newfd) return newfd;
  LatchMode();
  if (nidx < 0 || (mode() == FdMode::kDisjoint && nidx >= limit())) {
    // Beyond the range this mode can give newfd (kKernel: the kernel
    // checks RLIMIT_NOFILE in the dup3 below).
    return -EBADF;
  }
  if (!s) return -ENOMEM;
  Chunk* c = GetChunk(nidx, false);
  long i = nidx & (kChunkSize - 1);
  // No EBUSY for a number being closed or dup2'ed: the kernel frees a
  // number and installs a file in one step, so wait for that step.
  uint64_t w = AcquireBusy(s);
  if (mode() == FdMode::kKernel) {
    if (File* old = FileOf(w)) old->NumberRemoved(newfd);
    int r = CopyPlaceholderTo(oldfd, newfd);
    if (r < 0) {
      s->fetch_and(~kBusyBit, std::memory_order_release);
      return r;
    }
  } else if (!FileOf(w)) {
    uint64_t bit = uint64_t{1} << (i & 63);
    uint64_t prev = c->bitmap[i >> 6].fetch_or(bit, std::memory_order_acq_rel);
    if (prev & bit) {
      // Reserved by a call that has not installed its file yet.
      s->fetch_and(~kBusyBit, std::memory_order_release);
      return -EBUSY;
    }
  }
  f->set_many_numbers();
  f->Ref();  // the slot's reference
  BorrowRecord* old_owner = c->owners[i].load(std::memory_order_relaxed);
  c->owners[i].store(MyBorrowRecord(), std::memory_order_relaxed);
  uint64_t cur = s->load(std::memory_order_relaxed);
  // seq_cst: see Borrow. Clears the busy bit and the shared bit of the old
  // file with it. The word replaced (cur), not w, says whether the old
  // file's slot became shared: a borrower may have set the bit while we
  // held the busy bit with the old file still in the word.
  while (!s->compare_exchange_weak(
      cur, (cur & kCountMask) | Word(f.get(), cloexec),
      std::memory_order_seq_cst, std::memory_order_relaxed)) {
  }
  w = cur;
  File* file = f.get();
  File* old = FileOf(w);
  if (!old) Live::Inc(Live::descriptors);
  // f's reference is kept until NumberAdded has returned (see Dup).
  file->NumberAdded(newfd, oldfd);
  if (!old) return newfd;
  // Wait out the old file's users before dropping the slot's reference to
  // it. Counted lookups of either file share the count: waiting for it to
  // drain is enough, if a little more than needed.
  for (int spins = 0; s->load(std::memory_order_acquire) & kCountMask;
       ++spins) {
    Backoff(spins);
  }
  if (w & kSharedBit) {
    WaitUntilUnborrowed(old);
  } else {
    WaitUntilUnborrowedIn(old, old_owner);
  }
  old->Unref();
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

void FdTable::ForgetOrphan(int fd) {
  if (mode() != FdMode::kKernel) return;
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s) return;
  uint64_t w = s->load(std::memory_order_acquire);
  while (FileOf(w) && !(w & kBusyBit)) {
    if (s->compare_exchange_weak(w, (w & kCountMask) | kBusyBit,
                                 std::memory_order_seq_cst,
                                 std::memory_order_relaxed)) {
      File* orphan = Evict(fd, s, w);
      s->fetch_and(~kBusyBit, std::memory_order_release);
      orphan->Unref();
      return;
    }
  }
}

// Lowest free index >= min_idx. The hint is a lower bound of the free
// indices that a free (Unreserve) only lowers and an allocation raises only
// from the value it started from (a CAS): a free that happened meanwhile
// keeps it low. An allocation that relied on the hint checks it again after
// taking its bit: if a number below its starting point was freed since, it
// gives its bit back and starts over, so the number it returns was the
// lowest free one at some instant of the call (issue 15, bug 7).
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

long FdTable::SetLimit(long limit) {
  if (limit < 1 || limit > kCapacity) return -EINVAL;
  return limit_.exchange(limit, std::memory_order_relaxed);
}

}  // namespace uepoll::impl
