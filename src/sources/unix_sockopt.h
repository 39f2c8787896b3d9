// SockOpts: the socket options setsockopt set on a uepoll socket.
//
// uepoll answers the options a socket pair's state decides itself
// (capi/sockopt_api.cc: SO_TYPE, SO_ERROR, SO_PEERCRED, ...). Every other
// option is the kernel's to validate and to report: a setsockopt is made
// on a transient kernel socket of the same type, after the options
// recorded here, and recorded only if the kernel accepted it; a
// getsockopt of such an option replays the record on a transient socket
// and asks it. So the errno, the length rules and the value read back are
// the kernel's, and what an option does to the data path is not modelled
// (docs/semantics.md D4).
//
// Thread safety: mu_ guards the list; entries are never removed before the
// socket is freed (a second set of an option replaces its bytes).
#ifndef UEPOLL_SRC_SOURCES_UNIX_SOCKOPT_H_
#define UEPOLL_SRC_SOURCES_UNIX_SOCKOPT_H_

#include <sys/socket.h>

#include "base/alloc.h"
#include "base/mutex.h"

namespace uepoll::impl {

class SockOpts {
 public:
  // The bytes of a value kept: the largest SOL_SOCKET option (a timeval, a
  // linger, an interface name) fits; longer values are cut to this.
  static constexpr socklen_t kMaxValue = 64;

  SockOpts() = default;
  SockOpts(const SockOpts&) = delete;
  SockOpts& operator=(const SockOpts&) = delete;
  ~SockOpts();

  // Records setsockopt(level, name, value, len) (after the kernel accepted
  // it): 0, or -ENOMEM.
  int Record(int level, int name, const void* value, socklen_t len)
      EXCLUDES(mu_);
  // Whether (level, name) was ever set.
  bool Has(int level, int name) EXCLUDES(mu_);
  // Calls fn(level, name, value, len) for every option as last set, in the
  // order each was first set: for a replay on a kernel socket.
  template <class Fn>
  void ForEach(Fn fn) EXCLUDES(mu_) {
    MutexLock l(mu_);
    for (Entry* e = head_; e; e = e->next)
      fn(e->level, e->name, e->value, e->len);
  }

 private:
  struct Entry {
    int level;
    int name;
    socklen_t len;
    unsigned char value[kMaxValue];
    Entry* next;
  };

  Mutex mu_;
  Entry* head_ GUARDED_BY(mu_) = nullptr;
  Entry* tail_ GUARDED_BY(mu_) = nullptr;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_UNIX_SOCKOPT_H_
