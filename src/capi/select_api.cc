// uepoll_select and uepoll_pselect over any mix of uepoll and kernel
// descriptors, as fs/select.c (Linux 6.18) answers through glibc.
//
// Sets that hold no uepoll descriptor go to libc whole. Otherwise:
//   1. the kernel descriptors of the sets (uepoll bits cleared) are checked
//      by the kernel's own select with a zero timeout: a number that is not
//      open is EBADF there (max_select_fd), exactly as the kernel decides
//      it, and nothing more is asked of it;
//   2. every descriptor of the sets becomes a pollfd with the events select
//      waits for (POLLIN_SET, POLLOUT_SET, POLLEX_SET), and the poll
//      engine waits (capi/poll_core.h); a kernel descriptor that poll
//      reports POLLNVAL (closed meanwhile, or an O_PATH file, which select
//      skips) or an entry whose only news is for a set it is not in, is
//      dropped from later passes, so nothing spins;
//   3. the result sets hold the bits of the ready descriptors, and the
//      count is the number of bits set, as do_select counts.
// select writes the time left back into *timeout (glibc passes the
// kernel's write-back through), computed from an end time kept as the
// kernel keeps it (EndTime); pselect does not (glibc hands the kernel a
// copy). The sets are written on success and on a timeout, never on an
// error, as core_sys_select does.
//
// Which bits: the kernel reads and writes only the first min(nfds,
// max_fds) bits of each set (core_sys_select), max_fds being how many
// slots its descriptor table has; a bit beyond is never read, so a caller
// may pass an nfds far beyond its sets (select(getdtablesize(), ...) with
// FD_SETSIZE sets). uepoll's numbers are the kernel's (the disjoint ones
// are beyond select's reach: uepoll.h), so it writes the same bits, no
// more, and reads no more than nfds within one fd_set or the kernel's bits
// beyond (KernelSetBits, KeepBitsPastTheTable).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/select.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <ctime>

#include <uepoll/uepoll.h>

#include "base/alloc.h"
#include "base/deadline.h"
#include "base/fork_path.h"
#include "base/sys.h"
#include "capi/errors.h"
#include "capi/poll_core.h"
#include "core/fd_table.h"
#include "core/io_iter.h"

namespace uepoll::impl {
namespace {

constexpr short kInSet = POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR;
constexpr short kOutSet = POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR;
constexpr short kExSet = POLLPRI;
constexpr int kWordBits = 64;

using Word = uint64_t;

bool Bit(const Word* set, int fd) {
  return set && ((set[fd / kWordBits] >> (fd % kWordBits)) & 1u);
}
void SetBit(Word* set, int fd) {
  set[fd / kWordBits] |= Word{1} << (fd % kWordBits);
}

// The kernel's max_fds is not published where a call could read it
// cheaply (only /proc/self/status's FDSize), so select asks the kernel's
// own select: on a set of ours holding only bit p, where p is not an open
// descriptor, it fails EBADF if p lies within the table and ignores the
// bit beyond it. A floor is kept (the table has at least that many slots):
// a table never shrinks, save in a fork child, where the floor starts
// over, and after an unshare(CLONE_FILES) of the application's, which
// this does not follow (a stale floor reads bits past the new, smaller
// table, which name nothing). So a call whose nfds is within the floor
// asks nothing; one beyond it asks once (whether the table still ends at
// the floor), and more only while the table grows.
constexpr int kMinTable = 64;  // NR_OPEN_DEFAULT: every table's size
std::atomic<int> g_table_floor{kMinTable};

UEPOLL_FORK_PATH void ResetTableFloor() {
  if (g_table_floor.load(std::memory_order_relaxed) != kMinTable) {
    g_table_floor.store(kMinTable, std::memory_order_relaxed);
  }
}

void RaiseTableFloor(int at_least) {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, ResetTableFloor);
    return true;
  }();
  (void)registered;
  int cur = g_table_floor.load(std::memory_order_relaxed);
  while (cur < at_least && !g_table_floor.compare_exchange_weak(
                               cur, at_least, std::memory_order_relaxed)) {
  }
}

