// The poll engine of uepoll_poll (capi/poll_api.cc), shared with ppoll and
// select/pselect (capi/select_api.cc).
#ifndef UEPOLL_SRC_CAPI_POLL_CORE_H_
#define UEPOLL_SRC_CAPI_POLL_CORE_H_

#include <poll.h>
#include <signal.h>
#include <time.h>

#include "base/deadline.h"

namespace uepoll::impl {

// do_sys_poll's check of nfds against RLIMIT_NOFILE: 0 or -EINVAL.
int CheckNfds(nfds_t n);

// poll(2) over fds[0..n), any mix of uepoll and kernel descriptors, after
// the nfds check: the number of entries with revents set, or -errno
// (EFAULT, ENOMEM, EINTR). `timeout` is what an array of kernel
// descriptors only is handed to ppoll (the remaining time of `deadline`);
// `mask` (or nullptr) is installed for the sleep.
int PollFds(pollfd* fds, nfds_t n, const Deadline& deadline,
            const timespec* timeout, const sigset_t* mask);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CAPI_POLL_CORE_H_
