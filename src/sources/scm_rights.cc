#include "sources/scm_rights.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "base/alloc.h"
#include "base/caps.h"
#include "base/private_fd.h"
#include "base/sys.h"
#include "core/fd_table.h"
#include "kernel/export.h"
#include "sources/io_wait.h"
#include "sources/no_cancel.h"
#include "sources/unix_common.h"
#include "sources/unix_gc.h"

namespace uepoll::impl {
namespace {

constexpr size_t kHdr = sizeof(cmsghdr);  // CMSG_ALIGN(sizeof(cmsghdr))

size_t CmsgAlign(size_t n) {
  return (n + sizeof(size_t) - 1) & ~(sizeof(size_t) - 1);
}

// The header of the control message at offset `off` (the buffer may be
// unaligned: copied out).
cmsghdr HeaderAt(const char* ctl, size_t off) {
  cmsghdr h;
  std::memcpy(&h, ctl + off, sizeof h);
  return h;
}

// scm_check_creds and the pid lookup of __scm_send's SCM_CREDENTIALS.
int CheckCredentials(const ucred& c) {
  if (c.uid == static_cast<uid_t>(-1) || c.gid == static_cast<gid_t>(-1)) {
    return -EINVAL;
  }
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  getresuid(&ruid, &euid, &suid);
  getresgid(&rgid, &egid, &sgid);
  bool pid_ok = c.pid == getpid() || HasCapability(CAP_SYS_ADMIN);
  bool uid_ok = c.uid == ruid || c.uid == euid || c.uid == suid ||
                HasCapability(CAP_SETUID);
  bool gid_ok = c.gid == rgid || c.gid == egid || c.gid == sgid ||
                HasCapability(CAP_SETGID);
  if (!pid_ok || !uid_ok || !gid_ok) return -EPERM;
  // find_get_pid: a pid that names no task (a zombie still counts) is
  // ESRCH. kill(pid, 0) fails ESRCH exactly then; 0 and negative values
  // name no single task.
  if (c.pid != getpid() &&
      (c.pid <= 0 || (kill(c.pid, 0) != 0 && errno == ESRCH))) {
    return -ESRCH;
  }
  return 0;
}

}  // namespace

ScmFiles* ScmFiles::Alloc(int capacity) {
  void* p = Allocate(sizeof(ScmFiles) + sizeof(Entry) * capacity);
  if (!p) return nullptr;
  auto* fp = new (p) ScmFiles;
  fp->capacity_ = capacity;
  fp->entries_ = reinterpret_cast<Entry*>(fp + 1);
  return fp;
}

ScmFiles* ScmFiles::Grow(ScmFiles* fp, int n) {
  if (!fp) return Alloc(n);
  if (fp->count_ + n <= fp->capacity_) return fp;
  ScmFiles* bigger = Alloc(fp->count_ + n);
  if (!bigger) return nullptr;
  std::memcpy(bigger->entries_, fp->entries_, sizeof(Entry) * fp->count_);
  bigger->count_ = fp->count_;
  fp->~ScmFiles();
  Deallocate(fp);
  return bigger;
}

int ScmSend(const void* control, size_t controllen, ScmFiles** out) {
  *out = nullptr;
  const char* ctl = static_cast<const char*>(control);
  ScmFiles* fp = nullptr;
  int err = 0;
  // for_each_cmsghdr: CMSG_FIRSTHDR needs room for one header;
  // __cmsg_nxthdr stops when the next header would not fit.
  size_t off = 0;
  bool more = ctl && controllen >= kHdr;
  while (more && !err) {
    cmsghdr h = HeaderAt(ctl, off);
    // CMSG_OK: a whole header, and no longer than what is left.
    if (h.cmsg_len < kHdr || h.cmsg_len > controllen - off) {
      err = -EINVAL;
      break;
    }
    if (h.cmsg_level == SOL_SOCKET) {
      if (h.cmsg_type == SCM_RIGHTS) {
        // scm_fp_copy: whole ints only; none is fine; at most SCM_MAX_FD
        // in the whole message.
        long num = static_cast<long>((h.cmsg_len - kHdr) / sizeof(int));
        int have = fp ? fp->count_ : 0;
        if (num > ScmFiles::kMaxFd || have + num > ScmFiles::kMaxFd) {
          err = -EINVAL;
        } else if (num > 0) {
          ScmFiles* grown = ScmFiles::Grow(fp, static_cast<int>(num));
          if (!grown) {
            err = -ENOMEM;
            break;
          }
          fp = grown;
          const char* data = ctl + off + kHdr;
          for (long i = 0; i < num && !err; ++i) {
            int fd;
            std::memcpy(&fd, data + i * sizeof(int), sizeof fd);
            FileRef f = FdTable::Get().Lookup(fd);
            ScmFiles::Entry e{nullptr, -1};
            if (f) {
              e.file = f.release();
              // An instance travels with its kernel half (its numbers may
              // all close before it is received): a copy, or -1.
              e.kfd = e.file->DupKernelFileForFlight();
            } else {
              // fget_raw of a kernel descriptor: uepoll holds a copy.
              int dup = sys::Fcntl(fd, F_DUPFD_CLOEXEC, 0);
              if (dup < 0) {
                err = -errno;
                break;
              }
              // Off the numbers the application would get next.
              dup = MovePrivateFd(dup);
              FdTable::Get().ForgetOrphan(dup);
              e.kfd = dup;
            }
            fp->entries_[fp->count_++] = e;
          }
        }
      } else if (h.cmsg_type == SCM_CREDENTIALS) {
        if (h.cmsg_len != CMSG_LEN(sizeof(ucred))) {
          err = -EINVAL;
        } else {
          ucred c;
          std::memcpy(&c, ctl + off + kHdr, sizeof c);
          err = CheckCredentials(c);
        }
      } else {
        err = -EINVAL;  // no other SOL_SOCKET message may be sent
      }
    }
    size_t next = off + CmsgAlign(h.cmsg_len);
    more = next >= off && next + kHdr <= controllen;
    off = next;
  }
  if (err) {
    if (fp) DestroyScmFiles(fp);
    return err;
  }
  *out = fp;
  return 0;
}

int RejectUepollRights(const msghdr* msg) {
  if (UserFault(msg)) return 0;
  const char* ctl = static_cast<const char*>(msg->msg_control);
  size_t controllen = msg->msg_controllen;
  if (UserFault(ctl) || controllen < kHdr) return 0;
  size_t off = 0;
  while (off + kHdr <= controllen) {
    cmsghdr h = HeaderAt(ctl, off);
    if (h.cmsg_len < kHdr || h.cmsg_len > controllen - off) return 0;
    if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
      size_t num = (h.cmsg_len - kHdr) / sizeof(int);
      for (size_t i = 0; i < num; ++i) {
        int fd;
        std::memcpy(&fd, ctl + off + kHdr + i * sizeof(int), sizeof fd);
        if (FdTable::Get().IsOpen(fd)) return -EOPNOTSUPP;
      }
    }
    size_t next = off + CmsgAlign(h.cmsg_len);
    if (next < off) return 0;
    off = next;
  }
  return 0;
}

