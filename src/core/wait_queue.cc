#include "core/wait_queue.h"

#include <errno.h>

#include "base/signal_defer.h"
#include "core/borrow.h"

namespace uepoll::impl {

void WaitQueue::SetSoloLocked(bool removal_fence) {
  WaitEntry* solo = nullptr;
  if (head_.next != &head_ && head_.next->next == &head_) {
    WaitEntry* only = UEPOLL_CONTAINER_OF(head_.next, WaitEntry, node);
    if (only->kind == WaitKind::kEpollItem) solo = only;
  }
  if (removal_fence) {
    // A removal from a queue that lockless wakers use: a seq_cst RMW even
    // if solo_ keeps its value. A waker's seq_cst load of solo_ that found
    // the removed entry comes before it in the total order, and so does
    // that waker's borrow (its seq_cst hazard store, made before the
    // load): the remover's scan of the hazards, after this, sees it
    // (WaitForOtherBorrowers).
    solo_.exchange(solo, std::memory_order_seq_cst);
  } else if (solo_.load(std::memory_order_relaxed) != solo) {
    solo_.store(solo, std::memory_order_release);
  }
}

void WaitQueue::AddLocked(WaitEntry* e) {
  if (e->flags & WaitEntry::kExclusive) {
    head_.PushBack(&e->node);
  } else {
    head_.PushFront(&e->node);
  }
  e->flags &= ~WaitEntry::kDrainWakers;
  // solo_ before the count, whose seq_cst increment releases it: a
  // lockless waker that sees the new count (its seq_cst load in Active())
  // sees the new solo_, so a second entry is never passed over.
  SetSoloLocked(false);
  count_.fetch_add(1, std::memory_order_seq_cst);
}

void WaitQueue::RemoveLocked(WaitEntry* e) {
  if (!e->node.linked()) return;
  e->node.Unlink();
  // lockless_ is written under lock_ only. If it is still false, the
  // first lockless waker takes lock_ after us to set it, and so sees
  // solo_ as we leave it: it never finds e.
  const bool drain = lockless_.load(std::memory_order_relaxed);
  SetSoloLocked(drain);
  count_.fetch_sub(1, std::memory_order_relaxed);
  if (drain) e->flags |= WaitEntry::kDrainWakers;
}

void WaitQueue::WakeUpBorrowed(const File* owner, uint32_t key) {
  if (!Active()) return;
  // Signal handlers wait: one that ran here and slept would pin this
  // thread's borrows (PinBorrowed), and the remover of solo_'s entry
  // would no longer wait for us.
  EnterSignalCritical();
  // Acquire: pairs with the release under lock_ below, so that solo_ is
  // seen as the removals before that left it (RemoveLocked).
  if (lockless_.load(std::memory_order_acquire) && HoldsBorrowOf(owner)) {
    if (WaitEntry* e = solo_.load(std::memory_order_seq_cst)) {
      if (auto hook = lockless_wake_hook_.load(std::memory_order_acquire)) {
        hook(e);
      }
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
  // From now on removals mark their entries (RemoveLocked); the first
  // waker of a queue, and every one without a borrow, wakes under lock_.
  if (!lockless_.load(std::memory_order_relaxed) && HoldsBorrowOf(owner)) {
    lockless_.store(true, std::memory_order_release);
  }
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
      SetSoloLocked(false);  // a thread's entry: never called locklessly
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
        SetSoloLocked(false);
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
