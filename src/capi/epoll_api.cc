// uepoll_epoll_*: argument checks in the kernel's order, then the engine.
#include <errno.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"

using uepoll::impl::Deadline;
using uepoll::impl::kNotUepoll;
namespace sys = uepoll::impl::sys;
using uepoll::impl::ToErrno;
using uepoll::impl::WaitArgs;

namespace {

bool BadTimespec(const timespec *t) {
  return t->tv_sec < 0 || t->tv_nsec < 0 || t->tv_nsec >= 1000000000L;
}

WaitArgs Args(Deadline d, const sigset_t *mask) {
  WaitArgs a;
  a.deadline = d;
  a.sigmask = mask;
  return a;
}

// capable(CAP_NET_ADMIN), which the kernel asks for busy_poll_budget > 64.
bool HasNetAdmin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32));
}

// EPIOCSPARAMS / EPIOCGPARAMS on a kernel descriptor (Linux 6.9+), with
// the kernel's own validation; min_wait_ns has no kernel counterpart.
struct KernelEpollParams {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad;
};
constexpr unsigned long kEpiocSParams = _IOW(0x8A, 0x01, KernelEpollParams);
constexpr unsigned long kEpiocGParams = _IOR(0x8A, 0x02, KernelEpollParams);

int KernelSetParams(int epfd, const struct uepoll_params *params) {
  if (!params) {
    return ::ioctl(epfd, kEpiocSParams,
                   static_cast<KernelEpollParams *>(nullptr));
  }
  KernelEpollParams k{params->busy_poll_usecs, params->busy_poll_budget,
                      params->prefer_busy_poll, params->pad};
  if (params->min_wait_ns) {
    // Validate the descriptor first, as the ioctl would.
    KernelEpollParams cur{};
    if (::ioctl(epfd, kEpiocGParams, &cur) != 0) return -1;
    return ToErrno(-EINVAL);
  }
  return ::ioctl(epfd, kEpiocSParams, &k);
}

int KernelGetParams(int epfd, struct uepoll_params *params) {
  KernelEpollParams k{};
  int r = ::ioctl(epfd, kEpiocGParams, params ? &k : nullptr);
  if (r != 0 || !params) return r;
  params->busy_poll_usecs = k.busy_poll_usecs;
  params->busy_poll_budget = k.busy_poll_budget;
  params->prefer_busy_poll = k.prefer_busy_poll;
  params->pad = 0;
  params->min_wait_ns = 0;
  return 0;
}

}  // namespace

extern "C" {

int uepoll_epoll_create(int size) {
  if (size <= 0) return ToErrno(-EINVAL);
  return ToErrno(uepoll::impl::EpollCreate(0));
}

int uepoll_epoll_create1(int flags) {
  return ToErrno(uepoll::impl::EpollCreate(flags));
}

int uepoll_epoll_make_watchable(int epfd) {
  return ToErrno(uepoll::impl::EpollMakeWatchable(epfd));
}

int uepoll_epoll_ctl(int epfd, int op, int fd, struct epoll_event *event) {
  int r = uepoll::impl::EpollCtl(epfd, op, fd, event);
  if (r == kNotUepoll) return sys::EpollCtl(epfd, op, fd, event);
  return ToErrno(r);
}

int uepoll_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                      int timeout) {
  int r = uepoll::impl::EpollWait(epfd, events, maxevents,
                                  Args(Deadline::FromMillis(timeout), nullptr));
  if (r == kNotUepoll) {
    return sys::EpollPwait(epfd, events, maxevents, timeout, nullptr);
  }
  return ToErrno(r);
}

int uepoll_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
                       int timeout, const sigset_t *sigmask) {
  int r = uepoll::impl::EpollWait(epfd, events, maxevents,
                                  Args(Deadline::FromMillis(timeout), sigmask));
  if (r == kNotUepoll) {
    return sys::EpollPwait(epfd, events, maxevents, timeout, sigmask);
  }
  return ToErrno(r);
}

int uepoll_epoll_pwait2(int epfd, struct epoll_event *events, int maxevents,
                        const struct timespec *timeout,
                        const sigset_t *sigmask) {
  Deadline d = Deadline::Infinite();
  if (timeout) {
    // Validated before the descriptor, as the kernel does.
    if (BadTimespec(timeout)) return ToErrno(-EINVAL);
    d = Deadline::FromTimespec(*timeout);
  }
  int r = uepoll::impl::EpollWait(epfd, events, maxevents, Args(d, sigmask));
  if (r == kNotUepoll) {
    return sys::EpollPwait2(epfd, events, maxevents, timeout, sigmask);
  }
  return ToErrno(r);
}

int uepoll_epoll_pwait3(int epfd, struct epoll_event *events, int maxevents,
                        const struct uepoll_wait_args *args) {
  if (!args) return ToErrno(-EFAULT);
  if (args->flags) return ToErrno(-EINVAL);
  Deadline d = Deadline::Infinite();
  if (args->timeout) {
    if (BadTimespec(args->timeout)) return ToErrno(-EINVAL);
    d = Deadline::FromTimespec(*args->timeout);
  }
  WaitArgs a = Args(d, args->sigmask);
  // Saturate: a minimum wait beyond INT64_MAX ns is "until the timeout".
  a.min_wait_ns = args->min_wait_ns > uint64_t{INT64_MAX}
                      ? INT64_MAX
                      : static_cast<int64_t>(args->min_wait_ns);
  int r = uepoll::impl::EpollWait(epfd, events, maxevents, a);
  if (r == kNotUepoll) {
    // A kernel epoll instance has no minimum wait to give (semantics.md).
    if (args->min_wait_ns) return ToErrno(-EOPNOTSUPP);
    return sys::EpollPwait2(epfd, events, maxevents, args->timeout,
                            args->sigmask);
  }
  return ToErrno(r);
}

int uepoll_epoll_set_params(int epfd, const struct uepoll_params *params) {
  uepoll::impl::EpollParams current;
  // The ioctl's order: the descriptor, its kind, then the argument.
  int r = uepoll::impl::EpollGetParams(epfd, &current);
  if (r == kNotUepoll) return KernelSetParams(epfd, params);
  if (r < 0) return ToErrno(r);
  if (!params) return ToErrno(-EFAULT);
  if (params->pad) return ToErrno(-EINVAL);
  if (params->busy_poll_usecs > uint32_t{INT32_MAX}) return ToErrno(-EINVAL);
  if (params->prefer_busy_poll > 1) return ToErrno(-EINVAL);
  if (params->busy_poll_budget > 64 && !HasNetAdmin()) return ToErrno(-EPERM);
  uepoll::impl::EpollParams p;
  p.busy_poll_usecs = params->busy_poll_usecs;
  p.busy_poll_budget = params->busy_poll_budget;
  p.prefer_busy_poll = params->prefer_busy_poll;
  p.min_wait_ns = params->min_wait_ns;
  return ToErrno(uepoll::impl::EpollSetParams(epfd, p));
}

int uepoll_epoll_get_params(int epfd, struct uepoll_params *params) {
  uepoll::impl::EpollParams p;
  int r = uepoll::impl::EpollGetParams(epfd, &p);
  if (r == kNotUepoll) return KernelGetParams(epfd, params);
  if (r < 0) return ToErrno(r);
  if (!params) return ToErrno(-EFAULT);
  params->busy_poll_usecs = p.busy_poll_usecs;
  params->busy_poll_budget = p.busy_poll_budget;
  params->prefer_busy_poll = p.prefer_busy_poll;
  params->pad = 0;
  params->min_wait_ns = p.min_wait_ns;
  return 0;
}

}  // extern "C"
