// UserObject: a pollable object defined by the application, the kernel's
// driver contract moved into the process: an f_op->poll (the `poll`
// callback answering the readiness mask now) and a wait queue the owner
// wakes with a hint (uepoll_obj_notify, the kernel's wake_up_poll).
//
// Two modes:
//  - callbacks: poll (required), read, write, release (optional) and a
//    context pointer (uepoll_obj_create);
//  - mask (the vpoll model): the owner sets and clears readiness bits
//    directly, and Poll answers exactly those bits (uepoll_vpoll_create).
//
// The callback rules (docs/design.md, "User-defined objects"):
//  - poll runs with uepoll locks held: the instance's mtx_ during a harvest
//    or ADD/MOD (plus its ancestors' when instances nest), none in
//    uepoll_poll and blocking reads. Never under a wait-queue lock or an
//    instance's lock_, so the wakeup path never waits for it. It must not
//    block and must not call uepoll; debug builds abort with a message when
//    it notifies or polls itself, and when it takes a uepoll lock its
//    thread already holds (base/mutex.h).
//  - read and write run with no uepoll lock held, the descriptor pinned
//    (a counted reference), so they may call uepoll, close descriptors and
//    notify. They must not block either: a blocking descriptor sleeps in
//    uepoll when they return -EAGAIN, until the next notify, then asks
//    again.
//  - release runs once, at the descriptors' last close, after every epoll
//    item watching the object was removed, with no uepoll lock held (the
//    collector's purge included), the thread's borrows pinned and
//    cancellation disabled, so it may call uepoll, close any descriptor,
//    block.
//
// Ordering contract for the owner: change the state poll reads before
// calling notify, either under a lock that poll also takes or with seq_cst
// atomics (as eventfd's count); then notify costs one atomic load when
// nobody watches (WaitQueue::Active) and takes no lock on the epoll fast
// path, and no watcher can miss the change (docs/design.md).
//
// Lifetime: the struct is the C API's opaque `struct uepoll_obj` handle. It
// is counted twice over: File::refs_ (descriptors and calls, whose end runs
// Release and the release callback), and handles_ (1 for the open file, 1
// per owner handle), whose end frees the memory. So the owner may notify
// after the last close: nobody watches any more, and nothing happens.
#ifndef UEPOLL_SRC_SOURCES_USER_OBJECT_H_
#define UEPOLL_SRC_SOURCES_USER_OBJECT_H_

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>

#include <uepoll/uepoll.h>

#include "core/file.h"

namespace uepoll::impl {

// The readiness bits a user object may report or a mask may hold
// (EPOLLALLMASK without EPOLLNVAL; never the flag bits EPOLLET, ...).
inline constexpr uint32_t kUserReadinessBits =
    EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDNORM |
    EPOLLRDBAND | EPOLLWRNORM | EPOLLWRBAND | EPOLLMSG | EPOLLRDHUP;

class UserObject final : public File {
 public:
  UEPOLL_ALLOCATED_CLASS
  // Callback mode; ops already validated.
  UserObject(const uepoll_obj_ops& ops, void* ctx, int flags);
  // Mask mode.
  UserObject(uint32_t mask, int flags);

  uint32_t Poll(int depth) override;
  WaitQueue& PollQueue() override { return wq_; }
  ssize_t Read(void* buf, size_t count) override;
  ssize_t Write(const void* buf, size_t count) override;

  bool mask_mode() const { return ops_.poll == nullptr; }

  // wake_up_poll(events): any thread, any time the object is alive.
  void Notify(uint32_t events);
  // Mask mode: UEPOLL_VPOLL_ADDEVENTS / DELEVENTS / SETEVENTS.
  int MaskCtl(int op, uint32_t events);

  // Owner handles (uepoll_obj_create's *objp, uepoll_obj_put).
  void GetHandle() { handles_.fetch_add(1, std::memory_order_relaxed); }
  void PutHandle();

 protected:
  void Release() override;

 private:
  friend int CreateUserObject(const uepoll_obj_ops*, void*, int, UserObject**);
  ssize_t CallIo(bool write, void* buf, size_t count);

  const uepoll_obj_ops ops_;  // poll == nullptr: mask mode
  void* const ctx_;
  // ops_.release, cleared by a create that fails after construction.
  void (*release_)(void*) = nullptr;
  // The mask in mask mode. seq_cst: pairs like eventfd's count with the
  // epoll fast path (docs/design.md) and with WaitQueue::Active().
  std::atomic<uint32_t> mask_{0};
  // 1 for the open file (dropped by Release) + 1 per owner handle.
  std::atomic<long> handles_{1};
  WaitQueue wq_;
};

// The C API's constructors and the mask control, after pointer checks.
int CreateUserObject(const uepoll_obj_ops* ops, void* ctx, int flags,
                     UserObject** handle);
int CreateVpoll(uint32_t events, int flags);
int VpollCtl(int fd, int op, uint32_t events);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_USER_OBJECT_H_
