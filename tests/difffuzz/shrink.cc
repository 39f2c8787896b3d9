// uepoll-difffuzz: running whole sequences, and shrinking a failing one
// (see interp.h).
#include <fcntl.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "difffuzz/interp.h"

namespace difffuzz {

// ---------------------------------------------------------------- sequences

bool RunSequence(const std::vector<Op>& ops, Mismatch* m, const Options& opt) {
  Session s(opt);
  if (!s.ok()) {
    if (m)
      *m = {0,
            Op{K::kCount, {0, 0, 0, 0}, 0, 0, 0},
            {},
            {},
            "setup: " + s.setup_error()};
    return false;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!s.Run(ops[i], i, m)) return false;
  }
  return s.Teardown(ops.size(), m);
}

namespace {
// The check that failed: "result", "state" (the state check) or a
// teardown's.
std::string CheckName(const std::string& what) {
  return what.substr(0, what.find(':'));
}

bool SameFailure(const std::vector<Op>& ops, const Mismatch& m, K kind,
                 bool teardown, const std::string& check) {
  bool is_teardown = m.index >= ops.size();
  if (is_teardown != teardown) return false;
  if (teardown) return true;
  return ops[m.index].k == kind && CheckName(m.what) == check;
}
}  // namespace

// The op with every handle reference replaced by the raw offset it names
// now, so that deleting an earlier op does not shift what later ops name.
Op Session::Normalized(const Op& op) const {
  int n = 0;
  switch (op.k) {
    case K::kCtl:
    case K::kDup2:
    case K::kDup3:
      n = 2;
      break;
    case K::kPoll:
      n = 4;
      break;
    case K::kWait:
    case K::kRead:
    case K::kWrite:
    case K::kShutdown:
    case K::kDup:
    case K::kFcntl:
    case K::kClose:
    case K::kReadv:
    case K::kWritev:
    case K::kSend:
    case K::kRecv:
    case K::kIoctl:
      n = 1;
      break;
    default:
      break;
  }
  Op out = op;
  for (int i = 0; i < n; ++i) {
    if (op.h[i] == kNegFd) continue;
    long off = numbering_.Offset(true, Resolve(op.h[i]).k);
    out.h[i] = kRawBase - static_cast<int32_t>(off);
  }
  return out;
}

namespace {

// ops with handle references made raw offsets (Session::Normalized), if
// that still fails the same way.
std::vector<Op> NormalizedIfSame(const std::vector<Op>& ops, K kind,
                                 bool teardown, const std::string& check,
                                 const Options& opt) {
  std::vector<Op> norm;
  {
    Session s(opt);
    if (!s.ok()) return ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      norm.push_back(s.Normalized(ops[i]));
      if (!s.Run(ops[i], i, nullptr)) break;
    }
  }
  if (norm.size() != ops.size()) return ops;
  Mismatch m;
  if (!RunSequence(norm, &m, opt) &&
      SameFailure(norm, m, kind, teardown, check))
    return norm;
  return ops;
}

}  // namespace

std::vector<Op> Shrink(std::vector<Op> ops, const Mismatch& first,
                       const Options& opt, Options* used) {
  bool teardown = first.index >= ops.size();
  std::string check = CheckName(first.what);
  K kind = teardown ? K::kCount : ops[first.index].k;
  if (!teardown) ops.resize(first.index + 1);
  Options sopt = opt;
  if (check == "state") {
    // The state may have differed since an earlier call, and which checks
    // probe everything depends on how many came before: shrink towards the
    // first call after which the state differs, checking after every call.
    sopt.check = Check::kAll;
    sopt.full_probe = true;
    sopt.check_every = 1;
    Mismatch m0;
    if (!RunSequence(ops, &m0, sopt) && m0.index < ops.size()) {
      kind = ops[m0.index].k;
      check = CheckName(m0.what);
      ops.resize(m0.index + 1);
    }
  }
  if (used) *used = sopt;
  ops = NormalizedIfSame(ops, kind, teardown, check, sopt);
  // Delete chunks, halving their size down to single ops, while the
  // failure persists (the failing op itself stays: the last one).
  for (size_t chunk = std::max<size_t>(1, ops.size() / 2);; chunk /= 2) {
    bool changed = true;
    for (int pass = 0; changed && pass < 3; ++pass) {
      changed = false;
      size_t end = teardown ? ops.size() : ops.size() - 1;
      while (end > 0) {
        size_t from = end >= chunk ? end - chunk : 0;
        std::vector<Op> cand = ops;
        cand.erase(cand.begin() + static_cast<long>(from),
                   cand.begin() + static_cast<long>(end));
        Mismatch m;
        if (!RunSequence(cand, &m, sopt) &&
            SameFailure(cand, m, kind, teardown, check)) {
          if (!teardown) cand.resize(m.index + 1);
          ops = std::move(cand);
          changed = true;
        }
        end = std::min(from, teardown ? ops.size() : ops.size() - 1);
      }
    }
    if (chunk <= 1) break;
  }
  // A creation cannot be deleted without moving every later number; make
  // it a plain one of as many numbers (eventfd, pipe2), which takes the
  // same numbers but is nothing the failure needs.
  const Op kOne{K::kEventfd, {0, 0, 0, 0}, 0, EFD_NONBLOCK, 0};
  const Op kTwo{K::kPipe2, {0, 0, 0, 0}, 0, O_NONBLOCK, 0};
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    bool two = op.k == K::kPipe2 || op.k == K::kSocketpair ||
               (op.k == K::kKernelObj && (op.a == 1 || op.a == 3));
    bool one =
        !two &&
        (op.k == K::kEventfd || op.k == K::kEpollCreate ||
         op.k == K::kEpollCreate1 || op.k == K::kDup || op.k == K::kKernelObj ||
         (op.k == K::kFcntl && (op.a == F_DUPFD || op.a == F_DUPFD_CLOEXEC)));
    if (!one && !two) continue;
    const Op& plain = two ? kTwo : kOne;
    if (op.k == plain.k && op.a == plain.a && op.b == plain.b) continue;
    std::vector<Op> cand = ops;
    cand[i] = plain;
    Mismatch m;
    if (!RunSequence(cand, &m, sopt) &&
        SameFailure(cand, m, kind, teardown, check)) {
      if (!teardown) cand.resize(m.index + 1);
      ops = std::move(cand);
    }
  }
  return ops;
}

}  // namespace difffuzz
