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
//   queued                  written under ep->lock_, by the scanner that
//                           owns the item, or under ep->mtx_ by a MOD of
//                           a disabled item; read lockless by the callback
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
#include <cstddef>
#include <cstdint>

#include "base/list.h"
#include "core/wait_queue.h"

namespace uepoll::impl {

class File;
class Eventpoll;

struct EpItem {
  // Ordered by who touches what. The first 48 bytes are what every event
  // touches: a wakeup reads ep, events and queued (the first 16, on one
  // line at every alignment malloc gives an item), a harvest also
  // rdllink, file and data. The rest is touched by ctl and close only.
  // With the hot fields at both ends (the order before), a wakeup read two
  // lines of its item, and an item's last line is its neighbour's first:
  // ET events/s 1.61M-1.67M before, 2.20M-2.25M after (BENCHMARKS.md,
  // "The item's hot fields together").
  Eventpoll* ep;
  std::atomic<uint32_t> events;
  // "A future scan will poll this item": it is on rdllist_, or on a scan's
  // private list and not yet processed. Lets a wakeup skip lock_ when the
  // item is already queued and no thread waits (EpItemWake's fast path).
  // A disabled item's mark may be stale (a reported ONESHOT item keeps
  // it): no wakeup reads it then, and the MOD that re-arms clears it.
  std::atomic<bool> queued;
  bool dying;
  // The two-pass harvest (Eventpoll::SendEvents) that last reported the
  // item in its first pass, or 0: its second pass must not report it
  // again in the same batch. Written and read under ep->mtx_ by the
  // scanner that owns the item.
  uint16_t batch;
  File* file;
  ListNode rdllink;
  uint64_t data;
  EpItem* ovf_next;
  WaitEntry wait;  // wait.aux holds the registration's fd
  EpItem* hash_next;
  ListNode fllink;

  int fd() const { return static_cast<int>(wait.aux); }
};

// One item per registration: 104 bytes is a 112-byte malloc chunk, which
// with the bucket array keeps a registration under 128 bytes.
static_assert(sizeof(EpItem) <= 104, "EpItem grew: check bytes/registration");
// The order above: what a wakeup reads in the first 16 bytes (one line at
// malloc's 16-byte alignment), what every event touches in the first 48.
static_assert(offsetof(EpItem, queued) < 16 && offsetof(EpItem, ep) == 0,
              "a wakeup's fields must stay at the item's start");
static_assert(offsetof(EpItem, data) + sizeof(uint64_t) <= 48,
              "a harvest's fields must stay in the item's first 48 bytes");

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
