#include "base/handler_arena.h"

#include <errno.h>
#include <sys/mman.h>

namespace uepoll::impl {
namespace {

// One size of block: a lock-free stack of free block indices, and the
// count of blocks never handed out (taken in order before the stack has
// any).
struct BlockClass {
  size_t offset;  // of block 0 in the mapping
  size_t size;
  uint32_t count;
  // (tag << 32) | (index + 1), 0 for empty; the tag counts pushes, so a
  // pop that read a head which was popped and pushed back meanwhile fails
  // its compare-and-swap (ABA).
  std::atomic<uint64_t> head{0};
  std::atomic<uint32_t> fresh{0};
  std::atomic<uint32_t>* next;  // per block: the index + 1 below it
};

std::atomic<uint32_t> g_small_next[HandlerArena::kSmallCount];
std::atomic<uint32_t> g_large_next[HandlerArena::kLargeCount];
BlockClass g_classes[2] = {
    {0,
     HandlerArena::kSmallBlock,
     HandlerArena::kSmallCount,
     {0},
     {0},
     g_small_next},
    {HandlerArena::kSmallBytes,
     HandlerArena::kLargeBlock,
     HandlerArena::kLargeCount,
     {0},
     {0},
     g_large_next},
};

long Pop(BlockClass& c) {
  uint64_t h = c.head.load(std::memory_order_acquire);
  while (h & 0xFFFFFFFFu) {
    uint32_t idx = static_cast<uint32_t>(h) - 1;
    uint64_t below = c.next[idx].load(std::memory_order_relaxed);
    uint64_t want = (h & ~uint64_t{0xFFFFFFFFu}) | below;
    if (c.head.compare_exchange_weak(h, want, std::memory_order_acquire,
                                     std::memory_order_acquire)) {
      return idx;
    }
  }
  uint32_t f = c.fresh.load(std::memory_order_relaxed);
  while (f < c.count) {
    if (c.fresh.compare_exchange_weak(f, f + 1, std::memory_order_relaxed)) {
      return f;
    }
  }
  return -1;
}

void Push(BlockClass& c, uint32_t idx) {
  uint64_t h = c.head.load(std::memory_order_relaxed);
  for (;;) {
    c.next[idx].store(static_cast<uint32_t>(h), std::memory_order_relaxed);
    uint64_t want = ((h >> 32) + 1) << 32 | (idx + 1);
    // release: the block's last use by its freer happens before the next
    // owner's first.
    if (c.head.compare_exchange_weak(h, want, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      return;
    }
  }
}

}  // namespace

std::atomic<uintptr_t> HandlerArena::base_{HandlerArena::kNoBase};
std::atomic<long> HandlerArena::in_use_{0};

void* HandlerArena::Allocate(size_t n) noexcept {
  BlockClass* c = n <= kSmallBlock   ? &g_classes[0]
                  : n <= kLargeBlock ? &g_classes[1]
                                     : nullptr;
  if (!c) return nullptr;
  uintptr_t base = base_.load(std::memory_order_acquire);
  if (base == kNoBase) {
    // The first allocation in a handler: mmap is async-signal-safe.
    int saved = errno;
    void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    errno = saved;
    if (m == MAP_FAILED) return nullptr;
    uintptr_t mine = reinterpret_cast<uintptr_t>(m);
    if (base_.compare_exchange_strong(base, mine, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      base = mine;
    } else {
      munmap(m, kBytes);  // another thread's mapping won; base is it
    }
  }
  long idx = Pop(*c);
  if (idx < 0) return nullptr;
  in_use_.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<void*>(base + c->offset +
                                 static_cast<size_t>(idx) * c->size);
}

void HandlerArena::Free(void* p) noexcept {
  size_t off =
      reinterpret_cast<uintptr_t>(p) - base_.load(std::memory_order_relaxed);
  BlockClass& c = off < kSmallBytes ? g_classes[0] : g_classes[1];
  in_use_.fetch_sub(1, std::memory_order_relaxed);
  Push(c, static_cast<uint32_t>((off - c.offset) / c.size));
}

}  // namespace uepoll::impl
