#include "kernel/kernel_half.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <new>

#include "base/cancellable.h"
#include "base/fork_path.h"
#include "base/private_fd.h"
#include "base/sys.h"
#include "base/unlisted_epoll.h"
#include "core/fd_table.h"

namespace uepoll::impl {
namespace {

// The kernel's sigset_t size (_NSIG / 8), which the raw syscall takes.
constexpr long kSigsetSize = 8;

uint64_t NewKey(const void* self) {
  uint32_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r) {
    // No entropy yet (early boot): any value the application is unlikely
    // to use will do.
    r = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(self) >> 4) *
        0x9E3779B1u;
  }
  // Top bit set: no small integer and no user-space pointer has it.
  return (uint64_t{r} | 0x80000000u) << 32;
}

// errno of the last call, or kLost if the number k no longer names an open
// descriptor (the application closed it with libc close()).
int FailedOn(int k) {
  int err = errno;
  if (err == EBADF && sys::Fcntl(k, F_GETFD, 0) < 0) return KernelHalf::kLost;
  return -err;
}

// Whether epoll_pwait2 failed ENOSYS once: kernels before 5.11 lack it, and
// so do tools that run the program on an emulated syscall table (valgrind
// 3.19). A wait then goes through epoll_pwait, its timeout rounded up to
// whole milliseconds as epoll_wait's own unit (BridgeNoPwait2.*).
std::atomic<bool> g_no_pwait2{false};

// A relative timeout in epoll_wait's milliseconds, rounded up (a wait never
// ends before its time), -1 for none, INT_MAX at most.
int TimeoutMs(const timespec* t) {
  if (!t) return -1;
  constexpr long long kMax = INT_MAX;
  if (t->tv_sec >= kMax / 1000) return INT_MAX;
  long long ms = static_cast<long long>(t->tv_sec) * 1000 +
                 (t->tv_nsec + 999999) / 1000000;
  return static_cast<int>(ms < kMax ? ms : kMax);
}

// One epoll_pwait2 (epoll_pwait without it) on k; a sleep is a
// cancellation point, a harvest is not.
int WaitOn(int k, epoll_event* ev, int room, const timespec* timeout,
           const sigset_t* mask, bool sleeps) {
  if (!g_no_pwait2.load(std::memory_order_relaxed)) {
    int n = sleeps ? static_cast<int>(CancellableSyscall(
                         SYS_epoll_pwait2, k, reinterpret_cast<long>(ev), room,
                         reinterpret_cast<long>(timeout),
                         reinterpret_cast<long>(mask), kSigsetSize))
                   : sys::EpollPwait2(k, ev, room, timeout, mask);
    if (n >= 0 || errno != ENOSYS) return n;
    g_no_pwait2.store(true, std::memory_order_relaxed);
  }
  int ms = TimeoutMs(timeout);
  return sleeps ? static_cast<int>(CancellableSyscall(
                      SYS_epoll_pwait, k, reinterpret_cast<long>(ev), room, ms,
                      reinterpret_cast<long>(mask), kSigsetSize))
                : sys::EpollPwait(k, ev, room, ms, mask);
}

