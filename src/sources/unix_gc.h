// UnixGc: the garbage collector for uepoll sockets in flight (the kernel's
// net/unix/garbage.c).
//
// A socket whose descriptor was sent over a socket pair is "in flight": a
// message in some receive queue holds a reference to it (ScmFiles). Such
// references can form cycles that no descriptor reaches any more: a socket
// sent over its own pair into its own receive queue, then closed; two
// sockets each sent into the other's queue, then closed. Each keeps the
// other alive through a message only it could receive. The collector finds
// them and purges their receive queues, which drops the references and
// frees them, as unix_gc does.
//
// The books, under one process-wide lock (gc_mu, innermost: taken under a
// pair's mu_, never the other way round; no other lock is taken under it,
// and no callback runs under it):
//  - each socket's inflight count: references to it in queued lists;
//  - for each socket, the lists queued on its receive queue (ScmFiles
//    owner and queued_node);
//  - the list of sockets with inflight > 0.
// A list enters the books when it is queued (UnixPair::QueueLocked, under
// the receiving pair's mu_) and leaves them when a receive detaches it or
// it is destroyed. A peek takes its new references under gc_mu too.
//
// A collection (Collect) marks under gc_mu: a socket in flight is a
// candidate when every reference to it is an in-flight one
// (File::RefCount() == inflight: no descriptor, no call in progress). For
// each candidate, the references from lists queued on candidates are
// subtracted; a candidate with some left is reachable from outside (a
// queue that someone can still receive from), and so is everything its
// queued lists reference, transitively. The remaining candidates are
// garbage: each gets one extra reference, gc_mu is released, their
// receive queues are purged, and the extra references are dropped, which
// frees them. Reading a reference count without a lock is safe here: a
// count can only grow through a descriptor (a candidate has none), through
// a peek (which takes gc_mu) or through another collection's extra
// reference (taken under gc_mu); when a count drops meanwhile, the socket
// merely looks reachable until the next collection.
//
// The purge holds no lock: it frees files, and a user object's release
// callback may run there and call uepoll (close, dup, sendmsg, create),
// block, or wait for another thread's collection. So collections on
// different threads run side by side (each marking is atomic under gc_mu;
// a socket one collection holds as garbage is no candidate for another),
// and a collection requested on the thread that is purging (by a release
// callback's close) is run by that collection's loop once the purge has
// returned, not nested inside it. A collection holds cancellation off
// (sources/no_cancel.h): it cannot be unwound half way.
//
// When: the kernel collects when a unix socket is released and when a
// sendmsg passes descriptors while many are in flight. uepoll collects at
// the end of the uepoll_close or dup2/dup3 that removed a number of a
// socket in flight, or released any socket while some are in flight
// (Request), and after each sendmsg that passed descriptors, synchronously.
// A cycle whose last outside reference was held by a call in progress
// (poll's) is collected at the next such event (docs/semantics.md D27).
#ifndef UEPOLL_SRC_SOURCES_UNIX_GC_H_
#define UEPOLL_SRC_SOURCES_UNIX_GC_H_

namespace uepoll::impl {

class ScmFiles;
class UnixSocket;

namespace UnixGc {

// fp was just queued on receiver's queue (its pair's mu_ held).
void Queued(ScmFiles* fp, UnixSocket* receiver);
// fp left its queue: received, or about to be destroyed.
void Dequeued(ScmFiles* fp);
// Takes one reference on every file of fp (for a peek), under gc_mu.
void RefAll(const ScmFiles& fp);
// Whether any uepoll socket is in flight now (a hint).
bool AnyInFlight();
// This thread dropped a reference that may have been the last one from
// outside the messages: collect before its C API call returns.
void Request();
// Runs a collection if this thread requested one.
void MaybeCollect();
// Runs a collection.
void Collect();

}  // namespace UnixGc
}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_UNIX_GC_H_
