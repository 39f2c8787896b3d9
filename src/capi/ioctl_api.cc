// uepoll_ioctl: do_vfs_ioctl's generic commands on a uepoll descriptor,
// then the object's own (File::Ioctl: pipes FIONREAD, sockets SIOCINQ /
// SIOCOUTQ / SIOCATMARK, instances EPIOCSPARAMS / EPIOCGPARAMS); anything
// else is what the kernel answers for a file without that command (ENOTTY,
// EINVAL for an instance). A kernel descriptor goes to libc.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>

#include <cstdint>
#include <cstring>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "capi/user_access.h"
#include "core/fd_table.h"
#include "core/io_iter.h"

namespace uepoll::impl {
namespace {

// The kernel's struct epoll_params and its ioctls (<linux/eventpoll.h>,
// Linux 6.9+; not in every libc's headers).
struct EpollParamsAbi {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad;
};
constexpr unsigned long kEpiocSParams = 0x40088a01;  // _IOW(0x8A, 1, ...)
constexpr unsigned long kEpiocGParams = 0x80088a02;  // _IOR(0x8A, 2, ...)

// get_user of an int argument.
int GetInt(unsigned long arg, int* v) {
  auto* p = reinterpret_cast<const void*>(arg);
  if (UserFault(p) || !AccessOk(p, sizeof(int))) return -EFAULT;
  std::memcpy(v, p, sizeof *v);
  return 0;
}

// ep_eventpoll_ioctl: the parameters, through the uepoll_params calls
// (which keep the instance's min_wait); any other command is EINVAL.
int EpollIoctl(int fd, unsigned long cmd, unsigned long arg) {
  auto* p = reinterpret_cast<void*>(arg);
  uepoll_params cur{};
  if (cmd == kEpiocGParams) {
    if (uepoll_epoll_get_params(fd, &cur) != 0) return -errno;
    if (UserFault(p) || !AccessOk(p, sizeof(EpollParamsAbi))) return -EFAULT;
    EpollParamsAbi out{cur.busy_poll_usecs, cur.busy_poll_budget,
                       cur.prefer_busy_poll, 0};
    std::memcpy(p, &out, sizeof out);
    return 0;
  }
  if (cmd != kEpiocSParams) return -EINVAL;
  if (UserFault(p) || !AccessOk(p, sizeof(EpollParamsAbi))) return -EFAULT;
  EpollParamsAbi in;
  std::memcpy(&in, p, sizeof in);
  if (uepoll_epoll_get_params(fd, &cur) != 0) return -errno;
  cur.busy_poll_usecs = in.busy_poll_usecs;
  cur.busy_poll_budget = in.busy_poll_budget;
  cur.prefer_busy_poll = in.prefer_busy_poll;
  cur.pad = in.pad;
  if (uepoll_epoll_set_params(fd, &cur) != 0) return -errno;
  return 0;
}

int Ioctl(int fd, File* f, unsigned long cmd, unsigned long arg) {
  switch (cmd) {
    case FIOCLEX:
      return FdTable::Get().SetFdFlags(fd, FD_CLOEXEC);
    case FIONCLEX:
      return FdTable::Get().SetFdFlags(fd, 0);
    case FIONBIO: {  // ioctl_fionbio: flips O_NONBLOCK directly
      int on;
      if (int err = GetInt(arg, &on)) return err;
      uint32_t flags = f->flags();
      f->set_flags(on ? flags | O_NONBLOCK : flags & ~uint32_t{O_NONBLOCK});
      return 0;
    }
    case FIOASYNC: {  // ioctl_fioasync (core/sigio.h)
      int on;
      if (int err = GetInt(arg, &on)) return err;
      // Only a change calls the kind's fasync; a kind without one refuses
      // it (ENOTTY).
      if (!on == !(f->flags() & O_ASYNC)) return 0;
      return f->Fasync(fd, on != 0);
    }
    case FIOQSIZE:  // regular files, directories and links only
      return -ENOTTY;
    default:
      break;
  }
  if (f->is_epoll()) return EpollIoctl(fd, cmd, arg);
  return f->Ioctl(cmd, arg);
}

}  // namespace
}  // namespace uepoll::impl

extern "C" int uepoll_ioctl(int fd, unsigned long request, ...) {
  // Every ioctl argument is an int, a long or a pointer: one register.
  va_list ap;
  va_start(ap, request);
  unsigned long arg = va_arg(ap, unsigned long);
  va_end(ap);
  uepoll::impl::FileRef f = uepoll::impl::FdTable::Get().Lookup(fd);
  if (!f) return uepoll::impl::sys::Ioctl(fd, request, arg);
  return uepoll::impl::ToErrno(uepoll::impl::Ioctl(fd, f.get(), request, arg));
}
