#include "core/wait_queue.h"

#include <errno.h>

namespace uepoll::impl {

void WaitQueue::AddLocked(WaitEntry* e) {
  if (e->flags & WaitEntry::kExclusive) {
    head_.PushBack(&e->node);
  } else {
    head_.PushFront(&e->node);
  }
  count_.fetch_add(1, std::memory_order_seq_cst);
}

void WaitQueue::RemoveLocked(WaitEntry* e) {
  if (!e->node.linked()) return;
  e->node.Unlink();
  count_.fetch_sub(1, std::memory_order_relaxed);
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
    if (!n->linked()) count_.fetch_sub(1, std::memory_order_relaxed);
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
      if (!n->linked()) count_.fetch_sub(1, std::memory_order_relaxed);
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
