// Pipe pages: the 4096-byte buffers of a pipe's slots, and the small pool
// a write fills before it takes the pipe's mutex (pages are allocated and
// freed outside locks, so readers never wait for a writer's allocation).
//
// Thread safety: a PagePool is a local of one write call; a Page belongs to
// whoever holds it (the pool, the pipe's ring under its mutex, or a reader
// freeing it after the mutex is released).
//
// Invariants: a pool holds at most kPipeSlots pages; Put() only returns a page
// obtained while the pool had room (after a Take(), or into an empty pool).
#ifndef UEPOLL_SRC_SOURCES_PIPE_PAGE_H_
#define UEPOLL_SRC_SOURCES_PIPE_PAGE_H_

#include <algorithm>
#include <cstddef>
#include <new>

#include "base/alloc.h"

namespace uepoll::impl {

constexpr size_t kPipePageSize = 4096;
constexpr unsigned kPipeSlots = 16;  // PIPE_DEF_BUFFERS: max_usage

struct Page {
  UEPOLL_ALLOCATED_CLASS  // new (std::nothrow) Page: uninitialized bytes
      char bytes[kPipePageSize];
};

// Up to kPipeSlots pages allocated before the pipe's mutex is taken.
// Leftovers are freed by the destructor, which runs after it is released.
class PagePool {
 public:
  PagePool() = default;
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;
  ~PagePool() {
    for (unsigned i = 0; i < n_; ++i) delete pages_[i];
  }
  // False if an allocation failed (the pool keeps what it got).
  bool Fill(unsigned want) {
    want = std::min(want, kPipeSlots);
    while (n_ < want) {
      Page* p = new (std::nothrow) Page;
      if (!p) return false;
      pages_[n_++] = p;
    }
    return true;
  }
  Page* Take() { return n_ ? pages_[--n_] : nullptr; }
  void Put(Page* p) { pages_[n_++] = p; }  // n_ < kPipeSlots: only after Take()

 private:
  Page* pages_[kPipeSlots];
  unsigned n_ = 0;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_PIPE_PAGE_H_
