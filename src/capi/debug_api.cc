// uepoll/debug.h: live-object counts and the descriptor limit.
#include <uepoll/debug.h>

#include "base/alloc.h"
#include "capi/errors.h"
#include "core/fd_table.h"
#include "core/live.h"

using uepoll::impl::FdTable;
using uepoll::impl::Live;

extern "C" {

int uepoll_debug_live_counts(struct uepoll_live_counts *out) {
  if (!out) return uepoll::impl::ToErrno(-EFAULT);
  // Exact when the process is quiescent (core/live.h).
  uepoll::impl::LiveCounts c = Live::Sum();
  out->files = c.files;
  out->items = c.items;
  out->descriptors = c.descriptors;
  out->instances = c.instances;
  return 0;
}

long uepoll_debug_set_fd_limit(long limit) {
  return uepoll::impl::ToErrno(FdTable::Get().SetLimit(limit));
}

long uepoll_debug_fd_capacity(void) { return FdTable::kCapacity; }

int uepoll_debug_fail_alloc(long n) {
  if (n < 0) return uepoll::impl::ToErrno(-EINVAL);
  uepoll::impl::g_alloc_fail_countdown.store(n, std::memory_order_relaxed);
  return 0;
}

long uepoll_debug_alloc_count(void) {
  return uepoll::impl::g_alloc_count.load(std::memory_order_relaxed);
}

long uepoll_debug_handler_blocks(void) {
  return uepoll::impl::HandlerArena::InUse();
}

}  // extern "C"
