#include "difffuzz/interp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "support/backend.h"

namespace difffuzz {
namespace {

using uepoll_test::Backend;

constexpr int kErrnoSentinel = 0x5eed;
constexpr int kMaxEvents = 256;
constexpr uint32_t kPollAllMask = POLLIN | POLLOUT | POLLPRI | POLLRDHUP;

// The count n split over nseg segments of buf, unevenly (the first gets
// the odd bytes, one in the middle is empty when there are four), so that
// segment boundaries fall inside messages and pages.
void SplitSegments(unsigned char* buf, size_t n, struct iovec* iov, int nseg) {
  size_t off = 0;
  for (int i = 0; i < nseg; ++i) {
    size_t len = nseg == 4 && i == 2 ? 0 : n / static_cast<size_t>(nseg);
    if (i == 0) len += n % static_cast<size_t>(nseg);
    if (i == nseg - 1) len = n - off;
    iov[i].iov_base = buf + off;
    iov[i].iov_len = len;
    off += len;
  }
}

uint64_t Fnv(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

void FillPattern(unsigned char* p, size_t n, uint64_t seed) {
  uint64_t x = seed | 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = static_cast<unsigned char>(x);
  }
}

// g_cov[kind][errno] (errno 0: success); g_cov_nonempty[kind]: successes
// with output (events reported, bytes read...).
long g_cov[static_cast<int>(K::kCount) + 1][134];
long g_cov_nonempty[static_cast<int>(K::kCount) + 1];

unsigned char g_kbuf[kMaxWrite + 16];
unsigned char g_ubuf[kMaxWrite + 16];

}  // namespace

bool ReturnsFd(const Op& op) {
  switch (op.k) {
    case K::kEventfd:
    case K::kEpollCreate:
    case K::kEpollCreate1:
    case K::kDup:
    case K::kDup2:
    case K::kDup3:
      return true;
    case K::kFcntl:
      return op.a == F_DUPFD || op.a == F_DUPFD_CLOEXEC;
    case K::kKernelObj:
      return op.a == 0 || op.a == 2;
    default:
      return false;
  }
}

// ---------------------------------------------------------------- session
// (construction and teardown of the numbering: session.cc)

Session::Fds Session::Resolve(int32_t h) const {
  int off;
  if (h == kNegFd) return {-1, -1};
  if (h >= 0) {
    if (static_cast<size_t>(h) < table_.size()) {
      off = table_[static_cast<size_t>(h)].off;
    } else {
      off = kFdSpan + h % 8;  // past the limit: never open
    }
  } else {
    off = (kRawBase - h) % (kFdSpan + 8);
  }
  return {numbering_.Fd(true, off), numbering_.Fd(false, off)};
}

void Session::Push(long off, K kind, int side, bool kobj) {
  if (off < 0 || off >= kFdSpan) return;
  cur_[static_cast<size_t>(off)] = static_cast<int>(table_.size());
  table_.push_back({static_cast<int>(off), kind, side, kobj});
}

// ---------------------------------------------------------------- execution

Outcome Session::Exec(bool kernel, const Op& op, Fds f[4]) {
  const Backend& b =
      kernel ? uepoll_test::KernelBackend() : uepoll_test::UepollBackend();
  auto fd = [&](int i) { return kernel ? f[i].k : f[i].u; };
  unsigned char* buf = kernel ? g_kbuf : g_ubuf;
  Outcome o;
  errno = kErrnoSentinel;
  switch (op.k) {
    case K::kEventfd:
      o.ret = b.eventfd(static_cast<unsigned>(op.a),
                        static_cast<int>(op.b) | EFD_NONBLOCK);
      break;
    case K::kPipe2: {
      int p[2] = {-1, -1};
      o.ret = b.pipe2(p, static_cast<int>(op.b) | O_NONBLOCK);
      if (o.ret == 0) {
        o.out.push_back(static_cast<uint64_t>(numbering_.Offset(kernel, p[0])));
        o.out.push_back(static_cast<uint64_t>(numbering_.Offset(kernel, p[1])));
      }
      break;
    }
    case K::kSocketpair: {
      int sv[2] = {-1, -1};
      o.ret = b.socketpair(static_cast<int>(op.a),
                           static_cast<int>(op.b) | SOCK_NONBLOCK,
                           static_cast<int>(op.c), sv);
      if (o.ret == 0) {
        o.out.push_back(
            static_cast<uint64_t>(numbering_.Offset(kernel, sv[0])));
        o.out.push_back(
            static_cast<uint64_t>(numbering_.Offset(kernel, sv[1])));
      }
      break;
    }
    case K::kEpollCreate:
      o.ret = b.epoll_create(static_cast<int>(op.a));
      break;
    case K::kEpollCreate1:
      o.ret = b.epoll_create1(static_cast<int>(op.b));
      break;
    case K::kCtl: {
      struct epoll_event ev {};
      ev.events = static_cast<uint32_t>(op.b);
      ev.data.u64 = op.c;
      o.ret = b.epoll_ctl(fd(0), static_cast<int>(op.a), fd(1),
                          op.h[2] ? nullptr : &ev);
      break;
    }
    case K::kWait: {
      struct epoll_event evs[kMaxEvents];
      int max = static_cast<int>(op.a);
      if (max > kMaxEvents && max <= INT_MAX / 12) max = kMaxEvents;
      if (op.b == 0) {
        o.ret = b.epoll_wait(fd(0), evs, max, 0);
      } else {
        struct timespec ts = {0, 0};
        if (op.b == 2) ts.tv_nsec = -1;
        o.ret = b.epoll_pwait2(fd(0), evs, max, &ts, nullptr);
      }
      for (long i = 0; i < o.ret; ++i) {
        o.out.push_back(evs[i].events);
        o.out.push_back(uint64_t{evs[i].data.u64});  // packed: no reference
      }
      break;
    }
    case K::kPoll: {
      struct pollfd p[4];
      nfds_t n = static_cast<nfds_t>(op.b) & 3;
      if (op.b == 4) n = 4;
      for (int i = 0; i < 4; ++i) {
        p[i].fd = fd(i);
        p[i].events = static_cast<short>((op.a >> (16 * i)) & 0xffff);
        p[i].revents = 0x7777;
      }
      o.ret = b.poll(n ? p : nullptr, n, 0);
      for (nfds_t i = 0; i < n; ++i)
        o.out.push_back(static_cast<uint16_t>(p[i].revents));
      break;
    }
    case K::kPollAll: {
      struct pollfd p[kFdSpan];
      for (int i = 0; i < kFdSpan; ++i) {
        p[i].fd = numbering_.Fd(kernel, i);
        p[i].events = static_cast<short>(kPollAllMask);
        p[i].revents = 0;
      }
      o.ret = b.poll(p, kFdSpan, 0);
      for (auto& x : p) o.out.push_back(static_cast<uint16_t>(x.revents));
      break;
    }
    case K::kRead: {
      size_t n = static_cast<size_t>(op.a);
      if (n > static_cast<size_t>(kMaxWrite)) n = kMaxWrite;
      o.ret = b.read(fd(0), buf, n);
      if (o.ret > 0) o.out.push_back(Fnv(buf, static_cast<size_t>(o.ret)));
      break;
    }
    case K::kWrite: {
      size_t n = static_cast<size_t>(op.a);
      if (n > static_cast<size_t>(kMaxWrite)) n = kMaxWrite;
      FillPattern(buf, n, op.c);
      if (n >= 8) memcpy(buf, &op.c, 8);
      o.ret = b.write(fd(0), buf, n);
      break;
    }
    case K::kShutdown:
      o.ret = b.shutdown(fd(0), static_cast<int>(op.a));
      break;
    case K::kDup:
      o.ret = b.dup(fd(0));
      break;
    case K::kDup2:
      o.ret = b.dup2(fd(0), fd(1));
      break;
    case K::kDup3:
      o.ret = b.dup3(fd(0), fd(1), static_cast<int>(op.b));
      break;
    case K::kFcntl: {
      long arg = op.b;
      if (op.a == F_SETFL) arg |= O_NONBLOCK;
      if ((op.a == F_DUPFD || op.a == F_DUPFD_CLOEXEC) && arg >= 0) {
        arg = numbering_.Fd(kernel, arg);
      }
      o.ret = b.fcntl(fd(0), static_cast<int>(op.a), arg);
      break;
    }
    case K::kClose:
      o.ret = b.close(fd(0));
      break;
    case K::kReadv:
    case K::kWritev: {
      size_t n = static_cast<size_t>(op.a);
      if (n > static_cast<size_t>(kMaxWrite)) n = kMaxWrite;
      struct iovec iov[4];
      int nseg = static_cast<int>(op.b & 7);
      if (nseg > 4) nseg = 4;
      SplitSegments(buf, n, iov, nseg);
      if (op.k == K::kWritev) {
        FillPattern(buf, n, op.c);
        o.ret = b.writev(fd(0), iov, nseg);
      } else {
        o.ret = b.readv(fd(0), iov, nseg);
        if (o.ret > 0) o.out.push_back(Fnv(buf, static_cast<size_t>(o.ret)));
      }
      break;
    }
    case K::kSend: {
      size_t n = static_cast<size_t>(op.a);
      if (n > static_cast<size_t>(kMaxWrite)) n = kMaxWrite;
      FillPattern(buf, n, op.c);
      o.ret = b.send(fd(0), buf, n, static_cast<int>(op.b) | MSG_DONTWAIT);
      break;
    }
    case K::kRecv: {
      size_t n = static_cast<size_t>(op.a);
      if (n > static_cast<size_t>(kMaxWrite)) n = kMaxWrite;
      o.ret = b.recv(fd(0), buf, n, static_cast<int>(op.b) | MSG_DONTWAIT);
      // With MSG_TRUNC a datagram's whole length comes back; only n bytes
      // were copied.
      if (o.ret > 0) {
        o.out.push_back(Fnv(buf, std::min(n, static_cast<size_t>(o.ret))));
      }
      break;
    }
    case K::kIoctl: {
      int value = op.a == FIONBIO ? 1 : -7;
      o.ret = b.ioctl(fd(0), static_cast<unsigned long>(op.a), &value);
      if (o.ret == 0) o.out.push_back(static_cast<uint32_t>(value));
      break;
    }
    case K::kKernelObj: {
      // The libc call on both sides: on uepoll's, a kernel descriptor that
      // every uepoll_* call passes to libc.
      int p[2] = {-1, -1};
      switch (op.a) {
        case 0:
          o.ret = ::eventfd(static_cast<unsigned>(op.b),
                            EFD_NONBLOCK | ((op.c & 1) ? EFD_SEMAPHORE : 0));
          break;
        case 1:
          o.ret = ::pipe2(p, O_NONBLOCK);
          break;
        case 2:
          o.ret = ::epoll_create1(0);
          break;
        default:
          o.ret = ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, p);
          break;
      }
      if ((op.a == 1 || op.a == 3) && o.ret == 0) {
        o.out.push_back(static_cast<uint64_t>(numbering_.Offset(kernel, p[0])));
        o.out.push_back(static_cast<uint64_t>(numbering_.Offset(kernel, p[1])));
      }
      break;
    }
    case K::kLimit:
    case K::kCount:
      break;
  }
  int e = errno;
  if (o.ret == -1) {
    o.err = e;
  } else if (e != kErrnoSentinel) {
    o.err = -e;  // success changed errno: a difference in itself
  }
  if (o.ret >= 0 && ReturnsFd(op)) o.ret = numbering_.Offset(kernel, o.ret);
  return o;
}

