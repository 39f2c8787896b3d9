// Probes: what the kernel's epoll_ctl would answer for a descriptor, asked
// without changing anything, where uepoll must give the kernel's errno for
// a call the kernel will not see (a uepoll object on one side of it).
//
// Each makes a short-lived descriptor of its own (an eventfd or an epoll)
// and closes it; errno is preserved.
#ifndef UEPOLL_SRC_KERNEL_PROBE_H_
#define UEPOLL_SRC_KERNEL_PROBE_H_

#include <sys/epoll.h>

namespace uepoll::impl {

// epoll_ctl on kernel descriptor epfd naming a uepoll target (which no
// kernel epoll can hold): the kernel's checks of epfd come first (EBADF for
// a closed number, a placeholder or a uepoll number being closed, EINVAL
// for a file that is not an epoll), then the target's, which a uepoll
// number fails with EPERM. `changing`: the number is in the middle of a
// uepoll close or dup2.
int KernelEpfdAnswer(int epfd, bool changing);

// epoll_ctl on a uepoll object that is not an instance, naming kernel
// descriptor fd: the kernel checks the target before the instance (EBADF,
// EPERM for a file it cannot poll), then refuses the instance (EINVAL).
int KernelTargetAnswer(int fd, const epoll_event& ev);

// The kernel's EBADF for a closed descriptor, else `otherwise`.
int ClosedOr(int fd, int otherwise);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_PROBE_H_
