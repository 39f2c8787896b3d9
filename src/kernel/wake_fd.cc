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

State& S() {
  static State* s = new State;  // never destroyed
  return *s;
}

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
  // The forking thread is the only one: the mutex cannot be held by a
  // thread of the child unless the fork came from inside Get(), which
  // calls no fork. Still ours here: no application code has run.
  if (h.fd >= 0) sys::Close(h.fd);
  s.word.store(Pack(-1, h.gen), std::memory_order_relaxed);
  new (&s.mu) Mutex();
}

}  // namespace uepoll::impl