bool Session::MayAllocate(const Op& op) const {
  switch (op.k) {
    case K::kPipe2:
    case K::kSocketpair:
      return true;
    case K::kKernelObj:
      return true;
    default:
      return ReturnsFd(op) && op.k != K::kDup2 && op.k != K::kDup3;
  }
}

bool Session::Run(const Op& op, size_t index, Mismatch* m) {
  if (op.k == K::kLimit) {
    numbering_.SetLimit(static_cast<int>(op.a));
    return true;
  }
  if (op.k == K::kKernelObj && opt_.numbering != NumberingMode::kKernel) {
    return true;  // the uepoll side's number would not line up
  }
  Fds f[4];
  for (int i = 0; i < 4; ++i) f[i] = Resolve(op.h[i]);
  if (Deviation(op, f)) return true;
  if (opt_.skip_known && KnownDifference(op, f)) return true;
  Op eff = op;
  if (op.k == K::kWrite || op.k == K::kWritev || op.k == K::kSend) {
    // Sockets: short writes, and none once the kernel's send queue is
    // beyond kSocketQueueCap (decided from the kernel alone, so that both
    // sides skip or run the same ops).
    struct stat st;
    if (f[0].k >= 0 && ::fstat(f[0].k, &st) == 0 && S_ISSOCK(st.st_mode)) {
      int outq = 0;
      if (::ioctl(f[0].k, SIOCOUTQ, &outq) == 0 && outq > kSocketQueueCap) {
        return true;
      }
      if (eff.a > 256) eff.a = 256;
    }
  }
  // An instance holding kernel descriptors (or one above such an
  // instance) reports its two halves in an order of its own
  // (docs/design.md, "kernel half"): under the kernel numbering every wait
  // takes all that is ready, compared as a set.
  const bool as_set = opt_.numbering == NumberingMode::kKernel &&
                      op.k == K::kWait && op.a >= 1 && op.a <= INT_MAX / 12;
  if (as_set) eff.a = kMaxEvents;
  numbering_.Enter(true, MayAllocate(eff));
  Outcome ko = Exec(true, eff, f);
  numbering_.Leave();
  numbering_.Enter(false, MayAllocate(eff));
  Outcome uo = Exec(false, eff, f);
  numbering_.Leave();
  if (as_set) {
    for (Outcome* o : {&ko, &uo}) {
      std::vector<std::pair<uint64_t, uint64_t>> evs;
      for (size_t i = 0; i + 1 < o->out.size(); i += 2) {
        evs.push_back({o->out[i + 1], o->out[i]});
      }
      std::sort(evs.begin(), evs.end());
      o->out.clear();
      for (auto [data, events] : evs) {
        o->out.push_back(events);
        o->out.push_back(data);
      }
    }
  }
  if (!(ko == uo) && !(opt_.skip_known && KnownAfterTheFact(op, f, &ko, &uo))) {
    if (m) *m = {index, op, ko, uo, "result"};
    return false;
  }
  {
    int e = ko.ret < 0 ? ko.err : 0;
    if (e >= 0 && e < 134) ++g_cov[static_cast<int>(op.k)][e];
    if (ko.ret > 0) ++g_cov_nonempty[static_cast<int>(op.k)];
  }
  if (ko.ret < 0) {
    if (opt_.check == Check::kOff) return true;
    if (opt_.check == Check::kFailures && opt_.check_every > 1 &&
        failures_++ % opt_.check_every != 0) {
      return true;
    }
    if (m) *m = {index, op, ko, uo, ""};
    return CheckState(op, f, index, m);
  }
  switch (op.k) {
    case K::kEventfd:
    case K::kEpollCreate:
    case K::kEpollCreate1:
      Push(ko.ret, op.k == K::kEventfd ? K::kEventfd : K::kEpollCreate1, 0,
           false);
      break;
    case K::kPipe2:
    case K::kSocketpair:
      Push(static_cast<long>(ko.out[0]), op.k, 0, false);
      Push(static_cast<long>(ko.out[1]), op.k, 1, false);
      break;
    case K::kKernelObj:
      if (op.a == 0 || op.a == 2) {
        Push(ko.ret, op.a == 0 ? K::kEventfd : K::kEpollCreate1, 0, true);
      } else {
        K kind = op.a == 1 ? K::kPipe2 : K::kSocketpair;
        Push(static_cast<long>(ko.out[0]), kind, 0, true);
        Push(static_cast<long>(ko.out[1]), kind, 1, true);
      }
      break;
    case K::kCtl:
      if (op.a == EPOLL_CTL_ADD) {
        if (added_.size() >= 32) added_.erase(added_.begin());
        added_.push_back({op.h[0], op.h[1]});
      }
      break;
    case K::kDup:
    case K::kDup2:
    case K::kDup3:
    case K::kFcntl: {
      if (!ReturnsFd(op)) break;
      // The copy's kind: its source's (the handle open at that offset).
      long src = numbering_.Offset(true, f[0].k);
      int h = src >= 0 && src < kFdSpan ? cur_[static_cast<size_t>(src)] : -1;
      if (h >= 0) {
        const Handle& hd = table_[static_cast<size_t>(h)];
        Push(ko.ret, hd.kind, hd.side, hd.kobj);
      } else {
        Push(ko.ret, K::kCount, 0, false);
      }
      break;
    }
    case K::kClose: {
      long off = numbering_.Offset(true, f[0].k);
      if (off >= 0 && off < kFdSpan) cur_[static_cast<size_t>(off)] = -1;
      break;
    }
    default:
      break;
  }
  if (opt_.check != Check::kAll) return true;
  if (m) *m = {index, op, ko, uo, ""};
  return CheckState(op, f, index, m);
}

