#include "kernel/bridge.h"

#include <errno.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "base/alloc.h"
#include "base/mutex.h"
#include "base/sys.h"

namespace uepoll::impl {
namespace {

struct Entry {
  Bridge::ReadyFn ready = nullptr;  // nullptr: free
  void* ctx = nullptr;
  uint32_t gen = 0;  // bumped at each reuse; stale events are ignored
};

struct State {
  Mutex mu;
  int gfd GUARDED_BY(mu) = -1;       // the bridge epoll
  int sentinel GUARDED_BY(mu) = -1;  // its identity check
  Entry* entries GUARDED_BY(mu) = nullptr;
  int nentries GUARDED_BY(mu) = 0;
  int cap GUARDED_BY(mu) = 0;
};

State& S() {
  static State* s = new State;  // never destroyed
  return *s;
}

// The number still names our bridge (bridge.h).
bool Ours(State& s) REQUIRES(s.mu) {
  if (s.gfd < 0) return false;
  epoll_event ev{};
  return sys::EpollCtl(s.gfd, EPOLL_CTL_MOD, s.sentinel, &ev) == 0;
}

// A usable bridge, made anew if the old one is gone. false: out of kernel
// descriptors.
bool Ensure(State& s) REQUIRES(s.mu) {
  if (Ours(s)) return true;
  // Not ours any more (or never made): forget the numbers, never close.
  s.gfd = s.sentinel = -1;
  for (int i = 0; i < s.nentries; ++i) {
    if (s.entries[i].ready) ++s.entries[i].gen;  // their registrations died
  }
  int g = sys::EpollCreate1(EPOLL_CLOEXEC);
  if (g < 0) return false;
  int e = sys::Eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  if (e < 0 || sys::EpollCtl(g, EPOLL_CTL_ADD, e, &ev) != 0) {
    if (e >= 0) sys::Close(e);
    sys::Close(g);
    return false;
  }
  s.gfd = g;
  s.sentinel = e;
  return true;
}

uint64_t Key(int idx, uint32_t gen) {
  return (uint64_t{gen} << 32) | static_cast<uint32_t>(idx);
}

// fork(): the child must not share the parent's bridge (its reaps would
// take the parent's events). At the child's atfork handler no application
// code has run, so the numbers are still ours to close.
void Prepare() NO_THREAD_SAFETY_ANALYSIS { S().mu.Lock(); }
void Parent() NO_THREAD_SAFETY_ANALYSIS { S().mu.Unlock(); }
void Child() NO_THREAD_SAFETY_ANALYSIS {
  State& s = S();
  if (s.gfd >= 0) sys::Close(s.gfd);
  if (s.sentinel >= 0) sys::Close(s.sentinel);
  s.gfd = s.sentinel = -1;
  for (int i = 0; i < s.nentries; ++i) ++s.entries[i].gen;
  s.mu.Unlock();
}
[[maybe_unused]] const int g_atfork = pthread_atfork(Prepare, Parent, Child);

}  // namespace

int Bridge::Register(int kfd, ReadyFn ready, void* ctx) {
  State& s = S();
  MutexLock l(s.mu);
  if (!Ensure(s)) return -EMFILE;
  int idx = 0;
  while (idx < s.nentries && s.entries[idx].ready) ++idx;
  if (idx == s.cap) {
    int cap = s.cap ? s.cap * 2 : 16;
    Entry* grown = NewArray<Entry>(static_cast<size_t>(cap));
    if (!grown) return -ENOMEM;
    for (int i = 0; i < s.nentries; ++i) grown[i] = s.entries[i];
    DeleteArray(s.entries);
    s.entries = grown;
    s.cap = cap;
  }
  if (idx == s.nentries) ++s.nentries;
  Entry& e = s.entries[idx];
  ++e.gen;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = Key(idx, e.gen);
  if (sys::EpollCtl(s.gfd, EPOLL_CTL_ADD, kfd, &ev) != 0) {
    int err = errno;
    if (idx == s.nentries - 1) --s.nentries;
    return -err;
  }
  e.ready = ready;
  e.ctx = ctx;
  return idx;
}

void Bridge::Unregister(int handle) {
  State& s = S();
  MutexLock l(s.mu);
  if (handle < 0 || handle >= s.nentries) return;
  // The kernel drops the registration when the instance's kernel epoll is
  // closed; until then a late event carries the old generation.
  s.entries[handle].ready = nullptr;
  s.entries[handle].ctx = nullptr;
  ++s.entries[handle].gen;
}

int Bridge::Fd() {
  State& s = S();
  MutexLock l(s.mu);
  return s.gfd;
}

void Bridge::Reap() {
  State& s = S();
  MutexLock l(s.mu);
  if (!Ours(s)) {
    // Closed under us: a new bridge, so that sleepers stop waking on the
    // dead number (its registrations are gone, bridge.h).
    Ensure(s);
    return;
  }
  epoll_event evs[64];
  timespec zero{0, 0};
  for (;;) {
    int n = sys::EpollPwait2(s.gfd, evs, 64, &zero, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      auto idx = static_cast<int>(evs[i].data.u64 & 0xffffffffu);
      auto gen = static_cast<uint32_t>(evs[i].data.u64 >> 32);
      if (idx < 0 || idx >= s.nentries) continue;  // the sentinel, or stale
      Entry& e = s.entries[idx];
      if (e.ready && e.gen == gen) e.ready(e.ctx);
    }
    if (n < 64) return;
  }
}

}  // namespace uepoll::impl
