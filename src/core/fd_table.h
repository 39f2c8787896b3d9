// FdTable: uepoll's descriptor table, numbered from UEPOLL_FD_BASE.
//
// Lookup takes no process-wide lock and is safe against a concurrent close
// on another thread. The design is type-stable storage with validated
// reference acquisition (docs/design.md, "Descriptor lookup"):
//  - Slots live in chunks of kChunkSize that are allocated on first use and
//    never freed, so a slot's memory is always valid to touch.
//  - A slot word holds File* | flag bits. Bit 0 is a per-slot lock, taken
//    for a few instructions by lookup (to take a reference on the file the
//    slot holds) and by close/dup2 (to swap the file out). A file referenced
//    by a slot holds that slot's reference, so while the slot lock is held
//    and the slot still names the file, the file is alive: Ref() is safe.
//    This is the user-space stand-in for the kernel's RCU + get_file_rcu().
//  - The per-slot lock is never held across anything but those few
//    instructions; contention on it is contention on the same descriptor,
//    which the file's own refcount would see anyway.
//  - Allocation (lowest free number >= a minimum) uses a bitmap per chunk
//    with CAS; a reserved bit with an empty slot is "allocated, not yet
//    installed", where dup2 onto it fails EBUSY as in the kernel.
#ifndef UEPOLL_SRC_CORE_FD_TABLE_H_
#define UEPOLL_SRC_CORE_FD_TABLE_H_

#include <atomic>
#include <cstdint>

#include "core/file.h"

namespace uepoll::impl {

class FdTable {
 public:
  static constexpr int kBase = 0x40000000;  // UEPOLL_FD_BASE
  static constexpr int kChunkBits = 10;
  static constexpr int kChunkSize = 1 << kChunkBits;
  static constexpr int kMaxChunks = 1 << 13;
  static constexpr long kCapacity = long{kChunkSize} * kMaxChunks;  // 8M
  static constexpr long kDefaultLimit = kCapacity;

  static FdTable& Get();

  static bool InRange(int fd) { return fd >= kBase; }

  // A new reference to the file at fd, or an empty FileRef (EBADF).
  FileRef Lookup(int fd);

  // Installs f (adopting one reference) at the lowest free number >= minfd
  // (a uepoll number; values below kBase mean kBase). Returns the fd or
  // -EMFILE (-EINVAL if minfd is beyond the limit). On failure the
  // reference is still the caller's.
  int Install(File* f, bool cloexec, int minfd = kBase);

  // Two numbers at once (pipe, socketpair): both or neither.
  int Install2(File* a, File* b, bool cloexec, int fds[2]);

  int Close(int fd);
  int Dup(int oldfd, int minfd, bool cloexec);
  // dup2 (flags = -1: dup2 semantics) and dup3.
  int Dup3(int oldfd, int newfd, int flags, bool is_dup2);
  int GetFdFlags(int fd);
  int SetFdFlags(int fd, long arg);

  long limit() const { return limit_.load(std::memory_order_relaxed); }
  long SetLimit(long limit);

 private:
  static constexpr uintptr_t kLockBit = 1;
  static constexpr uintptr_t kCloexecBit = 2;
  static constexpr uintptr_t kFlagMask = 3;

  struct Chunk {
    std::atomic<uintptr_t> slots[kChunkSize];
    std::atomic<uint64_t> bitmap[kChunkSize / 64];
  };

  FdTable() = default;
  Chunk* GetChunk(long idx, bool create);
  std::atomic<uintptr_t>* Slot(long idx, bool create);
  // Locks the slot if it holds a file; returns the word (without lock bit)
  // or 0 if empty (then not locked).
  static uintptr_t LockSlot(std::atomic<uintptr_t>* s);
  long Reserve(long min_idx);  // -1 when full
  void Unreserve(long idx);

  std::atomic<Chunk*> chunks_[kMaxChunks] = {};
  std::atomic<long> limit_{kDefaultLimit};
  std::atomic<long> hint_{0};  // no free index below this (a hint)
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_FD_TABLE_H_
