// The state check (interp.h, Options::check): after a failing call, both
// sides' observable state must still agree, since a failing call changes
// nothing on the kernel. What is observed, each without changing anything
// a later op could see:
//
//  - which numbers are open and how ready each is: one poll() of the whole
//    span with IN|OUT|PRI|RDHUP (POLLNVAL: closed);
//  - each open number's flags and kind: F_GETFD, F_GETFL, FIONREAD and
//    SIOCOUTQ (a pipe's or socket's byte count, ENOTTY elsewhere),
//    F_GETPIPE_SZ (pipes only) and an EPOLL_CTL_DEL of a scratch instance
//    that is registered nowhere (ENOENT from an instance, EINVAL from
//    anything else);
//  - which registrations exist: for each (instance, target) pair, an
//    EPOLL_CTL_ADD of the target with events 0, which fails EEXIST if it
//    is registered, and if it was not (the ADD succeeded) an EPOLL_CTL_DEL
//    that takes it out again. The ADD's answer says more than "registered
//    or not": ELOOP, EINVAL (depth, an instance in itself), EPERM. Events
//    0: the item is never ready, so the instance's watchers (an
//    edge-triggered parent) see no edge; targets with ERR or HUP, which
//    every item reports, are not probed.
//
// An instance's own reports (what epoll_wait would return) are not read:
// a harvest consumes edge-triggered and one-shot events. Its readiness
// (poll) and its registrations stand for them; the ops after the check
// compare every harvest anyway.
//
// Cost, on each side: the poll and one call per open number (the kind
// probe that finds the instances) at every check; the other five calls for
// the op's operands, and 1-2 calls per probed pair. The registration probe
// covers, after a failing ctl, its own pair; after any other failing call,
// every pair with an operand (the instance a dup2 onto it failed on, with
// every target). Every 32nd check observes every number and every pair
// (Options::full_probe: every check).
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include <uepoll/uepoll.h>

#include "difffuzz/interp.h"
#include "support/backend.h"

