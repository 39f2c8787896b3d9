// unlisted_epoll: kernel epolls of uepoll's own while they sit at a number
// that no uepoll table lists yet.
//
// The kernel makes a descriptor visible only once its file is whole
// (fd_install). uepoll cannot: an instance's number in the kernel
// numbering holds its kernel half, which the kernel puts at the lowest free
// number before uepoll's table names the instance there (FdTable::Install,
// Dup, InstallFlight), and a few calls make a short-lived epoll of their
// own (a thread's sleep epoll before it moves up, kernel/probe.h's probe,
// a kernel half copied for flight). In that moment another thread's call
// on the number (a number it closed and still uses, or one another thread
// is about to get) finds a kernel epoll that uepoll did not list, and its
// answer for a uepoll target is the one for a kernel epoll: EPERM, which
// the kernel never gives there (the kernel would answer EBADF, or act on
// the new instance).
//
// So each such epoll is made inside a Scope, which counts it in and out,
// and a call whose answer rests on having found an unlisted kernel epoll
// checks afterwards whether one was in the making around its look-up
// (Mark before the look-up, WaitSince after the kernel answered); if so it
// waits for those to finish and looks the number up again, as if it came
// after them. The check is on error paths only; a Scope costs two atomic
// increments on calls that make a kernel epoll anyway.
#ifndef UEPOLL_SRC_BASE_UNLISTED_EPOLL_H_
#define UEPOLL_SRC_BASE_UNLISTED_EPOLL_H_

#include <stdint.h>

#include <atomic>

namespace uepoll::impl {

class UnlistedEpolls {
 public:
  // The count of finished scopes, read before the look-up.
  static uint64_t Mark() { return done_.load(std::memory_order_seq_cst); }

  // Whether a scope was open at some moment since `mark` was read, or has
  // been opened since; if so, waits until the scopes open now have closed
  // (the caller then looks again). False, without waiting, inside a Scope
  // of this thread (a signal handler that interrupted one would wait for
  // itself).
  static bool WaitSince(uint64_t mark);

  // fork(): scopes other parent threads had open never close in the child.
  // Written only where it changes: a write makes the child copy the page.
  static void ForkChild() {
    uint64_t started = started_.load(std::memory_order_relaxed);
    if (done_.load(std::memory_order_relaxed) != started) {
      done_.store(started, std::memory_order_relaxed);
    }
  }

  class Scope {
   public:
    // `counts`: false for a file whose kernel file is no epoll (a
    // placeholder), which needs no scope.
    explicit Scope(bool counts = true);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool counts_;
  };

 private:
  // started_ >= done_ at all times; equal when no scope is open.
  static std::atomic<uint64_t> started_;
  static std::atomic<uint64_t> done_;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_UNLISTED_EPOLL_H_
