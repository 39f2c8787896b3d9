// uepoll_poll: poll(2) over any mix of uepoll and kernel descriptors.
//
// Like the kernel's do_poll: a first pass that needs no wait entry (the
// common, already-ready case), then a pass that hooks an entry on every
// uepoll object's queue and re-polls, so that a wakeup between the two
// cannot be lost; then sleep, unhook, and repeat until something is ready,
// the timeout passes or a signal arrives.
//
// Kernel descriptors in the array are polled by the kernel: in a pass, one
// ppoll with a zero timeout for all of them; in the sleep, the parker's
// ppoll watches them beside its own descriptor, together with the kernel
// halves of uepoll instances in the array (which hold the kernel halves of
// the instances below them, kernel/kernel_half.h). An array with no uepoll
// descriptor at all is simply the kernel's poll.
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "base/alloc.h"
#include "base/parker.h"
#include "base/sys.h"
#include "capi/errors.h"
#include "capi/poll_core.h"
#include "core/fd_table.h"
#include "core/io_iter.h"
#include "epoll/eventpoll.h"
#include "kernel/export.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {
namespace {

struct PollEntry {
  WaitEntry entry;
  Parker* parker;
  WaitQueue* queue;
};

}  // namespace

// pollwake: any change may matter; the re-poll decides.
int PollEntryWake(WaitEntry* e, uint32_t /*key*/) {
  UEPOLL_CONTAINER_OF(e, PollEntry, entry)->parker->Unpark();
  return 1;
}

namespace {

// An array of n T from Allocate, destroyed and freed with it (ok() false if
// the allocation failed).
template <class T>
class Array {
 public:
  explicit Array(size_t n) : n_(n), p_(n ? NewArray<T>(n) : nullptr) {}
  ~Array() {
    if (!p_) return;
    for (size_t i = 0; i < n_; ++i) p_[i].~T();
    DeleteArray(p_);
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  bool ok() const { return n_ == 0 || p_ != nullptr; }
  T& operator[](size_t i) { return p_[i]; }
  T* get() { return p_; }

 private:
  size_t n_;
  T* p_;
};

// One pass: fills revents, returns how many are nonzero (or -errno). Each
// pass looks the descriptors up again, as the kernel's do_poll does: one
// closed while we slept reports POLLNVAL. Kernel descriptors are asked in
// batches, one ppoll with a zero timeout each, from a stack array: a poll
// that need not sleep allocates nothing.
int PollOnce(pollfd* fds, nfds_t n) {
  constexpr nfds_t kBatch = 16;
  pollfd kp[kBatch];
  nfds_t from[kBatch];
  nfds_t nk = 0;
  int count = 0;
  auto flush = [&]() -> int {
    if (nk == 0) return 0;
    timespec zero{0, 0};
    if (sys::Ppoll(kp, nk, &zero, nullptr) < 0) return -errno;
    for (nfds_t j = 0; j < nk; ++j) {
      fds[from[j]].revents = kp[j].revents;
      if (kp[j].revents) ++count;
    }
    nk = 0;
    return 0;
  };
  for (nfds_t i = 0; i < n; ++i) {
    fds[i].revents = 0;
    if (fds[i].fd < 0) continue;
    FileRef ref = FdTable::Get().Lookup(fds[i].fd);
    if (!ref) {
      kp[nk] = pollfd{fds[i].fd, fds[i].events, 0};
      from[nk++] = i;
      if (nk == kBatch) {
        if (int r = flush()) return r;
      }
      continue;
    }
    uint32_t want = static_cast<uint16_t>(fds[i].events) | EPOLLERR | EPOLLHUP;
    fds[i].revents = static_cast<short>(ref->Poll(0) & want);
    if (fds[i].revents) ++count;
  }
  if (int r = flush()) return r;
  return count;
}

// RLIMIT_NOFILE's soft limit, as the kernel's rlimit() reads it. Through
// the legacy getrlimit syscall where the ABI has it with 64-bit fields:
// glibc's getrlimit is prlimit64, which costs twice as much (measured on
// the reference VM: 420 ns against 950 ns; a null syscall is 380 ns).
rlim_t NofileSoftLimit() {
#if defined(SYS_getrlimit) && defined(__LP64__)
  struct {
    unsigned long cur, max;
  } rl;
  if (sys::Syscall(SYS_getrlimit, RLIMIT_NOFILE, reinterpret_cast<long>(&rl), 0,
                   0, 0, 0) == 0) {
    return rl.cur;
  }
#else
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) return rl.rlim_cur;
#endif
  return RLIM_INFINITY;
}

// A zero timeout that found nothing: the kernel still installed the mask
// first, and a pending signal it unblocks fails the call with EINTR, its
// handler run inside the call under that mask (do_poll's and do_select's
// signal_pending test; epoll_pwait has no such test, and returns 0). The
// kernel decides it: a ppoll of no descriptors with a zero timeout does
// exactly that.
int PendingUnderMask(const sigset_t* mask) {
  timespec zero{0, 0};
  return sys::Ppoll(nullptr, 0, &zero, mask) < 0 ? -errno : 0;
}

}  // namespace

