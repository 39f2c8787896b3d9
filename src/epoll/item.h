// EpItem: one registration of (object, descriptor number) in an instance,
// the kernel's struct epitem.
//
// Field protection (see the LOCKING block in eventpoll.h):
//   hash_next               ep->mtx_
//   file, fd, ep            immutable after insertion
//   events                  written under ep->mtx_, read by the wakeup
//                           callback under ep->lock_: atomic
//   data                    ep->mtx_
//   rdllink                 ep->lock_, except during a scan, when the
//                           scanner (holding ep->mtx_) owns the items it
//                           spliced out
//   ovf_next                ep->lock_ (kOvfRemoved once removed)
//   queued                  written under ep->lock_ or by the scanner that
//                           owns the item; read lockless by the callback
//   batch                   ep->mtx_, by the scanner that owns the item
//   wait                    the watched file's PollQueue().lock_; a
//                           lockless wakeup (WaitQueue::WakeUpBorrowed)
//                           reaches the item without it
//   fllink, dying           file->watch_lock_
//
// An item holds no reference on its file (the file's last close removes
// it) and one reference on its instance (Eventpoll::ep_refs_).
#ifndef UEPOLL_SRC_EPOLL_ITEM_H_
#define UEPOLL_SRC_EPOLL_ITEM_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>

#include "base/list.h"
#include "core/wait_queue.h"

namespace uepoll::impl {

class File;
class Eventpoll;

struct EpItem {
  EpItem* hash_next;
  File* file;
  Eventpoll* ep;
  ListNode rdllink;
  EpItem* ovf_next;
  WaitEntry wait;  // wait.aux holds the registration's fd
  ListNode fllink;
  uint64_t data;
  std::atomic<uint32_t> events;
  bool dying;
  // "A future scan will poll this item": it is on rdllist_, or on a scan's
  // private list and not yet processed. Lets a wakeup skip lock_ when the
  // item is already queued and no thread waits (EpItemWake's fast path).
  std::atomic<bool> queued;
  // The two-pass harvest (Eventpoll::SendEvents) that last reported the
  // item in its first pass, or 0: its second pass must not report it
  // again in the same batch. Written and read under ep->mtx_ by the
  // scanner that owns the item.
  uint16_t batch;

  int fd() const { return static_cast<int>(wait.aux); }
};

// One item per registration: 104 bytes is a 112-byte malloc chunk, which
// with the bucket array keeps a registration under 128 bytes.
static_assert(sizeof(EpItem) <= 104, "EpItem grew: check bytes/registration");

// The bits that are flags, not readiness (the kernel's EP_PRIVATE_BITS).
inline constexpr uint32_t kEpPrivateBits =
    EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE;

// A marker for "not on the overflow list" (the kernel's EP_UNACTIVE_PTR).
inline EpItem* const kOvfUnactive = reinterpret_cast<EpItem*>(-1L);
// ovf_next of an item its instance removed (Eventpoll::RemoveLocked, under
// lock_): a lockless wakeup still running (WaitQueue::WakeUpBorrowed)
// finds it under lock_ and leaves it alone.
inline EpItem* const kOvfRemoved = reinterpret_cast<EpItem*>(-2L);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_EPOLL_ITEM_H_
