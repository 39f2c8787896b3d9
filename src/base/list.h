// ListNode: an intrusive circular doubly-linked list, as the kernel's
// list_head. A node that is not on a list points to itself, so "is it linked"
// is one load and unlinking is idempotent.
#ifndef UEPOLL_SRC_BASE_LIST_H_
#define UEPOLL_SRC_BASE_LIST_H_

#include <cstddef>

namespace uepoll::impl {

struct ListNode {
  ListNode* prev = this;
  ListNode* next = this;

  ListNode() = default;
  ListNode(const ListNode&) = delete;
  ListNode& operator=(const ListNode&) = delete;

  bool linked() const { return next != this; }
  bool empty() const { return next == this; }

  void Reset() { prev = next = this; }

  // Inserts n before this node (at the tail when this is a list head).
  void InsertBefore(ListNode* n) {
    n->prev = prev;
    n->next = this;
    prev->next = n;
    prev = n;
  }
  // Inserts n after this node (at the head when this is a list head).
  void InsertAfter(ListNode* n) {
    n->next = next;
    n->prev = this;
    next->prev = n;
    next = n;
  }
  void PushBack(ListNode* n) { InsertBefore(n); }
  void PushFront(ListNode* n) { InsertAfter(n); }

  // Unlinks this node and makes it self-linked.
  void Unlink() {
    prev->next = next;
    next->prev = prev;
    Reset();
  }

  // Moves every node of `from` (a head) to the front of this list, in order,
  // leaving `from` empty.
  void SpliceFront(ListNode* from) {
    if (from->empty()) return;
    ListNode* first = from->next;
    ListNode* last = from->prev;
    last->next = next;
    next->prev = last;
    next = first;
    first->prev = this;
    from->Reset();
  }
  // Moves every node of `from` to the back of this list, in order.
  void SpliceBack(ListNode* from) {
    if (from->empty()) return;
    ListNode* first = from->next;
    ListNode* last = from->prev;
    first->prev = prev;
    prev->next = first;
    last->next = this;
    prev = last;
    from->Reset();
  }
};

// container_of: the struct that holds `member` at `ptr`. The types used with
// it are standard-layout.
#define UEPOLL_CONTAINER_OF(ptr, type, member) \
  reinterpret_cast<type*>(reinterpret_cast<char*>(ptr) - offsetof(type, member))

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_LIST_H_
