#include "epoll/nesting.h"

#include <pthread.h>

#include <algorithm>
#include <cassert>

#include "base/fork_path.h"

namespace uepoll::impl {

UEPOLL_FORK_DATA constinit Mutex g_nested;

namespace {

// Written under g_nested, read by ADD under an instance's mtx_.
std::atomic<uint64_t> g_loop_check_gen{1};

// fork() safety (Fork.ChildDoesNestedAddsWhileParentThreadsDoNestedAdds).
// g_nested is the one process-wide lock (every other lock belongs to an
// object), so a child must never inherit it held: a thread of the parent inside
// a nested ADD at the fork does not exist in the child to release it, and the
// child's own first nested ADD - on instances it made itself - would block
// forever. The prepare handler takes it, so no check is in progress while
// fork() copies the address space (the check's generation and the gen_ marks it
// leaves on instances are then consistent too); the parent releases it; the
// child releases the copy its forking thread holds. Lock order: g_nested is the
// outermost uepoll lock, and fork() is never called with a uepoll lock
// held (handlers run before glibc takes its own locks, so a nested ADD
// that allocates finishes first).
// Unchecked: atfork handlers lock in one function and unlock in another.
UEPOLL_FORK_PATH void PrepareFork() NO_THREAD_SAFETY_ANALYSIS {
  g_nested.Lock();
}
UEPOLL_FORK_PATH void AfterFork() NO_THREAD_SAFETY_ANALYSIS {
  g_nested.Unlock();
}
[[maybe_unused]] const int g_atfork_registered =
    pthread_atfork(PrepareFork, AfterFork, AfterFork);

// The kernel's path_limits: paths of length 1 are unlimited; 500 of length
// 2, 100 of 3, 50 of 4 and 10 of 5 may reach one source.
constexpr int kPathLimits[kMaxNests + 1] = {1000, 500, 100, 50, 10};

}  // namespace

Mutex& NestingLock() { return g_nested; }
uint64_t LoopCheckGen() {
  return g_loop_check_gen.load(std::memory_order_acquire);
}

NestingCheck::NestingCheck()
    : gen_(g_loop_check_gen.fetch_add(1, std::memory_order_acq_rel) + 1) {}

NestingCheck::~NestingCheck() {
  // Bump again so that no instance still matches this generation.
  g_loop_check_gen.fetch_add(1, std::memory_order_acq_rel);
  assert(!files_ && "NestingCheck: TakeFiles first");
}

File** NestingCheck::TakeFiles(size_t* n) {
  File** files = files_;
  *n = nfiles_;
  files_ = nullptr;
  nfiles_ = cap_ = 0;
  return files;
}

bool NestingCheck::CreatesLoop(Eventpoll* ep, Eventpoll* to) {
  inserting_into_ = ep;
  int depth = DownDepth(to, 0);
  if (depth > kMaxNests) return true;
  int up = UpDepth(ep);
  return depth + 1 + up > kMaxNests;
}

void NestingCheck::AddFile(File* f) {
  if (std::find(files_, files_ + nfiles_, f) != files_ + nfiles_) return;
  if (nfiles_ == cap_) {
    size_t cap = cap_ ? cap_ * 2 : 16;
    File** grown = NewArray<File*>(cap);
    if (!grown) {
      oom_ = true;
      return;
    }
    std::copy(files_, files_ + nfiles_, grown);
    DeleteArray(files_);
    files_ = grown;
    cap_ = cap;
  }
  // A file already in its last close adds no path: its items are going.
  if (!f->TryRef()) return;
  files_[nfiles_++] = f;
}

// How many instance links lead down from ep (0: none), or more than
// kMaxNests if the walk meets the instance being inserted into (a cycle).
int NestingCheck::DownDepth(Eventpoll* ep, int depth) {
  if (ep->down_gen_ == gen_) return ep->down_depth_;
  int result = 0;
  MutexLock l(ep->mtx_);
  ep->gen_.store(gen_, std::memory_order_release);
  ep->items_.ForEach([&](EpItem* epi) {
    g_nested.AssertHeld();  // the analysis does not see into the lambda
    if (result > kMaxNests) return;
    if (epi->file->is_epoll()) {
      auto* child = static_cast<Eventpoll*>(epi->file);
      if (child == inserting_into_ || depth > kMaxNests) {
        result = kMaxNests + 1;
      } else {
        result = std::max(result, DownDepth(child, depth + 1) + 1);
      }
    } else {
      AddFile(epi->file);
    }
  });
  ep->down_gen_ = gen_;
  ep->down_depth_ = result;
  return result;
}

// How many instance links lead up from ep to an unwatched instance.
int NestingCheck::UpDepth(Eventpoll* ep) {
  if (ep->up_gen_ == gen_) return ep->up_depth_;
  int result = 0;
  {
    MutexLock l(ep->watch_lock());
    for (ListNode* n = ep->watchers_.next; n != &ep->watchers_; n = n->next) {
      EpItem* epi = UEPOLL_CONTAINER_OF(n, EpItem, fllink);
      result = std::max(result, UpDepth(epi->ep) + 1);
    }
  }
  ep->up_gen_ = gen_;
  ep->up_depth_ = result;
  return result;
}

bool NestingCheck::TooManyPaths() {
  for (size_t i = 0; i < nfiles_; ++i) {
    std::fill(std::begin(path_count_), std::end(path_count_), 0);
    if (PathsFrom(files_[i], 0)) return true;
  }
  return false;
}

// Counts the wakeup paths from f up to unwatched instances. Holding f's
// watch_lock_ keeps its items, and so their instances, alive.
bool NestingCheck::PathsFrom(File* f, int depth) {
  if (depth > kMaxNests) return true;
  MutexLock l(f->watch_lock());
  for (ListNode* n = f->watchers_.next; n != &f->watchers_; n = n->next) {
    EpItem* epi = UEPOLL_CONTAINER_OF(n, EpItem, fllink);
    if (!epi->ep->watched()) {
      if (depth > 0 && ++path_count_[depth] > kPathLimits[depth]) return true;
    } else if (PathsFrom(epi->ep, depth + 1)) {
      return true;
    }
  }
  return false;
}

}  // namespace uepoll::impl
