// Several threads each making one epoll_wait on an instance, for tests of
// which blocked waiters an event wakes (tests/threads/wakeup_test.cc and
// its kernel-source twin, tests/bridge/wakeup_test.cc): who returned, and
// who returned what.
#ifndef UEPOLL_TESTS_THREADS_WAITER_GROUP_H_
#define UEPOLL_TESTS_THREADS_WAITER_GROUP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "support/backend.h"
#include "threads/waiter.h"

namespace uepoll_test {

using Waiters = std::vector<std::unique_ptr<Waiter>>;

// A waiter making one epoll_wait on ep (maxevents max, bounded timeout).
inline std::unique_ptr<Waiter> StartEpollWaiter(const Backend& b, int ep,
                                                int max = 1) {
  const Backend* bp = &b;
  return std::make_unique<Waiter>([bp, ep, max](epoll_event* ev) {
    return bp->epoll_wait(ep, ev, max, kWaitMs);
  });
}

inline Waiters StartEpollWaiters(const Backend& b, int n, int ep) {
  Waiters ws;
  for (int i = 0; i < n; ++i) ws.push_back(StartEpollWaiter(b, ep));
  return ws;
}

inline int CountDone(const Waiters& ws) {
  int n = 0;
  for (auto& w : ws) n += w->Done();
  return n;
}

// How many finished waiters returned exactly one event carrying data.
inline int CountGot(const Waiters& ws, uint64_t data) {
  int n = 0;
  for (auto& w : ws) {
    n += w->Done() && w->result() == 1 && w->event(0).data.u64 == data;
  }
  return n;
}

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_THREADS_WAITER_GROUP_H_
