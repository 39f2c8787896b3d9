// The socket pair's side of getsockopt, setsockopt and getpeername
// (capi/sockopt_api.cc): the option records, and what the pair's state
// answers.
#include "sources/unix_sockopt.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sources/unix_common.h"

namespace uepoll::impl {

SockOpts::~SockOpts() {  // the socket is gone
  while (Entry* e = head_) {
    head_ = e->next;
    Delete(e);
  }
}

int SockOpts::Record(int level, int name, const void* value, socklen_t len) {
  len = std::min(len, kMaxValue);
  // Made outside mu_ (no allocation under a lock), dropped if not needed.
  Entry* fresh = New<Entry>();
  MutexLock l(mu_);
  Entry* e = head_;
  while (e && (e->level != level || e->name != name)) e = e->next;
  if (!e) {
    if (!fresh) return -ENOMEM;
    e = fresh;
    fresh = nullptr;
    e->level = level;
    e->name = name;
    e->next = nullptr;
    if (tail_) {
      tail_->next = e;
    } else {
      head_ = e;
    }
    tail_ = e;
  }
  e->len = len;
  std::memcpy(e->value, value, len);
  Delete(fresh);
  return 0;
}

bool SockOpts::Has(int level, int name) {
  MutexLock l(mu_);
  for (Entry* e = head_; e; e = e->next) {
    if (e->level == level && e->name == name) return true;
  }
  return false;
}

UnixSocket::~UnixSocket() { Delete(opts_.load(std::memory_order_relaxed)); }

SockOpts* UnixSocket::MakeOpts() {
  SockOpts* o = opts();
  if (o) return o;
  auto* fresh = New<SockOpts>();
  if (!fresh) return nullptr;
  // acq_rel: publishes the record; on failure, acquires the winner's.
  if (!opts_.compare_exchange_strong(o, fresh, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
    Delete(fresh);
    return o;
  }
  return fresh;
}

int UnixPair::TakeError(int me) {
  MutexLock l(mu_);
  int err = side_[me].err;
  side_[me].err = 0;
  return err;
}

void UnixPair::StashError(int me, int err) {
  MutexLock l(mu_);
  side_[me].err = err;
}

bool UnixPair::Connected(int me) {
  MutexLock l(mu_);
  return side_[me].connected;
}

long UnixPair::WmemAlloc(int me) {
  MutexLock l(mu_);
  return side_[me].wmem;
}

ucred UnixPair::PeerCred() {
  {
    MutexLock l(mu_);
    if (cred_set_) return cred_;
  }
  // The syscalls outside mu_; the first answer stored wins.
  ucred c{getpid(), geteuid(), getegid()};
  MutexLock l(mu_);
  if (!cred_set_) {
    cred_ = c;
    cred_set_ = true;
  }
  return cred_;
}

}  // namespace uepoll::impl
