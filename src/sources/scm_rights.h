// Descriptor passing over uepoll socket pairs (SCM_RIGHTS), as the kernel's
// net/core/scm.c and af_unix.c do it.
//
// ScmFiles is the kernel's scm_fp_list: the files one sendmsg passes. Each
// entry holds either a uepoll file (one reference, so the object lives as
// long as the message) or a kernel descriptor, held as a close-on-exec
// duplicate that uepoll owns while the message is in flight (the kernel
// holds a struct file; user space can only hold a number, see
// docs/semantics.md D27). A receive installs each entry as a new
// descriptor, lowest number first, as receive_fd does: a uepoll file with
// FdTable::Install, a kernel one with F_DUPFD (then the duplicate is
// closed). A list that is never received (the message was purged, or the
// receiver's control buffer was too short) drops its references and closes
// its duplicates.
//
// Thread safety: a list being built or delivered belongs to one thread; a
// queued list belongs to the receive queue that holds it (UnixPair::mu_),
// and the collector's links in it (queued_node, owner) to UnixGc's lock.
#ifndef UEPOLL_SRC_SOURCES_SCM_RIGHTS_H_
#define UEPOLL_SRC_SOURCES_SCM_RIGHTS_H_

#include <sys/socket.h>

#include <cstddef>

#include "base/list.h"
#include "core/file.h"

namespace uepoll::impl {

struct RecvArgs;
class UnixSocket;

class ScmFiles {
 public:
  static constexpr int kMaxFd = 253;  // SCM_MAX_FD

  struct Entry {
    File* file;  // a uepoll file with one reference, or nullptr
    // With file: a copy of its kernel file to install at the received
    // number (an instance's kernel half, File::DupKernelFileForFlight), or
    // -1. Without: uepoll's duplicate of a kernel descriptor.
    int kfd;
  };

  int count() const { return count_; }
  Entry& at(int i) { return entries_[i]; }
  const Entry& at(int i) const { return entries_[i]; }

  // The collector's books (unix_gc.cc), under its lock: the socket whose
  // receive queue holds this list, and the link in that socket's list (a
  // standard-layout holder, so that the node leads back to the list).
  struct Link {
    ListNode node;
    ScmFiles* fp;
  } queued{{}, this};
  UnixSocket* owner = nullptr;

 private:
  friend int ScmSend(const void*, size_t, ScmFiles**);
  friend ScmFiles* ScmClone(const ScmFiles&);
  friend void DestroyScmFiles(ScmFiles*);
  static ScmFiles* Alloc(int capacity);
  // Appends n entries' worth of room: the list itself when it fits, a
  // larger copy otherwise (nullptr, with *this intact, on ENOMEM).
  static ScmFiles* Grow(ScmFiles* fp, int n);

  int count_ = 0;
  int capacity_ = 0;
  Entry* entries_ = nullptr;  // capacity_ entries right after the object
};

// __scm_send for a unix socket: walks the control messages of a sendmsg
// (CMSG_OK, SOL_SOCKET only) and collects SCM_RIGHTS descriptors into *out
// (nullptr if none). SCM_CREDENTIALS are checked as the kernel checks them
// (length, privileges, the pid) and then dropped: no uepoll socket can ask
// for them (SO_PASSCRED). 0, or -errno with nothing held (EINVAL, EBADF,
// ESRCH, EPERM, ENOMEM; EMFILE when a kernel descriptor cannot be
// duplicated, a deviation).
int ScmSend(const void* control, size_t controllen, ScmFiles** out);

// scm_recv_unix + scm_detach_fds: installs fp's files as new descriptors
// into a's control buffer as far as it has room (MSG_CMSG_CLOEXEC sets
// FD_CLOEXEC on them), sets MSG_CTRUNC for what does not fit, and destroys
// the list (what was not installed is closed). Called with no lock held.
void ScmRecv(RecvArgs& a, ScmFiles* fp);

// unix_peek_fds: a copy holding new references (and new duplicates of
// kernel descriptors), for MSG_PEEK; nullptr if it cannot be made (the
// peek then delivers no descriptors, as the kernel's does when scm_fp_dup
// fails). Called under the queue's pair lock, so the original cannot be
// received meanwhile.
ScmFiles* ScmClone(const ScmFiles& fp);

// For a sendmsg on a kernel socket: -EOPNOTSUPP if a well-formed
// SCM_RIGHTS message of msg names a uepoll descriptor (the kernel would
// pass its placeholder; docs/semantics.md D27), else 0. A malformed control
// buffer is left to the kernel to refuse.
int RejectUepollRights(const msghdr* msg);

// Drops every reference and closes every duplicate; leaves the
// collector's books first if the list is queued. No lock held.
void DestroyScmFiles(ScmFiles* fp);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_SCM_RIGHTS_H_
