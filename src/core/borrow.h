// Borrowed lookups: using a descriptor's file for the length of a call
// without writing to any cache line that other threads share.
//
// Why: a counted lookup makes four atomic read-modify-writes on two lines
// that every thread using the same descriptor shares (the slot word and
// File::refs_), and neighbouring descriptors share slot lines. On this
// project's 2-core VM a cache line takes about 240 ns to move between
// cores, so two threads calling epoll_wait(timeout 0) on one instance ran
// at 4.3M calls/s together against 33M on one thread, and two threads that
// shared nothing at all slowed each other down through the slot lines
// (docs/design.md, "Descriptor lookup"). Every lookup is a borrow now.
//
// How (hazard pointers, without deferred frees):
//  - Each thread owns a BorrowRecord: kSlots hazard words on a cache line of
//    its own. Records live in a process-wide list, are never freed, and are
//    reused by later threads once their owner exits.
//  - A borrower publishes the File* it read from a slot word in one of its
//    hazard words (seq_cst), then reads the slot word again (seq_cst). If
//    the word still names that file, the file cannot be freed until the
//    hazard is cleared.
//  - A closer (close, dup2 over the number) clears the slot word (seq_cst
//    RMW) and waits until no record that may hold the file does, before it
//    drops the slot's reference: the record of the slot's owner (the
//    thread that installed it) if no other thread ever borrowed through
//    the slot, every record otherwise (FdTable tracks which). Sequential
//    consistency of the four accesses means either the borrower's second
//    read sees the slot cleared or the closer's scan sees the hazard.
//  - A borrow is held for a bounded time: ctl never sleeps except on mutexes
//    whose holders make progress. Before a thread sleeps in the kernel,
//    Parker runs PinBorrowed() (installed as its before-sleep hook by
//    MyBorrowRecord), which turns each of the thread's validated hazards
//    into a counted reference (File::Ref is safe: the hazard keeps the
//    slot's reference alive) and clears the hazard, so a closer never waits
//    for a sleeping thread. Busy polling and a raised SIGPIPE (whose handler
//    may close the descriptor) call it themselves.
//  - Frees are never deferred: the last Unref still frees at once, so leak
//    checks and sanitizer reports mean what they meant before.
//
// What it costs: a borrow is two loads and one locked store to the
// borrower's own line; ending it is a plain store. A close scans one record
// (the owner's), or every record (O(threads that ever borrowed), each a
// load) for a number other threads used too.
#ifndef UEPOLL_SRC_CORE_BORROW_H_
#define UEPOLL_SRC_CORE_BORROW_H_

#include <atomic>

#include "core/file.h"

namespace uepoll::impl {

struct alignas(64) BorrowRecord {
  // epoll_ctl borrows two files; the rest leaves room for a signal handler
  // that makes calls while the interrupted call holds its borrows.
  static constexpr int kSlots = 4;

  // Written by the owner, read by closers (WaitUntilUnborrowed).
  std::atomic<File*> hazard[kSlots] = {};
  // How many borrows each hazard slot has ended: written by the owner,
  // read by WaitForOtherBorrowers, which waits for one borrow to end, not
  // for the slot to stop naming a file that the owner keeps borrowing.
  std::atomic<uint32_t> ended[kSlots] = {};
  // Owner only: hazards PinBorrowed() turned into counted references.
  File* pinned[kSlots] = {};
  // Owner only: the hazard was validated against its slot. PinBorrowed
  // pins only these: a signal handler that sleeps in uepoll while the
  // interrupted Borrow has published but not yet validated its hazard must
  // not take a reference on a file that may already be freed.
  bool valid[kSlots] = {};
  std::atomic<bool> in_use{false};  // a live thread owns this record
  BorrowRecord* next = nullptr;     // immutable once the record is listed

  // A slot with neither a hazard nor a pinned reference, or -1.
  int FreeSlot() const;
};

// A file used for the length of one call: either a borrow (a hazard in the
// calling thread's record) or a counted reference, as FileRef.
class FileBorrow {
 public:
  FileBorrow() = default;
  explicit FileBorrow(FileRef ref) : f_(ref.release()) {}
  // f is published in rec->hazard[slot] and validated (FdTable::Borrow).
  FileBorrow(File* f, BorrowRecord* rec, int slot)
      : f_(f), rec_(rec), slot_(slot) {}
  ~FileBorrow() {
    if (f_) Reset();  // inline: an empty borrow (a kernel number) costs a test
  }
  FileBorrow(FileBorrow&& o) noexcept : f_(o.f_), rec_(o.rec_), slot_(o.slot_) {
    o.f_ = nullptr;
  }
  FileBorrow& operator=(FileBorrow&&) = delete;
  FileBorrow(const FileBorrow&) = delete;
  FileBorrow& operator=(const FileBorrow&) = delete;

  File* get() const { return f_; }
  File* operator->() const { return f_; }
  explicit operator bool() const { return f_ != nullptr; }

 private:
  void Reset();

  File* f_ = nullptr;
  BorrowRecord* rec_ = nullptr;  // nullptr: f_ holds a counted reference
  int slot_ = -1;
};

// The calling thread's record, or nullptr (the thread is exiting, or the
// record could not be allocated): callers then take a counted reference.
BorrowRecord* MyBorrowRecord();

// The calling thread's record once it has one (MyBorrowRecord), else
// null. initial-exec, as t_signal_defer (base/signal_defer.h): an inline
// %fs-relative load.
extern __thread BorrowRecord* t_borrow_record
    __attribute__((tls_model("initial-exec")));

// Whether the calling thread holds a validated borrow of f: f cannot be
// freed, and every closer and WaitForOtherBorrowers(f) waits for it, until
// the call that made it returns (or pins it: a caller that relies on it
// keeps signal handlers waiting, base/signal_defer.h).
inline bool HoldsBorrowOf(const File* f) {
  BorrowRecord* r = t_borrow_record;
  if (!r) return false;
  for (int i = 0; i < BorrowRecord::kSlots; ++i) {
    if (r->valid[i] && r->hazard[i].load(std::memory_order_relaxed) == f) {
      return true;
    }
  }
  return false;
}

// Before a thread sleeps (Parker's hook), spins in a wait or raises a
// signal: its borrows become counted references, so that closers need not
// wait for it.
void PinBorrowed();

// For closers, after the file left its slot: returns once no thread holds
// a borrow of f. Only borrows started before the slot was cleared can
// exist, and each ends within its call or is pinned first.
void WaitUntilUnborrowed(File* f);
// The same, when only one record can hold such a borrow (rec may be null).
void WaitUntilUnborrowedIn(File* f, BorrowRecord* rec);

// For the remover of something that threads holding a borrow of f may
// reach without a lock (WaitQueue::WakeUpBorrowed), once it is out of
// their reach: returns once every other thread's borrow of f that may
// have started before has ended. The caller's own borrows are not waited
// for; if it has to wait, they are pinned first (PinBorrowed), so that no
// closer waits for the caller while the caller waits. Call with no lock
// held. f is only compared, never used: it may have been freed.
void WaitForOtherBorrowers(const File* f);
// Tests only: called by WaitForOtherBorrowers each time it is about to
// wait for another thread's borrow of f, so that a test can tell that a
// remover waits (tests/threads/lockless_wake_test.cc). null outside tests.
void SetBorrowWaitHookForTest(void (*hook)(const File* f));

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_BORROW_H_
