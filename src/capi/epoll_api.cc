// uepoll_epoll_*: argument checks in the kernel's order, then the engine.
#include <errno.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "base/caps.h"
#include "base/sys.h"
#include "base/unlisted_epoll.h"
#include "capi/errors.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "kernel/probe.h"

using uepoll::impl::Deadline;
using uepoll::impl::Eventpoll;
using uepoll::impl::FdTable;
using uepoll::impl::File;
using uepoll::impl::FileBorrow;
using uepoll::impl::FileRef;
using uepoll::impl::kEpPrivateBits;
using uepoll::impl::KernelEpfdAnswer;
using uepoll::impl::KernelTargetAnswer;
using uepoll::impl::kNotUepoll;
namespace sys = uepoll::impl::sys;
using uepoll::impl::ToErrno;
using uepoll::impl::UnlistedEpolls;
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
bool HasNetAdmin() { return uepoll::impl::HasCapability(CAP_NET_ADMIN); }

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
    return sys::Ioctl(epfd, kEpiocSParams, 0);
  }
  KernelEpollParams k{params->busy_poll_usecs, params->busy_poll_budget,
                      params->prefer_busy_poll, params->pad};
  if (params->min_wait_ns) {
    // Validate the descriptor first, as the ioctl would.
    KernelEpollParams cur{};
    if (sys::Ioctl(epfd, kEpiocGParams,
                   reinterpret_cast<unsigned long>(&cur)) != 0) {
      return -1;
    }
    return ToErrno(-EINVAL);
  }
  return sys::Ioctl(epfd, kEpiocSParams, reinterpret_cast<unsigned long>(&k));
}

int KernelGetParams(int epfd, struct uepoll_params *params) {
  KernelEpollParams k{};
  int r = sys::Ioctl(epfd, kEpiocGParams,
                     reinterpret_cast<unsigned long>(params ? &k : nullptr));
  if (r != 0 || !params) return r;
  params->busy_poll_usecs = k.busy_poll_usecs;
  params->busy_poll_budget = k.busy_poll_budget;
  params->prefer_busy_poll = k.prefer_busy_poll;
  params->pad = 0;
  params->min_wait_ns = 0;
  return 0;
}

// The only bits EPOLLEXCLUSIVE may come with (EPOLLEXCLUSIVE_OK_BITS).
constexpr uint32_t kExclusiveOkBits = EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP |
                                      EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;

// epoll_ctl's checks, in the kernel's order (do_epoll_ctl), then the
// engine: a kernel descriptor goes to the instance's kernel half, a uepoll
// one to Eventpoll::Ctl.
//
// kLookAgain: the number was looked up in a moment it held an unlisted
// epoll; the caller asks again.
constexpr int kLookAgain = INT_MIN + 1;