// 1: p lies within the kernel's descriptor table; 0: beyond it; -errno.
int WithinKernelTable(int p) {
  // The interceptors of sanitizers read a whole fd_set.
  constexpr size_t kSetWords = sizeof(fd_set) / sizeof(Word);
  for (;;) {
    if (sys::Fcntl(p, F_GETFD, 0) >= 0) return 1;  // open: within
    size_t words = std::max(static_cast<size_t>(p) / kWordBits + 1, kSetWords);
    Word small[kSetWords] = {};
    Word* set = words > kSetWords ? NewArray<Word>(words) : small;
    if (!set) return -ENOMEM;
    SetBit(set, p);
    timespec zero{0, 0};
    int r = sys::Pselect(p + 1, reinterpret_cast<fd_set*>(set), nullptr,
                         nullptr, &zero, nullptr);
    int err = errno;
    if (set != small) DeleteArray(set);
    // Ignored, unless p was opened meanwhile (ready or not).
    if (r >= 0) return r > 0 || sys::Fcntl(p, F_GETFD, 0) >= 0 ? 1 : 0;
    if (err == EBADF) return 1;
    if (err != EINTR) return -err;  // EINTR: a signal came; ask again
  }
}

// KernelSetBits past the floor.
int LearnKernelSetBits(int floor, int nfds) {
  while (floor < nfds) {
    // max_fds >= floor. Does the table end there?
    int in = WithinKernelTable(floor);
    if (in <= 0) return in < 0 ? in : floor;
    // It grew: the kernel doubles it, so ask at twice the floor.
    int next = static_cast<int>(std::min<long>(long{floor} * 2, nfds));
    in = WithinKernelTable(next - 1);
    if (in < 0) return in;
    if (in) {
      RaiseTableFloor(next);
      floor = next;
      continue;
    }
    // It ends in (floor, next - 1]: the first number beyond it.
    int lo = floor + 1;
    int hi = next - 1;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      in = WithinKernelTable(mid);
      if (in < 0) return in;
      if (in) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    RaiseTableFloor(lo);
    return lo;
  }
  return nfds;
}

// The bits of each set to read, for nfds > 0, or -errno (ENOMEM) if they
// could not be learned: nfds itself when it is within one fd_set (the
// sets are the caller's fd_sets, which hold FD_SETSIZE bits; a bit past
// the table is then read but comes back as it was: KeepBitsPastTheTable),
// else min(nfds, max_fds), what the kernel reads.
int KernelSetBits(int nfds) {
  int floor = g_table_floor.load(std::memory_order_relaxed);
  if (nfds <= floor || nfds <= FD_SETSIZE) return nfds;
  // The questions fail EBADF on the way: errno is the caller's.
  int saved = errno;
  int n = LearnKernelSetBits(floor, nfds);
  errno = saved;
  return n;
}

// A bit the kernel never wrote back, because it lies past the table, is
// left as the caller set it. Such a number is never open, so only the
// entries that poll found not open (kept as -2 - fd) are asked about; one
// closed since the kernel checked the sets lies within the table.
void KeepBitsPastTheTable(Word* const user[3], Word* const in[3],
                          const pollfd* fds, size_t m) {
  int saved = errno;
  for (size_t i = 0; i < m; ++i) {
    if (fds[i].fd > -2) continue;
    int fd = -2 - fds[i].fd;
    if (WithinKernelTable(fd) != 0) continue;
    for (int s = 0; s < 3; ++s) {
      if (user[s] && Bit(in[s], fd)) SetBit(user[s], fd);
    }
  }
  errno = saved;
}

