#include "core/wait_queue.h"

#include <errno.h>

#include "base/signal_defer.h"
#include "core/borrow.h"

namespace uepoll::impl {

void WaitQueue::SetSoloLocked() {
  WaitEntry* solo = nullptr;
  if (head_.next != &head_ && head_.next->next == &head_) {
    WaitEntry* only = UEPOLL_CONTAINER_OF(head_.next, WaitEntry, node);
    if (only->kind == WaitKind::kEpollItem) solo = only;
  }
  // seq_cst: a remover's store comes before its load of lockless_
  // (RemoveLocked), against a lockless waker's store to lockless_ before
  // its load of solo_ (WakeUpBorrowed).
  if (solo_.load(std::memory_order_relaxed) != solo) {
    solo_.store(solo, std::memory_order_seq_cst);
  }
}

void WaitQueue::AddLocked(WaitEntry* e) {
  if (e->flags & WaitEntry::kExclusive) {
    head_.PushBack(&e->node);
  } else {
    head_.PushFront(&e->node);
  }
  e->flags &= ~WaitEntry::kDrainWakers;
  // solo_ before the count: a lockless waker that sees the new count (its
  // seq_cst load in Active()) sees the new solo_, so a second entry is
  // never passed over.
  SetSoloLocked();
  count_.fetch_add(1, std::memory_order_seq_cst);
}

void WaitQueue::RemoveLocked(WaitEntry* e) {
  if (!e->node.linked()) return;
  e->node.Unlink();
  SetSoloLocked();
  count_.fetch_sub(1, std::memory_order_relaxed);
  // After solo_ no longer names e (seq_cst, SetSoloLocked): either this
  // load sees a lockless waker's flag, or that waker's load of solo_
  // comes after the store and never finds e.
  if (lockless_.load(std::memory_order_seq_cst)) {
    e->flags |= WaitEntry::kDrainWakers;
  }
}

void WaitQueue::WakeUpBorrowed(const File* owner, uint32_t key) {
  if (!Active()) return;
  // Signal handlers wait: one that ran here and slept would pin this
  // thread's borrows (PinBorrowed), and the remover of solo_'s entry
  // would no longer wait for us.
  EnterSignalCritical();
  if (HoldsBorrowOf(owner)) {
    if (!lockless_.load(std::memory_order_seq_cst)) {
      lockless_.store(true, std::memory_order_seq_cst);
    }
    if (WaitEntry* e = solo_.load(std::memory_order_seq_cst)) {
      // Not under lock_: the borrow keeps e alive (see the header). The
      // function is an epoll item's, which takes its instance's lock_
      // itself and checks there that the item is still registered.
      EpItemWake(e, key);
      LeaveSignalCritical();
      return;
    }
  }
  LeaveSignalCritical();
  MutexLock l(lock_);
  WakeUpLocked(key, 1);
}

namespace {

int Call(WaitEntry* e, uint32_t key) {
  switch (e->kind) {
    case WaitKind::kThread:
      return ThreadWaitEntry::Wake(e, key);
    case WaitKind::kPoll:
      return PollEntryWake(e, key);
    case WaitKind::kEpollItem:
      return EpItemWake(e, key);
  }
  return 0;
}

}  // namespace

void WaitQueue::WakeUpLocked(uint32_t key, int nr_exclusive) {
  ListNode* n = head_.next;
  while (n != &head_) {
    ListNode* next = n->next;  // the function may unlink its own entry
    WaitEntry* e = UEPOLL_CONTAINER_OF(n, WaitEntry, node);
    int consumed = Call(e, key);
    // A thread's entry unlinks itself when woken (autoremove); its owner
    // cannot free it before we drop lock_.
    if (!n->linked()) {
      SetSoloLocked();
      count_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (consumed && (e->flags & WaitEntry::kExclusive) && --nr_exclusive == 0) {
      break;
    }
    n = next;
  }
}

void WaitQueue::PassOnLocked(uint32_t key) {
  ListNode* n = head_.next;
  while (n != &head_) {
    ListNode* next = n->next;
    WaitEntry* e = UEPOLL_CONTAINER_OF(n, WaitEntry, node);
    if (e->flags & WaitEntry::kExclusive) {
      int consumed = Call(e, key);
      if (!n->linked()) {
        SetSoloLocked();
        count_.fetch_sub(1, std::memory_order_relaxed);
      }
      if (consumed) break;
    }
    n = next;
  }
}

// Autoremove: the woken thread finds its entry unlinked and knows it was
// picked (an exclusive waiter then owns the wakeup).
int ThreadWaitEntry::Wake(WaitEntry* e, uint32_t key) {
  auto* w = UEPOLL_CONTAINER_OF(e, ThreadWaitEntry, entry);
  Parker* p = w->parker;
  w->key = key;
  // Unlink before Unpark: once the owner may run, it must see the entry gone.
  e->node.Unlink();
  p->Unpark();
  return 1;
}

void ThreadWaitEntry::LeaveLocked(WaitQueue& q, bool pass_on) {
  if (!queued) return;
  queued = false;
  if (entry.node.linked()) {
    q.RemoveLocked(&entry);
  } else if (pass_on && (entry.flags & WaitEntry::kExclusive)) {
    q.PassOnLocked(key);  // picked, and leaving without a test
  }
}

}  // namespace uepoll::impl
