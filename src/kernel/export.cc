// Export: the kernel equivalent of a uepoll object. See export.h for the
// protocol; the per-kind conversions are in sources/pipe_export.cc,
// sources/unix_export.cc and sources/eventfd.cc.
//
// Locking: g_session (one conversion at a time) is the outermost lock of
// uepoll: a session takes sources' locks (nested only inside it, see
// export.h), instances' locks through Ctl and CtlKernel (and, through
// CtlKernel's BecomeMixed, files' watch_lock_ upward). g_forward (the list of
// forward descriptors) is a leaf, taken under a source's lock by a Kernelize
// and held across fork() by its atfork handlers.
#include "kernel/export.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>

#include <cstring>
#include <mutex>

#include "base/alloc.h"
#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/parker.h"
#include "base/sys.h"
#include "core/borrow.h"
#include "core/fd_table.h"
#include "epoll/eventpoll.h"
#include "epoll/item.h"
#include "sources/eventfd.h"
#include "sources/pipe_inode.h"
#include "sources/unix_common.h"
#include "timer/timer_queue.h"

namespace uepoll::impl {
namespace {

UEPOLL_FORK_DATA constinit Mutex g_session;

// ---- forward descriptors and fork() ----

UEPOLL_FORK_DATA constinit Mutex g_forward ACQUIRED_AFTER(g_session);
UEPOLL_FORK_DATA constinit ListNode g_forward_list GUARDED_BY(g_forward);

// Unchecked: atfork handlers lock in one function and unlock in another.
UEPOLL_FORK_PATH void ForwardPrepare() NO_THREAD_SAFETY_ANALYSIS {
  g_forward.Lock();
}
UEPOLL_FORK_PATH void ForwardParent() NO_THREAD_SAFETY_ANALYSIS {
  g_forward.Unlock();
}
// The child's copies of shells are never used (the threads that held them
// do not exist here), and their descriptors would keep the kernel objects
// open in the child: close them while they are certainly still ours.
// Unchecked: it runs holding g_forward, taken by ForwardPrepare.
UEPOLL_FORK_PATH void ForwardChild() NO_THREAD_SAFETY_ANALYSIS {
  while (!g_forward_list.empty()) {
    ForwardFd* f = UEPOLL_CONTAINER_OF(g_forward_list.next, ForwardFd, node);
    f->node.Unlink();
    sys::Close(f->fd.exchange(-1, std::memory_order_acq_rel));
  }
  g_forward.Unlock();
}
[[maybe_unused]] const int g_forward_atfork =
    pthread_atfork(ForwardPrepare, ForwardParent, ForwardChild);

// ---- fork modes ----

std::atomic<int> g_fork_mode{static_cast<int>(ForkMode::kCopy)};
std::once_flag g_share_registered;

// Registered at the first SetForkMode(kShare), after every handler of
// uepoll's own static initialization: prepare handlers run last-registered
// first, so this one runs before any of them takes a uepoll lock.
UEPOLL_FORK_PATH void SharePrepare() {
  if (g_fork_mode.load(std::memory_order_acquire) ==
      static_cast<int>(ForkMode::kShare)) {
    ExportAll(false);
  }
}

// ---- the instance side ----

// Registers kernel descriptor fd in ep's kernel half with ev (which every
// instance has from its creation: kernel/kernel_half.h).
int AddToKernelHalf(Eventpoll* ep, int fd, epoll_event ev) {
  int r = ep->CtlKernel(EPOLL_CTL_ADD, fd, &ev);
  return r == -EEXIST ? 0 : r;
}

bool Convertible(File* f) {
  FileKind k = f->kind();
  return k == FileKind::kPipe || k == FileKind::kSocket ||
         k == FileKind::kEventfd;
}

}  // namespace

// ---- the session ----

ExportSession::~ExportSession() {
  for (size_t i = 0; i < n_; ++i) {
    if (v_[i].ref) v_[i].file->Unref();
  }
  DeleteArray(v_);
  DeleteArray(nums_);
}

ExportSession::Entry* ExportSession::Find(File* f) {
  for (size_t i = 0; i < n_; ++i) {
    if (v_[i].file == f) return &v_[i];
  }
  return nullptr;
}

int ExportSession::Reserve(size_t n) {
  if (n_ + n <= cap_) return 0;
  size_t cap = cap_ ? cap_ * 2 : 8;
  while (cap < n_ + n) cap *= 2;
  Entry* v = NewArray<Entry>(cap);
  if (!v) return -ENOMEM;
  if (n_) std::memcpy(v, v_, n_ * sizeof *v);
  DeleteArray(v_);
  v_ = v;
  cap_ = cap;
  return 0;
}

void ExportSession::Add(File* f, int kfd) {
  if (Entry* e = Find(f)) {
    // A provisional entry becomes the converted file, or a file converted
    // twice in one session keeps one reference.
    if (e->ref) {
      f->Unref();
    } else {
      e->ref = true;
    }
    e->kfd = kfd;
    return;
  }
  v_[n_++] = Entry{f, kfd, true};
}

void ExportSession::Provisional(File* f, int kfd) {
  if (!Find(f)) v_[n_++] = Entry{f, kfd, false};
}

void ExportSession::Forget(File* f) {
  Entry* e = Find(f);
  if (!e || e->ref) return;
  *e = v_[--n_];
}

int ExportSession::KernelFdFor(File* f) {
  if (Entry* e = Find(f)) return e->kfd;
  if (int err = Kernelize(f, *this)) return err;
  Entry* e = Find(f);
  return e ? e->kfd : -EBADF;
}

void ExportSession::HandOverNumbers() {
  // Numbers that a dup of a shell made meanwhile are found by the passes
  // after the first; each pass hands over all it finds.
  FdTable& t = FdTable::Get();
  for (int pass = 0; pass < 4; ++pass) {
    bool found = false;
    t.ForEachOpen([&](int fd, File* f, bool) {
      Entry* e = Find(f);
      if (!e || !e->ref) return;
      found = true;
      if (t.HandOver(fd, f, e->kfd) != 0) return;
      if (nnums_ == capnums_) {
        size_t cap = capnums_ ? capnums_ * 2 : 16;
        Number* v = NewArray<Number>(cap);
        if (!v) return;  // the registration then uses a copy (below)
        if (nnums_) std::memcpy(v, nums_, nnums_ * sizeof *v);
        DeleteArray(nums_);
        nums_ = v;
        capnums_ = cap;
      }
      nums_[nnums_++] = Number{fd, f};
    });
    if (!found) break;
  }
}

void ExportSession::MoveRegistrations(File* f, int kfd) {
  struct Reg {
    Eventpoll* ep;
    int fd;
    epoll_event ev;
  };
  constexpr int kBatch = 16;
  // Each pass moves (or drops) every item it collected, so the loop ends;
  // an ADD racing with the conversion is picked up by the next pass.
  for (;;) {
    Reg regs[kBatch];
    int n = 0;
    {
      MutexLock l(f->watch_lock());
      for (ListNode* it = f->watchers_.next; it != &f->watchers_ && n < kBatch;
           it = it->next) {
        EpItem* epi = UEPOLL_CONTAINER_OF(it, EpItem, fllink);
        if (epi->dying || !epi->ep->TryRef()) continue;
        // data is the instance's (its mtx_): a MOD racing with the
        // conversion may or may not be seen, as if it came before or
        // after it (docs/semantics.md D12).
        regs[n++] = Reg{
            epi->ep,
            epi->fd(),
            {epi->events.load(std::memory_order_relaxed), {.u64 = epi->data}}};
      }
    }
    if (n == 0) return;
    for (int i = 0; i < n; ++i) {
      Reg& r = regs[i];
      // The item's own number if it named this object; otherwise (closed,
      // or reused since, while a dup kept the object open) a private copy
      // that is closed right after, as the kernel keeps an item whose
      // number was closed while the file stays open.
      int num = -1;
      for (size_t j = 0; j < nnums_ && num < 0; ++j) {
        if (nums_[j].fd == r.fd && nums_[j].file == f) num = r.fd;
      }
      int copy = -1;
      if (num < 0) {
        copy = sys::Fcntl(kfd, F_DUPFD_CLOEXEC, 0);
        if (copy >= 0) FdTable::Get().ForgetOrphan(copy);
        num = copy;
      }
      if (num >= 0) AddToKernelHalf(r.ep, num, r.ev);
      if (copy >= 0) sys::Close(copy);
      r.ep->Ctl(EPOLL_CTL_DEL, f, r.fd, epoll_event{});
      r.ep->Unref();
    }
  }
}

int ExportSession::Commit() {
  HandOverNumbers();
  for (size_t i = 0; i < n_; ++i) {
    if (v_[i].ref) MoveRegistrations(v_[i].file, v_[i].kfd);
  }
  // Threads asleep in the objects re-check, see the export, and go on in
  // the kernel; poll() callers look their numbers up again.
  for (size_t i = 0; i < n_; ++i) {
    if (v_[i].ref) v_[i].file->PollQueue().WakeUp(0, 0);
  }
  return 0;
}

// ---- conversions by kind ----

int Kernelize(File* f, ExportSession& s) {
  switch (f->kind()) {
    case FileKind::kPipe:
      return static_cast<PipeEnd*>(f)->inode()->Kernelize(s);
    case FileKind::kSocket:
      return AsUnixSocket(f)->pair()->Kernelize(s);
    case FileKind::kEventfd:
      return static_cast<EventFd*>(f)->Kernelize(s);
    default:
      // An instance (its uepoll half), a timerfd (its ticks come from
      // uepoll's timer thread), a user object (the application's code):
      // no kernel object can be them (docs/semantics.md D12).
      return -EOPNOTSUPP;
  }
}

bool IsExported(File* f) {
  switch (f->kind()) {
    case FileKind::kPipe:
      return static_cast<PipeEnd*>(f)->inode()->exported();
    case FileKind::kSocket:
      return AsUnixSocket(f)->pair()->exported();
    case FileKind::kEventfd:
      return static_cast<EventFd*>(f)->exported();
    default:
      return false;
  }
}

int DupExported(File* f, bool cloexec) {
  int kfd = -1;
  switch (f->kind()) {
    case FileKind::kPipe: {
      auto* end = static_cast<PipeEnd*>(f);
      kfd = end->inode()->kfd(end->reader());
      break;
    }
    case FileKind::kSocket: {
      UnixSocket* s = AsUnixSocket(f);
      kfd = s->pair()->kfd(s->side());
      break;
    }
    case FileKind::kEventfd:
      kfd = static_cast<EventFd*>(f)->kfd();
      break;
    default:
      break;
  }
  if (kfd < 0) return -EBADF;
  int fd = sys::Fcntl(kfd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
  if (fd < 0) return -errno;
  FdTable::Get().ForgetOrphan(fd);
  return fd;
}

// ---- entry points ----

int ExportFd(int fd) {
  FdTable& t = FdTable::Get();
  FileRef f = t.Lookup(fd);
  if (!f) return sys::Fcntl(fd, F_GETFD, 0) < 0 ? -EBADF : 0;
  if (t.mode() != FdMode::kKernel) return -EOPNOTSUPP;
  MutexLock l(g_session);
  ExportSession s;
  if (int err = Kernelize(f.get(), s)) return err;
  return s.Commit();
}

UEPOLL_FORK_PATH int ExportAll(bool inheritable_only) {
  FdTable& t = FdTable::Get();
  if (t.mode() != FdMode::kKernel) return 0;
  MutexLock l(g_session);
  ExportSession s;
  int converted = 0;
  // Numbers only: each object is looked up (a reference) before use.
  t.ForEachOpen([&](int fd, File*, bool cloexec) {
    if (inheritable_only && cloexec) return;
    FileRef f = t.Lookup(fd);
    if (!f || !Convertible(f.get()) || s.KernelFdFor(f.get()) < 0) return;
    ++converted;
  });
  s.Commit();
  return converted;
}

int ExportRights(const msghdr* msg) {
  if (UserFault(msg)) return 0;
  const char* ctl = static_cast<const char*>(msg->msg_control);
  size_t len = msg->msg_controllen;
  if (UserFault(ctl) || len < sizeof(cmsghdr)) return 0;
  size_t off = 0;
  while (off + sizeof(cmsghdr) <= len) {
    cmsghdr h;
    std::memcpy(&h, ctl + off, sizeof h);
    if (h.cmsg_len < sizeof(cmsghdr) || h.cmsg_len > len - off) return 0;
    if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
      size_t num = (h.cmsg_len - sizeof(cmsghdr)) / sizeof(int);
      for (size_t i = 0; i < num; ++i) {
        int fd;
        std::memcpy(&fd, ctl + off + sizeof(cmsghdr) + i * sizeof(int),
                    sizeof fd);
        if (FdTable::Get().IsOpen(fd) && ExportFd(fd) != 0) {
          return -EOPNOTSUPP;
        }
      }
    }
    size_t next =
        off + ((h.cmsg_len + sizeof(size_t) - 1) & ~(sizeof(size_t) - 1));
    if (next <= off) return 0;
    off = next;
  }
  return 0;
}

int SetForkMode(int mode) {
  if (mode != static_cast<int>(ForkMode::kCopy) &&
      mode != static_cast<int>(ForkMode::kShare)) {
    return -EINVAL;
  }
  if (mode == static_cast<int>(ForkMode::kShare)) {
    std::call_once(g_share_registered, [] {
      // Prepare handlers run last-registered first. uepoll's handlers
      // that are registered lazily (the parker registry's, the timer
      // queue's) are registered now, so that ours still comes before
      // them: a conversion must not run while they hold their locks (a
      // thread making its first sleep with a borrow held would wait for
      // the registry, and the conversion for its borrow).
      Parker::Current();
      TimerQueue::Get();
      pthread_atfork(SharePrepare, nullptr, nullptr);
    });
  }
  g_fork_mode.store(mode, std::memory_order_release);
  return 0;
}

UEPOLL_FORK_PATH int GetForkMode() {
  return g_fork_mode.load(std::memory_order_acquire);
}

int KernelPipe2(int k[2], int flags) {
  const uepoll_libc_calls* next = sys::Next();
  return next ? next->pipe2(k, flags) : ::pipe2(k, flags);
}

int KernelSocketpair(int domain, int type, int protocol, int k[2]) {
  const uepoll_libc_calls* next = sys::Next();
  return next ? next->socketpair(domain, type, protocol, k)
              : ::socketpair(domain, type, protocol, k);
}

// ---- forward descriptors ----

void AdoptForward(ForwardFd* f, int kfd) {
  if (kfd < 0) return;
  MutexLock l(g_forward);
  f->fd.store(kfd, std::memory_order_release);
  g_forward_list.PushBack(&f->node);
}

void DropForward(ForwardFd* f) {
  // Every pipe end, socket and eventfd comes here at its release: one load
  // for those never exported. A descriptor is stored before the object
  // can be released, and cleared only here or in a forked child.
  if (f->get() < 0) return;
  int fd;
  {
    MutexLock l(g_forward);
    fd = f->fd.exchange(-1, std::memory_order_acq_rel);
    f->node.Unlink();
  }
  if (fd >= 0) sys::Close(fd);
}

namespace {

// The rest of `it` as an iovec array: a few segments on the stack, more
// from the heap (UIO_MAXIOV at most).
class Segs {
 public:
  explicit Segs(const IoIter& it) {
    n_ = it.Remaining(small_, kSmall);
    if (n_ == kSmall) {
      big_ = NewArray<iovec>(1024);
      if (big_) n_ = it.Remaining(big_, 1024);
    }
  }
  ~Segs() { DeleteArray(big_); }
  Segs(const Segs&) = delete;
  Segs& operator=(const Segs&) = delete;
  iovec* get() { return big_ ? big_ : small_; }
  int count() const { return static_cast<int>(n_); }

