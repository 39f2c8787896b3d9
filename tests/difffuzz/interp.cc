#include "difffuzz/interp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

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
    default:
      return false;
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

// ---------------------------------------------------------------- session

Session::Session(bool skip_known) : skip_known_(skip_known) {
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old);
  old_sigpipe_ = reinterpret_cast<void*>(old.sa_handler);

  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  if (c.descriptors != 0) {
    setup_error_ = "uepoll descriptors are open before the session";
    return;
  }
  live_files_ = c.files;
  live_items_ = c.items;
  live_descriptors_ = c.descriptors;
  live_instances_ = c.instances;

  // Find K0: the lowest kernel number above which kFdSpan + 8 numbers are
  // free; fill the holes below it so that the kernel allocates from K0.
  int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    setup_error_ = "cannot open /dev/null";
    return;
  }
  int k0 = devnull + 1;
  for (int fd = k0; fd < k0 + kFdSpan + 8; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) k0 = fd + 1;  // open: start above it
  }
  for (int fd = 0; fd < k0; ++fd) {
    if (fd == devnull || ::fcntl(fd, F_GETFD) != -1) continue;
    if (::dup2(devnull, fd) == fd) fillers_.push_back(fd);
  }
  fillers_.push_back(devnull);
  k0_ = k0;
  struct rlimit rl;
  getrlimit(RLIMIT_NOFILE, &rl);
  old_kernel_limit_ = static_cast<long>(rl.rlim_cur);
  rl.rlim_cur = static_cast<rlim_t>(k0_ + kFdSpan);
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    setup_error_ = "setrlimit failed";
    return;
  }
  old_uepoll_limit_ = uepoll_debug_set_fd_limit(kFdSpan);
  if (old_uepoll_limit_ < 0) {
    setup_error_ = "uepoll_debug_set_fd_limit failed";
    return;
  }
  cur_.assign(kFdSpan + 8, -1);
  ok_ = true;
}

Session::~Session() {
  if (!torn_down_) {
    // Kernel side first: sanitizer runtimes (UBSan's vptr check) need free
    // kernel descriptors for themselves while uepoll calls run.
    for (int off = 0; off < kFdSpan; ++off) {
      if (k0_ >= 0) ::close(k0_ + off);
    }
    for (int off = 0; off < kFdSpan; ++off) uepoll_close(UEPOLL_FD_BASE + off);
  }
  if (old_uepoll_limit_ > 0) uepoll_debug_set_fd_limit(old_uepoll_limit_);
  if (old_kernel_limit_ > 0) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = static_cast<rlim_t>(old_kernel_limit_);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  for (int fd : fillers_) ::close(fd);
  struct sigaction old {};
  old.sa_handler = reinterpret_cast<void (*)(int)>(old_sigpipe_);
  sigaction(SIGPIPE, &old, nullptr);
}

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
  return {k0_ + off, UEPOLL_FD_BASE + off};
}

void Session::Push(long off, K kind, int side) {
  if (off < 0 || off >= kFdSpan) return;
  cur_[static_cast<size_t>(off)] = static_cast<int>(table_.size());
  table_.push_back({static_cast<int>(off), kind, side});
}

// ---------------------------------------------------------------- execution

