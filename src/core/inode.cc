#include "core/inode.h"

#include <unistd.h>

namespace uepoll::impl {
namespace {

// The next inode number: above every 32-bit number the kernel's
// get_next_ino hands pipefs and sockfs.
std::atomic<uint64_t> g_next_ino{uint64_t{1} << 32};

}  // namespace

uint64_t InodeNumber(InodeIdentity* id) {
  uint64_t ino = id->ino.load(std::memory_order_acquire);
  if (ino) return ino;
  uint64_t fresh = g_next_ino.fetch_add(1, std::memory_order_relaxed) + 1;
  // The first number assigned wins; a racing caller's is skipped.
  if (id->ino.compare_exchange_strong(ino, fresh, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
    return fresh;
  }
  return ino;
}

// The inode's ids: the caller's effective ids when first asked.
void InodeOwner(InodeIdentity* id, uid_t* uid, gid_t* gid) {
  uint64_t o = id->owner.load(std::memory_order_acquire);
  if (o == InodeIdentity::kUnset) {
    uint64_t fresh = (uint64_t{geteuid()} << 32) | getegid();
    if (id->owner.compare_exchange_strong(o, fresh, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
      o = fresh;
    }
  }
  *uid = static_cast<uid_t>(o >> 32);
  *gid = static_cast<gid_t>(o & 0xffffffffu);
}

}  // namespace uepoll::impl
