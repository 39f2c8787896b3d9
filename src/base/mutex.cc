#include "base/mutex.h"

#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace uepoll::impl {
namespace {

// Spinning longer than a few hundred pauses only burns the core the holder
// may need (2 cores here); past that, sleep.
constexpr int kSpinLimit = 100;

long Futex(std::atomic<int>* addr, int op, int val) {
  return syscall(SYS_futex, reinterpret_cast<int*>(addr),
                 op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
}

}  // namespace

void Mutex::LockSlow() {
#ifndef NDEBUG
  // Held (the fast path failed) and by this very thread: it would sleep
  // forever.
  if (owner_.load(std::memory_order_relaxed) == Self()) ReportSelfDeadlock();
#endif
  for (int i = 0; i < kSpinLimit; ++i) {
    int s = state_.load(std::memory_order_relaxed);
    if (s == 0 && state_.compare_exchange_weak(s, 1, std::memory_order_acquire,
                                               std::memory_order_relaxed)) {
      return;
    }
    // Keep spinning even when somebody already sleeps: the holder's
    // critical sections are short, and sleeping costs two syscalls.
    CpuRelax();
  }
  // Announce a waiter (state 2) and sleep until the lock is seen free. The
  // exchange returning 0 means we took it (leaving 2: a spurious wake later
  // is harmless).
  while (state_.exchange(2, std::memory_order_acquire) != 0) {
    Futex(&state_, FUTEX_WAIT, 2);
  }
}

void Mutex::Wake() { Futex(&state_, FUTEX_WAKE, 1); }

#ifndef NDEBUG
void Mutex::ReportSelfDeadlock() {
  const char* (*context)() = deadlock_context_.load(std::memory_order_relaxed);
  fprintf(stderr,
          "uepoll: deadlock: this thread tries to take a uepoll lock it "
          "already holds%s\n",
          context ? context() : "");
  abort();
}
#endif

}  // namespace uepoll::impl
