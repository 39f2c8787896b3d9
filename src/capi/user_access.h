// The kernel's checks of user pointers and lengths, as the C API makes
// them before handing buffers to the engine.
#ifndef UEPOLL_SRC_CAPI_USER_ACCESS_H_
#define UEPOLL_SRC_CAPI_USER_ACCESS_H_

#include <limits.h>
#include <stddef.h>

#include <cstdint>

namespace uepoll::impl {

// The kernel's access_ok() on x86-64: the range must lie below
// TASK_SIZE_MAX. NULL passes (it faults later, as in the kernel).
inline constexpr uintptr_t kTaskSizeMax = (uintptr_t{1} << 47) - 4096;
// MAX_RW_COUNT: reads and writes are clamped to this many bytes.
inline constexpr size_t kMaxRwCount = INT_MAX & ~size_t{4095};

inline bool AccessOk(const void* buf, size_t count) {
  auto addr = reinterpret_cast<uintptr_t>(buf);
  return count <= kTaskSizeMax && addr <= kTaskSizeMax - count;
}

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CAPI_USER_ACCESS_H_
