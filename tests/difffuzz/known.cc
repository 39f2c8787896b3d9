// uepoll-difffuzz: the documented deviations and the known, pinned engine
// differences the interpreter skips or tolerates (see interp.h).
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>

#include <uepoll/uepoll.h>

#include "difffuzz/interp.h"

namespace difffuzz {

// The known differences: ops on which uepoll is known to differ, each
// pinned by a regression test that fails until the engine is fixed. Decide
// from state both sides share (the kernel's, or the numbering's), so that
// both sides skip the same ops; e.g.
//   if (op.k == K::kSocketpair && <kernel has < 2 free numbers>) return true;
//
// K1: a dup2/dup3 from a closed number onto an instance, under the kernel
// numbering: uepoll detaches the instance's kernel half before the kernel
// refuses the dup (DiffFuzzKernelRegressions.dup2__*).
// K2: under the kernel numbering, an ADD of an instance that the kernel
// accepts and uepoll refuses ELOOP: an instance once nested keeps its
// kernel half in the bridge, one kernel level more
// (DiffFuzzKernelRegressions.nesting__*). Not decidable before the call:
// Run undoes the kernel's ADD instead (KnownAfterTheFact), and the state
// check's probe leaves nestings alone.
// K3: under the kernel numbering, a ctl of a kernel descriptor (or of a
// closed number) in a uepoll instance while the uepoll side is out of
// numbers, or while the instance's own number is at or beyond the limit:
// uepoll needs a kernel descriptor of its own for the answer (EMFILE,
// EBADF; the kernel answers without one: issue 20, item 13). Decided from
// the uepoll side's table, which both sides then skip by.
// K4: under the kernel numbering, an ADD of an instance that uepoll accepts
// and the kernel refuses ELOOP: a chain of uepoll instances above kernel
// instances is not held to the kernel's depth limit (the known gap of
// BridgeMixed.ChainThroughKernelEpollsHasTheKernelsDepthLimit). Run undoes
// uepoll's ADD (KnownAfterTheFact).
// K5: under the kernel numbering, a dup of an instance that holds kernel
// descriptors, taking the last free number: it succeeds but leaves errno
// EMFILE (DiffFuzzKernelRegressions.dup__*); tolerated after the fact.
bool Session::KnownDifference(const Op& op, const Fds f[4]) const {
  if (opt_.numbering == NumberingMode::kKernel &&
      (op.k == K::kDup2 || op.k == K::kDup3) && ::fcntl(f[0].k, F_GETFD) < 0 &&
      f[1].k >= 0 &&
      ::epoll_ctl(f[1].k, EPOLL_CTL_DEL, kscratch_, nullptr) < 0 &&
      errno == ENOENT) {
    return true;
  }
  if (opt_.numbering == NumberingMode::kKernel && op.k == K::kCtl &&
      uepoll_is_uepoll_fd(f[0].u) && f[1].u >= 0 &&
      !uepoll_is_uepoll_fd(f[1].u) &&
      (numbering_.Offset(false, f[0].u) >= numbering_.limit() ||
       const_cast<Numbering&>(numbering_).UepollSideFull())) {
    return true;
  }
  return false;
}

bool Session::KnownAfterTheFact(const Op& op, const Fds f[4], Outcome* ko,
                                Outcome* uo) {
  if (opt_.numbering != NumberingMode::kKernel) return false;
  if (ReturnsFd(op) && ko->ret >= 0 && ko->ret == uo->ret && ko->err == 0 &&
      uo->err == -EMFILE) {
    uo->err = 0;  // K5
    return true;
  }
  if (op.k != K::kCtl || op.a != EPOLL_CTL_ADD) return false;
  const bool k2 = ko->ret == 0 && uo->ret == -1 && uo->err == ELOOP;
  const bool k4 = uo->ret == 0 && ko->ret == -1 && ko->err == ELOOP;
  if (!k2 && !k4) return false;
  if (::epoll_ctl(f[1].k, EPOLL_CTL_DEL, kscratch_, nullptr) == 0 ||
      errno != ENOENT) {
    return false;  // the target is no instance
  }
  if (k2) {
    ::epoll_ctl(f[0].k, EPOLL_CTL_DEL, f[1].k, nullptr);
    *ko = *uo;
  } else {
    uepoll_epoll_ctl(f[0].u, EPOLL_CTL_DEL, f[1].u, nullptr);
    *uo = *ko;
  }
  return true;
}

// Documented deviations the generator can reach, skipped on both sides:
// under the kernel numbering, a ctl whose instance is a kernel descriptor
// and whose target a uepoll one (D1: EPERM; only a watchable instance can
// be watched by the kernel).
bool Session::Deviation(const Op& op, const Fds f[4]) const {
  if (opt_.numbering != NumberingMode::kKernel || op.k != K::kCtl) return false;
  return !uepoll_is_uepoll_fd(f[0].u) && uepoll_is_uepoll_fd(f[1].u);
}

}  // namespace difffuzz
