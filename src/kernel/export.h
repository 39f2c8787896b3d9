// Export: the kernel equivalent of a uepoll object (docs/design.md,
// "Crossing a process boundary").
//
// A uepoll pipe, socket pair or eventfd lives in the process's memory; a
// child made by fork() gets a copy, and exec() discards it. When an object
// must cross (a fork, an exec with a number that is not close-on-exec, a
// descriptor passed over a kernel socket), it is turned into the kernel's
// equivalent object at the same numbers: a kernel pipe, socket pair or
// eventfd holding what the uepoll one held (buffered data in order, message
// boundaries, descriptors in flight, O_NONBLOCK, O_DIRECT, FD_CLOEXEC of
// each number, EFD_SEMAPHORE, shutdown state, a closed peer, a pending
// ECONNRESET), and each epoll registration watching it becomes a
// registration of the kernel descriptor in that instance's kernel half,
// with the same events and data. Both processes then share a kernel file,
// as they would have from the start.
//
// How one object converts (a "session", serialized by one process-wide
// lock, the outermost of uepoll's):
//  1. Kernelize, under the source's own lock: the kernel object is made
//     and filled, then the uepoll object is marked exported and emptied.
//     A socket pair's messages may carry uepoll files: each is converted
//     first, inside (source locks nest only here, one session at a time,
//     and no other path takes two source locks, so no cycle can form).
//     The uepoll object keeps one kernel descriptor per end, its forward
//     descriptor; from here on every call that reaches it (a call that
//     looked the number up before, a thread asleep in it) is handed to the
//     kernel through that descriptor, so nothing is lost, duplicated or
//     reordered. If anything fails, the kernel object is closed and the
//     uepoll object is left as it was (-errno).
//  2. Commit, holding no source lock: each number of the object becomes a
//     copy of its kernel descriptor (FdTable::HandOver), each epoll item
//     watching it moves to its instance's kernel half (AddToKernelHalf),
//     and its wait queues are woken so that sleepers re-check and forward.
//  3. The session drops its references: the uepoll object (now a shell)
//     goes at its last reference, closing its forward descriptors.
//
// Cost: nothing on any path of an object that is never exported, but one
// predictable branch on a flag in a line the path already holds (the
// source's lock or count). An export costs a few syscalls per object plus
// one per buffered chunk, one per number and one per registration.
//
// Thread safety: ExportFd, ExportAll and ExportRights take the session
// lock and may be called from any thread holding no uepoll lock and no
// borrow of the objects they convert.
#ifndef UEPOLL_SRC_KERNEL_EXPORT_H_
#define UEPOLL_SRC_KERNEL_EXPORT_H_

#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>

#include "base/list.h"
#include "core/file.h"
#include "core/io_iter.h"

namespace uepoll::impl {

struct EpItem;

// One conversion in progress: the files converted so far (each with the
// kernel descriptor that now stands for it) and those being converted.
class ExportSession {
 public:
  ExportSession() = default;
  ~ExportSession();
  ExportSession(const ExportSession&) = delete;
  ExportSession& operator=(const ExportSession&) = delete;

  // Room for n more files (Add and Provisional never fail after it): 0 or
  // -ENOMEM. A Kernelize reserves before it changes anything.
  int Reserve(size_t n);
  // f was converted; kfd (owned by f's source) stands for it. Adopts a
  // reference on f the caller took (dropped when the session ends).
  void Add(File* f, int kfd);
  // f is being converted and kfd will stand for it (a socket pair whose
  // messages name its own sockets); no reference. Forget undoes it, Add
  // turns it into a converted file.
  void Provisional(File* f, int kfd);
  void Forget(File* f);
  // The kernel descriptor standing for f, converting f first if needed: a
  // descriptor f's source owns (valid while f lives), or -errno
  // (EOPNOTSUPP: an epoll instance, a timerfd or a user object).
  int KernelFdFor(File* f);
  // Step 2 for every file added. 0, or the first -errno met (the rest is
  // still committed).
  int Commit();

