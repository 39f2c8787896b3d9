#include "sources/unix_gc.h"

#include <pthread.h>

#include <atomic>

#include "base/fork_path.h"
#include "base/list.h"
#include "base/mutex.h"
#include "sources/no_cancel.h"
#include "sources/scm_rights.h"
#include "sources/unix_common.h"

namespace uepoll::impl::UnixGc {
namespace {

// The books (see unix_gc.h); innermost.
UEPOLL_FORK_DATA constinit Mutex g_mu;
ListNode g_inflight GUARDED_BY(g_mu);  // GcLink::node of sockets in flight
// Sum of every socket's inflight count (a hint for AnyInFlight).
std::atomic<long> g_total{0};
thread_local bool t_requested = false;
// This thread is inside Collect (a release its purge runs called back).
thread_local bool t_collecting = false;

// fork() safety, as for the nesting lock (epoll/nesting.cc): a child must
// not inherit the lock held by a thread that does not exist there. The
// prepare handler waits out any update of the books and any marking;
// fork() is never called with a uepoll lock held. A purge in progress on
// another thread is not waited for (it may run the application's release
// callbacks, which may fork): the child keeps its copies of that
// collection's garbage, unfreed (docs/semantics.md D12).
// Unchecked: atfork handlers lock in one function and unlock in another.
UEPOLL_FORK_PATH void PrepareFork() NO_THREAD_SAFETY_ANALYSIS { g_mu.Lock(); }
UEPOLL_FORK_PATH void AfterFork() NO_THREAD_SAFETY_ANALYSIS { g_mu.Unlock(); }
[[maybe_unused]] const int g_atfork_registered =
    pthread_atfork(PrepareFork, AfterFork, AfterFork);

UnixSocket* SocketOfLink(ListNode* n) {
  return UEPOLL_CONTAINER_OF(n, GcLink, node)->sock;
}
ScmFiles* ListOfNode(ListNode* n) {
  return UEPOLL_CONTAINER_OF(n, ScmFiles::Link, node)->fp;
}

void AddInflight(UnixSocket* s) REQUIRES(g_mu) {
  if (s->gc_.inflight++ == 0) {
    g_inflight.PushBack(&s->gc_.link.node);
    s->in_flight_.store(true, std::memory_order_relaxed);
  }
  g_total.fetch_add(1, std::memory_order_relaxed);
}

void DropInflight(UnixSocket* s) REQUIRES(g_mu) {
  if (--s->gc_.inflight == 0) {
    s->gc_.link.node.Unlink();
    s->in_flight_.store(false, std::memory_order_relaxed);
  }
  g_total.fetch_sub(1, std::memory_order_relaxed);
}

// Calls fn(socket) for each uepoll socket that fp references.
template <class Fn>
void ForEachSocket(const ScmFiles& fp, Fn fn) {
  for (int i = 0; i < fp.count(); ++i) {
    if (UnixSocket* s = AsUnixSocket(fp.at(i).file)) fn(s);
  }
}

// Marks everything reachable from `s`'s queued lists alive (an explicit
// stack through next_mark).
void MarkReachable(UnixSocket* root) REQUIRES(g_mu) {
  UnixSocket* stack = root;
  root->gc_.next_mark = nullptr;
  while (UnixSocket* s = stack) {
    stack = s->gc_.next_mark;
    ListNode& head = s->gc_.queued;
    for (ListNode* n = head.next; n != &head; n = n->next) {
      ForEachSocket(*ListOfNode(n), [&](UnixSocket* t) {
        if (t->gc_.candidate && !t->gc_.alive) {
          t->gc_.alive = true;
          t->gc_.next_mark = stack;
          stack = t;
        }
      });
    }
  }
}

}  // namespace

void Queued(ScmFiles* fp, UnixSocket* receiver) {
  MutexLock l(g_mu);
  fp->owner = receiver;
  receiver->gc_.queued.PushBack(&fp->queued.node);
  // Unchecked lambda: clang analyses it alone, not knowing that
  // ForEachSocket runs it under the g_mu held here.
  ForEachSocket(
      *fp, [](UnixSocket* s) NO_THREAD_SAFETY_ANALYSIS { AddInflight(s); });
}

void Dequeued(ScmFiles* fp) {
  MutexLock l(g_mu);
  if (!fp->owner) return;
  fp->queued.node.Unlink();
  fp->owner = nullptr;
  // Unchecked lambda: run under the g_mu held here (as in Queued).
  ForEachSocket(
      *fp, [](UnixSocket* s) NO_THREAD_SAFETY_ANALYSIS { DropInflight(s); });
}

void RefAll(const ScmFiles& fp) {
  MutexLock l(g_mu);
  for (int i = 0; i < fp.count(); ++i) {
    if (File* f = fp.at(i).file) f->Ref();
  }
}

bool AnyInFlight() { return g_total.load(std::memory_order_relaxed) != 0; }

void Request() {
  if (AnyInFlight()) t_requested = true;
}

UEPOLL_FORK_PATH void MaybeCollect() {
  if (!t_requested) return;
  t_requested = false;
  Collect();
}

namespace {

// One marking, under g_mu: the sockets nobody can reach, each with one
// extra reference (ours until the purge is done), linked through
// next_hit. Reading a count without a lock is safe here (unix_gc.h); a
// socket another collection holds as garbage has a reference more than
// its in-flight ones, so it is no candidate here.
UnixSocket* Mark() EXCLUDES(g_mu) {
  UnixSocket* garbage = nullptr;
  MutexLock l(g_mu);
  // Candidates: every reference is an in-flight one.
  for (ListNode* n = g_inflight.next; n != &g_inflight; n = n->next) {
    UnixSocket* s = SocketOfLink(n);
    s->gc_.candidate = s->RefCount() == s->gc_.inflight;
    s->gc_.refs = s->gc_.inflight;
    s->gc_.alive = false;
  }
  // Subtract the references held by lists queued on candidates.
  for (ListNode* n = g_inflight.next; n != &g_inflight; n = n->next) {
    UnixSocket* s = SocketOfLink(n);
    if (!s->gc_.candidate) continue;
    ListNode& head = s->gc_.queued;
    for (ListNode* q = head.next; q != &head; q = q->next) {
      ForEachSocket(*ListOfNode(q), [](UnixSocket* t) {
        if (t->gc_.candidate) --t->gc_.refs;
      });
    }
  }
  // What is left is referenced from a queue outside the candidates (or
  // from a socket that is not a candidate): alive, with all it reaches.
  for (ListNode* n = g_inflight.next; n != &g_inflight; n = n->next) {
    UnixSocket* s = SocketOfLink(n);
    bool root = !s->gc_.candidate || s->gc_.refs > 0;
    if (root && !s->gc_.alive) {
      s->gc_.alive = true;
      MarkReachable(s);
    }
  }
  for (ListNode* n = g_inflight.next; n != &g_inflight; n = n->next) {
    UnixSocket* s = SocketOfLink(n);
    if (s->gc_.candidate && !s->gc_.alive) {
      s->Ref();
      s->gc_.next_hit = garbage;
      garbage = s;
    }
  }
  return garbage;
}

// Purging drops the in-flight references (and may free other files, and
// run their release callbacks); the garbage sockets themselves go with our
// references. No lock held.
void Purge(UnixSocket* garbage) {
  for (UnixSocket* s = garbage; s; s = s->gc_.next_hit) s->PurgeForGc();
  while (UnixSocket* s = garbage) {
    garbage = s->gc_.next_hit;
    s->Unref();
  }
}

}  // namespace

void Collect() {
  // A release run by the purge below (a user object's callback) may close,
  // dup or pass descriptors; those calls end in MaybeCollect on this very
  // thread. They are answered by another pass of the loop below, after the
  // purge that ran them, never by a collection nested inside it.
  if (t_collecting) {
    t_requested = true;
    return;
  }
  t_collecting = true;
  // Releases run no uepoll lock held (Purge), so they may call anything,
  // wait for other threads and their collections, or be collections'
  // reason to run again; a cancellation waits until the purge is done.
  NoCancel no_cancel;
  do {
    // Requests made by this collection's releases (unix_pair.cc's
    // Release asks for one whenever sockets are in flight): the loop
    // collects once more for them.
    t_requested = false;
    Purge(Mark());
  } while (t_requested);
  t_collecting = false;
}

}  // namespace uepoll::impl::UnixGc