// "/proc/self/fdinfo/<fd>" into out (40 bytes), without snprintf. The
// prefix is stored as immediates (its bytes, little-endian): a string in
// .rodata would be one more page for the child to fault in.
UEPOLL_FORK_PATH void FdinfoPath(int fd, char* out) {
  uint64_t w0 = 0x65732f636f72702fULL;  // "/proc/se"
  uint64_t w1 = 0x666e6964662f666cULL;  // "lf/fdinf"
  uint16_t w2 = 0x2f6f;                 // "o/"
  // Kept in registers: merged, the first two would be one 16-byte
  // constant, loaded from .rodata.
  asm("" : "+r"(w0), "+r"(w1));
  __builtin_memcpy(out, &w0, 8);
  __builtin_memcpy(out + 8, &w1, 8);
  __builtin_memcpy(out + 16, &w2, 2);
  size_t n = 18;
  char digits[12];
  int nd = 0;
  unsigned v = static_cast<unsigned>(fd);
  do {
    digits[nd++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (nd > 0) out[n++] = digits[--nd];
  out[n] = '\0';
}

// One registration of an epoll's fdinfo.
struct FdinfoItem {
  int tfd;
  uint32_t events;
  uint64_t data;
};

// At p (not past end): spaces, then `name`, then spaces, then a number in
// base 10 or 16; advances p past it. False if any part is missing.
UEPOLL_FORK_PATH bool ParseField(const char*& p, const char* end,
                                 const char* name, int base, uint64_t* out) {
  while (p < end && *p == ' ') ++p;
  for (; *name != '\0'; ++name, ++p) {
    if (p == end || *p != *name) return false;
  }
  while (p < end && *p == ' ') ++p;
  const char* start = p;
  uint64_t v = 0;
  for (; p < end; ++p) {
    char c = *p;
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      break;
    }
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  *out = v;
  return p != start;
}

// "tfd: N events: X data: Y ..." (the rest of the line is ignored); false
// for any other line (the header's pos, flags, mnt_id, ino).
UEPOLL_FORK_PATH bool ParseFdinfoLine(const char* p, const char* end,
                                      FdinfoItem* it) {
  uint64_t tfd, events, data;
  if (!ParseField(p, end, "tfd:", 10, &tfd) ||
      !ParseField(p, end, "events:", 16, &events) ||
      !ParseField(p, end, "data:", 16, &data) || tfd > INT_MAX ||
      events > UINT32_MAX) {
    return false;
  }
  it->tfd = static_cast<int>(tfd);
  it->events = static_cast<uint32_t>(events);
  it->data = data;
  return true;
}

// Registers it in the epoll nk as it is in the epoll k, if the number
// it->tfd still names the file registered there (a number closed and
// reused while a dup kept the file alive names another file): the
// kernel's own comparison, where the kernel has it.
UEPOLL_FORK_PATH void CopyRegistration(pid_t self, int k, int nk,
                                       const FdinfoItem& it) {
  struct kcmp_epoll_slot slot = {static_cast<__u32>(k),
                                 static_cast<__u32>(it.tfd), 0};
  long same = sys::Syscall(SYS_kcmp, self, self, KCMP_EPOLL_TFD, it.tfd,
                           reinterpret_cast<long>(&slot), 0);
  if (same != 0 &&
      !(same < 0 && (errno == ENOSYS || errno == EPERM || errno == EACCES))) {
    return;
  }
  epoll_event ev{};
  ev.events = it.events;
  ev.data.u64 = it.data;
  sys::EpollCtl(nk, EPOLL_CTL_ADD, it.tfd, &ev);
}

// Whether the numbers a and b name one open file (kcmp KCMP_FILE).
// Without kcmp (ENOSYS, or EPERM under a seccomp filter), whether both are
// open: the check then only catches numbers that were closed.
UEPOLL_FORK_PATH bool SameFile(int a, int b) {
  if (a < 0 || b < 0) return false;
  pid_t self = getpid();
  long r = sys::Syscall(SYS_kcmp, self, self, KCMP_FILE, a, b, 0);
  if (r >= 0) return r == 0;
  if (errno != ENOSYS && errno != EPERM && errno != EACCES) return false;
  return sys::Fcntl(a, F_GETFD, 0) >= 0 && sys::Fcntl(b, F_GETFD, 0) >= 0;
}

}  // namespace

KernelHalf::KernelHalf(const File* owner) : owner_(owner), key_(NewKey(this)) {}

int KernelHalf::Create(int minfd) {
  int saved = errno;
  int fd = sys::EpollCreate1(EPOLL_CLOEXEC);
  if (fd < 0) {
    fd = -errno;
  } else if (static_cast<unsigned>(fd) < static_cast<unsigned>(minfd)) {
    // F_DUPFD's rule for the lowest number >= minfd (unsigned, as F_DUPFD
    // compares: a negative minfd is beyond any limit).
    int moved = sys::Fcntl(fd, F_DUPFD_CLOEXEC, static_cast<unsigned>(minfd));
    int err = errno;
    sys::Close(fd);
    fd = moved >= 0 ? moved : -err;
  }
  errno = saved;
  return fd;
}

void KernelHalf::Adopt(int fd) {
  MutexLock l(kmu_);
  // Holds() under kmu_: a close of fd that cleared the slot before this
  // check is seen here; one after it finds knum_ == fd in NumberRemoved.
  if (knum_.load(std::memory_order_relaxed) < 0 &&
      FdTable::Get().Holds(fd, const_cast<File*>(owner_))) {
    knum_.store(fd, std::memory_order_seq_cst);
  }
}

int KernelHalf::OtherNumber(int fd) {
  int other = -1;
  File* owner = const_cast<File*>(owner_);
  if (owner->maybe_many_numbers()) {
    FdTable::Get().ForEachNumberOf(owner, [&](int n) {
      // A number the application closed with libc close() maps to this
      // instance still (an orphan) but holds no kernel file: skip it.
      if (n != fd && other < 0 && sys::Fcntl(n, F_GETFD, 0) >= 0) other = n;
    });
  }
  return other;
}

bool KernelHalf::NumberRemoved(int fd) {
  bool last = false;
  {
    MutexLock l(kmu_);
    if (knum_.load(std::memory_order_relaxed) != fd) return false;
    int saved = errno;  // OtherNumber's probes may fail
    int other = OtherNumber(fd);
    errno = saved;
    // seq_cst, against Op's increment of kops_ then load of knum_.
    knum_.store(other, std::memory_order_seq_cst);
    last = other < 0;
  }
  // Operations that read the old number finish before it is closed. (Below
  // zero only in a fork child: ForgetOtherThreadsOps.)
  for (int spins = 0; kops_.load(std::memory_order_seq_cst) > 0; ++spins) {
    Backoff(spins);
  }
  return last;
}

bool KernelHalf::IsLastNumber(int fd) {
  MutexLock l(kmu_);
  if (knum_.load(std::memory_order_relaxed) != fd) return false;
  int saved = errno;
  bool last = OtherNumber(fd) < 0;
  errno = saved;
  return last;
}

void KernelHalf::NumberLost(int fd) {
  int saved = errno;
  MutexLock l(kmu_);
  if (knum_.load(std::memory_order_relaxed) == fd) {
    // No wait for operations in flight: the number holds nothing of ours.
    knum_.store(OtherNumber(fd), std::memory_order_seq_cst);
  }
  errno = saved;
}

int KernelHalf::Ctl(int op, int fd, epoll_event* ev) {
  int saved = errno;
  int r = Op(-EBADF, [&](int k) {
    return sys::EpollCtl(k, op, fd, ev) == 0 ? 0 : FailedOn(k);
  });
  errno = saved;
  return r;
}

int KernelHalf::CtlInternal(int op, int fd, uint64_t cookie, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = cookie;
  return Ctl(op, fd, op == EPOLL_CTL_DEL ? nullptr : &ev);
}

int KernelHalf::Wait(epoll_event* ev, int room, const timespec* timeout,
                     const sigset_t* mask) {
  int saved = errno;
  const bool sleeps =
      timeout == nullptr || timeout->tv_sec != 0 || timeout->tv_nsec != 0;
  int r = Op(0, [&](int k) {
    // A sleep is a cancellation point, as the kernel's epoll_pwait2 is
    // through libc (Cancel.epoll_pwait_with_mask__cancelled_waiter_leaves_
    // the_instance_working); a harvest is not.
    int n = WaitOn(k, ev, room, timeout, mask, sleeps);
    if (n >= 0) return n;
    if (errno == EINTR) return -EINTR;
    // EFAULT as the kernel gives it (an event to copy, no buffer);
    // anything else means the number no longer holds our epoll.
    if (errno == EFAULT) return -EFAULT;
    return kLost;
  });
  errno = saved;
  return r;
}

bool KernelHalf::Ready() {
  int saved = errno;
  int r = Op(0, [&](int k) {
    pollfd p{k, POLLIN, 0};
    timespec zero{0, 0};
    if (sys::Ppoll(&p, 1, &zero, nullptr) <= 0) return 0;
    if (p.revents & POLLNVAL) return kLost;
    return (p.revents & POLLIN) ? 1 : 0;
  });
  errno = saved;
  return r > 0;
}

int KernelHalf::DupForFlight() {
  int saved = errno;
  // The copy is an unlisted epoll until it has moved up.
  UnlistedEpolls::Scope unlisted;
  int r = Op(-1, [&](int k) {
    int c = sys::Fcntl(k, F_DUPFD_CLOEXEC, 0);
    if (c >= 0) return MovePrivateFd(c);
    return errno == EBADF ? kLost : -1;
  });
  errno = saved;
  return r;
}

__thread KernelHalf::ThreadOps KernelHalf::t_ops = {};

UEPOLL_FORK_PATH void KernelHalf::ForgetOtherThreadsOps() {
  int own = 0;
  int named = t_ops.depth < ThreadOps::kSlots ? t_ops.depth : ThreadOps::kSlots;
  for (int i = 0; i < named; ++i) own += t_ops.ops[i] == &kops_;
  // Written only where it changes: a write makes the child copy the page.
  if (kops_.load(std::memory_order_relaxed) != own) {
    kops_.store(own, std::memory_order_relaxed);
  }
}

// Every application registration of the epoll `from` (a number of ours),
// as the kernel lists them, "tfd: N events: X data: Y ..." per line
// (fs/eventpoll.c, ep_show_fdinfo), added to the epoll `into`. Internal
// ones are the caller's to make again. Read and parsed without stdio: in a
// fork child each page of libc's code it runs is a page fault.
UEPOLL_FORK_PATH void KernelHalf::CopyRegistrations(int from, int into) {
  char path[40];
  FdinfoPath(from, path);
  int info = sys::Open(path, O_RDONLY | O_CLOEXEC);
  if (info < 0) return;
  char buf[1024];  // small: a deeper stack page is one more fault
  size_t have = 0;
  pid_t self = getpid();
  for (;;) {
    ssize_t got = sys::Read(info, buf + have, sizeof buf - 1 - have);
    if (got <= 0) break;
    have += static_cast<size_t>(got);
    size_t line = 0;
    for (size_t nl = 0; nl < have; ++nl) {
      if (buf[nl] != '\n') continue;
      FdinfoItem it;
      if (ParseFdinfoLine(buf + line, buf + nl, &it) && !IsInternal(it.data)) {
        CopyRegistration(self, from, into, it);
      }
      line = nl + 1;
    }
    have -= line;
    for (size_t i = 0; i < have; ++i) buf[i] = buf[line + i];
    if (have == sizeof buf - 1) have = 0;  // a line longer than the buffer
  }
  sys::Close(info);
}

UEPOLL_FORK_PATH int KernelHalf::RebuildInChild(bool copy) {
  int k = knum_.load(std::memory_order_relaxed);
  if (k < 0) return -EBADF;
  int saved = errno;
  // A thread of the parent process was copying its own inheritance at the
  // fork (CopyInherited): part of it is in k, the rest still in the copies.
  bool was_copying = imu_.HeldAtFork();
  if (was_copying) new (&imu_) Mutex();
  int nk = sys::EpollCreate1(EPOLL_CLOEXEC);
  if (nk < 0) {
    int err = -errno;
    errno = saved;
    return err;
  }
  MutexLock l(imu_);  // only this thread exists: free
  if (inherited_.load(std::memory_order_relaxed) >= 0) {
    // The parent process had not made its own copy yet (no operation
    // since its fork): k holds none of the application's registrations
    // unless that copy was under way, and the copies stay the source.
    if (was_copying) {
      CopyRegistrations(k, nk);
      if (SameFile(inherited_.load(std::memory_order_relaxed), inherited2_)) {
        CopyRegistrations(inherited_.load(std::memory_order_relaxed), nk);
      }
      DropInheritedLocked();
    }
  } else if (copy) {
    // The second at the lowest free number above the first: where
    // DupPrivateFd would put it (nothing else runs in the child), without
    // its second read of RLIMIT_NOFILE.
    int a = DupPrivateFd(k);
    int b =
        a >= 0 ? sys::Fcntl(k, F_DUPFD_CLOEXEC, static_cast<unsigned>(a)) : -1;
    if (b >= 0) {
      inherited2_ = b;
      inherited_.store(a, std::memory_order_release);
    } else {
      // No number for the copies: copy now.
      if (a >= 0) sys::Close(a);
      CopyRegistrations(k, nk);
    }
  }
  File* owner = const_cast<File*>(owner_);
  FdTable::Get().ForEachNumberOf(owner, [&](int n) {
    if (sys::Fcntl(n, F_GETFD, 0) >= 0) sys::Dup3(nk, n, O_CLOEXEC);
  });
  sys::Close(nk);
  errno = saved;
  return 0;
}

UEPOLL_FORK_PATH void KernelHalf::DropInheritedInChild() {
  if (inherited_.load(std::memory_order_relaxed) < 0) return;
  if (imu_.HeldAtFork()) new (&imu_) Mutex();
  MutexLock l(imu_);  // only this thread exists: free
  DropInheritedLocked();
}

void KernelHalf::CopyInherited() {
  int saved = errno;
  MutexLock l(imu_);
  int from = inherited_.load(std::memory_order_relaxed);
  if (from >= 0) {
    if (SameFile(from, inherited2_)) {
      // Into the number operations use (pinned, as an operation's).
      InFlight op(&kops_);
      int k = knum_.load(std::memory_order_seq_cst);
      if (k >= 0) CopyRegistrations(from, k);
    }
    DropInheritedLocked();
  }
  errno = saved;
}

UEPOLL_FORK_PATH void KernelHalf::DropInheritedLocked() {
  int a = inherited_.load(std::memory_order_relaxed);
  if (a < 0) return;
  // Ours only if both numbers still name one file (closefrom() may have
  // closed them, and the numbers may have been reused since).
  if (SameFile(a, inherited2_)) {
    sys::Close(a);
    sys::Close(inherited2_);
  }
  inherited2_ = -1;
  inherited_.store(-1, std::memory_order_release);
}

KernelHalf::~KernelHalf() {
  if (inherited_.load(std::memory_order_acquire) < 0) return;
  int saved = errno;
  MutexLock l(imu_);
  DropInheritedLocked();
  errno = saved;
}

}  // namespace uepoll::impl