ScmFiles* ScmClone(const ScmFiles& src) {
  // Called under the queue's pair lock: the close() of a failed copy must
  // not unwind from there (NoCancel).
  NoCancel no_cancel;
  ScmFiles* fp = ScmFiles::Alloc(src.count_);
  if (!fp) return nullptr;
  for (int i = 0; i < src.count_; ++i) {
    const ScmFiles::Entry& e = src.entries_[i];
    ScmFiles::Entry c{e.file, -1};
    if (e.kfd >= 0) {
      c.kfd = MovePrivateFd(sys::Fcntl(e.kfd, F_DUPFD_CLOEXEC, 0));
      if (c.kfd < 0) {
        for (int j = 0; j < fp->count_; ++j) {
          if (fp->entries_[j].kfd >= 0) sys::Close(fp->entries_[j].kfd);
        }
        fp->~ScmFiles();
        Deallocate(fp);
        return nullptr;
      }
      FdTable::Get().ForgetOrphan(c.kfd);
    }
    fp->entries_[fp->count_++] = c;
  }
  // The new references, under the collector's lock: a collection must see
  // a socket's count and its in-flight references at one instant.
  UnixGc::RefAll(src);
  return fp;
}

void DestroyScmFiles(ScmFiles* fp) {
  // Each close() is a cancellation point and each Unref may run a release
  // callback: a cancellation half way would leak the rest (NoCancel).
  NoCancel no_cancel;
  if (fp->owner) UnixGc::Dequeued(fp);
  for (int i = 0; i < fp->count_; ++i) {
    ScmFiles::Entry& e = fp->entries_[i];
    if (e.file) e.file->Unref();
    if (e.kfd >= 0) sys::Close(e.kfd);
  }
  fp->~ScmFiles();
  Deallocate(fp);
}

