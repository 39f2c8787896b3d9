#include "core/sigio.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstring>

#include "base/sys.h"
#include "core/borrow.h"
#include "core/io_iter.h"

namespace uepoll::impl {
namespace {

// The kernel's F_GETOWNER_UIDS (fcntl.h does not name it in every libc).
constexpr int kGetOwnerUids = 17;

// find_vpid(pid) != NULL: some task, thread group or process group has
// that number. EPERM still means it exists.
bool PidExists(pid_t pid) {
  if (kill(pid, 0) == 0 || errno == EPERM) return true;
  return kill(-pid, 0) == 0 || errno == EPERM;
}

// f_modown: the new owner, with the caller's ids when there is one.
int SetOwner(File* f, int type, pid_t pid) {
  FileOwner* o = f->MakeOwner();
  if (!o) return -ENOMEM;
  uid_t uid = pid ? getuid() : 0;
  uid_t euid = pid ? geteuid() : 0;
  MutexLock l(o->mu);
  o->state.type = type;
  o->state.pid = pid;
  if (pid) {
    o->state.uid = uid;
    o->state.euid = euid;
  }
  return 0;
}

FileOwner::State OwnerOf(File* f) {
  FileOwner* o = f->owner();
  return o ? o->Get() : FileOwner::State{};
}

// The signals for which POSIX defines si_codes of their own: a queued
// signal of that kind says SI_SIGIO instead of POLL_* (send_sigio_to_task).
bool SigSpecificSicodes(int sig) {
  switch (sig) {
    case SIGILL:
    case SIGFPE:
    case SIGSEGV:
    case SIGBUS:
    case SIGTRAP:
    case SIGCHLD:
    case SIGPOLL:
    case SIGSYS:
      return true;
    default:
      return false;
  }
}

// band_table, in the poll bits user space sees (mangle_poll).
long BandBits(int reason) {
  switch (reason) {
    case POLL_IN:
      return POLLIN | POLLRDNORM;
    case POLL_OUT:
      return POLLOUT | POLLWRNORM | POLLWRBAND;
    case POLL_MSG:
      return POLLIN | POLLRDNORM | POLLMSG;
    case POLL_ERR:
      return POLLERR;
    case POLL_PRI:
      return POLLPRI | POLLRDBAND;
    case POLL_HUP:
      return POLLHUP | POLLERR;
    default:
      return ~0L;
  }
}

// do_send_sig_info for owner o: 0 if queued.
int Queue(const FileOwner::State& o, int sig, siginfo_t* si) {
  pid_t self = getpid();
  long r;
  switch (o.type) {
    case F_OWNER_TID:  // one thread (group 0), of this process only
      r = sys::Syscall(SYS_rt_tgsigqueueinfo, self, o.pid, sig,
                       reinterpret_cast<long>(si), 0, 0);
      // A thread of another process: tkill (SI_TKILL) is what reaches it.
      if (r != 0 && errno == ESRCH) {
        r = sys::Syscall(SYS_tkill, o.pid, sig, 0, 0, 0, 0);
      }
      return r == 0 ? 0 : -errno;
    case F_OWNER_PGRP:
      return kill(-o.pid, sig) == 0 ? 0 : -errno;
    default:
      if (o.pid == self) {
        r = sys::Syscall(SYS_rt_sigqueueinfo, self, sig,
                         reinterpret_cast<long>(si), 0, 0, 0);
        return r == 0 ? 0 : -errno;
      }
      return kill(o.pid, sig) == 0 ? 0 : -errno;
  }
}

// send_sigio: the F_SETSIG signal with its siginfo, or plain SIGIO (also
// when that one cannot be queued).
void SendSigio(const FileOwner::State& o, int fd, int reason) {
  if (o.pid == 0) return;
  // A handler may close the descriptor the interrupted call uses (as for
  // SIGPIPE, io_wait.h): its borrow must not make that close wait.
  PinBorrowed();
  int saved = errno;
  siginfo_t si;
  if (o.signum != 0) {
    std::memset(&si, 0, sizeof si);
    si.si_signo = o.signum;
    si.si_code = reason;
    if (o.signum != SIGPOLL && o.signum < SIGRTMIN &&
        SigSpecificSicodes(o.signum)) {
      si.si_code = SI_SIGIO;
    }
    si.si_band = BandBits(reason);
    si.si_fd = fd;
    if (Queue(o, o.signum, &si) == 0) {
      errno = saved;
      return;
    }
  }
  std::memset(&si, 0, sizeof si);
  si.si_signo = SIGIO;
  si.si_code = SI_KERNEL;  // SEND_SIG_PRIV
  Queue(o, SIGIO, &si);
  errno = saved;
}

}  // namespace

long FcntlOwner(File* f, int cmd, unsigned long arg) {
  switch (cmd) {
    case F_GETOWN: {
      FileOwner::State o = OwnerOf(f);
      return o.type == F_OWNER_PGRP ? -static_cast<long>(o.pid) : o.pid;
    }
    case F_SETOWN: {  // f_setown
      int who = static_cast<int>(arg);
      int type = F_OWNER_PID;
      if (who < 0) {
        if (who == INT_MIN) return -EINVAL;
        type = F_OWNER_PGRP;
        who = -who;
      }
      if (who && !PidExists(who)) return -ESRCH;
      return SetOwner(f, type, who);
    }
    case F_GETOWN_EX: {
      auto* p = reinterpret_cast<f_owner_ex*>(arg);
      FileOwner::State o = OwnerOf(f);
      if (UserFault(p)) return -EFAULT;
      f_owner_ex out{};
      out.type = static_cast<__pid_type>(o.type);
      out.pid = o.pid;
      std::memcpy(p, &out, sizeof out);
      return 0;
    }
    case F_SETOWN_EX: {
      auto* p = reinterpret_cast<const char*>(arg);
      if (UserFault(p)) return -EFAULT;
      // The caller's type may be any int: read it as one, not as the enum.
      int type;
      pid_t pid;
      std::memcpy(&type, p + offsetof(f_owner_ex, type), sizeof type);
      std::memcpy(&pid, p + offsetof(f_owner_ex, pid), sizeof pid);
      if (type != F_OWNER_TID && type != F_OWNER_PID && type != F_OWNER_PGRP) {
        return -EINVAL;
      }
      if (pid && !PidExists(pid)) return -ESRCH;
      return SetOwner(f, type, pid);
    }
    case kGetOwnerUids: {
      auto* p = reinterpret_cast<uid_t*>(arg);
      FileOwner::State o = OwnerOf(f);
      if (UserFault(p)) return -EFAULT;
      uid_t out[2] = {o.uid, o.euid};
      std::memcpy(p, out, sizeof out);
      return 0;
    }
    case F_GETSIG:
      return OwnerOf(f).signum;
    case F_SETSIG: {
      if (arg > _NSIG - 1) return -EINVAL;  // valid_signal
      FileOwner* o = f->MakeOwner();
      if (!o) return -ENOMEM;
      MutexLock l(o->mu);
      o->state.signum = static_cast<int>(arg);
      return 0;
    }
    default:
      return -EINVAL;
  }
}

int FasyncSlot::Set(File* f, int fd, bool on) {
  MutexLock l(mu_);
  if (on) {
    file_ = f;
    fd_ = fd;
    f->set_flags(f->flags() | O_ASYNC);
    armed_.store(true, std::memory_order_release);
  } else if (file_ == f) {
    file_ = nullptr;
    fd_ = -1;
    f->set_flags(f->flags() & ~uint32_t{O_ASYNC});
    armed_.store(false, std::memory_order_relaxed);
  }
  return 0;
}

void FasyncSlot::Clear(File* f) {
  if (!armed_.load(std::memory_order_acquire)) return;
  MutexLock l(mu_);
  if (file_ != f) return;
  file_ = nullptr;
  fd_ = -1;
  armed_.store(false, std::memory_order_relaxed);
}

void FasyncSlot::KillSlow(int band) {
  File* f;
  int fd;
  {
    MutexLock l(mu_);
    f = file_;
    fd = fd_;
    // A file in its last close is about to Clear the slot: it gets no
    // more signals, as the kernel's __fput removes it first.
    if (!f || !f->TryRef()) return;
  }
  FileOwner::State o = OwnerOf(f);
  // Sent with no lock held: the handler may run before this returns.
  SendSigio(o, fd, band);
  f->Unref();
}

}  // namespace uepoll::impl