 private:
  struct Entry {
    File* file;
    int kfd;
    bool ref;  // the session holds a reference
  };
  Entry* Find(File* f);
  // The numbers of files added, handed to the kernel (step 2).
  void HandOverNumbers();
  void MoveRegistrations(File* f, int kfd);

  Entry* v_ = nullptr;
  size_t n_ = 0;
  size_t cap_ = 0;
  // The numbers handed over, as (number, file) pairs.
  struct Number {
    int fd;
    File* file;
  };
  Number* nums_ = nullptr;
  size_t nnums_ = 0;
  size_t capnums_ = 0;
};

// Step 1 for f, by kind (pipe_export.cc, unix_export.cc, eventfd.cc):
// 0, or -errno with f unchanged; -EOPNOTSUPP for a kind that has no kernel
// equivalent uepoll can make.
int Kernelize(File* f, ExportSession& s);

// uepoll_export_fd: converts the object at fd. 0 (fd is a kernel
// descriptor already: nothing to do), or -errno: EBADF (not open),
// EOPNOTSUPP (cannot convert), EMFILE, ENFILE, ENOMEM.
int ExportFd(int fd);

// Converts every object that can be converted (inheritable_only: only
// those with a number whose FD_CLOEXEC is clear, for an exec). Returns how
// many objects were converted; what cannot be converted is skipped.
int ExportAll(bool inheritable_only);

// For a sendmsg on a kernel socket: converts every uepoll descriptor that
// an SCM_RIGHTS message of msg names, so that the kernel passes the kernel
// object. 0, or -EOPNOTSUPP when one cannot be converted (nothing sent). A
// malformed control buffer is left to the kernel to refuse.
int ExportRights(const msghdr* msg);

// Fork modes (uepoll_set_fork_mode): in kShare, every fork() first runs
// ExportAll(false) (a pthread_atfork prepare handler, registered at the
// first SetForkMode(kShare)).
enum class ForkMode : int { kCopy = 0, kShare = 1 };
int SetForkMode(int mode);
int GetForkMode();

// Whether f was exported (a shell whose calls go to the kernel). One load;
// for slow paths (a poll() that slept on f, a receive that installs f).
bool IsExported(File* f);
// For a shell: a new descriptor (F_DUPFD, lowest >= 0, close-on-exec as
// asked) for the kernel object that stands for it, or -errno.
int DupExported(File* f, bool cloexec);

// A forward descriptor: each exported end keeps one, registered in a
// process-wide list, so that a forked child closes its copies at the fork
// (the child's copy of a shell is never used: the threads that held it do
// not exist there, and the copy would keep the kernel object open in the
// child: no EOF for the parent's reader). The list's lock is a leaf,
// taken under a source's lock by Kernelize.
struct ForwardFd {
  std::atomic<int> fd{-1};
  ListNode node;  // in the list while fd >= 0 (guarded by its lock)
  int get() const { return fd.load(std::memory_order_acquire); }
};
// Stores kfd (>= 0; -1 is ignored) and registers it.
void AdoptForward(ForwardFd* f, int kfd);
// Closes and unregisters it, if it holds one.
void DropForward(ForwardFd* f);  // one load when it holds none

// libc's pipe2 and socketpair (base/sys.h has no entries for them: only
// the conversions make kernel pipes and pairs).
int KernelPipe2(int k[2], int flags);
int KernelSocketpair(int domain, int type, int protocol, int k[2]);

// A call in progress on an exported object, handed to the kernel object
// through its forward descriptor (the rest of `it`). -errno on failure.
// The caller holds no lock; its borrows are pinned first, since the call
// may block in the kernel.
ssize_t ForwardRead(int kfd, IoIter& it);
ssize_t ForwardWrite(int kfd, IoIter& it);
// A sendmsg / recvmsg of a uepoll socket, handed to the kernel socket.
ssize_t ForwardSendmsg(int kfd, IoIter& it, int flags, const sockaddr* name,
                       socklen_t namelen, const void* control,
                       size_t controllen);
ssize_t ForwardRecvmsg(int kfd, IoIter& it, int flags, char* control,
                       size_t* controllen, int* msg_flags);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_EXPORT_H_