void ScmRecv(RecvArgs& a, ScmFiles* fp) {
  // Descriptors installed and a list half handed over cannot be unwound:
  // the receive completes (NoCancel), as the kernel's scm_detach_fds does.
  NoCancel no_cancel;
  if (!a.control) {
    // scm_recv_unix: no buffer at all; the descriptors are lost.
    a.msg_flags |= MSG_CTRUNC;
    DestroyScmFiles(fp);
    return;
  }
  // scm_detach_fds: as many as fit after one header.
  bool cloexec = a.flags & MSG_CMSG_CLOEXEC;
  long room = a.controllen <= kHdr
                  ? 0
                  : static_cast<long>((a.controllen - kHdr) / sizeof(int));
  int fdmax = static_cast<int>(room < fp->count() ? room : fp->count());
  char* data = a.control + kHdr;
  int i = 0;
  for (; i < fdmax; ++i) {
    // receive_fd: the number is written to the caller's buffer before the
    // file is installed; a fault there ends the loop.
    if (UserFault(data + i * sizeof(int))) break;
    ScmFiles::Entry& e = fp->at(i);
    int fd;
    if (e.file && IsExported(e.file)) {
      // Converted while in flight (kernel/export.h): the kernel object
      // that stands for it.
      fd = DupExported(e.file, cloexec);
      if (fd < 0) break;
      e.file->Unref();
      e.file = nullptr;
      if (e.kfd >= 0) sys::Close(e.kfd);
      e.kfd = -1;
    } else if (e.file) {
      fd = FdTable::Get().InstallFlight(e.file, cloexec, e.kfd);
      if (fd < 0) break;
      e.file = nullptr;  // the descriptor owns the reference now
      if (e.kfd >= 0) sys::Close(e.kfd);
      e.kfd = -1;
    } else {
      fd = sys::Fcntl(e.kfd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
      if (fd < 0) break;
      FdTable::Get().ForgetOrphan(fd);
      sys::Close(e.kfd);
      e.kfd = -1;
    }
    std::memcpy(data + i * sizeof(int), &fd, sizeof fd);
  }
  if (i > 0) {
    cmsghdr h{};
    h.cmsg_len = CMSG_LEN(i * sizeof(int));
    h.cmsg_level = SOL_SOCKET;
    h.cmsg_type = SCM_RIGHTS;
    std::memcpy(a.control, &h, sizeof h);
    size_t used = CMSG_SPACE(i * sizeof(int));
    a.controllen = used < a.controllen ? used : a.controllen;
  } else {
    a.controllen = 0;
  }
  if (i < fp->count() || (fp->count() && fdmax <= 0)) a.msg_flags |= MSG_CTRUNC;
  // The installed entries were cleared above; the rest are dropped.
  DestroyScmFiles(fp);
}

}  // namespace uepoll::impl
