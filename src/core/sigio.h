// Signal-driven I/O, as the kernel's fs/fcntl.c does it: a file's owner
// (fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG: the kernel's f_owner), the fasync
// slot of a pipe or socket end (the kernel's fasync_struct list) and
// kill_fasync, which sends the owner SIGIO (or the F_SETSIG signal, with
// si_code, si_band and si_fd) when data arrives or room appears.
//
// Who records what:
//  - every File may have an owner (FileOwner, made by the first F_SETOWN,
//    F_SETOWN_EX or F_SETSIG; the kernel answers those for any file);
//  - a pipe end or socket that is put in signal-driven mode (O_ASYNC by
//    F_SETFL or ioctl FIOASYNC, File::Fasync) is recorded in its
//    FasyncSlot with the descriptor it was set through, and carries O_ASYNC
//    in its status flags; the last close of the file clears the slot.
//  - the sources call FasyncSlot::Kill where the kernel calls kill_fasync
//    (pipe.cc, unix_*.cc), with no lock held.
//
// A process that crosses fork() with such an object (another module turns
// it into a kernel object) reads the state back through FileOwner's
// accessors and File::flags() & O_ASYNC.
//
// Delivery (docs/semantics.md D28): to this process or one of its threads,
// the signal carries the kernel's siginfo (rt_sigqueueinfo, which the
// kernel lets a process send itself with any si_code); to another process
// or to a process group, kill() sends it, so the handler sees SI_USER and
// no si_band/si_fd.
#ifndef UEPOLL_SRC_CORE_SIGIO_H_
#define UEPOLL_SRC_CORE_SIGIO_H_

#include <sys/types.h>

#include <atomic>

#include "base/alloc.h"
#include "base/mutex.h"
#include "core/file.h"

namespace uepoll::impl {

// The kernel's struct fown_struct.
struct FileOwner {
  // pid_type: the F_OWNER_* value F_GETOWN_EX reports. A record made by
  // F_SETSIG alone says F_OWNER_TID with pid 0, as the kernel's zeroed one.
  struct State {
    int type = 0;    // F_OWNER_TID (0), F_OWNER_PID (1), F_OWNER_PGRP (2)
    pid_t pid = 0;   // 0: nobody (no signal is sent)
    uid_t uid = 0;   // the real and effective ids of whoever set pid
    uid_t euid = 0;  // (F_GETOWNER_UIDS)
    int signum = 0;  // F_SETSIG: 0 is plain SIGIO
  };
  State Get() EXCLUDES(mu) {
    MutexLock l(mu);
    return state;
  }

  Mutex mu;
  State state GUARDED_BY(mu);
};

// fcntl F_GETOWN, F_SETOWN, F_GETOWN_EX, F_SETOWN_EX, F_GETOWNER_UIDS,
// F_GETSIG, F_SETSIG on f, as do_fcntl answers them: the result or -errno.
long FcntlOwner(File* f, int cmd, unsigned long arg);

// One end's fasync list. A uepoll pipe end or socket is one File whatever
// its numbers, so the list holds at most that file.
class FasyncSlot {
 public:
  // fasync_helper for f through descriptor fd: records it (on; a second
  // "on" only updates the descriptor) or drops it (off), and sets or
  // clears O_ASYNC in f's flags. Always 0 (the slot needs no allocation).
  int Set(File* f, int fd, bool on) EXCLUDES(mu_);
  // f's last close: drop it if it is the one recorded.
  void Clear(File* f) EXCLUDES(mu_);
  // kill_fasync(band: POLL_IN, POLL_OUT, POLL_HUP...): signals the owner
  // of the recorded file. Called with no lock held; costs one load when
  // nothing is recorded.
  void Kill(int band) EXCLUDES(mu_) {
    if (armed()) KillSlow(band);
  }
  // Whether a file is recorded (a hint: SOCK_FASYNC).
  bool armed() const { return armed_.load(std::memory_order_acquire); }
  // The descriptor f was put in the mode through, or -1 if f is not the
  // file recorded.
  int Fd(File* f) EXCLUDES(mu_) {
    MutexLock l(mu_);
    return file_ == f ? fd_ : -1;
  }

 private:
  void KillSlow(int band) EXCLUDES(mu_);

  Mutex mu_;
  File* file_ GUARDED_BY(mu_) = nullptr;
  int fd_ GUARDED_BY(mu_) = -1;
  std::atomic<bool> armed_{false};  // file_ != nullptr (a hint for Kill)
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_SIGIO_H_