// do_sys_poll's check of nfds: EINVAL above RLIMIT_NOFILE's soft limit
// (PollNfds.NfdsAboveRlimitNofileIsEinval), before anything else. The limit is
// read on every call with nfds > 0: it may be as low as 0, so no nfds >= 1 is
// safe without reading it, and setrlimit (or another process's prlimit) may
// change it at any time, so it cannot be cached. RLIM_INFINITY is never below
// an unsigned int. uepoll's own descriptor limit plays no part, as in the
// kernel.
int CheckNfds(nfds_t n) {
  if (n == 0) return 0;
  return n > NofileSoftLimit() ? -EINVAL : 0;
}

int PollFds(pollfd* fds, nfds_t n, const Deadline& deadline,
            const timespec* timeout, const sigset_t* mask) {
  if (n && !fds) return -EFAULT;
  bool any_uepoll = false;
  FdTable& t = FdTable::Get();
  for (nfds_t i = 0; i < n && !any_uepoll; ++i) {
    // A number being closed or replaced right now is looked at once that
    // is done (FdTable::WaitUnchanged): the kernel's poll of what it still
    // names there (an instance's kernel half) would miss the instance's
    // events.
    any_uepoll = t.IsOpen(fds[i].fd);
    while (!any_uepoll && t.WaitUnchanged(fds[i].fd)) {
      any_uepoll = t.IsOpen(fds[i].fd);
    }
  }
  if (!any_uepoll) {
    int r = sys::Ppoll(fds, n, timeout, mask);
    return r < 0 ? -errno : r;
  }
  // An expiry no thread ran yet must be seen (docs/design.md, "Timers").
  RunDueTimers();
  int count = PollOnce(fds, n);
  if (count) return count;
  if (deadline.is_zero()) return mask ? PendingUnderMask(mask) : 0;

  // The objects whose queues we sleep on, held for the whole wait, and the
  // kernel descriptors to sleep on: [0] the parker's, then the array's
  // kernel descriptors, then what the uepoll objects ask for (at most two
  // each: an instance's kernel half).
  Array<FileRef> files(n);
  Array<pollfd> sleep_set(1 + 3 * n + 1);
  // The array index of the uepoll object each sleep_set entry came from,
  // or -1 (the parker's, an array entry's own kernel descriptor).
  Array<long> sleep_owner(1 + 3 * n + 1);
  if (!files.ok() || !sleep_set.ok() || !sleep_owner.ok()) return -ENOMEM;
  sleep_owner[0] = -1;
  nfds_t ns = 1;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0) continue;
    files[i] = FdTable::Get().Lookup(fds[i].fd);
    int extra[2];
    int k = 0;
    if (!files[i]) {
      extra[k++] = fds[i].fd;
    } else {
      k = files[i]->KernelSleepFds(extra);
    }
    for (int j = 0; j < k; ++j) {
      short events = files[i] ? short{POLLIN} : fds[i].events;
      sleep_owner[ns] = files[i] ? static_cast<long>(i) : -1;
      sleep_set[ns++] = pollfd{extra[j], events, 0};
    }
  }

  Array<PollEntry> entries(n);
  if (!entries.ok()) return -ENOMEM;
  for (nfds_t i = 0; i < n; ++i) entries[i].queue = nullptr;
  // Unhooks every entry on every way out, a cancellation (pthread_cancel)
  // unwinding the sleep included.
  struct Entries {
    PollEntry* p;
    nfds_t n;
    void Unhook() {
      for (nfds_t i = 0; i < n; ++i) {
        if (p[i].queue) p[i].queue->Remove(&p[i].entry);
        p[i].queue = nullptr;
      }
    }
    ~Entries() { Unhook(); }
  } hooked{entries.get(), n};
  Parker* parker = &Parker::Current();
  for (;;) {
    for (nfds_t i = 0; i < n; ++i) {
      if (!files[i]) continue;
      entries[i].entry.kind = WaitKind::kPoll;
      entries[i].parker = parker;
      entries[i].queue = &files[i]->PollQueue();
      entries[i].queue->Add(&entries[i].entry);
    }
    count = PollOnce(fds, n);
    Parker::Result r = Parker::kWoken;
    if (!count) {
      r = parker->Park(deadline, mask, ns > 1 ? sleep_set.get() : nullptr, ns);
    }
    hooked.Unhook();
    if (count) return count;
    if (r & Parker::kKernelReady) {
      for (nfds_t i = 1; i < ns; ++i) {
        if ((sleep_set[i].revents & POLLNVAL) && sleep_owner[i] >= 0) {
          // An instance's kernel half, closed with libc close(): sleeping
          // on it again would end at once (kernel/kernel_half.h, "Numbers").
          File* f = files[static_cast<nfds_t>(sleep_owner[i])].get();
          if (f->is_epoll()) {
            static_cast<Eventpoll*>(f)->KernelNumberLost(sleep_set[i].fd);
          }
        }
      }
    }
    count = PollOnce(fds, n);
    if (count) return count;
    if (r & Parker::kInterrupted) return -EINTR;
    // An object of the array became the kernel's while we slept (kernel/
    // export.h): its number names the kernel object now, which this sleep
    // set does not watch. Start again from the numbers.
    for (nfds_t i = 0; i < n; ++i) {
      if (files[i] && IsExported(files[i].get())) {
        timespec left;
        return PollFds(fds, n, deadline, deadline.RemainingTimespec(&left),
                       mask);
      }
    }
    if ((r & Parker::kTimedOut) || deadline.Expired()) return 0;
  }
}

