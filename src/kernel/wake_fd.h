// WakeFd: the process's one always-readable eventfd, which kernel epolls
// of uepoll instances register to wake their sleepers (kernel/
// kernel_half.h, "tokens").
//
// Its count is 1 from creation and nobody reads or writes it, so it is
// readable forever. A kernel half registers it edge-triggered with events
// 0; an EPOLL_CTL_MOD of that registration to EPOLLIN|EPOLLET makes the
// kernel poll it, find it ready and queue it, waking one thread asleep in
// epoll_wait on that kernel epoll: a wakeup of exactly one instance, one
// syscall, with no per-instance descriptor. The MOD also proves that the
// number still names our eventfd inside that epoll (the registration is
// keyed by file and number), so a number the application closed and
// reused is never touched: the MOD fails, the user calls Lost(), and the
// next Get() makes a new one (docs/semantics.md D19).
//
// fork(): the child gets a new one (ForkChild, called by the kernel half's
// atfork child handler while the numbers are still certainly ours), so
// that a child's close of the inherited number cannot leave registrations
// of the parent's file in the child's epolls.
//
// Thread safety: the number and its generation are atomics; creation is
// serialized by a mutex taken with no other lock held... or under an
// instance's lock_, which is innermost: the mutex here is a leaf below it.
#ifndef UEPOLL_SRC_KERNEL_WAKE_FD_H_
#define UEPOLL_SRC_KERNEL_WAKE_FD_H_

#include <cstdint>

namespace uepoll::impl {

class WakeFd {
 public:
  struct Handle {
    int fd = -1;       // -1: none could be made (out of descriptors)
    uint32_t gen = 0;  // bumped at every new eventfd
  };
  // The current eventfd, made on first use.
  static Handle Get();
  // The registration of h.fd failed its identity check: the number is no
  // longer ours. Forgets it (never closes it) if it is still the current.
  static void Lost(Handle h);
  // In a fork child, before any application code: a new eventfd.
  static void ForkChild();
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_WAKE_FD_H_
