// File: an open object, the kernel's struct file and its private data in
// one. Sources (eventfd, pipe ends, sockets) and epoll instances derive from
// it.
//
// Lifetime: refs_ counts the descriptors that refer to the object plus the
// calls in progress on it (the kernel's f_count: descriptor-table entries
// and fget()). epoll items do NOT hold a reference: when the last reference
// goes, every item watching the object is removed (the kernel's
// eventpoll_release_file), then the kind's Release() runs.
//
// Thread safety: refs_ and f_flags_ are atomic. The watchers list (the
// kernel's file->f_ep) is guarded by watch_lock_ and owned by the epoll code.
#ifndef UEPOLL_SRC_CORE_FILE_H_
#define UEPOLL_SRC_CORE_FILE_H_

#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>

#include <atomic>
#include <cassert>
#include <cstdint>

#include "base/alloc.h"
#include "base/list.h"
#include "base/mutex.h"
#include "core/live.h"
#include "core/wait_queue.h"

namespace uepoll::impl {

enum class FileKind : uint8_t {
  kEventfd,
  kPipe,
  kSocket,
  kEpoll,
  kTimerfd,  // sources/timerfd.h
  kUser,     // sources/user_object.h: callbacks or a readiness mask
};

class IoIter;
struct FileOwner;  // core/sigio.h
struct InodeIdentity;

class File {
 public:
  UEPOLL_ALLOCATED_CLASS
  File(FileKind kind, uint32_t f_flags) : kind_(kind), f_flags_(f_flags) {
    Live::Inc(Live::files);
  }
  virtual ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  FileKind kind() const { return kind_; }
  bool is_epoll() const { return kind_ == FileKind::kEpoll; }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // A reference unless the object is already in its last close.
  bool TryRef() {
    long r = refs_.load(std::memory_order_relaxed);
    while (r > 0) {
      if (refs_.compare_exchange_weak(r, r + 1, std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  // acq_rel: the release half orders this holder's writes before the
  // object's teardown; the acquire half (in the last Unref) sees them all.
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) LastClose();
  }

  // Current readiness (EPOLL* bits), the kernel's f_op->poll() without a
  // poll table. Never blocks, changes nothing observable. `depth` is the
  // nesting depth for epoll instances polling instances.
  virtual uint32_t Poll(int depth = 0) = 0;
  // The queue watchers hook into (poll_wait()).
  virtual WaitQueue& PollQueue() = 0;
  // Whether Poll() is at present one atomic load that takes no lock: an
  // eventfd's always, a timerfd's unless it is armed with
  // TFD_TIMER_CANCEL_ON_SET (its poll then takes its lock and reads the
  // clock's steps). A harvest may then poll the file by PollNoLock() with
  // its instance's lock_ held (epoll/wait.cc, the head harvest).
  bool poll_is_a_load() const {
    return poll_is_a_load_.load(std::memory_order_relaxed);
  }
  // Poll() by that one load, for a caller that found poll_is_a_load() true
  // and holds a lock that the kind's own locks may not nest inside: it
  // takes no lock even if poll_is_a_load() changed since. A kind that sets
  // the flag overrides it; this one is never called.
  virtual uint32_t PollNoLock() {
    assert(!"a kind whose poll is a load overrides PollNoLock");
    return 0;
  }

  virtual ssize_t Read(void* buf, size_t count);
  virtual ssize_t Write(const void* buf, size_t count);
  // Vectored I/O (readv, writev; the kernel's read_iter and write_iter).
  // The defaults call Read/Write once per segment and stop at the first
  // short count, as the kernel's do_loop_readv_writev does for a file that
  // has only read/write; a kind whose kernel counterpart has read_iter
  // (pipes, sockets, eventfd's read, timerfd) overrides them. `it` has a
  // nonzero count.
  virtual ssize_t ReadIter(IoIter& it);
  virtual ssize_t WriteIter(IoIter& it);
  virtual int Shutdown(int how);
  // The kind's ioctl, after the C API handled the generic commands
  // (FIONBIO, FIOCLEX, ...): the kernel's f_op->unlocked_ioctl. `arg` is
  // the caller's argument, a pointer for the commands that take one.
  // Default: -ENOTTY, as for a file without an ioctl.
  virtual int Ioctl(unsigned long cmd, unsigned long arg);
  // The kernel's file_count(): references held by descriptors, calls in
  // progress and (for sockets) descriptors in flight. A snapshot; only the
  // socket garbage collector reads it (sources/unix_gc.h).
  long RefCount() const { return refs_.load(std::memory_order_acquire); }

  // The kernel file of the object's first number, in the kernel
  // numbering: a new descriptor at the lowest free number >= minfd, or
  // -errno. A placeholder (kernel/placeholder.h) by default; an instance's
  // is its kernel half (kernel/kernel_half.h).
  virtual int OpenKernelFile(int minfd);
  // A new number newfd now refers to this object, made from oldfd (dup,
  // dup2, F_DUPFD); its kernel file is a copy of oldfd's. An instance's
  // kernel half may use it (epoll/kernel_side.cc).
  virtual void NumberAdded(int newfd, int oldfd) {
    (void)newfd;
    (void)oldfd;
  }
  // Number fd stops referring to this object (close, dup2 over it) and is
  // about to be closed or replaced in the kernel; called while no other
  // close or dup2 of fd can run.
  virtual void NumberRemoved(int fd) { (void)fd; }
  // The change NumberRemoved(fd) announced failed in the kernel (a dup2
  // that the kernel refused): fd still names the object. A failing call
  // changes nothing.
  virtual void NumberRestored(int fd) { (void)fd; }
  // Kernel descriptors a thread blocked on this object (in poll(), or in a
  // wait on an instance) must sleep on too, in out[0..n); returns n (0..2).
  virtual int KernelSleepFds(int out[2]) {
    (void)out;
    return 0;
  }
  // Whether a call given the number's kernel file could sleep on it (an
  // instance's kernel half is a kernel epoll; a placeholder refuses every
  // call): a close then puts a placeholder at the number before the slot
  // stops naming the object (FdTable::Close).
  virtual bool KernelFileMaySleep() const { return false; }
  // For a message carrying the object in flight (sources/scm_rights.h): a
  // private copy of the kernel file its numbers must have when it is
  // received, or -1 when a new OpenKernelFile() will do (a placeholder).
  virtual int DupKernelFileForFlight() { return -1; }
  // The object was given more than one number at some point (a hint for
  // the instance's kernel half, which must find every number).
  bool maybe_many_numbers() const {
    return many_numbers_.load(std::memory_order_relaxed);
  }
  void set_many_numbers() {
    if (!maybe_many_numbers()) {
      many_numbers_.store(true, std::memory_order_seq_cst);
    }
  }

  // fork(): in the child, an object that a parent thread was in the middle
  // of changing (one of its locks held: that thread does not exist here)
  // is left as it is, and its numbers can still be closed: closing one
  // neither tells the object nor waits for it, and the last reference
  // leaks the object instead of tearing it down, which would take its
  // locks (docs/semantics.md D12). Set only by an atfork child handler,
  // before any other code runs in the child; never in a parent.
  bool left_at_fork() const { return left_at_fork_; }
  void set_left_at_fork() { left_at_fork_ = true; }

  // fasync (the kernel's f_op->fasync): put this file in signal-driven
  // mode through descriptor fd (on), or take it out (off), and set or
  // clear O_ASYNC in its flags; 0 or -errno. Default: -ENOTTY, a kind
  // without signal-driven I/O (fcntl F_SETFL then ignores O_ASYNC and
  // ioctl FIOASYNC fails ENOTTY, as the kernel does for a file without
  // fasync). Pipes and sockets implement it (core/sigio.h).
  virtual int Fasync(int fd, bool on) {
    (void)fd;
    (void)on;
    return -ENOTTY;
  }
  // The descriptor signal-driven mode was set through (si_fd), or -1 when
  // the file is not in that mode (then flags() has no O_ASYNC).
  virtual int FasyncFd() { return -1; }
  // fstat's inode identity (capi/stat_api.cc) for the kinds that have an
  // inode of their own: both ends of a pipe share one, each socket has its
  // own. Default: nullptr, an anonymous inode (eventfds, instances,
  // timerfds and user objects all report the kernel's one anon inode).
  virtual InodeIdentity* Inode() { return nullptr; }

  // The kernel's f_owner (fcntl F_SETOWN, F_SETOWN_EX, F_SETSIG): nullptr
  // until the first command that sets it. Owned by the file, freed with
  // it; never replaced once made (core/sigio.h).
  FileOwner* owner() const { return owner_.load(std::memory_order_acquire); }
  // The owner record, made on first use; nullptr when out of memory.
  FileOwner* MakeOwner();

  // File status flags (F_GETFL): access mode | O_NONBLOCK | ...
  uint32_t flags() const { return f_flags_.load(std::memory_order_relaxed); }
  bool nonblock() const { return flags() & O_NONBLOCK; }
  void set_flags(uint32_t f) { f_flags_.store(f, std::memory_order_relaxed); }
  // F_SETFL: which flags this kind lets change; -EINVAL for O_DIRECT where
  // unsupported.
  virtual int SetStatusFlags(uint32_t arg);

  // --- epoll bookkeeping: items watching this file (the kernel's f_ep) ---
  // The lock of the watchers list, taken by the epoll code.
  Mutex& watch_lock() RETURN_CAPABILITY(watch_lock_) { return watch_lock_; }

 private:
  Mutex watch_lock_;  // private, where it was: the layout is unchanged

 public:
  ListNode watchers_ GUARDED_BY(watch_lock_);
  // Lockless "is this file watched by some instance" (READ_ONCE(f_ep)),
  // a hint for the ADD-time nesting decision only; never a reason to skip
  // watch_lock_ on a lifetime path.
  std::atomic<int> nwatchers_{0};

 protected:
  // ReadIter for an object whose kernel read_iter hands out one value of
  // exactly `size` bytes (eventfd, timerfd): EINVAL below `size`, then, as
  // their Read does for a NULL buffer, EFAULT before anything is consumed
  // (docs/semantics.md D2), then Read into a bounce buffer and copy out.
  ssize_t ReadIterOneValue(IoIter& it, size_t size);

  // The kind's teardown once no reference and no watcher is left. Default:
  // delete this. Epoll instances defer the free to their own refcount.
  virtual void Release() { delete this; }

  void set_poll_is_a_load(bool v) {
    poll_is_a_load_.store(v, std::memory_order_relaxed);
  }

 private:
  void LastClose();

  const FileKind kind_;
  std::atomic<bool> poll_is_a_load_{false};  // see poll_is_a_load()
  std::atomic<long> refs_{1};
  std::atomic<uint32_t> f_flags_;
  std::atomic<bool> many_numbers_{false};
  bool left_at_fork_ = false;               // see left_at_fork()
  std::atomic<FileOwner*> owner_{nullptr};  // see owner()
};

// RAII reference to a File, as fdget()/fdput().
class FileRef {
 public:
  FileRef() = default;
  explicit FileRef(File* f) : f_(f) {}  // adopts a reference
  ~FileRef() {
    if (f_) f_->Unref();
  }
  FileRef(FileRef&& o) noexcept : f_(o.f_) { o.f_ = nullptr; }
  FileRef& operator=(FileRef&& o) noexcept {
    if (this != &o) {
      if (f_) f_->Unref();
      f_ = o.f_;
      o.f_ = nullptr;
    }
    return *this;
  }
  File* get() const { return f_; }
  File* operator->() const { return f_; }
  explicit operator bool() const { return f_ != nullptr; }
  File* release() {
    File* f = f_;
    f_ = nullptr;
    return f;
  }

 private:
  File* f_ = nullptr;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_CORE_FILE_H_
