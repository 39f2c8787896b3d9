// FdTable: uepoll's descriptor table.
//
// Numbering (docs/design.md, "Descriptor numbers"), chosen once per process:
//  - kKernel (the default): every uepoll descriptor is a number the kernel
//    reserved for it in the process's own table, with a placeholder file
//    (src/kernel/placeholder.h): an O_PATH descriptor that every read,
//    write, poll and epoll_ctl of the kernel refuses. Numbers are small and
//    dense, lowest free first (the kernel allocates them), and
//    RLIMIT_NOFILE applies. Creating or closing costs one syscall.
//  - kDisjoint (opt-in): numbers from UEPOLL_FD_BASE, allocated here with a
//    bitmap, lowest free first; no syscall at create or close, but tables
//    indexed by descriptor and select() cannot use such numbers, and a
//    uepoll object cannot be put at a kernel number (dup2).
// Numbers the table does not hold are the kernel's: the C API passes them
// to libc.
//
// Lookup is wait-free, takes no lock and is safe against a concurrent
// close on another thread:
//  - Slots live in chunks of kChunkSize, allocated on first use and never
//    freed, so a slot's memory is always valid to touch.
//  - A slot word holds File* (bits 0-47), a count of counted lookups in
//    flight (bits 48-60, the fallback below), kBusyBit (61: a close or dup2
//    owns the slot), kSharedBit (62) and FD_CLOEXEC (63).
//  - Borrow reads the word, publishes the file in a hazard word of the
//    calling thread's own record (core/borrow.h) and reads the word again.
//    It writes nothing that another thread reads on its own hot path: two
//    threads using different descriptors share no written cache line.
//  - Each slot has an owner, the record of the thread that installed it
//    (owners_, type-stable like the slots). A borrow by another thread
//    first sets kSharedBit (one CAS, once). A closer clears the word, waits
//    out counted lookups, and then waits until no record that may hold the
//    file does: the owner's alone for a slot that never became shared, all
//    of them otherwise. Sources that one thread creates, uses and closes
//    never pay for a scan of other threads' records.
//  - Counted lookups (a thread whose record has no free hazard slot, e.g.
//    a signal handler nested in calls) add one to the slot's count, take a
//    reference and subtract one; closers wait for the count to drain.
//  - kBusyBit serializes closes and dup2s of one number with each other and
//    with installs: the owner of the bit finishes the kernel's side of the
//    change (closing the placeholder, or dup3 onto the number) before the
//    slot takes its new value, so the kernel's table and this one never
//    disagree for a settled number. Lookups still see the old file while
//    the bit is set and its pointer is still in the word.
#ifndef UEPOLL_SRC_CORE_FD_TABLE_H_
#define UEPOLL_SRC_CORE_FD_TABLE_H_

#include <limits.h>

#include <atomic>
#include <cstdint>

#include "core/borrow.h"
#include "core/file.h"

namespace uepoll::impl {

enum class FdMode : int { kKernel = 0, kDisjoint = 1 };

// Returned by engine entry points given a number that is not a uepoll
// descriptor: the C API then makes the libc call itself (base/sys.h).
// Never a valid -errno.
inline constexpr int kNotUepoll = INT_MIN;

class FdTable {
 public:
  static constexpr int kBase = 0x40000000;  // UEPOLL_FD_BASE
  static constexpr int kChunkBits = 10;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kMaxChunks = 1 << 13;
  static constexpr long kCapacity = long{kChunkSize} * kMaxChunks;  // 8M

  // The process's table, built on its first use (GetSlow).
  static FdTable& Get() {
    FdTable* t = instance_.load(std::memory_order_acquire);
    return t ? *t : GetSlow();
  }

  // The numbering mode; fixed by the first descriptor installed. Before
  // that, the environment variable UEPOLL_FD_MODE (kernel|disjoint) or
  // SetMode decides.
  FdMode mode() const {
    return (mode_.load(std::memory_order_relaxed) & 1) ? FdMode::kDisjoint
                                                       : FdMode::kKernel;
  }
  // 0, -EINVAL (unknown mode), or -EBUSY once a descriptor was installed
  // under another mode.
  int SetMode(int mode);

  // Whether fd currently names a uepoll object.
  bool IsOpen(int fd);