// Scratch for one call: the three input sets (copied, as get_fd_set does),
// the three kernel-only sets, and the pollfd array.
class SelectScratch {
 public:
  ~SelectScratch() {
    DeleteArray(words_);
    DeleteArray(fds_);
  }
  bool Alloc(size_t nwords, size_t nfds) {
    words_ = NewArray<Word>(nwords * 6);
    fds_ = NewArray<pollfd>(nfds ? nfds : 1);
    return words_ && fds_;
  }
  Word* words(int i, size_t nwords) { return words_ + i * nwords; }
  pollfd* fds() { return fds_; }

 private:
  Word* words_ = nullptr;
  pollfd* fds_ = nullptr;
};

// Whether the first n bits of the sets name a uepoll descriptor; false
// when n <= 0 or a set cannot be read (libc then answers the whole call).
bool HasUepoll(int n, const fd_set* r, const fd_set* w, const fd_set* e) {
  const Word* sets[3] = {reinterpret_cast<const Word*>(r),
                         reinterpret_cast<const Word*>(w),
                         reinterpret_cast<const Word*>(e)};
  if (n <= 0) return false;
  for (const Word* set : sets) {
    if (set && UserFault(set)) return false;
  }
  for (int fd = 0; fd < n; ++fd) {
    if (!Bit(sets[0], fd) && !Bit(sets[1], fd) && !Bit(sets[2], fd)) {
      continue;
    }
    // As poll's: a number being closed right now is looked at after it
    // (FdTable::WaitUnchanged).
    FdTable& t = FdTable::Get();
    bool mine = t.IsOpen(fd);
    while (!mine && t.WaitUnchanged(fd)) mine = t.IsOpen(fd);
    if (mine) return true;
  }
  return false;
}

// After HasUepoll: n > 0, the sets are readable and hold a uepoll
// descriptor.
int Select(int n, fd_set* rset, fd_set* wset, fd_set* eset,
           const Deadline& deadline, const sigset_t* mask) {
  size_t nwords = (static_cast<size_t>(n) + kWordBits - 1) / kWordBits;
  Word* user[3] = {reinterpret_cast<Word*>(rset), reinterpret_cast<Word*>(wset),
                   reinterpret_cast<Word*>(eset)};
  size_t total = 0;
  for (int fd = 0; fd < n; ++fd) {
    if (Bit(user[0], fd) || Bit(user[1], fd) || Bit(user[2], fd)) ++total;
  }
  SelectScratch scratch;
  if (!scratch.Alloc(nwords, total)) return -ENOMEM;
  Word* in[3];
  Word* kern[3];
  for (int s = 0; s < 3; ++s) {
    in[s] = user[s] ? scratch.words(s, nwords) : nullptr;
    kern[s] = user[s] ? scratch.words(3 + s, nwords) : nullptr;
    if (in[s]) std::memcpy(in[s], user[s], nwords * sizeof(Word));
  }
  // 1. The kernel's verdict on its own descriptors.
  pollfd* fds = scratch.fds();
  size_t m = 0;
  bool any_kernel = false;
  for (int fd = 0; fd < n; ++fd) {
    short events = 0;
    if (Bit(in[0], fd)) events |= kInSet & ~(POLLHUP | POLLERR);
    if (Bit(in[1], fd)) events |= kOutSet & ~POLLERR;
    if (Bit(in[2], fd)) events |= kExSet;
    if (!Bit(in[0], fd) && !Bit(in[1], fd) && !Bit(in[2], fd)) continue;
    bool mine = FdTable::Get().IsOpen(fd);
    if (!mine) {
      any_kernel = true;
      for (int s = 0; s < 3; ++s) {
        if (Bit(in[s], fd)) SetBit(kern[s], fd);
      }
    }
    fds[m++] = pollfd{fd, events, 0};
  }
  if (any_kernel) {
    timespec zero{0, 0};
    if (sys::Pselect(n, reinterpret_cast<fd_set*>(kern[0]),
                     reinterpret_cast<fd_set*>(kern[1]),
                     reinterpret_cast<fd_set*>(kern[2]), &zero, nullptr) < 0) {
      return -errno;
    }
  }
  // 2. Wait until some descriptor is ready for a set it is in.
  for (;;) {
    timespec left;
    int r = PollFds(fds, m, deadline, deadline.RemainingTimespec(&left), mask);
    if (r < 0) return r;
    int count = 0;
    for (int s = 0; s < 3; ++s) {
      if (in[s]) std::memset(kern[s], 0, nwords * sizeof(Word));
    }
    for (size_t i = 0; i < m; ++i) {
      pollfd& p = fds[i];
      if (p.fd < 0 || !p.revents) continue;
      bool hit = false;
      if (!(p.revents & POLLNVAL)) {
        if (Bit(in[0], p.fd) && (p.revents & kInSet)) {
          SetBit(kern[0], p.fd);
          hit = true;
          ++count;
        }
        if (Bit(in[1], p.fd) && (p.revents & kOutSet)) {
          SetBit(kern[1], p.fd);
          hit = true;
          ++count;
        }
        if (Bit(in[2], p.fd) && (p.revents & kExSet)) {
          SetBit(kern[2], p.fd);
          hit = true;
          ++count;
        }
      }
      // Nothing select reports: skip it from now on (see above); a kernel
      // number that is not open is kept as -2 - fd for the write-back.
      if (!hit) {
        bool gone = (p.revents & POLLNVAL) && !FdTable::Get().IsOpen(p.fd);
        p.fd = gone ? -2 - p.fd : -1;
      }
    }
    if (count || r == 0) {
      // 3. A result (or the timeout: every set comes back empty).
      for (int s = 0; s < 3; ++s) {
        if (user[s]) std::memcpy(user[s], kern[s], nwords * sizeof(Word));
      }
      KeepBitsPastTheTable(user, in, fds, m);
      return count;
    }
    if (deadline.Expired()) {
      for (int s = 0; s < 3; ++s) {
        if (user[s]) std::memset(user[s], 0, nwords * sizeof(Word));
      }
      KeepBitsPastTheTable(user, in, fds, m);
      return 0;
    }
  }
}