int EpollCtlOnce(int epfd, int op, int fd, const epoll_event *event) {
  FdTable &t = FdTable::Get();
  uint64_t unlisted = UnlistedEpolls::Mark();
  // Borrows: ctl never sleeps but on mutexes, so closers wait briefly.
  FileBorrow f = t.Borrow(epfd);
  if (!f) {
    // A kernel epfd: the kernel's call, unless the target is uepoll's,
    // which no kernel instance can watch (its kernel file is a placeholder,
    // or the kernel half of an instance, which alone would misreport it).
    if (t.IsOpen(fd)) {
      // A watchable instance's number is a kernel epoll that reports
      // exactly its readiness (watchable.cc): the kernel's call.
      FileRef tf = t.Lookup(fd);
      if (tf && tf->is_epoll() &&
          static_cast<Eventpoll *>(tf.get())->watchable()) {
        return kNotUepoll;
      }
      if (op != EPOLL_CTL_DEL && !event) return -EFAULT;
      int r = KernelEpfdAnswer(epfd, t.Changing(epfd));
      // EPERM: epfd is a kernel epoll. One of uepoll's own, in the moment
      // before its number is listed (an instance being created there),
      // is the instance: look again once it is (base/unlisted_epoll.h).
      if (r == -EPERM && UnlistedEpolls::WaitSince(unlisted)) {
        return kLookAgain;
      }
      return r;
    }
    return kNotUepoll;
  }
  epoll_event ev{};
  if (op != EPOLL_CTL_DEL) {
    if (!event) return -EFAULT;
    ev = *event;
  }
  // The min_wait patch's op checks the instance only: fd is not looked up.
  if (op == UEPOLL_EPOLL_CTL_MIN_WAIT) {
    if (!f->is_epoll()) return -EINVAL;
    return static_cast<Eventpoll *>(f.get())->Ctl(op, nullptr, fd, ev);
  }
  FileBorrow tf = t.Borrow(fd);
  if (!tf) {
    // A kernel descriptor: into an instance's kernel half.
    if (f->is_epoll()) {
      auto *ep = static_cast<Eventpoll *>(f.get());
      int r = ep->CtlKernel(op, fd, op == EPOLL_CTL_DEL ? nullptr : &ev);
      // The kernel epoll it added may have been an instance's kernel half
      // in the moment before the table listed the instance at fd
      // (base/unlisted_epoll.h). If fd names an instance now and its
      // kernel half is what was added (the DEL finds it), take that back
      // and add the instance, as a look-up after its create would have.
      // A DEL that finds nothing: the ADD took a kernel file that was at
      // fd before, and stands.
      if (r == 0 && op == EPOLL_CTL_ADD &&
          UnlistedEpolls::WaitSince(unlisted)) {
        FileBorrow now = t.Borrow(fd);
        if (now && now->is_epoll() &&
            ep->CtlKernel(EPOLL_CTL_DEL, fd, nullptr) == 0) {
          return kLookAgain;
        }
      }
      return r;
    }
    // Not an instance: the kernel checks the target first (EBADF, EPERM).
    return KernelTargetAnswer(fd, ev);
  }
  // Every uepoll object can be polled, so the kernel's EPERM never arises.
  if (f.get() == tf.get() || !f->is_epoll()) return -EINVAL;
  if (op != EPOLL_CTL_DEL && (ev.events & EPOLLEXCLUSIVE)) {
    if (op == EPOLL_CTL_MOD) return -EINVAL;
    if (op == EPOLL_CTL_ADD &&
        (tf->is_epoll() || (ev.events & ~kExclusiveOkBits))) {
      return -EINVAL;
    }
  }
  return static_cast<Eventpoll *>(f.get())->Ctl(op, tf.get(), fd, ev);
}

int EpollCtl(int epfd, int op, int fd, const epoll_event *event) {
  for (;;) {
    int r = EpollCtlOnce(epfd, op, fd, event);
    if (r != kLookAgain) return r;
  }
}

// epoll_wait's checks (do_epoll_wait) on the file the number named, then
// the engine.
int WaitOn(const FileBorrow &f, epoll_event *events, int maxevents,
           const WaitArgs &args) {
  constexpr int kMaxEvents = INT32_MAX / static_cast<int>(sizeof(epoll_event));
  if (maxevents <= 0 || maxevents > kMaxEvents) return -EINVAL;
  if (!f->is_epoll()) return -EINVAL;
  // A NULL array faults only when an event is copied out (SendEvents).
  return static_cast<Eventpoll *>(f.get())->Wait(events, maxevents, args);
}

int EpollWait(int epfd, epoll_event *events, int maxevents,
              const WaitArgs &args) {
  FdTable &t = FdTable::Get();
  // A borrow, not a reference: many threads wait on one instance, and a
  // reference would make them all write to its refs_ line on every call.
  // Wait pins the borrow before it sleeps or spins.
  if (FileBorrow f = t.Borrow(epfd)) return WaitOn(f, events, maxevents, args);
  // A number being closed or replaced right now is looked up again once
  // that is done: the kernel's wait on what it still names there (an
  // instance's kernel half) would sleep through the instance's events
  // (FdTable::WaitUnchanged).
  while (t.WaitUnchanged(epfd)) {
    if (FileBorrow f = t.Borrow(epfd))
      return WaitOn(f, events, maxevents, args);
  }
  return kNotUepoll;
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
  int r = EpollCtl(epfd, op, fd, event);
  if (r == kNotUepoll) return sys::EpollCtl(epfd, op, fd, event);
  return ToErrno(r);
}

int uepoll_epoll_wait(int epfd, struct epoll_event *events, int maxevents,
                      int timeout) {
  int r = EpollWait(epfd, events, maxevents,
                    Args(Deadline::FromMillis(timeout), nullptr));
  if (r == kNotUepoll) {
    return sys::EpollPwait(epfd, events, maxevents, timeout, nullptr);
  }
  return ToErrno(r);
}

int uepoll_epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
                       int timeout, const sigset_t *sigmask) {
  int r = EpollWait(epfd, events, maxevents,
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
  int r = EpollWait(epfd, events, maxevents, Args(d, sigmask));
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
  int r = EpollWait(epfd, events, maxevents, a);
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