Outcome Session::Exec(bool kernel, const Op& op, Fds f[4]) {
  const Backend& b =
      kernel ? uepoll_test::KernelBackend() : uepoll_test::UepollBackend();
  const long base = kernel ? k0_ : UEPOLL_FD_BASE;
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
        o.out.push_back(static_cast<uint64_t>(p[0] - base));
        o.out.push_back(static_cast<uint64_t>(p[1] - base));
      }
      break;
    }
    case K::kSocketpair: {
      int sv[2] = {-1, -1};
      o.ret = b.socketpair(static_cast<int>(op.a),
                           static_cast<int>(op.b) | SOCK_NONBLOCK,
                           static_cast<int>(op.c), sv);
      if (o.ret == 0) {
        o.out.push_back(static_cast<uint64_t>(sv[0] - base));
        o.out.push_back(static_cast<uint64_t>(sv[1] - base));
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
      for (nfds_t i = 0; i < n; ++i) o.out.push_back(static_cast<uint16_t>(p[i].revents));
      break;
    }
    case K::kPollAll: {
      struct pollfd p[kFdSpan];
      for (int i = 0; i < kFdSpan; ++i) {
        p[i].fd = static_cast<int>(base) + i;
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
      if ((op.a == F_DUPFD || op.a == F_DUPFD_CLOEXEC) && arg >= 0) arg += base;
      o.ret = b.fcntl(fd(0), static_cast<int>(op.a), arg);
      break;
    }
    case K::kClose:
      o.ret = b.close(fd(0));
      break;
    case K::kCount:
      break;
  }
  int e = errno;
  if (o.ret == -1) {
    o.err = e;
  } else if (e != kErrnoSentinel) {
    o.err = -e;  // success changed errno: a difference in itself
  }
  if (o.ret >= 0 && ReturnsFd(op)) o.ret -= base;
  return o;
}

// The known differences (each pinned by a regression test that fails until
// the engine is fixed). Decided from the kernel's state alone.
bool Session::KnownDifference(const Op& op) const {
  // socketpair with a full table: the kernel fails EMFILE before it looks
  // at domain/type/protocol, uepoll checks them first
  // (regressions_test.cc: socketpair__full_table_emfile_beats_*).
  if (op.k == K::kSocketpair &&
      (op.a != AF_UNIX || (op.b & 0xf) != SOCK_STREAM || op.c != 0)) {
    int free_numbers = 0;
    for (int off = 0; off < kFdSpan && free_numbers < 2; ++off) {
      if (::fcntl(k0_ + off, F_GETFD) == -1) ++free_numbers;
    }
    return free_numbers < 2;
  }
  return false;
}

