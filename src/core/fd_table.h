// FdTable: uepoll's descriptor table, numbered from UEPOLL_FD_BASE.
//
// Lookup takes no process-wide lock and is safe against a concurrent close
// on another thread. The design is type-stable storage with validated
// reference acquisition (docs/design.md, "Descriptor lookup"):
//  - Slots live in chunks of kChunkSize that are allocated on first use and
//    never freed, so a slot's memory is always valid to touch.
//  - A slot word holds File* (bits 0-47), a count of lookups in flight on
//    the slot (bits 48-61), "borrowable" (bit 62: the file is an epoll
//    instance, see Borrow) and FD_CLOEXEC (bit 63). Lookup adds one to the
//    count, takes a reference on the file the word names, and subtracts
//    one: two wait-free RMWs, no lock, no spinning. A closer (close, dup2
//    replacing a file) clears the pointer and then waits until the count
//    drops to zero before it drops the slot's reference: any lookup that
//    saw the old pointer has taken its own reference by then. This is the
//    user-space stand-in for the kernel's RCU + get_file_rcu(): the grace
//    period is the few instructions between the two RMWs of a lookup.
//  - Only closers ever wait, and only for lookups already in flight; a
//    closer that finds a lookup preempted inside that window yields.
//  - Borrow is Lookup without the shared writes, for the descriptors that
//    threads share: a hazard pointer in the calling thread's own record
//    (core/borrow.h). A slot is borrowable when it holds an epoll instance,
//    or once a thread other than the file's creator has looked it up
//    through Borrow. Closers of a borrowable slot also wait until no thread
//    borrows the file, which costs a scan of the records; sources that one
//    thread creates, uses and closes never pay it.
//  - Allocation (lowest free number >= a minimum) uses a bitmap per chunk
//    with CAS; a reserved bit with an empty slot is "allocated, not yet
//    installed", where dup2 onto it fails EBUSY as in the kernel.
#ifndef UEPOLL_SRC_CORE_FD_TABLE_H_
#define UEPOLL_SRC_CORE_FD_TABLE_H_

#include <atomic>
#include <cstdint>

#include "core/borrow.h"
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

  // The file at fd for the length of one call, or an empty FileBorrow
  // (EBADF). A borrowable slot's file is borrowed through a hazard pointer
  // (no write to a shared line); any other file gets a counted reference.
  // Parker pins the borrow before any sleep; a caller that spins (busy
  // polling) or raises a signal calls PinBorrowed() first.
  FileBorrow Borrow(int fd);

  // Installs f (adopting one reference) at the lowest free number >= minfd
  // (a uepoll number; values below kBase mean kBase). Returns the fd or
  // -EMFILE (-EINVAL if minfd is beyond the limit). On failure the
  // reference is still the caller's.
  int Install(File* f, bool cloexec, int minfd = kBase);

  // Two numbers at once (pipe, socketpair): both or neither.
  int Install2(File* a, File* b, bool cloexec, int fds[2]);

  // Install2 in two steps, as the kernel's get_unused_fd_flags and
  // fd_install, for calls that must fail EMFILE before they check their
  // other arguments (socketpair, pipe2). Reserve2 takes two numbers (0, or
  // -EMFILE / -ENOMEM with nothing taken): allocated but empty, so lookups
  // see them closed and dup2 onto them fails EBUSY. Exactly one of
  // InstallReserved2 (adopting a reference to each file) or Unreserve2
  // (put_unused_fd) must follow.
  int Reserve2(long idx[2]);
  void InstallReserved2(const long idx[2], File* a, File* b, bool cloexec,
                        int fds[2]);
  void Unreserve2(const long idx[2]);

  int Close(int fd);
  int Dup(int oldfd, int minfd, bool cloexec);
  // dup2 (flags = -1: dup2 semantics) and dup3.
  int Dup3(int oldfd, int newfd, int flags, bool is_dup2);
  int GetFdFlags(int fd);
  int SetFdFlags(int fd, long arg);

  long limit() const { return limit_.load(std::memory_order_relaxed); }
  long SetLimit(long limit);

 private:
  static constexpr uint64_t kPtrMask = (uint64_t{1} << 48) - 1;
  static constexpr uint64_t kCountOne = uint64_t{1} << 48;
  // 14 bits: at most 16383 lookups of one number in flight at once (each
  // is a thread inside the few instructions of Lookup).
  static constexpr uint64_t kCountMask = ((uint64_t{1} << 14) - 1) << 48;
  static constexpr uint64_t kBorrowBit = uint64_t{1} << 62;
  static constexpr uint64_t kCloexecBit = uint64_t{1} << 63;

  struct Chunk {
    std::atomic<uint64_t> slots[kChunkSize];
    std::atomic<uint64_t> bitmap[kChunkSize / 64];
  };

  FdTable() = default;
  Chunk* GetChunk(long idx, bool create);
  std::atomic<uint64_t>* Slot(long idx, bool create);
  // The slot of a uepoll number, or nullptr if out of range or never used.
  std::atomic<uint64_t>* SlotOfFd(int fd);
  // Waits until no lookup is in flight on the slot (after a closer removed
  // the file it had).
  static void WaitForLookups(std::atomic<uint64_t>* s);
  static uint64_t Word(File* f, bool cloexec) {
    return reinterpret_cast<uintptr_t>(f) | (cloexec ? kCloexecBit : 0) |
           (f->is_epoll() ? kBorrowBit : 0);
  }
  // Sets the borrowable bit of a slot that still holds f.
  static void MarkBorrowable(std::atomic<uint64_t>* s, File* f);
  // After a closer cleared a slot whose old word was w: waits out the
  // lookups and borrows that may still use the file, so the slot's
  // reference may be dropped.
  static void WaitForUsers(std::atomic<uint64_t>* s, uint64_t w);
  static File* FileOf(uint64_t w) {
    return reinterpret_cast<File*>(static_cast<uintptr_t>(w & kPtrMask));
  }
  long Reserve(long min_idx);  // -1 when full
  void Unreserve(long idx);

  std::atomic<Chunk*> chunks_[kMaxChunks] = {};
  std::atomic<long> limit_{kDefaultLimit};
  std::atomic<long> hint_{0};  // no free index below this (a hint)
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_FD_TABLE_H_