  // A new reference to the file at fd, or an empty FileRef (not a uepoll
  // descriptor: the caller passes the number to the kernel, or EBADF).
  FileRef Lookup(int fd);

  // The file at fd for the length of one call, or an empty FileBorrow.
  // Parker pins the borrow before any sleep; a caller that spins (busy
  // polling) or raises a signal calls PinBorrowed() first.
  FileBorrow Borrow(int fd) {
    long idx = Index(fd);
    if (idx < 0) return {};
    Chunk* c = chunks_[idx >> kChunkBits].load(std::memory_order_acquire);
    if (!c) return {};
    long i = idx & (kChunkSize - 1);
    // A number this table does not hold (a kernel descriptor, on every
    // call a program makes on one) is answered here, inline, before the
    // calling thread's record is looked at; BorrowHeld's first pass would
    // answer the same. Acquire, as there.
    if (!FileOf(c->slot(i).load(std::memory_order_acquire))) return {};
    return BorrowHeld(c, i);
  }

  // Installs f (adopting one reference) at the lowest free number >= minfd.
  // Returns the fd or -errno (EMFILE, ENFILE, ENOMEM; EINVAL if minfd is
  // beyond the limit). On failure the reference is still the caller's.
  int Install(File* f, bool cloexec, int minfd = 0);
  // Install for a file received in a descriptor-passing message: kfd, the
  // copy of its kernel file that travelled with it (File::
  // DupKernelFileForFlight), or -1 for a new one. kfd stays the caller's.
  int InstallFlight(File* f, bool cloexec, int kfd);

  // A pair installed in two steps, as the kernel's get_unused_fd_flags and
  // fd_install, for calls that must fail EMFILE before they check their
  // other arguments (socketpair, pipe2). Reserve2 takes two numbers (0, or
  // -errno with nothing taken): lookups see them closed. Exactly one of
  // InstallReserved2 (adopting a reference to each file) or Unreserve2
  // must follow.
  int Reserve2(long idx[2]);
  void InstallReserved2(const long idx[2], File* a, File* b, bool cloexec,
                        int fds[2]);
  void Unreserve2(const long idx[2]);

  // Takes a parked number (kDisjoint): true if it was parked and is now
  // the caller's, reserved (its bit set), false otherwise.
  bool ClaimParked(long idx);
  // Frees a number the calling thread parked, unless it was taken since
  // (a thread's exit).
  void ReleaseParked(long idx);

  // close(fd) of a uepoll descriptor; -EBADF if fd is not one (the caller
  // passes it to the kernel).
  int Close(int fd);
  // dup / F_DUPFD of a uepoll descriptor (fd is one: the caller checked).
  int Dup(int oldfd, int minfd, bool cloexec);
  // dup2 (is_dup2) and dup3 with either or both numbers uepoll's.
  int Dup3(int oldfd, int newfd, int flags, bool is_dup2);
  int GetFdFlags(int fd);
  int SetFdFlags(int fd, long arg);

  // Puts a copy of kernel descriptor src at fd if fd still names f, with
  // the number held (busy) so that no close or dup2 of it interleaves.
  // 0, or -EBADF if fd names something else now.
  int SetKernelFile(int fd, File* f, int src);
  // Whether a close or dup2 of fd is in progress (the busy bit).
  bool Changing(int fd) {
    std::atomic<uint64_t>* s = SlotOfFd(fd);
    return s && (s->load(std::memory_order_acquire) & kBusyBit);
  }
  // Waits until no close or dup2 of fd is in progress, and returns whether
  // one was. A call that found no uepoll file at fd and is about to give the
  // number to the kernel waits here when it would block there: between a
  // close's clearing of the slot and its close of the number's kernel file,
  // the kernel still sees that file (an instance's kernel half, which holds
  // nothing of the instance's uepoll objects), and a wait on it would sleep
  // through every event. After the wait the kernel sees what the close or
  // dup2 left, as if the call came after it. Only for a caller that holds
  // no borrow: a closer waits for borrows to drain.
  bool WaitUnchanged(int fd);
  // Whether fd names f right now.
  bool Holds(int fd, File* f) {
    std::atomic<uint64_t>* s = SlotOfFd(fd);
    return s && FileOf(s->load(std::memory_order_seq_cst)) == f;
  }
  // Calls fn(fd) for every number that names f (a scan of the table).
  template <class Fn>
  void ForEachNumberOf(File* f, Fn fn) {
    for (long c = 0; c < kMaxChunks; ++c) {
      Chunk* chunk = chunks_[c].load(std::memory_order_acquire);
      if (!chunk) continue;
      for (long i = 0; i < kChunkSize; ++i) {
        // seq_cst: pairs with Publish, against File::set_many_numbers.
        if (FileOf(chunk->slot(i).load(std::memory_order_seq_cst)) == f) {
          fn(FdOf(c * kChunkSize + i));
        }
      }
    }
  }