 private:
  static constexpr size_t kSmall = 8;
  iovec small_[kSmall];
  iovec* big_ = nullptr;
  size_t n_ = 0;
};

void ForgetReceived(const msghdr& m) {
  for (cmsghdr* h = CMSG_FIRSTHDR(&m); h;
       h = CMSG_NXTHDR(const_cast<msghdr*>(&m), h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t num = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < num; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
      FdTable::Get().ForgetOrphan(fd);
    }
  }
}

}  // namespace

ssize_t ForwardRead(int kfd, IoIter& it) {
  if (kfd < 0) return -EBADF;
  PinBorrowed();  // the kernel may block; a closer must not wait for us
  Segs v(it);
  ssize_t r = sys::Readv(kfd, v.get(), v.count());
  return r < 0 ? -errno : r;
}

ssize_t ForwardWrite(int kfd, IoIter& it) {
  if (kfd < 0) return -EBADF;
  PinBorrowed();
  Segs v(it);
  ssize_t r = sys::Writev(kfd, v.get(), v.count());
  return r < 0 ? -errno : r;
}

ssize_t ForwardSendmsg(int kfd, IoIter& it, int flags, const sockaddr* name,
                       socklen_t namelen, const void* control,
                       size_t controllen) {
  if (kfd < 0) return -EBADF;
  PinBorrowed();
  Segs v(it);
  msghdr m{};
  m.msg_name = const_cast<sockaddr*>(name);
  m.msg_namelen = name ? namelen : 0;
  m.msg_iov = v.get();
  m.msg_iovlen = static_cast<size_t>(v.count());
  m.msg_control = const_cast<void*>(control);
  m.msg_controllen = control ? controllen : 0;
  // uepoll descriptors named in the message become the kernel's first.
  if (int err = ExportRights(&m)) return err;
  ssize_t r = sys::Sendmsg(kfd, &m, flags);
  return r < 0 ? -errno : r;
}

ssize_t ForwardRecvmsg(int kfd, IoIter& it, int flags, char* control,
                       size_t* controllen, int* msg_flags) {
  if (kfd < 0) return -EBADF;
  PinBorrowed();
  Segs v(it);
  msghdr m{};
  m.msg_iov = v.get();
  m.msg_iovlen = static_cast<size_t>(v.count());
  m.msg_control = control;
  m.msg_controllen = control ? *controllen : 0;
  ssize_t r = sys::Recvmsg(kfd, &m, flags);
  if (r < 0) return -errno;
  if (m.msg_controllen) ForgetReceived(m);
  *controllen = m.msg_controllen;
  *msg_flags = m.msg_flags;
  return r;
}

}  // namespace uepoll::impl