bool Session::Run(const Op& op, size_t index, Mismatch* m) {
  if (skip_known_ && KnownDifference(op)) return true;
  Fds f[4];
  for (int i = 0; i < 4; ++i) f[i] = Resolve(op.h[i]);
  Op eff = op;
  if (op.k == K::kWrite) {
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
  Outcome ko = Exec(true, eff, f);
  Outcome uo = Exec(false, eff, f);
  if (!(ko == uo)) {
    if (m) *m = {index, op, ko, uo, "result"};
    return false;
  }
  {
    int e = ko.ret < 0 ? ko.err : 0;
    if (e >= 0 && e < 134) ++g_cov[static_cast<int>(op.k)][e];
    if (ko.ret > 0 || (op.k == K::kWait && ko.ret > 0)) {
      ++g_cov_nonempty[static_cast<int>(op.k)];
    }
  }
  if (ko.ret < 0) return true;
  switch (op.k) {
    case K::kEventfd:
    case K::kEpollCreate:
    case K::kEpollCreate1:
      Push(ko.ret, op.k == K::kEventfd ? K::kEventfd : K::kEpollCreate1, 0);
      break;
    case K::kPipe2:
    case K::kSocketpair:
      Push(static_cast<long>(ko.out[0]), op.k, 0);
      Push(static_cast<long>(ko.out[1]), op.k, 1);
      break;
    case K::kDup:
    case K::kDup2:
    case K::kDup3:
    case K::kFcntl: {
      if (!ReturnsFd(op)) break;
      K kind = K::kCount;
      int side = 0;
      if (op.h[0] >= 0 && static_cast<size_t>(op.h[0]) < table_.size()) {
        kind = table_[static_cast<size_t>(op.h[0])].kind;
        side = table_[static_cast<size_t>(op.h[0])].side;
      }
      Push(ko.ret, kind, side);
      break;
    }
    case K::kClose: {
      long off = f[0].k - k0_;
      if (off >= 0 && off < kFdSpan) cur_[static_cast<size_t>(off)] = -1;
      break;
    }
    default:
      break;
  }
  return true;
}

bool Session::Teardown(size_t index, Mismatch* m) {
  torn_down_ = true;
  bool ok = true;
  // Kernel side first (see ~Session).
  Outcome kos[kFdSpan];
  for (int off = 0; off < kFdSpan; ++off) {
    Op op{K::kClose, {kRawBase - off, 0, 0, 0}, 0, 0, 0};
    Fds f[4] = {{k0_ + off, UEPOLL_FD_BASE + off}, {}, {}, {}};
    kos[off] = Exec(true, op, f);
  }
  for (int off = 0; off < kFdSpan; ++off) {
    Op op{K::kClose, {kRawBase - off, 0, 0, 0}, 0, 0, 0};
    Fds f[4] = {{k0_ + off, UEPOLL_FD_BASE + off}, {}, {}, {}};
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

// ---------------------------------------------------------------- generator

int32_t Session::PickHandle(Chooser& ch, int want) const {
  // want: -1 any, else a K value (kPipe2 + 10 * side: a given end).
  uint32_t r = ch.Below(100);
  if (table_.empty() || r < 3) {
    switch (ch.Below(3)) {
      case 0:
        return kNegFd;
      case 1:
        return kRawBase - static_cast<int32_t>(ch.Below(kFdSpan + 8));
      default:
        return static_cast<int32_t>(table_.size() + ch.Below(8));
    }
  }
  if (r < 12) return static_cast<int32_t>(ch.Below(static_cast<uint32_t>(table_.size())));
  int cand[kFdSpan];
  int n = 0, nany = 0;
  int any[kFdSpan];
  for (int off = 0; off < kFdSpan; ++off) {
    int h = cur_[static_cast<size_t>(off)];
    if (h < 0) continue;
    any[nany++] = h;
    const Handle& hd = table_[static_cast<size_t>(h)];
    bool match = want < 0 || static_cast<int>(hd.kind) == want ||
                 static_cast<int>(hd.kind) + 10 * (hd.side + 1) == want;
    if (match) cand[n++] = h;
  }
  if (n > 0 && r < 90) return cand[ch.Below(static_cast<uint32_t>(n))];
  if (nany > 0) return any[ch.Below(static_cast<uint32_t>(nany))];
  return static_cast<int32_t>(ch.Below(static_cast<uint32_t>(table_.size())));
}

Op Session::Generate(Chooser& ch) const {
  Op op{K::kCount, {0, 0, 0, 0}, 0, 0, 0};
  int open = 0;
  for (int h : cur_) open += h >= 0;
  // Weights per kind; creations taper off as the span fills (but still hit
  // EMFILE now and then).
  int create_w = open < 8 ? 12 : open < 40 ? 4 : 1;
  const int w[] = {
      create_w,      // eventfd
      create_w,      // pipe2
      create_w,      // socketpair
      1,             // epoll_create
      create_w,      // epoll_create1
      26,            // ctl
      14,            // wait
      5,             // poll
      1,             // poll all
      12,            // read
      14,            // write
      2,             // shutdown
      2,             // dup
      2,             // dup2
      1,             // dup3
      2,             // fcntl
      open > 30 ? 12 : 4,  // close
  };
  int total = 0;
  for (int x : w) total += x;
  int pick = static_cast<int>(ch.Below(static_cast<uint32_t>(total)));
  int kind = 0;
  while (pick >= w[kind]) pick -= w[kind++];
  op.k = static_cast<K>(kind);
  const int kEpoll = static_cast<int>(K::kEpollCreate1);
  const int kEfd = static_cast<int>(K::kEventfd);
  const int kPipeRd = static_cast<int>(K::kPipe2) + 10;
  const int kPipeWr = static_cast<int>(K::kPipe2) + 20;
  const int kSock = static_cast<int>(K::kSocketpair);
  auto source_kind = [&] {
    switch (ch.Below(4)) {
      case 0: return kEfd;
      case 1: return kPipeRd;
      case 2: return kPipeWr;
      default: return kSock;
    }
  };
  auto small_or_big = [&]() -> uint64_t {
    return ch.OneIn(2) ? ch.Below(100) : (ch.Next() << 32 | ch.Next());
  };
  switch (op.k) {
    case K::kEventfd: {
      static const int64_t kInit[] = {0, 1, 2, 7, 0xfffffffe};
      op.a = kInit[ch.Below(5)];
      op.b = EFD_NONBLOCK | (ch.OneIn(3) ? EFD_SEMAPHORE : 0) |
             (ch.OneIn(4) ? EFD_CLOEXEC : 0);
      if (ch.OneIn(40)) op.b |= 2;  // unknown flag: EINVAL
      break;
    }
    case K::kPipe2:
      op.b = O_NONBLOCK | (ch.OneIn(4) ? O_CLOEXEC : 0) |
             (ch.OneIn(5) ? O_DIRECT : 0);
      if (ch.OneIn(40)) op.b |= O_APPEND;
      break;
    case K::kSocketpair: {
      op.a = AF_UNIX;
      op.b = SOCK_STREAM | SOCK_NONBLOCK | (ch.OneIn(4) ? SOCK_CLOEXEC : 0);
      op.c = 0;
      // Invalid arguments (never SOCK_DGRAM/SEQPACKET/RAW: unsupported by
      // uepoll, a documented deviation).
      switch (ch.Below(60)) {
        case 0: op.a = AF_INET; break;
        case 1: op.a = 12345; break;
        case 2: op.b = 7; break;
        case 3: op.b = 99; break;
        case 4: op.b = SOCK_STREAM | 0x1000; break;
        case 5: op.c = 5; break;
        default: break;
      }
      break;
    }
    case K::kEpollCreate: {
      static const int64_t kSizes[] = {1, 100, 0, -1};
      op.a = kSizes[ch.Below(4)];
      break;
    }
    case K::kEpollCreate1:
      op.b = ch.OneIn(4) ? EPOLL_CLOEXEC : 0;
      if (ch.OneIn(40)) op.b |= 1;
      break;
    case K::kCtl: {
      op.h[0] = PickHandle(ch, kEpoll);
      // Targets: sources mostly, instances for nesting.
      op.h[1] = PickHandle(ch, ch.OneIn(4) ? kEpoll : source_kind());
      uint32_t r = ch.Below(100);
      if (r < 50) {
        op.a = EPOLL_CTL_ADD;
      } else if (r < 75) {
        op.a = EPOLL_CTL_MOD;
      } else if (r < 92) {
        op.a = EPOLL_CTL_DEL;
      } else {
        static const int64_t kBad[] = {0, 4, -1, 17};
        op.a = kBad[ch.Below(4)];
      }
      uint32_t ev = 0;
      if (ch.Below(4)) ev |= EPOLLIN;
      if (ch.OneIn(3)) ev |= EPOLLOUT;
      if (ch.OneIn(4)) ev |= EPOLLRDHUP;
      if (ch.OneIn(8)) ev |= EPOLLPRI;
      if (ch.OneIn(16)) ev |= EPOLLERR;
      if (ch.OneIn(16)) ev |= EPOLLHUP;
      if (ch.OneIn(3)) ev |= EPOLLET;
      if (ch.OneIn(5)) ev |= EPOLLONESHOT;
      if (ch.OneIn(8)) ev |= EPOLLEXCLUSIVE;
      if (ch.OneIn(16)) ev |= EPOLLWAKEUP;
      if (ch.OneIn(16)) ev |= 1u << ch.Below(32);
      if (ch.OneIn(64)) ev = static_cast<uint32_t>(ch.Next());
      op.b = ev;
      op.c = small_or_big();
      op.h[2] = ch.OneIn(40) ? 1 : 0;
      break;
    }
    case K::kWait: {
      op.h[0] = PickHandle(ch, kEpoll);
      static const int64_t kMax[] = {1, 2, 3, 4, 8, 64, 1, 2, 0, -1,
                                     INT_MAX / 12 + 1};
      op.a = kMax[ch.Below(ch.OneIn(10) ? 11 : 8)];
      uint32_t r = ch.Below(50);
      op.b = r < 5 ? 1 : r == 5 ? 2 : 0;
      break;
    }
    case K::kPoll: {
      op.b = 1 + ch.Below(4);
      if (ch.OneIn(30)) op.b = 0;
      static const uint16_t kBits[] = {POLLIN,     POLLOUT,    POLLPRI,
                                       POLLRDHUP,  POLLERR,    POLLHUP,
                                       POLLRDNORM, POLLWRNORM, POLLRDBAND,
                                       POLLWRBAND, POLLNVAL,   POLLMSG};
      uint64_t masks = 0;
      for (int i = 0; i < 4; ++i) {
        op.h[i] = PickHandle(ch, ch.OneIn(4) ? kEpoll : -1);
        uint64_t m = 0;
        int nb = 1 + static_cast<int>(ch.Below(4));
        for (int j = 0; j < nb; ++j) m |= kBits[ch.Below(12)];
        if (ch.OneIn(20)) m = ch.Next() & 0xffff;
        masks |= m << (16 * i);
      }
      op.a = static_cast<int64_t>(masks);
      break;
    }
    case K::kPollAll:
      break;
    case K::kRead: {
      int want = source_kind();
      if (want == kPipeWr) want = kPipeRd;
      op.h[0] = PickHandle(ch, ch.OneIn(20) ? -1 : want);
      uint32_t r = ch.Below(10);
      if (want == kEfd && r < 8) {
        op.a = 8;
      } else if (r < 2) {
        static const int64_t kOdd[] = {0, 1, 7, 9, 16};
        op.a = kOdd[ch.Below(5)];
      } else if (r < 6) {
        op.a = 1 + ch.Below(300);
      } else if (r < 9) {
        op.a = 1 + ch.Below(5000);
      } else {
        op.a = 1 + ch.Below(kMaxWrite);
      }
      break;
    }
    case K::kWrite: {
      int want = source_kind();
      if (want == kPipeRd) want = kPipeWr;
      op.h[0] = PickHandle(ch, ch.OneIn(20) ? -1 : want);
      uint32_t r = ch.Below(10);
      if (want == kEfd && r < 8) {
        op.a = 8;
        static const uint64_t kVals[] = {0, 1, 2, 3, 100, ~uint64_t{0} - 1,
                                         ~uint64_t{0}, ~uint64_t{0} - 5,
                                         uint64_t{1} << 63};
        op.c = kVals[ch.Below(9)];
        break;
      }
      op.c = ch.Next();
      if (r < 1) {
        op.a = ch.OneIn(2) ? 0 : 8;
      } else if (r < 6 || want == kSock) {
        op.a = 1 + ch.Below(256);
      } else if (r < 9) {
        op.a = 1 + ch.Below(4096);
      } else {
        op.a = 4097 + ch.Below(kMaxWrite - 4096);
      }
      break;
    }
    case K::kShutdown: {
      op.h[0] = PickHandle(ch, ch.OneIn(5) ? -1 : kSock);
      op.a = ch.Below(3);
      if (ch.OneIn(30)) op.a = ch.OneIn(2) ? 3 : -1;
      break;
    }
    case K::kDup:
      op.h[0] = PickHandle(ch, -1);
      break;
    case K::kDup2:
    case K::kDup3:
      op.h[0] = PickHandle(ch, -1);
      op.h[1] = ch.OneIn(2) ? PickHandle(ch, -1)
                            : kRawBase - static_cast<int32_t>(ch.Below(kFdSpan + 4));
      if (op.k == K::kDup3) {
        static const int64_t kFlags[] = {0, O_CLOEXEC, O_CLOEXEC, O_NONBLOCK};
        op.b = kFlags[ch.Below(4)];
      }
      break;
    case K::kFcntl: {
      op.h[0] = PickHandle(ch, -1);
      static const int64_t kCmds[] = {F_GETFL, F_SETFL,  F_GETFD,
                                      F_SETFD, F_DUPFD, F_DUPFD_CLOEXEC,
                                      9999};
      op.a = kCmds[ch.Below(7)];
      if (op.a == F_SETFL) op.b = ch.OneIn(3) ? O_DIRECT : 0;
      if (op.a == F_SETFD) op.b = ch.Below(2);
      if (op.a == F_DUPFD || op.a == F_DUPFD_CLOEXEC) {
        op.b = ch.OneIn(10) ? -1 : static_cast<int64_t>(ch.Below(kFdSpan + 4));
      }
      break;
    }
    case K::kClose:
      op.h[0] = PickHandle(ch, -1);
      break;
    case K::kCount:
      break;
  }
  return op;
}

// ---------------------------------------------------------------- sequences

bool RunSequence(const std::vector<Op>& ops, Mismatch* m, bool skip_known) {
  Session s(skip_known);
  if (!s.ok()) {
    if (m) *m = {0, Op{K::kCount, {0, 0, 0, 0}, 0, 0, 0}, {}, {},
                 "setup: " + s.setup_error()};
    return false;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!s.Run(ops[i], i, m)) return false;
  }
  return s.Teardown(ops.size(), m);
}

namespace {
bool SameFailure(const std::vector<Op>& ops, const Mismatch& m, K kind,
                 bool teardown) {
  bool is_teardown = m.index >= ops.size();
  if (is_teardown != teardown) return false;
  return teardown || ops[m.index].k == kind;
}
}  // namespace

std::vector<Op> Shrink(std::vector<Op> ops, const Mismatch& first,
                       bool skip_known) {
  bool teardown = first.index >= ops.size();
  K kind = teardown ? K::kCount : ops[first.index].k;
  if (!teardown) ops.resize(first.index + 1);
  bool changed = true;
  for (int pass = 0; changed && pass < 8; ++pass) {
    changed = false;
    for (size_t i = ops.size(); i-- > 0;) {
      if (i >= ops.size()) continue;
      std::vector<Op> cand = ops;
      cand.erase(cand.begin() + static_cast<long>(i));
      Mismatch m;
      if (!RunSequence(cand, &m, skip_known) &&
          SameFailure(cand, m, kind, teardown)) {
        if (!teardown) cand.resize(m.index + 1);
        ops = std::move(cand);
        changed = true;
      }
    }
  }
  return ops;
}

// ---------------------------------------------------------------- printing

namespace {

std::string H(int32_t h) {
  if (h == kNegFd) return "-1";
  if (h <= kRawBase) return "fd#" + std::to_string(kRawBase - h);
  return "h" + std::to_string(h);
}

std::string Bits(uint64_t v, const std::pair<uint64_t, const char*>* names,
                 size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (names[i].first && (v & names[i].first) == names[i].first) {
      if (!s.empty()) s += "|";
      s += names[i].second;
      v &= ~names[i].first;
    }
  }
  if (v || s.empty()) {
    char b[32];
    snprintf(b, sizeof b, "0x%" PRIx64, v);
    if (!s.empty()) s += "|";
    s += b;
  }
  return s;
}

const std::pair<uint64_t, const char*> kEpollBits[] = {
    {EPOLLIN, "IN"},        {EPOLLOUT, "OUT"},       {EPOLLPRI, "PRI"},
    {EPOLLERR, "ERR"},      {EPOLLHUP, "HUP"},       {EPOLLRDHUP, "RDHUP"},
    {EPOLLRDNORM, "RDNORM"}, {EPOLLWRNORM, "WRNORM"}, {EPOLLRDBAND, "RDBAND"},
    {EPOLLWRBAND, "WRBAND"}, {EPOLLMSG, "MSG"},       {EPOLLET, "ET"},
    {EPOLLONESHOT, "ONESHOT"}, {EPOLLEXCLUSIVE, "EXCLUSIVE"},
    {EPOLLWAKEUP, "WAKEUP"}};

std::string Ev(uint64_t v) { return Bits(v, kEpollBits, std::size(kEpollBits)); }

std::string OpenFlags(uint64_t v) {
  static const std::pair<uint64_t, const char*> kBits[] = {
      {O_NONBLOCK, "NONBLOCK"}, {O_CLOEXEC, "CLOEXEC"}, {O_DIRECT, "DIRECT"},
      {O_APPEND, "APPEND"},     {EFD_SEMAPHORE, "SEMAPHORE"}};
  return Bits(v, kBits, std::size(kBits));
}

std::string CtlOp(int64_t op) {
  switch (op) {
    case EPOLL_CTL_ADD: return "ADD";
    case EPOLL_CTL_MOD: return "MOD";
    case EPOLL_CTL_DEL: return "DEL";
    default: return "op" + std::to_string(op);
  }
}

std::string FcntlCmd(int64_t c) {
  switch (c) {
    case F_GETFL: return "F_GETFL";
    case F_SETFL: return "F_SETFL";
    case F_GETFD: return "F_GETFD";
    case F_SETFD: return "F_SETFD";
    case F_DUPFD: return "F_DUPFD";
    case F_DUPFD_CLOEXEC: return "F_DUPFD_CLOEXEC";
    default: return std::to_string(c);
  }
}

const char* KName(K k) {
  static const char* const kNames[] = {
      "kEventfd", "kPipe2", "kSocketpair", "kEpollCreate", "kEpollCreate1",
      "kCtl", "kWait", "kPoll", "kPollAll", "kRead", "kWrite", "kShutdown",
      "kDup", "kDup2", "kDup3", "kFcntl", "kClose", "kCount"};
  return kNames[static_cast<int>(k)];
}

}  // namespace

std::string Describe(const Op& op) {
  char b[256];
  switch (op.k) {
    case K::kEventfd:
      snprintf(b, sizeof b, "eventfd(%" PRId64 ", %s)", op.a,
               OpenFlags(static_cast<uint64_t>(op.b)).c_str());
      break;
    case K::kPipe2:
      snprintf(b, sizeof b, "pipe2(%s)",
               OpenFlags(static_cast<uint64_t>(op.b) | O_NONBLOCK).c_str());
      break;
    case K::kSocketpair:
      snprintf(b, sizeof b, "socketpair(%" PRId64 ", 0x%" PRIx64 "|NONBLOCK, %" PRIu64 ")",
               op.a, op.b, op.c);
      break;
    case K::kEpollCreate:
      snprintf(b, sizeof b, "epoll_create(%" PRId64 ")", op.a);
      break;
    case K::kEpollCreate1:
      snprintf(b, sizeof b, "epoll_create1(0x%" PRIx64 ")", op.b);
      break;
    case K::kCtl:
      if (op.h[2]) {
        snprintf(b, sizeof b, "epoll_ctl(%s, %s, %s, NULL)", H(op.h[0]).c_str(),
                 CtlOp(op.a).c_str(), H(op.h[1]).c_str());
      } else {
        snprintf(b, sizeof b, "epoll_ctl(%s, %s, %s, {%s, 0x%" PRIx64 "})",
                 H(op.h[0]).c_str(), CtlOp(op.a).c_str(), H(op.h[1]).c_str(),
                 Ev(static_cast<uint64_t>(op.b)).c_str(), op.c);
      }
      break;
    case K::kWait:
      snprintf(b, sizeof b, "%s(%s, maxevents %" PRId64 ", timeout 0%s)",
               op.b ? "epoll_pwait2" : "epoll_wait", H(op.h[0]).c_str(), op.a,
               op.b == 2 ? " with tv_nsec -1" : "");
      break;
    case K::kPoll: {
      std::string s = "poll([";
      int n = op.b == 4 ? 4 : static_cast<int>(op.b & 3);
      for (int i = 0; i < n; ++i) {
        if (i) s += ", ";
        s += "{" + H(op.h[i]) + ", " +
             Ev(static_cast<uint64_t>(op.a >> (16 * i)) & 0xffff) + "}";
      }
      s += "], timeout 0)";
      return s;
    }
    case K::kPollAll:
      return "poll(every number in the span, IN|OUT|PRI|RDHUP)";
    case K::kRead:
      snprintf(b, sizeof b, "read(%s, %" PRId64 " bytes)", H(op.h[0]).c_str(), op.a);
      break;
    case K::kWrite:
      snprintf(b, sizeof b, "write(%s, %" PRId64 " bytes, first 8 = 0x%" PRIx64 ")",
               H(op.h[0]).c_str(), op.a, op.c);
      break;
    case K::kShutdown:
      snprintf(b, sizeof b, "shutdown(%s, %" PRId64 ")", H(op.h[0]).c_str(), op.a);
      break;
    case K::kDup:
      snprintf(b, sizeof b, "dup(%s)", H(op.h[0]).c_str());
      break;
    case K::kDup2:
      snprintf(b, sizeof b, "dup2(%s, %s)", H(op.h[0]).c_str(), H(op.h[1]).c_str());
      break;
    case K::kDup3:
      snprintf(b, sizeof b, "dup3(%s, %s, %s)", H(op.h[0]).c_str(),
               H(op.h[1]).c_str(), OpenFlags(static_cast<uint64_t>(op.b)).c_str());
      break;
    case K::kFcntl:
      snprintf(b, sizeof b, "fcntl(%s, %s, %" PRId64 ")", H(op.h[0]).c_str(),
               FcntlCmd(op.a).c_str(), op.b);
      break;
    case K::kClose:
      snprintf(b, sizeof b, "close(%s)", H(op.h[0]).c_str());
      break;
    case K::kCount:
      return "(end of sequence)";
  }
  return b;
}

std::string CoverageSummary() {
  std::string s;
  for (int k = 0; k < static_cast<int>(K::kCount); ++k) {
    s += std::string("  ") + KName(static_cast<K>(k)) + ": ok " +
         std::to_string(g_cov[k][0]) + " (ret>0 " +
         std::to_string(g_cov_nonempty[k]) + ")";
    for (int e = 1; e < 134; ++e) {
      if (g_cov[k][e]) {
        s += std::string(", ") + (strerrorname_np(e) ? strerrorname_np(e) : "?") +
             " " + std::to_string(g_cov[k][e]);
      }
    }
    s += "\n";
  }
  return s;
}

std::string ToCode(const Op& op) {
  char b[256];
  snprintf(b, sizeof b,
           "{K::%s, {%d, %d, %d, %d}, %" PRId64 ", %" PRId64 ", 0x%" PRIx64 "ull}",
           KName(op.k), op.h[0], op.h[1], op.h[2], op.h[3], op.a, op.b, op.c);
  return b;
}

std::string Describe(const Outcome& o, const Op& op) {
  std::string s = "ret " + std::to_string(o.ret);
  if (o.err > 0) s += std::string(" errno ") + (strerrorname_np(o.err) ? strerrorname_np(o.err) : "?");
  if (o.err < 0) s += " (errno changed on success to " + std::to_string(-o.err) + ")";
  if (o.out.empty()) return s;
  s += " [";
  for (size_t i = 0; i < o.out.size(); ++i) {
    if (i) s += ", ";
    if (op.k == K::kWait && i % 2 == 0) {
      s += "{" + Ev(o.out[i]);
    } else if (op.k == K::kWait) {
      char d[32];
      snprintf(d, sizeof d, "0x%" PRIx64 "}", o.out[i]);
      s += d;
    } else if (op.k == K::kPoll || op.k == K::kPollAll) {
      s += o.out[i] ? Ev(o.out[i]) : "0";
    } else {
      s += std::to_string(o.out[i]);
    }
  }
  return s + "]";
}

std::string Report(const std::vector<Op>& ops, const Mismatch& m) {
  std::string s;
  s += "  differs at op " + std::to_string(m.index) + " (" + m.what + "): " +
       Describe(m.op) + "\n";
  s += "    kernel: " + Describe(m.kernel, m.op) + "\n";
  s += "    uepoll: " + Describe(m.uepoll, m.op) + "\n";
  s += "  sequence (" + std::to_string(ops.size()) + " ops; h<i> = the i-th "
       "descriptor created, fd#<n> = the n-th number of the span):\n";
  for (size_t i = 0; i < ops.size(); ++i) {
    s += "    #" + std::to_string(i) + "  " + Describe(ops[i]) + "\n";
  }
  s += "  as code for tests/difffuzz/regressions_test.cc:\n";
  for (const Op& op : ops) s += "    " + ToCode(op) + ",\n";
  return s;
}

}  // namespace difffuzz
