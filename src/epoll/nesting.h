// The ADD-time checks for nested instances (the kernel's ep_loop_check and
// reverse_path_check), and the one process-wide lock in uepoll, g_nested,
// which only such an ADD takes. It is fork-safe: pthread_atfork handlers
// take it before fork() and release it in parent and child (nesting.cc).
//
// Thread safety: every function here requires NestingLock() held. They
// take instances' mtx_ (downward walk) and files' watch_lock_ (upward
// walks) while holding it.
#ifndef UEPOLL_SRC_EPOLL_NESTING_H_
#define UEPOLL_SRC_EPOLL_NESTING_H_

#include <cstddef>
#include <cstdint>

#include "base/mutex.h"
#include "epoll/eventpoll.h"

namespace uepoll::impl {

// At most 4 instance-to-instance links in any chain (5 instances).
inline constexpr int kMaxNests = 4;

Mutex& NestingLock();
// The generation of the current (or last) check; ADD compares an
// instance's gen_ with it to know whether a check just visited it.
uint64_t LoopCheckGen();

class NestingCheck {
 public:
  // Starts a check generation. Requires NestingLock().
  NestingCheck();
  // Drops the references on the files collected for the path check.
  ~NestingCheck();

  // ep_loop_check: true if adding `to` into `ep` makes a cycle or a chain
  // longer than kMaxNests links.
  bool CreatesLoop(Eventpoll* ep, Eventpoll* to);
  // Remember a plain (non-instance) target for the path check.
  void AddFile(File* f);
  // reverse_path_check: true if some collected file would have too many
  // wakeup paths.
  bool TooManyPaths();
  // An allocation failed while collecting files: the ADD must fail ENOMEM.
  bool out_of_memory() const { return oom_; }

 private:
  int DownDepth(Eventpoll* ep, int depth);
  int UpDepth(Eventpoll* ep);
  bool PathsFrom(File* f, int depth);

  uint64_t gen_;
  Eventpoll* inserting_into_ = nullptr;
  File** files_ = nullptr;  // each holds a reference
  size_t nfiles_ = 0;
  size_t cap_ = 0;
  bool oom_ = false;
  int path_count_[kMaxNests + 1] = {};
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_EPOLL_NESTING_H_