  // Calls fn(fd, file, cloexec) for every number that names a file now (a
  // snapshot: numbers may change meanwhile; `file` may be compared, not
  // used, unless the caller holds a reference to it).
  template <class Fn>
  void ForEachOpen(Fn fn) {
    for (long c = 0; c < kMaxChunks; ++c) {
      Chunk* chunk = chunks_[c].load(std::memory_order_acquire);
      if (!chunk) continue;
      for (long i = 0; i < kChunkSize; ++i) {
        uint64_t w = chunk->slot(i).load(std::memory_order_acquire);
        if (File* f = FileOf(w)) {
          fn(FdOf(c * kChunkSize + i), f, (w & kCloexecBit) != 0);
        }
      }
    }
  }

  // kernel/export.h: if fd names f, the kernel's number fd becomes a copy
  // of kernel descriptor kfd (close-on-exec as fd's FD_CLOEXEC says) and
  // uepoll forgets fd, as a dup2 of a kernel descriptor onto it would. The
  // caller holds a reference to f and no borrow of it. 0, -EBADF (fd names
  // something else now), -EOPNOTSUPP (the disjoint numbering) or the
  // kernel's errno.
  int HandOver(int fd, File* f, int kfd);

  // After a call that made the kernel hand out `fd` (a dup of a kernel
  // descriptor, or any call of the interposer's that returns a kernel
  // number: libuepoll-interpose.so, uepoll_forget_orphan): a uepoll file
  // still recorded there is an orphan whose number the application closed
  // behind uepoll's back; drop it, as a close would.
  void ForgetOrphan(int fd);
  // The lowest uepoll number >= fd (as an unsigned number, at most
  // UINT_MAX), or -1: close_range's walk. Skips chunks never allocated.
  long NextOpen(unsigned long fd);

  // kDisjoint only: how many numbers may be open (a test hook; RLIMIT_NOFILE
  // governs kKernel).
  long limit() const { return limit_.load(std::memory_order_relaxed); }
  long SetLimit(long limit);

 private:
  static constexpr uint64_t kPtrMask = (uint64_t{1} << 48) - 1;
  static constexpr uint64_t kCountOne = uint64_t{1} << 48;
  static constexpr uint64_t kCountMask = ((uint64_t{1} << 13) - 1) << 48;
  static constexpr uint64_t kBusyBit = uint64_t{1} << 61;
  static constexpr uint64_t kSharedBit = uint64_t{1} << 62;
  static constexpr uint64_t kCloexecBit = uint64_t{1} << 63;

  struct Chunk {
    // Where index i of the chunk lives in slots_ and owners_: consecutive
    // numbers a cache line apart (eight words share a line, and numbers i
    // and i+1 are 128 words apart), so that threads creating and closing
    // neighbouring numbers (lowest free first hands them out in turn) do
    // not write one line: a slot word is written at every create and
    // close, an owner word at every create.
    static constexpr long Pos(long i) {
      return ((i & 7) << (kChunkBits - 3)) | (i >> 3);
    }
    std::atomic<uint64_t>& slot(long i) { return slots_[Pos(i)]; }
    // The record of the thread that installed each slot's file (see above).
    std::atomic<BorrowRecord*>& owner(long i) { return owners_[Pos(i)]; }

    // kDisjoint: 1 while the number is parked (fd_alloc_disjoint.cc).
    std::atomic<uint8_t>& parked(long i) { return parked_[Pos(i)]; }

    std::atomic<uint64_t> slots_[kChunkSize];
    std::atomic<BorrowRecord*> owners_[kChunkSize];
    std::atomic<uint8_t> parked_[kChunkSize];
    // kDisjoint allocation: a set bit is a taken number.
    std::atomic<uint64_t> bitmap[kChunkSize / 64];
  };