// poll_select_set_timeout's end time: CLOCK_MONOTONIC now plus the
// timeout, as a timespec saturated at {INT64_MAX, 0} (timespec64_add_safe);
// {0, 0} for a zero timeout. Kept apart from the Deadline, which holds at
// most INT64_MAX ns, so that the time left written back is the kernel's
// for any timeout glibc passes ({INT64_MAX s, ...} included).
struct EndTime {
  int64_t sec = 0;
  int64_t nsec = 0;
  bool zero() const { return sec == 0 && nsec == 0; }
};

constexpr int64_t kNsPerSec = 1000000000;

// sec >= 0, 0 <= nsec < 1e9.
EndTime EndAfter(int64_t sec, int64_t nsec) {
  if (sec == 0 && nsec == 0) return {};
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t ns = now.tv_nsec + nsec;
  int64_t carry = ns >= kNsPerSec ? 1 : 0;
  int64_t s;
  if (__builtin_add_overflow(static_cast<int64_t>(now.tv_sec), sec, &s) ||
      __builtin_add_overflow(s, carry, &s)) {
    return {INT64_MAX, 0};
  }
  return {s, ns - carry * kNsPerSec};
}

// The sleep's deadline: the end time, or none when it lies beyond what a
// Deadline can hold (292 years of uptime: never reached).
Deadline DeadlineAt(const EndTime& end) {
  if (end.zero()) return Deadline::Zero();
  int64_t ns;
  if (__builtin_mul_overflow(end.sec, kNsPerSec, &ns) ||
      __builtin_add_overflow(ns, end.nsec, &ns)) {
    return Deadline::Infinite();
  }
  return Deadline::At(ns);
}