bool Session::Teardown(size_t index, Mismatch* m) {
  torn_down_ = true;
  bool ok = true;
  // Kernel side first (see ~Session).
  Outcome kos[kFdSpan];
  for (int off = 0; off < kFdSpan; ++off) {
    Op op{K::kClose, {kRawBase - off, 0, 0, 0}, 0, 0, 0};
    Fds f[4] = {
        {numbering_.Fd(true, off), numbering_.Fd(false, off)}, {}, {}, {}};
    kos[off] = Exec(true, op, f);
  }
  for (int off = 0; off < kFdSpan; ++off) {
    Op op{K::kClose, {kRawBase - off, 0, 0, 0}, 0, 0, 0};
    Fds f[4] = {
        {numbering_.Fd(true, off), numbering_.Fd(false, off)}, {}, {}, {}};
    const Outcome& ko = kos[off];
    Outcome uo = Exec(false, op, f);
    if (ok && !(ko == uo)) {
      if (m) *m = {index, op, ko, uo, "teardown close"};
      ok = false;
    }
  }
  if (!ok) return false;
  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  if (c.files != live_files_ || c.items != live_items_ ||
      c.descriptors != live_descriptors_ || c.instances != live_instances_) {
    if (m) {
      Op op{K::kCount, {0, 0, 0, 0}, 0, 0, 0};
      Outcome ko, uo;
      ko.out = {static_cast<uint64_t>(live_files_),
                static_cast<uint64_t>(live_items_),
                static_cast<uint64_t>(live_descriptors_),
                static_cast<uint64_t>(live_instances_)};
      uo.out = {static_cast<uint64_t>(c.files), static_cast<uint64_t>(c.items),
                static_cast<uint64_t>(c.descriptors),
                static_cast<uint64_t>(c.instances)};
      *m = {index, op, ko, uo,
            "leak: uepoll live counts {files, items, descriptors, instances} "
            "after closing everything differ from those before"};
    }
    return false;
  }
  return true;
}

std::string CoverageSummary() {
  std::string s;
  for (int k = 0; k < static_cast<int>(K::kCount); ++k) {
    s += std::string("  ") + KName(static_cast<K>(k)) + ": ok " +
         std::to_string(g_cov[k][0]) + " (ret>0 " +
         std::to_string(g_cov_nonempty[k]) + ")";
    for (int e = 1; e < 134; ++e) {
      if (g_cov[k][e]) {
        s += std::string(", ") +
             (strerrorname_np(e) ? strerrorname_np(e) : "?") + " " +
             std::to_string(g_cov[k][e]);
      }
    }
    s += "\n";
  }
  return s;
}

}  // namespace difffuzz
