// InodeIdentity: what fstat reports of a uepoll object that the kernel would
// take from the object's own inode (pipes: one for both ends, as the
// kernel's pipefs inode; sockets: one each, as sockfs). Everything else
// fstat reports is the kind's constant (capi/stat_api.cc).
//
// Filled lazily, the first time fstat or statx asks, except the creation
// time (a vDSO clock read when the object is made): an object nobody
// stats costs nothing more.
#ifndef UEPOLL_SRC_CORE_INODE_H_
#define UEPOLL_SRC_CORE_INODE_H_

#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace uepoll::impl {

struct InodeIdentity {
  static constexpr uint64_t kUnset = ~uint64_t{0};

  // st_ino, 0 until assigned (capi/stat_api.cc, StatInodeNumber).
  std::atomic<uint64_t> ino{0};
  // st_uid << 32 | st_gid once assigned, kUnset before.
  std::atomic<uint64_t> owner{kUnset};
  // st_atime, st_mtime and st_ctime (pipes: the kernel stamps the inode
  // at creation and, on pipefs, never again; sockets: zero).
  timespec created{0, 0};

  // The coarse realtime clock, as the kernel's current_time().
  void StampNow() { clock_gettime(CLOCK_REALTIME_COARSE, &created); }
};

// st_ino, assigned on first use: unique among uepoll objects and above
// every 32-bit number the kernel's get_next_ino gives pipefs and sockfs.
uint64_t InodeNumber(InodeIdentity* id);
// st_uid and st_gid: the caller's effective ids when first asked.
void InodeOwner(InodeIdentity* id, uid_t* uid, gid_t* gid);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_INODE_H_
