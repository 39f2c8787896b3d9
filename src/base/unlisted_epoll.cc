#include "base/unlisted_epoll.h"

#include "base/mutex.h"

namespace uepoll::impl {
namespace {

// Scopes this thread has open (a signal handler may nest inside one).
__thread int t_open_scopes __attribute__((tls_model("initial-exec")));

}  // namespace

std::atomic<uint64_t> UnlistedEpolls::started_{0};
std::atomic<uint64_t> UnlistedEpolls::done_{0};

UnlistedEpolls::Scope::Scope(bool counts) : counts_(counts) {
  if (!counts_) return;
  ++t_open_scopes;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // seq_cst, before the epoll is made: a thread that found the epoll (by
  // a system call on its number, after the one that made it) reads a
  // started_ that counts this scope.
  started_.fetch_add(1, std::memory_order_seq_cst);
}

UnlistedEpolls::Scope::~Scope() {
  if (!counts_) return;
  // After the table lists the number (or the epoll left it).
  done_.fetch_add(1, std::memory_order_seq_cst);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  --t_open_scopes;
}

bool UnlistedEpolls::WaitSince(uint64_t mark) {
  // done_ was `mark` at the look-up. If started_ is still `mark` now, no
  // scope was open then (started_ >= done_) and none opened since, so the
  // epoll the caller found was made by a scope that had closed before its
  // look-up: the table listed it then, or the number has changed since.
  uint64_t started = started_.load(std::memory_order_seq_cst);
  if (started == mark || t_open_scopes != 0) return false;
  // Scopes are short (a few system calls, no sleep): wait for the count
  // to catch up with those opened by now. A scope opened later may close
  // first; the caller's next look-up checks again.
  for (int spins = 0; done_.load(std::memory_order_seq_cst) < started;
       ++spins) {
    Backoff(spins);
  }
  return true;
}

}  // namespace uepoll::impl
