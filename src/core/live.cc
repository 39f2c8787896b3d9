#include "core/live.h"

#include <new>

namespace uepoll::impl {
namespace {

// Every slot ever made; pushed at the head, never removed or freed.
std::atomic<LiveSlot*> g_slots{nullptr};
// Counts of threads that could not get a slot of their own.
LiveSlot g_shared;

thread_local bool tl_live_exited = false;

// Hands the slot back, counts and all, when the thread exits.
struct LiveReleaser {
  bool armed = false;
  ~LiveReleaser() {
    if (tl_live_slot) {
      // Release: the next owner's plain increments continue from our
      // counts (its acquire CAS pairs with this store).
      tl_live_slot->in_use.store(false, std::memory_order_release);
      tl_live_slot = nullptr;
    }
    tl_live_exited = true;
  }
};
thread_local LiveReleaser tl_live_releaser;

}  // namespace

LiveSlot* AcquireLiveSlot() {
  // After the thread's releaser ran (a count from a later thread_local
  // destructor): the shared slot, not a slot that nobody would release.
  if (tl_live_exited) return nullptr;
  tl_live_releaser.armed = true;  // constructs it, so its destructor runs
  for (LiveSlot* s = g_slots.load(std::memory_order_acquire); s; s = s->next) {
    bool expected = false;
    if (!s->in_use.load(std::memory_order_relaxed) &&
        s->in_use.compare_exchange_strong(expected, true,
                                          std::memory_order_acquire)) {
      return tl_live_slot = s;
    }
  }
  // Not through Allocate(): slots are process infrastructure, made once per
  // concurrent thread and kept, not an allocation of the call that happens
  // to make one (the allocation-failure tests count per call).
  auto* s = new (std::nothrow) LiveSlot;
  if (!s) return nullptr;
  s->in_use.store(true, std::memory_order_relaxed);
  LiveSlot* head = g_slots.load(std::memory_order_relaxed);
  do {
    s->next = head;
  } while (!g_slots.compare_exchange_weak(head, s, std::memory_order_release,
                                          std::memory_order_relaxed));
  return tl_live_slot = s;
}

void Live::AddShared(Which w, long d) {
  g_shared.n[w].fetch_add(d, std::memory_order_relaxed);
}

LiveCounts Live::Sum() {
  long n[4] = {};
  auto add = [&](const LiveSlot& s) {
    for (int i = 0; i < 4; ++i) n[i] += s.n[i].load(std::memory_order_relaxed);
  };
  add(g_shared);
  for (LiveSlot* s = g_slots.load(std::memory_order_acquire); s; s = s->next)
    add(*s);
  LiveCounts c;
  c.files = n[files];
  c.items = n[items];
  c.descriptors = n[descriptors];
  c.instances = n[instances];
  return c;
}

}  // namespace uepoll::impl
