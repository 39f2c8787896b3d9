// uepoll-difffuzz: the generator: a random op suited to the current handle
// table (see interp.h).
#include <fcntl.h>
#include <limits.h>
#include <linux/sockios.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <string>

#include "difffuzz/interp.h"

namespace difffuzz {

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
  if (r < 12)
    return static_cast<int32_t>(ch.Below(static_cast<uint32_t>(table_.size())));
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

// A number that is closed now: a free offset, a handle whose number was
// closed or reused, or -1.
int32_t Session::PickClosed(Chooser& ch) const {
  int free_offs[kFdSpan];
  int n = 0;
  for (int off = 0; off < kFdSpan; ++off) {
    if (cur_[static_cast<size_t>(off)] < 0) free_offs[n++] = off;
  }
  if (n > 0 && !ch.OneIn(4)) {
    return kRawBase - free_offs[ch.Below(static_cast<uint32_t>(n))];
  }
  return ch.OneIn(2) ? kNegFd
                     : static_cast<int32_t>(table_.size() + ch.Below(8));
}

// An open kernel object (kKernelObj), or -1.
int32_t Session::PickKernelObj(Chooser& ch) const {
  int cand[kFdSpan];
  int n = 0;
  for (int off = 0; off < kFdSpan; ++off) {
    int h = cur_[static_cast<size_t>(off)];
    if (h >= 0 && table_[static_cast<size_t>(h)].kobj) cand[n++] = h;
  }
  return n ? cand[ch.Below(static_cast<uint32_t>(n))] : -1;
}

Op Session::Generate(Chooser& ch) const {
  Op op{K::kCount, {0, 0, 0, 0}, 0, 0, 0};
  int open = 0;
  for (int h : cur_) open += h >= 0;
  // Weights per kind; creations taper off as the span fills (but still hit
  // EMFILE now and then).
  int create_w = open < 8 ? 12 : open < 40 ? 4 : 1;
  const int w[] = {
      create_w,            // eventfd
      create_w,            // pipe2
      create_w,            // socketpair
      1,                   // epoll_create
      create_w,            // epoll_create1
      26,                  // ctl
      14,                  // wait
      5,                   // poll
      1,                   // poll all
      12,                  // read
      14,                  // write
      2,                   // shutdown
      2,                   // dup
      2,                   // dup2
      1,                   // dup3
      2,                   // fcntl
      open > 30 ? 12 : 4,  // close
      4,                   // readv
      4,                   // writev
      5,                   // send
      5,                   // recv
      2,                   // ioctl
      // Kernel objects on both sides: the kernel numbering only.
      opt_.numbering == NumberingMode::kKernel ? create_w : 0,
      // The descriptor limit: lowered now and then, back up soon after
      // (about 25 ops under it).
      numbering_.limit() < kFdSpan ? 6 : 1,
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
      case 0:
        return kEfd;
      case 1:
        return kPipeRd;
      case 2:
        return kPipeWr;
      default:
        return kSock;
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
      {
        static const int64_t kTypes[] = {SOCK_STREAM, SOCK_STREAM, SOCK_DGRAM,
                                         SOCK_SEQPACKET};
        op.b = kTypes[ch.Below(4)] | SOCK_NONBLOCK |
               (ch.OneIn(4) ? SOCK_CLOEXEC : 0);
      }
      op.c = 0;
      // Invalid arguments.
      switch (ch.Below(60)) {
        case 0:
          op.a = AF_INET;
          break;
        case 1:
          op.a = 12345;
          break;
        case 2:
          op.b = 7;
          break;
        case 3:
          op.b = 99;
          break;
        case 4:
          op.b = SOCK_STREAM | 0x1000;
          break;
        case 5:
          op.c = 5;
          break;
        default:
          break;
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
      // A kernel instance takes kernel targets (a uepoll one is D1,
      // skipped); a uepoll instance takes them now and then.
      if (opt_.numbering == NumberingMode::kKernel) {
        bool kinst = op.h[0] >= 0 &&
                     static_cast<size_t>(op.h[0]) < table_.size() &&
                     table_[static_cast<size_t>(op.h[0])].kobj;
        if (kinst ? !ch.OneIn(8) : ch.OneIn(3)) {
          int32_t t = PickKernelObj(ch);
          if (t >= 0) op.h[1] = t;
        }
      }
      uint32_t r = ch.Below(100);
      if (r < 50) {
        op.a = EPOLL_CTL_ADD;
      } else if (r < 75) {
        op.a = EPOLL_CTL_MOD;
      } else if (r < 92) {
        op.a = EPOLL_CTL_DEL;
      } else {
        // Not 4: uepoll takes op 4 as EPOLL_CTL_MIN_WAIT, an extension the
        // kernel lacks (tests/minwait_ctl states both sides' answers).
        static const int64_t kBad[] = {0, 5, -1, 17};
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
      // Failing on purpose: a pair that an ADD registered (EEXIST), or the
      // reverse of a nesting (ELOOP); MOD and DEL of it succeed or ENOENT.
      if (!added_.empty() && ch.OneIn(6)) {
        auto [ep, t] = added_[ch.Below(static_cast<uint32_t>(added_.size()))];
        op.h[0] = ep;
        op.h[1] = t;
        if (ch.OneIn(3)) std::swap(op.h[0], op.h[1]);
        op.a = ch.OneIn(2) ? EPOLL_CTL_ADD
                           : (ch.OneIn(2) ? EPOLL_CTL_MOD : EPOLL_CTL_DEL);
        op.h[2] = 0;
      }
      break;
    }
    case K::kWait: {
      op.h[0] = PickHandle(ch, kEpoll);
      static const int64_t kMax[] = {
          1, 2, 3, 4, 8, 64, 1, 2, 0, -1, INT_MAX / 12 + 1};
      op.a = kMax[ch.Below(ch.OneIn(10) ? 11 : 8)];
      uint32_t r = ch.Below(50);
      op.b = r < 5 ? 1 : r == 5 ? 2 : 0;
      break;
    }
    case K::kPoll: {
      op.b = 1 + ch.Below(4);
      if (ch.OneIn(30)) op.b = 0;
      static const uint16_t kBits[] = {
          POLLIN,     POLLOUT,    POLLPRI,    POLLRDHUP,  POLLERR,  POLLHUP,
          POLLRDNORM, POLLWRNORM, POLLRDBAND, POLLWRBAND, POLLNVAL, POLLMSG};
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
        op.a = ch.OneIn(6) ? ch.Below(8) : 8;  // a short buffer: EINVAL
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
        static const uint64_t kVals[] = {0,
                                         1,
                                         2,
                                         3,
                                         100,
                                         ~uint64_t{0} - 1,
                                         ~uint64_t{0},
                                         ~uint64_t{0} - 5,
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
      op.h[1] = ch.OneIn(2)
                    ? PickHandle(ch, -1)
                    : kRawBase - static_cast<int32_t>(ch.Below(kFdSpan + 4));
      // Failing on purpose: from a closed number (EBADF, newfd must stay
      // as it was), often onto an instance (one holding registrations).
      if (ch.OneIn(3)) {
        op.h[0] = PickClosed(ch);
        if (ch.OneIn(2)) {
          op.h[1] =
              !added_.empty() && ch.OneIn(2)
                  ? added_[ch.Below(static_cast<uint32_t>(added_.size()))].first
                  : PickHandle(ch, kEpoll);
        }
      }
      if (op.k == K::kDup3) {
        static const int64_t kFlags[] = {0, O_CLOEXEC, O_CLOEXEC, O_NONBLOCK};
        op.b = kFlags[ch.Below(4)];
      }
      break;
    case K::kFcntl: {
      op.h[0] = PickHandle(ch, -1);
      static const int64_t kCmds[] = {
          F_GETFL,         F_SETFL,      F_GETFD,      F_SETFD, F_DUPFD,
          F_DUPFD_CLOEXEC, F_GETPIPE_SZ, F_SETPIPE_SZ, 9999,    -1};
      op.a = kCmds[ch.Below(10)];
      if (op.a == F_SETPIPE_SZ) {
        // Shrinking below the content (EBUSY), rounding, the smallest size.
        static const int64_t kSizes[] = {0,    1,     4096,   5000,
                                         8192, 65536, 1 << 20};
        op.b = kSizes[ch.Below(7)];
      }
      if (op.a == F_SETFL) op.b = ch.OneIn(3) ? O_DIRECT : 0;
      if (op.a == F_SETFD) op.b = ch.Below(2);
      if (op.a == F_DUPFD || op.a == F_DUPFD_CLOEXEC) {
        // -1 and numbers at or past the limit: EINVAL.
        op.b = ch.OneIn(10) ? -1 : static_cast<int64_t>(ch.Below(kFdSpan + 4));
        if (ch.OneIn(8)) op.b = numbering_.limit() + ch.Below(4);
      }
      if (op.a == F_SETPIPE_SZ && ch.OneIn(4)) op.b = -1;  // EINVAL
      break;
    }
    case K::kClose:
      op.h[0] = PickHandle(ch, -1);
      break;
    case K::kReadv:
    case K::kWritev: {
      int want = source_kind();
      if (op.k == K::kReadv && want == kPipeWr) want = kPipeRd;
      if (op.k == K::kWritev && want == kPipeRd) want = kPipeWr;
      op.h[0] = PickHandle(ch, ch.OneIn(20) ? -1 : want);
      uint32_t r = ch.Below(10);
      if (want == kEfd && r < 7) {
        op.a = 8;
      } else if (r < 2) {
        static const int64_t kOdd[] = {0, 1, 7, 9, 16};
        op.a = kOdd[ch.Below(5)];
      } else if (r < 7) {
        op.a = 1 + ch.Below(300);
      } else {
        static const int64_t kBig[] = {4095, 4096, 4097, 8193, 65536, 70000};
        op.a = kBig[ch.Below(6)];
      }
      op.b = ch.Below(5);
      if (ch.OneIn(30)) op.b = 5;  // beyond the array: a short iovcnt
      op.c = small_or_big();
      break;
    }
    case K::kSend:
    case K::kRecv: {
      // Mostly sockets; now and then another object (ENOTSOCK).
      op.h[0] = PickHandle(ch, ch.OneIn(8) ? -1 : kSock);
      uint32_t r = ch.Below(10);
      if (r < 2) {
        static const int64_t kOdd[] = {0, 1, 7, 9, 16};
        op.a = kOdd[ch.Below(5)];
      } else if (r < 8) {
        op.a = 1 + ch.Below(300);
      } else {
        static const int64_t kBig[] = {4096, 36544, 65536, 70000};
        op.a = kBig[ch.Below(4)];
      }
      // MSG_OOB only on receives: a stream send of it is a documented
      // deviation (docs/semantics.md D26).
      static const int64_t kSendFlags[] = {0, MSG_NOSIGNAL, MSG_EOR, MSG_MORE,
                                           MSG_CONFIRM};
      static const int64_t kRecvFlags[] = {
          0,           MSG_PEEK, MSG_TRUNC,       MSG_PEEK | MSG_TRUNC,
          MSG_WAITALL, MSG_OOB,  MSG_CMSG_CLOEXEC};
      if (op.k == K::kSend) {
        op.b = kSendFlags[ch.Below(5)] | (ch.OneIn(2) ? MSG_NOSIGNAL : 0);
      } else {
        op.b = kRecvFlags[ch.Below(7)];
      }
      op.c = small_or_big();
      break;
    }
    case K::kIoctl: {
      op.h[0] = PickHandle(ch, -1);
      static const int64_t kReqs[] = {FIONREAD, SIOCOUTQ, FIONBIO, TCGETS};
      op.a = kReqs[ch.Below(4)];
      break;
    }
    case K::kKernelObj:
      op.a = ch.Below(4);
      if (op.a == 0) {
        op.b = ch.OneIn(2) ? 1 : 0;  // readable from the start, or not
        op.c = ch.OneIn(4);          // EFD_SEMAPHORE
      }
      break;
    case K::kLimit:
      // Lowered to just above what is open (EMFILE soon), or back up.
      if (numbering_.limit() < kFdSpan) {
        op.a = kFdSpan;
      } else {
        int highest = 0;
        for (int off = 0; off < kFdSpan; ++off) {
          if (cur_[static_cast<size_t>(off)] >= 0) highest = off + 1;
        }
        op.a = std::min<int64_t>(kFdSpan, std::max(1, highest) + ch.Below(3));
      }
      break;
    case K::kCount:
      break;
  }
  return op;
}

}  // namespace difffuzz
