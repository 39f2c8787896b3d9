// Capabilities of the calling thread, for the few checks where the kernel's
// answer depends on one (capable()): growing a pipe beyond
// fs.pipe-max-size (CAP_SYS_RESOURCE), SCM_CREDENTIALS naming another
// process or user (CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID), a busy-poll
// budget above 64 (CAP_NET_ADMIN), an alarm timer (CAP_WAKE_ALARM).
//
// One capget syscall per question: these are rare control paths, never an
// I/O path. Capabilities can change at any time (capset), so nothing is
// cached.
#ifndef UEPOLL_SRC_BASE_CAPS_H_
#define UEPOLL_SRC_BASE_CAPS_H_

#include <errno.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include "base/sys.h"

namespace uepoll::impl {

// Whether `cap` (CAP_*) is in the thread's effective set. False if the
// kernel does not answer.
// errno is preserved.
inline bool HasCapability(int cap) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  int saved = errno;
  bool ok = sys::Syscall(SYS_capget, reinterpret_cast<long>(&hdr),
                         reinterpret_cast<long>(data), 0, 0, 0, 0) == 0;
  errno = saved;
  if (!ok) return false;
  int word = cap / 32;
  if (word >= _LINUX_CAPABILITY_U32S_3) return false;
  return (data[word].effective >> (cap % 32)) & 1u;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_CAPS_H_
