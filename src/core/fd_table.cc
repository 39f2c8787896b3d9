#include "core/fd_table.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <cassert>
#include <new>

#include "base/env.h"
#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/sys.h"
#include "base/unlisted_epoll.h"
#include "kernel/placeholder.h"

namespace uepoll::impl {
namespace {

constexpr int kModeDisjointBit = 1;
constexpr int kModeLatchedBit = 2;

}  // namespace

FdTable& FdTable::GetSlow() {
  // Never destroyed: descriptors may be used from other threads' exit paths.
  // Built in static storage, not on the heap, and its constructor
  // allocates nothing: an allocator's own initialization reaches here
  // through the interposer (jemalloc's syscall(SYS_open) and read under
  // redis-server, realprog.redis) and must not re-enter malloc. Until an
  // object is installed, lookups find no chunk and allocate nothing.
  alignas(FdTable) static unsigned char storage[sizeof(FdTable)];
  static FdTable* table = new (storage) FdTable();
  // Release: the table is built before Get() hands it out without the
  // static's guard.
  instance_.store(table, std::memory_order_release);
  return *table;
}

// fork(): counted lookups and close/dup2 steps that other parent threads
// were in at the fork never finish in the child, where those threads do not
// exist; a closer would wait for them forever. Drop them. (Borrows are
// dropped by core/borrow.cc's own handler.) So are the unlisted epolls
// they were making.
UEPOLL_FORK_PATH void FdTable::ForkChild() {
  UnlistedEpolls::ForkChild();
  FdTable& t = Get();
  for (long c = 0; c < kMaxChunks; ++c) {
    Chunk* chunk = t.chunks_[c].load(std::memory_order_relaxed);
    if (!chunk) continue;
    // Written only where something is to clear: a write makes the child
    // copy the page (BENCHMARKS.md, "What a fork costs a process that
    // holds the engine").
    for (auto& slot : chunk->slots_) {
      if (slot.load(std::memory_order_relaxed) & (kCountMask | kBusyBit)) {
        slot.fetch_and(~(kCountMask | kBusyBit), std::memory_order_relaxed);
      }
    }
  }
  if (t.mode() == FdMode::kDisjoint) t.ForgetParkedInChild();
}

FdTable::FdTable() {
  pthread_atfork(nullptr, nullptr, ForkChild);
  // base/env.h: the engine may be loaded, and this made, before libc has
  // set environ up (a call from an executable's .preinit_array).
  char env[16];
  if (uepoll_env_get("UEPOLL_FD_MODE", env, sizeof env) > 0 &&
      strcmp(env, "disjoint") == 0) {
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
  return c ? &c->slot(idx & (kChunkSize - 1)) : nullptr;
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

FileBorrow FdTable::BorrowHeld(Chunk* c, long i) {
  std::atomic<uint64_t>* s = &c->slot(i);
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
      // owner's. owner() is type-stable and read after validation, so
      // it is the owner of this installation or the slot has changed
      // (and the CAS in MarkShared fails).
      bool ok = (again & kSharedBit) ||
                c->owner(i).load(std::memory_order_acquire) == rec ||
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

UEPOLL_FORK_PATH FileRef FdTable::Lookup(int fd) {
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
    // busy bit keeps owner() from changing under us.
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
  std::atomic<uint64_t>* s = &c->slot(i);
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
    c->owner(i).store(me, std::memory_order_relaxed);
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
    // A placeholder, or an instance's kernel half (an unlisted epoll until
    // it is published).
    UnlistedEpolls::Scope unlisted(f->KernelFileMaySleep());
    return PublishKernelFile(f, cloexec, f->OpenKernelFile(minfd));
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

int FdTable::PublishKernelFile(File* f, bool cloexec, int fd) {
  if (fd < 0) return fd;
  if (fd >= kCapacity || !GetChunk(fd, true)) {
    sys::Close(fd);
    return fd >= kCapacity ? -EMFILE : -ENOMEM;
  }
  Publish(fd, f, cloexec);
  Live::Inc(Live::descriptors);
  return fd;
}

int FdTable::InstallFlight(File* f, bool cloexec, int kfd) {
  if (kfd < 0 || mode() != FdMode::kKernel) return Install(f, cloexec);
  // The lowest free number, as receive_fd gives it, naming the copy of the
  // object's kernel file that travelled with it.
  UnlistedEpolls::Scope unlisted(f->KernelFileMaySleep());
  int saved = errno;
  int fd = sys::Fcntl(kfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) fd = -errno;
  errno = saved;
  int r = PublishKernelFile(f, cloexec, fd);
  if (r >= 0) f->NumberAdded(r, -1);
  return r;
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

bool FdTable::WaitUnchanged(int fd) {
  std::atomic<uint64_t>* s = SlotOfFd(fd);
  if (!s || !(s->load(std::memory_order_acquire) & kBusyBit)) return false;
  for (int spins = 0; s->load(std::memory_order_acquire) & kBusyBit; ++spins) {
    Backoff(spins);
  }
  return true;
}

UEPOLL_FORK_PATH int FdTable::Close(int fd) {
  long idx = Index(fd);
  if (idx < 0) return -EBADF;
  std::atomic<uint64_t>* s = Slot(idx, false);
  if (!s) return -EBADF;
  // A number the table does not hold (the kernel's), with no close or
  // dup2 of it finishing: nothing to serialize with, and no write, which
  // in a fork child would copy the table's page.
  if (IsFree(s->load(std::memory_order_seq_cst))) return -EBADF;
  uint64_t w = AcquireBusy(s);
  File* f = FileOf(w);
  if (!f) {
    s->fetch_and(~kBusyBit, std::memory_order_release);
    return -EBADF;
  }
  // An instance's number holds its kernel half, a kernel epoll: a call that
  // finds the slot empty below passes the number to the kernel, which would
  // let it sleep on that epoll through every event of the instance. So the
  // number gets a placeholder first, while lookups still find the instance
  // (and the instance has let go of the number). If no placeholder can be
  // made, the waits guard themselves (FdTable::WaitUnchanged).
  bool early = mode() == FdMode::kKernel && f->KernelFileMaySleep();
  if (early) {
    f->NumberRemoved(fd);
    // With the kernel half closed by libc, the placeholder may be made at
    // fd itself; it stays until the close of fd below, so that the number
    // is not free while the busy bit is held.
    NewPlaceholderAt(fd);
  }
  // seq_cst: see Borrow. New lookups find nothing from here on; the busy
  // bit stays until the kernel's side is closed too. The word this returns,
  // not w, says whether the slot became shared: a borrower may have set the
  // bit after we took the busy bit, while the file was still in the word.
  w = s->fetch_and(kCountMask | kBusyBit, std::memory_order_seq_cst);
  WaitForUsers(idx, s, w);
  if (mode() == FdMode::kKernel) {
    if (!early) f->NumberRemoved(fd);
    // The placeholder. Only now may the kernel hand the number out again;
    // a new owner's Publish waits for the busy bit below.
    sys::Close(fd);
  } else {
    Park(idx);
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
    // its dups (kernel/kernel_half.h).
    UnlistedEpolls::Scope unlisted(f->KernelFileMaySleep());
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

UEPOLL_FORK_PATH int FdTable::Dup3(int oldfd, int newfd, int flags,
                                   bool is_dup2) {
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
    // The busy bit is taken even on a free slot: it keeps the kernel's dup
    // apart from a uepoll dup2 onto the same number (whose placeholder the
    // kernel's dup could otherwise replace after the slot names its object).
    if (!s) return kernel_dup();
    uint64_t w = AcquireBusy(s);
    File* old = FileOf(w);
    if (old && mode() == FdMode::kKernel) {
      // A failing call changes nothing: what the kernel will refuse (a
      // closed oldfd) is refused before the object hears of it, and any
      // other refusal is undone (NumberRestored).
      int saved = errno;
      bool open = sys::Fcntl(oldfd, F_GETFD, 0) >= 0;
      errno = saved;
      if (!open) {
        s->fetch_and(~kBusyBit, std::memory_order_release);
        return -EBADF;
      }
      old->NumberRemoved(newfd);
    }
    int r = kernel_dup();
    if (r < 0 && old && mode() == FdMode::kKernel) old->NumberRestored(newfd);
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
    File* old = FileOf(w);
    if (old) old->NumberRemoved(newfd);
    int r = CopyPlaceholderTo(oldfd, newfd);
    if (r < 0) {
      if (old) old->NumberRestored(newfd);
      s->fetch_and(~kBusyBit, std::memory_order_release);
      return r;
    }
  } else if (!FileOf(w)) {
    uint64_t bit = uint64_t{1} << (i & 63);
    uint64_t prev = c->bitmap[i >> 6].fetch_or(bit, std::memory_order_acq_rel);
    if ((prev & bit) && !ClaimParked(nidx)) {
      // Reserved by a call that has not installed its file yet. (A parked
      // number is free: the dup2 takes it from its parker.)
      s->fetch_and(~kBusyBit, std::memory_order_release);
      return -EBUSY;
    }
  }
  f->set_many_numbers();
  f->Ref();  // the slot's reference
  BorrowRecord* old_owner = c->owner(i).load(std::memory_order_relaxed);
  c->owner(i).store(MyBorrowRecord(), std::memory_order_relaxed);
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

int FdTable::HandOver(int fd, File* f, int kfd) {
  if (mode() != FdMode::kKernel) return -EOPNOTSUPP;
  long idx = Index(fd);
  std::atomic<uint64_t>* s = idx < 0 ? nullptr : Slot(idx, false);
  if (!s) return -EBADF;
  uint64_t w = AcquireBusy(s);
  if (FileOf(w) != f) {
    s->fetch_and(~kBusyBit, std::memory_order_release);
    return -EBADF;
  }
  // The kernel's side first (as Dup3 does): lookups see f until the clear
  // below, the kernel's file after it.
  if (sys::Dup3(kfd, fd, (w & kCloexecBit) ? O_CLOEXEC : 0) < 0) {
    int err = -errno;
    s->fetch_and(~kBusyBit, std::memory_order_release);
    return err;
  }
  f->NumberRemoved(fd);
  // seq_cst: see Borrow. The word returned says whether it became shared.
  w = s->fetch_and(kCountMask | kBusyBit, std::memory_order_seq_cst);
  WaitForUsers(idx, s, w);
  s->fetch_and(~kBusyBit, std::memory_order_release);
  Live::Dec(Live::descriptors);
  f->Unref();  // the slot's reference; the caller's keeps f alive
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

long FdTable::NextOpen(unsigned long fd) {
  long idx;
  bool disjoint = mode() == FdMode::kDisjoint;
  if (!disjoint) {
    idx = fd < static_cast<unsigned long>(kCapacity) ? static_cast<long>(fd)
                                                     : kCapacity;
  } else {
    idx = fd <= static_cast<unsigned long>(kBase)
              ? 0
              : static_cast<long>(fd) - kBase;
  }
  while (idx < kCapacity) {
    Chunk* c = GetChunk(idx, false);
    if (!c) {
      idx = (idx | (kChunkSize - 1)) + 1;
      continue;
    }
    for (long i = idx & (kChunkSize - 1); i < kChunkSize; ++i, ++idx) {
      if (FileOf(c->slot(i).load(std::memory_order_acquire))) return FdOf(idx);
    }
  }
  return -1;
}

long FdTable::SetLimit(long limit) {
  if (limit < 1 || limit > kCapacity) return -EINVAL;
  return limit_.exchange(limit, std::memory_order_relaxed);
}

}  // namespace uepoll::impl
