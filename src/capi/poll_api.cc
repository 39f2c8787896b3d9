// uepoll_poll: poll(2) over uepoll descriptors.
//
// Like the kernel's do_poll: a first pass that needs no wait entry (the
// common, already-ready case), then a pass that hooks an entry on every
// object's queue and re-polls, so that a wakeup between the two cannot be
// lost; then sleep, unhook, and repeat until something is ready, the
// timeout passes or a signal arrives.
#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "base/alloc.h"
#include "base/parker.h"
#include "capi/errors.h"
#include "core/fd_table.h"

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

// An array of n FileRefs from Allocate (ok() false if that failed).
class FileRefArray {
 public:
  explicit FileRefArray(size_t n)
      : n_(n), p_(n ? NewArray<FileRef>(n) : nullptr) {}
  ~FileRefArray() {
    if (!p_) return;
    for (size_t i = 0; i < n_; ++i) p_[i].~FileRef();
    DeleteArray(p_);
  }
  bool ok() const { return p_ != nullptr; }
  FileRef& operator[](size_t i) { return p_[i]; }
  const FileRef& operator[](size_t i) const { return p_[i]; }

 private:
  size_t n_;
  FileRef* p_;
};

// One pass: fills revents, returns how many are nonzero. Each pass looks
// the descriptors up again, as the kernel's do_poll does: one closed while
// we slept reports POLLNVAL. The wait entries stay on the queues of the
// objects found by the first pass (`files`), as the kernel's do.
int PollOnce(pollfd* fds, nfds_t n) {
  int count = 0;
  for (nfds_t i = 0; i < n; ++i) {
    short rev = 0;
    if (fds[i].fd >= 0) {
      FileRef ref = FdTable::Get().Lookup(fds[i].fd);
      File* f = ref.get();
      if (!f) {
        rev = POLLNVAL;
      } else {
        uint32_t want =
            static_cast<uint16_t>(fds[i].events) | EPOLLERR | EPOLLHUP;
        rev = static_cast<short>(f->Poll(0) & want);
      }
    }
    fds[i].revents = rev;
    if (rev) ++count;
  }
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
  if (syscall(SYS_getrlimit, RLIMIT_NOFILE, &rl) == 0) return rl.cur;
#else
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) return rl.rlim_cur;
#endif
  return RLIM_INFINITY;
}

// do_sys_poll's check of nfds: EINVAL above RLIMIT_NOFILE's soft limit
// (issue 15, bug 9), before anything else. The limit is read on every call
// with nfds > 0: it may be as low as 0, so no nfds >= 1 is safe without
// reading it, and setrlimit (or another process's prlimit) may change it
// at any time, so it cannot be cached. RLIM_INFINITY is never below an
// unsigned int. uepoll's own descriptor limit plays no part, as in the
// kernel.
int CheckNfds(nfds_t n) {
  if (n == 0) return 0;
  return n > NofileSoftLimit() ? -EINVAL : 0;
}

int Poll(pollfd* fds, nfds_t n, const Deadline& deadline) {
  if (int err = CheckNfds(n)) return err;
  if (n && !fds) return -EFAULT;
  int count = PollOnce(fds, n);
  if (count || deadline.is_zero()) return count;

  // The objects whose queues we sleep on, held for the whole wait.
  FileRefArray files(n);
  if (n && !files.ok()) return -ENOMEM;
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd >= 0) files[i] = FdTable::Get().Lookup(fds[i].fd);
  }

  PollEntry* entries = NewArray<PollEntry>(n);
  if (!entries) return -ENOMEM;
  struct Freer {
    PollEntry* p;
    ~Freer() { DeleteArray(p); }
  } freer{entries};
  Parker* parker = &Parker::Current();
  for (;;) {
    for (nfds_t i = 0; i < n; ++i) {
      entries[i].queue = nullptr;
      if (!files[i]) continue;
      entries[i].entry.kind = WaitKind::kPoll;
      entries[i].parker = parker;
      entries[i].queue = &files[i]->PollQueue();
      entries[i].queue->Add(&entries[i].entry);
    }
    count = PollOnce(fds, n);
    Parker::Result r = Parker::Result::kWoken;
    if (!count) r = parker->Park(deadline, nullptr);
    for (nfds_t i = 0; i < n; ++i) {
      if (entries[i].queue) entries[i].queue->Remove(&entries[i].entry);
    }
    if (count) return count;
    count = PollOnce(fds, n);
    if (count) return count;
    if (r == Parker::Result::kInterrupted) return -EINTR;
    if (r == Parker::Result::kTimedOut || deadline.Expired()) return 0;
  }
}

}  // namespace
}  // namespace uepoll::impl

extern "C" int uepoll_poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  // The syscall takes nfds as an unsigned int: the upper bits of a 64-bit
  // nfds_t are dropped (poll(fds, 2^32 + 1, 0) polls one entry).
  nfds_t n = static_cast<unsigned int>(nfds);
  return uepoll::impl::ToErrno(
      uepoll::impl::Poll(fds, n, uepoll::impl::Deadline::FromMillis(timeout)));
}
