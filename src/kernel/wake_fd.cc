#include "kernel/wake_fd.h"

#include <errno.h>
#include <sys/eventfd.h>

#include <atomic>
#include <new>

#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/private_fd.h"
#include "base/sys.h"

namespace uepoll::impl {
namespace {

struct State {
  Mutex mu;
  // fd in the low 32 bits, generation in the high: one word, so that a
  // reader never pairs a number with another eventfd's generation.
  std::atomic<uint64_t> word{uint64_t{0xffffffffu}};
};

// Constant-initialized: no guard, no allocation. A fork child of a process
// that never made its eventfd then finds nothing to do (ForkChild), where a
// lazily allocated state would be made, in the child's copy of the heap, by
// every child (each page it touches a copy-on-write fault). Trivially
// destructible, so nothing runs at exit.
UEPOLL_FORK_DATA constinit State g_state;

State& S() { return g_state; }

WakeFd::Handle Unpack(uint64_t w) {
  WakeFd::Handle h;
  h.fd = static_cast<int32_t>(static_cast<uint32_t>(w));
  h.gen = static_cast<uint32_t>(w >> 32);
  return h;
}

uint64_t Pack(int fd, uint32_t gen) {
  return (uint64_t{gen} << 32) | static_cast<uint32_t>(fd);
}

}  // namespace

WakeFd::Handle WakeFd::Get() {
  State& s = S();
  Handle h = Unpack(s.word.load(std::memory_order_acquire));
  if (h.fd >= 0) return h;
  MutexLock l(s.mu);
  h = Unpack(s.word.load(std::memory_order_relaxed));
  if (h.fd >= 0) return h;
  int saved = errno;
  int fd = sys::Eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd >= 0) fd = MovePrivateFd(fd);
  errno = saved;
  if (fd < 0) return h;
  h.fd = fd;
  h.gen += 1;
  s.word.store(Pack(h.fd, h.gen), std::memory_order_release);
  return h;
}

void WakeFd::Lost(Handle h) {
  State& s = S();
  uint64_t expect = Pack(h.fd, h.gen);
  // Only the current one; the number is forgotten, never closed.
  s.word.compare_exchange_strong(expect, Pack(-1, h.gen),
                                 std::memory_order_acq_rel);
}

UEPOLL_FORK_PATH void WakeFd::ForkChild() {
  State& s = S();
  Handle h = Unpack(s.word.load(std::memory_order_relaxed));
  // Still ours here: no application code has run. Written only where it
  // changes (a write is a copy-on-write fault in the child).
  if (h.fd >= 0) {
    sys::Close(h.fd);
    s.word.store(Pack(-1, h.gen), std::memory_order_relaxed);
  }
  // The forking thread is the only one: a thread of the parent inside
  // Get() at the fork left the mutex held, with nobody to release it.
  if (s.mu.HeldAtFork()) new (&s.mu) Mutex();
}

}  // namespace uepoll::impl
