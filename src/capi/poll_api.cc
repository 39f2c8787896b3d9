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

int Poll(pollfd* fds, nfds_t n, const Deadline& deadline) {
  if (n > static_cast<nfds_t>(FdTable::Get().limit())) return -EINVAL;
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
  for (nfds_t i = 0; i < n; ++i) entries[i].queue = nullptr;
  // Unhooks every entry and frees the array on every way out, a
  // cancellation (pthread_cancel) unwinding the sleep included.
  struct Entries {
    PollEntry* p;
    nfds_t n;
    void Unhook() {
      for (nfds_t i = 0; i < n; ++i) {
        if (p[i].queue) p[i].queue->Remove(&p[i].entry);
        p[i].queue = nullptr;
      }
    }
    ~Entries() {
      Unhook();
      DeleteArray(p);
    }
  } hooked{entries, n};
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
    if (!count) r = parker->Park(deadline, nullptr);
    hooked.Unhook();
    if (count) return count;
    count = PollOnce(fds, n);
    if (count) return count;
    if (r & Parker::kInterrupted) return -EINTR;
    if ((r & Parker::kTimedOut) || deadline.Expired()) return 0;
  }
}

}  // namespace
}  // namespace uepoll::impl

extern "C" int uepoll_poll(struct pollfd* fds, nfds_t nfds, int timeout) {
  return uepoll::impl::ToErrno(uepoll::impl::Poll(
      fds, nfds, uepoll::impl::Deadline::FromMillis(timeout)));
}