namespace {

int Poll(pollfd* fds, nfds_t n, const Deadline& deadline,
         const timespec* timeout, const sigset_t* mask) {
  if (int err = CheckNfds(n)) return err;
  return PollFds(fds, n, deadline, timeout, mask);
}

// A relative timespec as ppoll and pselect take it: EINVAL unless
// tv_sec >= 0 and 0 <= tv_nsec < 1e9 (poll_select_set_timeout).
bool ValidTimespec(const timespec& ts) {
  return ts.tv_sec >= 0 && ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000;
}

}  // namespace
}  // namespace uepoll::impl

extern "C" int uepoll_poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  // The syscall takes nfds as an unsigned int: the upper bits of a 64-bit
  // nfds_t are dropped (poll(fds, 2^32 + 1, 0) polls one entry).
  nfds_t n = static_cast<unsigned int>(nfds);
  timespec ts;
  const timespec* tsp = nullptr;
  if (timeout >= 0) {
    ts.tv_sec = timeout / 1000;
    ts.tv_nsec = (timeout % 1000) * 1000000L;
    tsp = &ts;
  }
  return uepoll::impl::ToErrno(uepoll::impl::Poll(
      fds, n, uepoll::impl::Deadline::FromMillis(timeout), tsp, nullptr));
}

// ppoll through libc: the timeout is read, never written back (glibc
// passes the kernel a copy); then the mask, installed for the sleep only.
extern "C" int uepoll_ppoll(struct pollfd* fds, nfds_t nfds,
                            const struct timespec* tmo_p,
                            const sigset_t* sigmask) {
  using uepoll::impl::Deadline;
  Deadline deadline = Deadline::Infinite();
  if (tmo_p) {
    if (uepoll::impl::UserFault(tmo_p)) return uepoll::impl::ToErrno(-EFAULT);
    if (!uepoll::impl::ValidTimespec(*tmo_p)) {
      return uepoll::impl::ToErrno(-EINVAL);
    }
    deadline = Deadline::FromTimespec(*tmo_p);
  }
  if (sigmask && uepoll::impl::UserFault(sigmask)) {
    return uepoll::impl::ToErrno(-EFAULT);
  }
  nfds_t n = static_cast<unsigned int>(nfds);
  return uepoll::impl::ToErrno(
      uepoll::impl::Poll(fds, n, deadline, tmo_p, sigmask));
}
