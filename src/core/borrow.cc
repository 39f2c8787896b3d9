#include "core/borrow.h"

#include <pthread.h>
#include <sched.h>

#include <new>

#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/parker.h"
#include "base/signal_defer.h"

namespace uepoll::impl {

// Trivially destructible, so still readable from other thread_local
// destructors that run after Releaser's.
__thread BorrowRecord* t_borrow_record
    __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

// Every record ever made; pushed at the head, never removed or freed.
std::atomic<BorrowRecord*> g_records{nullptr};

thread_local bool tl_exited = false;

// Hands the record back when the thread exits. A thread that exits holds
// no borrow: borrows end with the call that made them.
struct Releaser {
  bool armed = false;
  ~Releaser() {
    if (t_borrow_record) {
      // Release: a thread that takes the record next sees it clean.
      t_borrow_record->in_use.store(false, std::memory_order_release);
      t_borrow_record = nullptr;
    }
    tl_exited = true;
  }
};
thread_local Releaser tl_releaser;

BorrowRecord* AcquireRecord() {
  for (BorrowRecord* r = g_records.load(std::memory_order_acquire); r;
       r = r->next) {
    bool expected = false;
    if (!r->in_use.load(std::memory_order_relaxed) &&
        r->in_use.compare_exchange_strong(expected, true,
                                          std::memory_order_acquire)) {
      return r;
    }
  }
  // Not through Allocate(): records are process infrastructure, made once
  // per concurrent thread and kept, not an allocation of the call that
  // happens to make one (the allocation-failure tests count per call). On
  // failure the caller takes counted references instead.
  auto* r = new (std::nothrow) BorrowRecord;
  if (!r) return nullptr;
  r->in_use.store(true, std::memory_order_relaxed);
  BorrowRecord* head = g_records.load(std::memory_order_relaxed);
  do {
    r->next = head;
    // seq_cst, not just release: a closer's scan (seq_cst load of the head)
    // must not miss a record whose first hazard it has to see; the Dekker
    // pair of borrow.h covers the hazard and the slot, not the list.
  } while (!g_records.compare_exchange_weak(head, r, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
  return r;
}

// fork(): only the forking thread exists in the child. Borrows that other
// parent threads held at the fork would make every closer of those files
// wait forever in the child: drop them, and free those threads' records.
// Their pinned references stay counted (the child never drops them: a
// leak, not a hang). At the child handler no other thread runs, so plain
// stores suffice.
UEPOLL_FORK_PATH void ForkChild() {
  for (BorrowRecord* r = g_records.load(std::memory_order_relaxed); r;
       r = r->next) {
    if (r == t_borrow_record) continue;
    // Written only where something is set: each write makes the child copy
    // a page.
    for (int i = 0; i < BorrowRecord::kSlots; ++i) {
      if (r->hazard[i].load(std::memory_order_relaxed) != nullptr) {
        r->hazard[i].store(nullptr, std::memory_order_relaxed);
      }
      if (r->valid[i]) r->valid[i] = false;
      if (r->pinned[i] != nullptr) r->pinned[i] = nullptr;
    }
    if (r->in_use.load(std::memory_order_relaxed)) {
      r->in_use.store(false, std::memory_order_relaxed);
    }
  }
}
[[maybe_unused]] const int g_atfork =
    pthread_atfork(nullptr, nullptr, ForkChild);

}  // namespace

int BorrowRecord::FreeSlot() const {
  for (int i = 0; i < kSlots; ++i) {
    if (!pinned[i] && !hazard[i].load(std::memory_order_relaxed)) return i;
  }
  return -1;
}

BorrowRecord* MyBorrowRecord() {
  if (t_borrow_record) return t_borrow_record;
  if (tl_exited) return nullptr;
  // A thread's first borrow inside a signal handler: the registration of
  // tl_releaser's destructor and a new record would call malloc, which the
  // handler may have interrupted (base/handler_arena.h). Counted
  // references instead, until a borrow outside a handler.
  if (InSignalHandler()) return nullptr;
  tl_releaser.armed = true;  // constructs it, so its destructor will run
  Parker::SetBeforeSleep(PinBorrowed);  // before this thread's first borrow
  t_borrow_record = AcquireRecord();
  return t_borrow_record;
}

void FileBorrow::Reset() {
  if (!f_) return;
  if (!rec_) {
    f_->Unref();
  } else if (rec_->pinned[slot_]) {
    rec_->pinned[slot_] = nullptr;
    f_->Unref();
  } else {
    rec_->valid[slot_] = false;
    std::atomic<uint32_t>& ended = rec_->ended[slot_];
    // Release, as the hazard's store below: for WaitForOtherBorrowers.
    ended.store(ended.load(std::memory_order_relaxed) + 1,
                std::memory_order_release);
    // Release: every access this call made to *f_ happens before a closer
    // that sees the hazard gone (its acquire load) drops the last reference.
    rec_->hazard[slot_].store(nullptr, std::memory_order_release);
  }
  f_ = nullptr;
}

void PinBorrowed() {
  BorrowRecord* r = t_borrow_record;
  if (!r) return;
  for (int i = 0; i < BorrowRecord::kSlots; ++i) {
    File* f = r->hazard[i].load(std::memory_order_relaxed);
    if (!f || !r->valid[i]) continue;
    r->valid[i] = false;
    // Safe: while the hazard is set, a closer of any slot holding f waits,
    // so the slot's reference keeps refs_ above zero. The Ref is ordered
    // before the release store below, which the closer acquires.
    f->Ref();
    r->pinned[i] = f;
    r->hazard[i].store(nullptr, std::memory_order_release);
  }
}

void WaitUntilUnborrowedIn(File* f, BorrowRecord* r) {
  if (!r) return;
  for (int i = 0; i < BorrowRecord::kSlots; ++i) {
    // seq_cst: the other half of the Dekker pair with FdTable::Borrow
    // (hazard store, slot load) against the closer's slot clear, this load.
    for (int spins = 0; r->hazard[i].load(std::memory_order_seq_cst) == f;
         ++spins) {
      Backoff(spins);  // the borrower may be preempted inside its call
    }
  }
}

void WaitUntilUnborrowed(File* f) {
  for (BorrowRecord* r = g_records.load(std::memory_order_seq_cst); r;
       r = r->next) {
    WaitUntilUnborrowedIn(f, r);
  }
}

namespace {
std::atomic<void (*)(const File*)> g_borrow_wait_hook{nullptr};
}  // namespace

void SetBorrowWaitHookForTest(void (*hook)(const File* f)) {
  g_borrow_wait_hook.store(hook, std::memory_order_release);
}

void WaitForOtherBorrowers(const File* f) {
  bool pinned = false;
  for (BorrowRecord* r = g_records.load(std::memory_order_seq_cst); r;
       r = r->next) {
    if (r == t_borrow_record) continue;
    for (int i = 0; i < BorrowRecord::kSlots; ++i) {
      // seq_cst: after the remover's seq_cst RMW that took the thing out
      // of reach (WaitQueue::SetSoloLocked), against the borrower's seq_cst
      // hazard store before its load of that thing.
      if (r->hazard[i].load(std::memory_order_seq_cst) != f) continue;
      // That borrow, or a later one (the count was raised before the
      // hazard was stored again), ends when the count moves: a thread that
      // borrows f again and again never makes us wait for the next one.
      uint32_t ended = r->ended[i].load(std::memory_order_acquire);
      if (!pinned) {
        // The borrower may be a closer of something this thread borrowed,
        // or wait for a closer that does: this thread's borrows become
        // references before it waits.
        PinBorrowed();
        pinned = true;
      }
      if (auto hook = g_borrow_wait_hook.load(std::memory_order_acquire)) {
        hook(f);
      }
      for (int spins = 0; r->hazard[i].load(std::memory_order_seq_cst) == f &&
                          r->ended[i].load(std::memory_order_acquire) == ended;
           ++spins) {
        Backoff(spins);
      }
    }
  }
}

}  // namespace uepoll::impl
