// ItemTable: the instance's registrations keyed by (file, fd), an intrusive
// chained hash table (the kernel uses an rbtree), with a one-item hint that
// Find tries first. Guarded by the owning instance's mtx_. Growing needs a
// larger bucket array, which the caller allocates before taking mtx_:
// allocating under a lock would make every thread that needs the lock wait
// for the allocator too.
#ifndef UEPOLL_SRC_EPOLL_ITEM_TABLE_H_
#define UEPOLL_SRC_EPOLL_ITEM_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/alloc.h"
#include "epoll/item.h"

namespace uepoll::impl {

class ItemTable {
 public:
  ItemTable() = default;
  ~ItemTable() { DeleteArray(buckets_); }
  ItemTable(const ItemTable&) = delete;
  ItemTable& operator=(const ItemTable&) = delete;

  EpItem* Find(const File* file, int fd) const {
    if (hint_ && hint_->file == file && hint_->fd() == fd) return hint_;
    if (!buckets_) return nullptr;
    size_t n = nbuckets_.load(std::memory_order_relaxed);
    for (EpItem* e = buckets_[Hash(file, fd) & (n - 1)]; e; e = e->hash_next) {
      if (e->file == file && e->fd() == fd) return e;
    }
    return nullptr;
  }
  // Requires a bucket array (Reserve beforehand).
  void Insert(EpItem* e) {
    EpItem** b = &buckets_[Hash(e->file, e->fd()) &
                           (nbuckets_.load(std::memory_order_relaxed) - 1)];
    e->hash_next = *b;
    *b = e;
    size_.store(size_.load(std::memory_order_relaxed) + 1,
                std::memory_order_relaxed);
  }
  void Erase(EpItem* e) {
    EpItem** p = &buckets_[Hash(e->file, e->fd()) &
                           (nbuckets_.load(std::memory_order_relaxed) - 1)];
    while (*p != e) p = &(*p)->hash_next;
    *p = e->hash_next;
    if (hint_ == e) hint_ = nullptr;  // the hint never outlives its item
    size_.store(size_.load(std::memory_order_relaxed) - 1,
                std::memory_order_relaxed);
  }
  size_t size() const { return size_.load(std::memory_order_relaxed); }

  // The item the next Find most likely asks for: the one a harvest just
  // reported, which the ctl that follows a report most often names (a
  // ONESHOT MOD, perf's ET re-ADD). Found without a walk of its chain,
  // which would read the hot line of every item before it there, lines
  // the sources' threads write when they link them (BENCHMARKS.md, "The
  // ctl's lookup hint"). Erase clears it.
  void Remember(EpItem* e) { hint_ = e; }

  // The bucket count one more insertion wants (0: the current array is
  // fine). Callable without the lock as a racy peek (the fields are atomic
  // for that alone; they change only under the lock).
  size_t WantBuckets() const {
    size_t n = nbuckets_.load(std::memory_order_relaxed);
    if (size_.load(std::memory_order_relaxed) + 1 <= n) return 0;
    return n ? n * 2 : 8;
  }
  // Rehashes into fresh (zeroed, n buckets, n == WantBuckets()); returns the
  // old array for the caller to free outside the lock.
  EpItem** Grow(EpItem** fresh, size_t n) {
    for (size_t i = 0, m = nbuckets_.load(std::memory_order_relaxed); i < m;
         ++i) {
      EpItem* e = buckets_[i];
      while (e) {
        EpItem* next = e->hash_next;
        EpItem** b = &fresh[Hash(e->file, e->fd()) & (n - 1)];
        e->hash_next = *b;
        *b = e;
        e = next;
      }
    }
    EpItem** old = buckets_;
    buckets_ = fresh;
    nbuckets_.store(n, std::memory_order_relaxed);
    return old;
  }

  // Calls fn(item) for every item; fn may Erase the item it is given.
  template <class Fn>
  void ForEach(Fn fn) {
    for (size_t i = 0, m = nbuckets_.load(std::memory_order_relaxed); i < m;
         ++i) {
      EpItem* e = buckets_[i];
      while (e) {
        EpItem* next = e->hash_next;
        fn(e);
        e = next;
      }
    }
  }

 private:
  static size_t Hash(const File* f, int fd) {
    uint64_t x =
        reinterpret_cast<uintptr_t>(f) ^ (uint64_t(uint32_t(fd)) << 32);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }

  EpItem** buckets_ = nullptr;
  std::atomic<size_t> nbuckets_{0};
  std::atomic<size_t> size_{0};
  EpItem* hint_ = nullptr;  // Remember; null, or an item in the table
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_EPOLL_ITEM_TABLE_H_