namespace difffuzz {
namespace {

using uepoll_test::Backend;

long g_checks = 0;

// Every kFullEvery-th check observes everything (Options::full_probe: every
// check does).
constexpr long kFullEvery = 1000000000;

// A result as one value: r, or kErr + errno.
constexpr uint64_t kErr = uint64_t{1} << 40;
uint64_t Res(long r) {
  return r >= 0 ? static_cast<uint64_t>(r)
                : kErr + static_cast<uint64_t>(errno);
}

enum Probe : uint8_t {
  kPollAll,  // the poll's return value
  kRevents,
  kGetFd,
  kGetFl,
  kNread,
  kOutq,
  kPipeSz,
  kIsEpoll,  // EPOLL_CTL_DEL of the scratch instance
  kRegAdd,   // the ADD probe of (a: instance, b: target)
  kRegDel,   // the DEL that undid a successful ADD probe
};

struct Obs {
  Probe probe;
  int a, b;
  uint64_t v;
  bool operator==(const Obs& o) const {
    return probe == o.probe && a == o.a && b == o.b && v == o.v;
  }
};

std::string Value(const Obs& o) {
  if (o.v >= kErr) {
    int e = static_cast<int>(o.v - kErr);
    const char* n = strerrorname_np(e);
    return std::string("-1 ") + (n ? n : std::to_string(e).c_str());
  }
  char b[32];
  snprintf(b, sizeof b,
           o.probe == kRevents || o.probe == kGetFl ? "0x%" PRIx64 : "%" PRIu64,
           o.v);
  return b;
}

std::string What(const Obs& o) {
  auto fd = [](int off) { return "fd#" + std::to_string(off); };
  switch (o.probe) {
    case kPollAll:
      return "poll(every number) returned";
    case kRevents:
      return "poll revents of " + fd(o.a);
    case kGetFd:
      return "fcntl(" + fd(o.a) + ", F_GETFD)";
    case kGetFl:
      return "fcntl(" + fd(o.a) + ", F_GETFL)";
    case kNread:
      return "ioctl(" + fd(o.a) + ", FIONREAD)";
    case kOutq:
      return "ioctl(" + fd(o.a) + ", SIOCOUTQ)";
    case kPipeSz:
      return "fcntl(" + fd(o.a) + ", F_GETPIPE_SZ)";
    case kIsEpoll:
      return "epoll_ctl(" + fd(o.a) + ", DEL, scratch instance)";
    case kRegAdd:
      return "registration probe epoll_ctl(" + fd(o.a) + ", ADD, " + fd(o.b) +
             ", {0})";
    case kRegDel:
      return "registration probe's undo epoll_ctl(" + fd(o.a) + ", DEL, " +
             fd(o.b) + ")";
  }
  return "?";
}

// The first difference of two observation lists, or "".
std::string FirstDifference(const std::vector<Obs>& k,
                            const std::vector<Obs>& u) {
  for (size_t i = 0; i < k.size() || i < u.size(); ++i) {
    if (i < k.size() && i < u.size() && k[i] == u[i]) continue;
    const Obs* ko = i < k.size() ? &k[i] : nullptr;
    const Obs* uo = i < u.size() ? &u[i] : nullptr;
    const Obs& any = ko ? *ko : *uo;
    std::string s = What(any) + ": kernel " + (ko ? Value(*ko) : "(none)");
    if (uo && ko &&
        !(uo->probe == ko->probe && uo->a == ko->a && uo->b == ko->b)) {
      s += ", uepoll " + What(*uo) + " " + Value(*uo);
    } else {
      s += std::string(", uepoll ") + (uo ? Value(*uo) : "(none)");
    }
    return s;
  }
  return "";
}

}  // namespace

long StateChecks() { return g_checks; }

bool Session::CheckState(const Op& op, const Fds f[4], size_t index,
                         Mismatch* m) {
  ++g_checks;
  const bool full = opt_.full_probe || checks_++ % kFullEvery == 0;
  // The op's operands (offsets).
  bool focus[kFdSpan] = {};
  for (int i = 0; i < 4; ++i) {
    long off = numbering_.Offset(true, f[i].k);
    if (off >= 0 && off < kFdSpan) focus[off] = true;
  }
  // Calls that change descriptor tables: every registration of an operand
  // is probed, which needs every instance's kind.
  const bool table_op = op.k == K::kDup || op.k == K::kDup2 ||
                        op.k == K::kDup3 || op.k == K::kFcntl ||
                        op.k == K::kClose;
  std::vector<Obs> obs[2];
  std::vector<int> open, instances;
  // Pass 1 on each side (kernel first): numbers, readiness, flags, kinds.
  for (int side = 0; side < 2; ++side) {
    const bool kernel = side == 0;
    const Backend& b =
        kernel ? uepoll_test::KernelBackend() : uepoll_test::UepollBackend();
    std::vector<Obs>& out = obs[side];
    struct pollfd p[kFdSpan];
    int np = 0;
    for (int i = 0; i < kFdSpan; ++i) {
      if (!full && !focus[i]) continue;
      p[np++] = {numbering_.Fd(kernel, i),
                 static_cast<short>(POLLIN | POLLOUT | POLLPRI | POLLRDHUP), 0};
    }
    const uint64_t polled_ret = Res(b.poll(p, static_cast<nfds_t>(np), 0));
    for (int j = 0, i = 0; i < kFdSpan; ++i) {
      // Not polled (a check of the operands only): open if F_GETFD says so.
      const int fd = numbering_.Fd(kernel, i);
      const bool polled = j < np && p[j].fd == fd;
      if (polled) {
        out.push_back({kRevents, i, 0, static_cast<uint16_t>(p[j].revents)});
        if (p[j++].revents & POLLNVAL) continue;
      } else if (!table_op || b.fcntl(fd, F_GETFD, 0) < 0) {
        continue;
      }
      if (kernel) open.push_back(i);
      // A kernel descriptor of the uepoll side is asked with the kernel's
      // scratch instance, a uepoll one with uepoll's.
      const int scratch =
          kernel || !uepoll_is_uepoll_fd(fd) ? kscratch_ : uscratch_;
      long r = b.epoll_ctl(fd, EPOLL_CTL_DEL, scratch, nullptr);
      out.push_back({kIsEpoll, i, 0, Res(r)});
      if (kernel && r < 0 && errno == ENOENT) instances.push_back(i);
      if (!polled) continue;
      out.push_back({kGetFd, i, 0, Res(b.fcntl(fd, F_GETFD, 0))});
      out.push_back({kGetFl, i, 0, Res(b.fcntl(fd, F_GETFL, 0))});
      int n = 0;
      out.push_back({kNread, i, 0, Res(b.ioctl(fd, FIONREAD, &n))});
      if (out.back().v < kErr) out.back().v = static_cast<uint32_t>(n);
      n = 0;
      out.push_back({kOutq, i, 0, Res(b.ioctl(fd, SIOCOUTQ, &n))});
      if (out.back().v < kErr) out.back().v = static_cast<uint32_t>(n);
      out.push_back({kPipeSz, i, 0, Res(b.fcntl(fd, F_GETPIPE_SZ, 0))});
    }
    // Last: a difference of one number's revents is the better report.
    out.push_back({kPollAll, 0, 0, polled_ret});
  }
  std::string d = FirstDifference(obs[0], obs[1]);
  if (d.empty()) {
    // Pass 2: the registration probe, over the same pairs on both sides.
    // A failing ctl: its own pair (either way round); a failing call that
    // changes descriptor tables: every registration of an instance among
    // its operands, and of its operands in any instance; other calls:
    // none but at the full checks.
    std::vector<std::pair<int, int>> pairs;
    const long c0 = numbering_.Offset(true, f[0].k);
    const long c1 = numbering_.Offset(true, f[1].k);
    auto wanted = [&](int ep, int t) {
      if (full) return true;
      if (op.k == K::kCtl) {
        return (ep == c0 && t == c1) || (ep == c1 && t == c0);
      }
      return table_op && (focus[ep] || focus[t]);
    };
    for (int ep : instances) {
      for (int t : open) {
        if (t == ep || !wanted(ep, t)) continue;
        // K2 (Session::KnownDifference): with --skip-known, no probe
        // nests an instance under the kernel numbering.
        if (opt_.skip_known && opt_.numbering == NumberingMode::kKernel &&
            std::find(instances.begin(), instances.end(), t) !=
                instances.end()) {
          continue;
        }
        // D1 (Session::Deviation): a kernel instance of the uepoll side
        // cannot take a uepoll descriptor.
        if (opt_.numbering == NumberingMode::kKernel &&
            !uepoll_is_uepoll_fd(numbering_.Fd(false, ep)) &&
            uepoll_is_uepoll_fd(numbering_.Fd(false, t))) {
          continue;
        }
        pairs.push_back({ep, t});
      }
    }
    // The probe's ADD has events 0, so that it queues nothing and wakes no
    // watcher of the instance (an edge-triggered parent would see a new
    // edge) - except for a target with ERR or HUP, which every
    // registration reports: those pairs are left out. Which targets have
    // them: a poll on both sides (a poll of an instance is no pure
    // observation either: it drops the idle items of its ready list, and
    // of those below it, as harvests do), compared too.
    bool hup[kFdSpan] = {};
    std::vector<Obs> polled[2];
    for (int side = 0; side < 2; ++side) {
      const bool kernel = side == 0;
      const Backend& b =
          kernel ? uepoll_test::KernelBackend() : uepoll_test::UepollBackend();
      struct pollfd p[kFdSpan];
      int np = 0;
      bool seen[kFdSpan] = {};
      for (auto [ep, t] : pairs) {
        if (seen[t]) continue;
        seen[t] = true;
        p[np++] = {numbering_.Fd(kernel, t), 0, 0};
      }
      if (np == 0) break;
      b.poll(p, static_cast<nfds_t>(np), 0);
      for (int i = 0; i < np; ++i) {
        int t = static_cast<int>(numbering_.Offset(kernel, p[i].fd));
        polled[side].push_back(
            {kRevents, t, 0, static_cast<uint16_t>(p[i].revents)});
        if (kernel && (p[i].revents & (POLLERR | POLLHUP))) hup[t] = true;
      }
    }
    d = FirstDifference(polled[0], polled[1]);
    if (!d.empty()) pairs.clear();
    std::erase_if(
        pairs, [&](const std::pair<int, int>& pr) { return hup[pr.second]; });
    for (int side = 0; side < 2; ++side) {
      const bool kernel = side == 0;
      const Backend& b =
          kernel ? uepoll_test::KernelBackend() : uepoll_test::UepollBackend();
      std::vector<Obs>& out = obs[side];
      out.clear();
      for (auto [ep, t] : pairs) {
        const int efd = numbering_.Fd(kernel, ep);
        const int tfd = numbering_.Fd(kernel, t);
        struct epoll_event ev {};
        ev.events = 0;
        ev.data.u64 = 0x5ca1ab1e;
        long r = b.epoll_ctl(efd, EPOLL_CTL_ADD, tfd, &ev);
        out.push_back({kRegAdd, ep, t, Res(r)});
        if (r == 0) {
          out.push_back(
              {kRegDel, ep, t, Res(b.epoll_ctl(efd, EPOLL_CTL_DEL, tfd, &ev))});
        }
      }
    }
    if (d.empty()) d = FirstDifference(obs[0], obs[1]);
  }
  if (d.empty()) return true;
  if (m) {
    m->index = index;
    m->op = op;
    m->what = std::string("state: after ") +
              (opt_.check == Check::kAll ? "the call" : "a failing call") +
              ", " + d;
  }
  return false;
}

}  // namespace difffuzz
