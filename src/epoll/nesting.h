// The ADD-time checks for nested instances (the kernel's ep_loop_check and
// reverse_path_check), and the one process-wide lock in uepoll, g_nested,
// which only such an ADD takes. It is fork-safe: pthread_atfork handlers
// take it before fork() and release it in parent and child (nesting.cc).
//
// Thread safety: every function here requires g_nested (declared in
// eventpoll.h, which it guards fields of; NestingLock() returns it) held,
// and says so with REQUIRES(g_nested). They take instances' mtx_
// (downward walk) and files' watch_lock_ (upward walks) while holding it.
#ifndef UEPOLL_SRC_EPOLL_NESTING_H_
#define UEPOLL_SRC_EPOLL_NESTING_H_

#include <cstddef>
#include <cstdint>

#include "base/mutex.h"
#include "epoll/eventpoll.h"

namespace uepoll::impl {

// At most 4 instance-to-instance links in any chain (5 instances).
inline constexpr int kMaxNests = 4;

Mutex& NestingLock() RETURN_CAPABILITY(g_nested);
// The generation of the current (or last) check; ADD compares an
// instance's gen_ with it to know whether a check just visited it.
uint64_t LoopCheckGen();

class NestingCheck {
 public:
  // Starts a check generation.
  NestingCheck() REQUIRES(g_nested);
  // Ends it. The references on the files collected for the path check
  // must have been taken with TakeFiles.
  ~NestingCheck() REQUIRES(g_nested);
  // Hands over the files collected for the path check, each with a
  // reference, as an array the caller frees (DeleteArray) once it has
  // dropped them, after g_nested is released: a file's last reference may
  // run its release there (a socket pair's queued messages, the instances
  // in flight in them, whose items' frees may wait for other threads:
  // docs/design.md, "Lockless eventfd wakeups"), which must hold no lock.
  File** TakeFiles(size_t* n) REQUIRES(g_nested);

  // ep_loop_check: true if adding `to` into `ep` makes a cycle or a chain
  // longer than kMaxNests links.
  bool CreatesLoop(Eventpoll* ep, Eventpoll* to) REQUIRES(g_nested);
  // Remember a plain (non-instance) target for the path check.
  void AddFile(File* f) REQUIRES(g_nested);
  // reverse_path_check: true if some collected file would have too many
  // wakeup paths.
  bool TooManyPaths() REQUIRES(g_nested);
  // An allocation failed while collecting files: the ADD must fail ENOMEM.
  bool out_of_memory() const { return oom_; }

 private:
  int DownDepth(Eventpoll* ep, int depth) REQUIRES(g_nested);
  int UpDepth(Eventpoll* ep) REQUIRES(g_nested);
  bool PathsFrom(File* f, int depth) REQUIRES(g_nested);

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