  FdTable();
  static FdTable& GetSlow();
  static void ForkChild();
  // The table index of fd, or -1 when fd is outside the mode's range.
  long Index(int fd) const {
    if (mode() == FdMode::kKernel) {
      return fd >= 0 && fd < kCapacity ? long{fd} : -1;
    }
    return fd >= kBase && long{fd} - kBase < kCapacity ? long{fd} - kBase : -1;
  }
  // Borrow's slow path: slot i of chunk c held a file a moment ago.
  FileBorrow BorrowHeld(Chunk* c, long i);
  int FdOf(long idx) const {
    return static_cast<int>(mode() == FdMode::kKernel ? idx : idx + kBase);
  }
  Chunk* GetChunk(long idx, bool create);
  std::atomic<uint64_t>* Slot(long idx, bool create);
  std::atomic<BorrowRecord*>* Owner(long idx) {
    return &GetChunk(idx, false)->owner(idx & (kChunkSize - 1));
  }
  // The slot of fd if its chunk exists, else nullptr.
  std::atomic<uint64_t>* SlotOfFd(int fd);
  static File* FileOf(uint64_t w) {
    return reinterpret_cast<File*>(static_cast<uintptr_t>(w & kPtrMask));
  }
  // Holds no file, and no close or dup2 of the number is finishing.
  static bool IsFree(uint64_t w) { return !FileOf(w) && !(w & kBusyBit); }
  static uint64_t Word(File* f, bool cloexec) {
    return reinterpret_cast<uintptr_t>(f) | (cloexec ? kCloexecBit : 0);
  }
  void LatchMode();
  // Sets kSharedBit on a slot that still holds f; false if it holds
  // something else now.
  static bool MarkShared(std::atomic<uint64_t>* s, File* f);
  // Takes kBusyBit of a slot (waiting out another owner); returns the word
  // before.
  static uint64_t AcquireBusy(std::atomic<uint64_t>* s);
  // After a closer cleared a slot whose old word was w: waits out the
  // lookups and borrows that may still use the file.
  void WaitForUsers(long idx, std::atomic<uint64_t>* s, uint64_t w);
  // Publishes the word of a newly installed file at idx, owned by the
  // calling thread; evicts an orphan found there (kKernel).
  void Publish(long idx, File* f, bool cloexec);
  // Returns the orphan, whose reference the caller drops once the busy
  // bit is released.
  File* Evict(long idx, std::atomic<uint64_t>* s, uint64_t w);
  // kDisjoint allocation (lowest free >= min_idx, a number the calling
  // thread parked included): the index, -1 when full, -2 out of memory.
  long Reserve(long min_idx);
  // Reserve from the thread's parked numbers or the bitmap (its list held).
  long ReserveCached(long min_idx);
  // Reserve from the bitmap only; when it is full, after ReclaimParked.
  long ReserveOrReclaim(long min_idx);
  long ReserveShared(long min_idx);
  void Unreserve(long idx);
  // A closed number kept for the calling thread's next create, or freed.
  void Park(long idx);
  // Every thread's parked numbers back to the bitmap; whether there was one.
  bool ReclaimParked();
  // fork() child: the parent's other threads' parked numbers are freed.
  void ForgetParkedInChild();
  // The first free index in [lo, hi), or -1 (kDisjoint).
  long FirstFree(long lo, long hi);
  // Lowers the hint to idx if it is above (kDisjoint).
  void LowerHint(long idx);
  int DupToFree(int oldfd, File* f, int minfd, bool cloexec);
  // Records f at the number of its new kernel file fd (or passes -errno
  // on); closes fd if it cannot be recorded.
  int PublishKernelFile(File* f, bool cloexec, int fd);

  // Get()'s answer once the table is built: inline, with no guard of a
  // function-local static (every call on every descriptor asks for it).
  static constinit inline std::atomic<FdTable*> instance_{nullptr};
  std::atomic<Chunk*> chunks_[kMaxChunks] = {};
  // Bit 0: kDisjoint; bit 1: latched (a descriptor was installed).
  std::atomic<int> mode_{0};
  std::atomic<long> limit_{kCapacity};
  // kDisjoint: no free index below this (a hint kept exact enough for
  // lowest-free allocation, see Reserve).
  std::atomic<long> hint_{0};
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_FD_TABLE_H_