// What select writes back: end - now, clamped at zero, in microseconds
// (truncated, as the kernel's timespec-to-timeval does).
timeval TimeLeft(const EndTime& end) {
  if (end.zero()) return timeval{0, 0};
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t sec = end.sec - now.tv_sec;
  int64_t nsec = end.nsec - now.tv_nsec;
  if (nsec < 0) {
    nsec += kNsPerSec;
    --sec;
  }
  if (sec < 0) return timeval{0, 0};
  return timeval{sec, static_cast<suseconds_t>(nsec / 1000)};
}

}  // namespace
}  // namespace uepoll::impl

using uepoll::impl::Deadline;
using uepoll::impl::ToErrno;
namespace sys = uepoll::impl::sys;

extern "C" {

int uepoll_select(int nfds, fd_set* readfds, fd_set* writefds,
                  fd_set* exceptfds, struct timeval* timeout) {
  int n = nfds > 0 ? uepoll::impl::KernelSetBits(nfds) : nfds;
  if (n < 0 && nfds > 0) return ToErrno(n);
  if (!uepoll::impl::HasUepoll(n, readfds, writefds, exceptfds)) {
    return sys::Select(nfds, readfds, writefds, exceptfds, timeout);
  }
  // The timeout as glibc's select hands it to the kernel: tv_usec taken
  // as an int, a negative field refused, the microseconds folded into
  // seconds (an overflow saturates to {INT64_MAX, 999999999}).
  Deadline deadline = Deadline::Infinite();
  uepoll::impl::EndTime end;
  if (timeout) {
    if (uepoll::impl::UserFault(timeout)) return ToErrno(-EFAULT);
    int64_t sec = timeout->tv_sec;
    auto usec = static_cast<int32_t>(timeout->tv_usec);
    if (sec < 0 || usec < 0) return ToErrno(-EINVAL);
    int64_t nsec;
    if (usec / 1000000 > INT64_MAX - sec) {
      sec = INT64_MAX;
      nsec = 999999999;
    } else {
      sec += usec / 1000000;
      nsec = (usec % 1000000) * int64_t{1000};
    }
    end = uepoll::impl::EndAfter(sec, nsec);
    deadline = uepoll::impl::DeadlineAt(end);
  }
  int r =
      uepoll::impl::Select(n, readfds, writefds, exceptfds, deadline, nullptr);
  // poll_select_finish: the time left, on every return (glibc converts the
  // kernel's write-back); after a zero timeout the kernel writes nothing
  // and glibc copies back its normalized {0, 0}.
  if (timeout) *timeout = uepoll::impl::TimeLeft(end);
  return ToErrno(r);
}

int uepoll_pselect(int nfds, fd_set* readfds, fd_set* writefds,
                   fd_set* exceptfds, const struct timespec* timeout,
                   const sigset_t* sigmask) {
  int n = nfds > 0 ? uepoll::impl::KernelSetBits(nfds) : nfds;
  if (n < 0 && nfds > 0) return ToErrno(n);
  if (!uepoll::impl::HasUepoll(n, readfds, writefds, exceptfds)) {
    return sys::Pselect(nfds, readfds, writefds, exceptfds, timeout, sigmask);
  }
  // do_pselect: the timeout, then the mask; glibc passes the kernel a copy
  // of the timeout, so nothing is written back.
  Deadline deadline = Deadline::Infinite();
  if (timeout) {
    if (uepoll::impl::UserFault(timeout)) return ToErrno(-EFAULT);
    if (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
        timeout->tv_nsec >= 1000000000) {
      return ToErrno(-EINVAL);
    }
    deadline = Deadline::FromTimespec(*timeout);
  }
  if (sigmask && uepoll::impl::UserFault(sigmask)) return ToErrno(-EFAULT);
  return ToErrno(
      uepoll::impl::Select(n, readfds, writefds, exceptfds, deadline, sigmask));
}

}  // extern "C"
