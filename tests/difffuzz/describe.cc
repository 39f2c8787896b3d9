// uepoll-difffuzz: printing ops and outcomes, readably and as C++ initializers
// (see interp.h).
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "difffuzz/interp.h"

namespace difffuzz {

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
    {EPOLLIN, "IN"},           {EPOLLOUT, "OUT"},
    {EPOLLPRI, "PRI"},         {EPOLLERR, "ERR"},
    {EPOLLHUP, "HUP"},         {EPOLLRDHUP, "RDHUP"},
    {EPOLLRDNORM, "RDNORM"},   {EPOLLWRNORM, "WRNORM"},
    {EPOLLRDBAND, "RDBAND"},   {EPOLLWRBAND, "WRBAND"},
    {EPOLLMSG, "MSG"},         {EPOLLET, "ET"},
    {EPOLLONESHOT, "ONESHOT"}, {EPOLLEXCLUSIVE, "EXCLUSIVE"},
    {EPOLLWAKEUP, "WAKEUP"}};

std::string Ev(uint64_t v) {
  return Bits(v, kEpollBits, std::size(kEpollBits));
}

std::string OpenFlags(uint64_t v) {
  static const std::pair<uint64_t, const char*> kBits[] = {
      {O_NONBLOCK, "NONBLOCK"},
      {O_CLOEXEC, "CLOEXEC"},
      {O_DIRECT, "DIRECT"},
      {O_APPEND, "APPEND"},
      {EFD_SEMAPHORE, "SEMAPHORE"}};
  return Bits(v, kBits, std::size(kBits));
}

std::string CtlOp(int64_t op) {
  switch (op) {
    case EPOLL_CTL_ADD:
      return "ADD";
    case EPOLL_CTL_MOD:
      return "MOD";
    case EPOLL_CTL_DEL:
      return "DEL";
    default:
      return "op" + std::to_string(op);
  }
}

std::string FcntlCmd(int64_t c) {
  switch (c) {
    case F_GETFL:
      return "F_GETFL";
    case F_SETFL:
      return "F_SETFL";
    case F_GETFD:
      return "F_GETFD";
    case F_SETFD:
      return "F_SETFD";
    case F_DUPFD:
      return "F_DUPFD";
    case F_DUPFD_CLOEXEC:
      return "F_DUPFD_CLOEXEC";
    default:
      return std::to_string(c);
  }
}

}  // namespace

const char* KName(K k) {
  static const char* const kNames[] = {
      "kEventfd", "kPipe2",    "kSocketpair", "kEpollCreate", "kEpollCreate1",
      "kCtl",     "kWait",     "kPoll",       "kPollAll",     "kRead",
      "kWrite",   "kShutdown", "kDup",        "kDup2",        "kDup3",
      "kFcntl",   "kClose",    "kReadv",      "kWritev",      "kSend",
      "kRecv",    "kIoctl",    "kKernelObj",  "kLimit",       "kCount"};
  return kNames[static_cast<int>(k)];
}

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
      snprintf(b, sizeof b,
               "socketpair(%" PRId64 ", 0x%" PRIx64 "|NONBLOCK, %" PRIu64 ")",
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
      snprintf(b, sizeof b, "read(%s, %" PRId64 " bytes)", H(op.h[0]).c_str(),
               op.a);
      break;
    case K::kWrite:
      snprintf(b, sizeof b,
               "write(%s, %" PRId64 " bytes, first 8 = 0x%" PRIx64 ")",
               H(op.h[0]).c_str(), op.a, op.c);
      break;
    case K::kShutdown:
      snprintf(b, sizeof b, "shutdown(%s, %" PRId64 ")", H(op.h[0]).c_str(),
               op.a);
      break;
    case K::kDup:
      snprintf(b, sizeof b, "dup(%s)", H(op.h[0]).c_str());
      break;
    case K::kDup2:
      snprintf(b, sizeof b, "dup2(%s, %s)", H(op.h[0]).c_str(),
               H(op.h[1]).c_str());
      break;
    case K::kDup3:
      snprintf(b, sizeof b, "dup3(%s, %s, %s)", H(op.h[0]).c_str(),
               H(op.h[1]).c_str(),
               OpenFlags(static_cast<uint64_t>(op.b)).c_str());
      break;
    case K::kFcntl:
      snprintf(b, sizeof b, "fcntl(%s, %s, %" PRId64 ")", H(op.h[0]).c_str(),
               FcntlCmd(op.a).c_str(), op.b);
      break;
    case K::kClose:
      snprintf(b, sizeof b, "close(%s)", H(op.h[0]).c_str());
      break;
    case K::kReadv:
    case K::kWritev:
      snprintf(b, sizeof b,
               "%s(%s, %" PRId64 " bytes in %" PRId64 " segments%s)",
               op.k == K::kReadv ? "readv" : "writev", H(op.h[0]).c_str(), op.a,
               op.b, op.k == K::kWritev ? ", pattern" : "");
      break;
    case K::kSend:
    case K::kRecv:
      snprintf(b, sizeof b,
               "%s(%s, %" PRId64 " bytes, flags 0x%" PRIx64 "|DONTWAIT)",
               op.k == K::kSend ? "send" : "recv", H(op.h[0]).c_str(), op.a,
               op.b);
      break;
    case K::kIoctl:
      snprintf(b, sizeof b, "ioctl(%s, 0x%" PRIx64 ")", H(op.h[0]).c_str(),
               op.a);
      break;
    case K::kKernelObj:
      if (op.a == 0) {
        snprintf(b, sizeof b,
                 "kernel eventfd(%" PRId64 ", NONBLOCK%s) (libc, both sides)",
                 op.b, (op.c & 1) ? "|SEMAPHORE" : "");
      } else {
        static const char* const kWhat[] = {"", "pipe2(NONBLOCK)",
                                            "epoll_create1(0)",
                                            "socketpair(STREAM|NONBLOCK)"};
        snprintf(b, sizeof b, "kernel %s (libc, both sides)", kWhat[op.a & 3]);
      }
      break;
    case K::kLimit:
      snprintf(b, sizeof b,
               "descriptor limit := offset %" PRId64 " (both sides)", op.a);
      break;
    case K::kCount:
      return "(end of sequence)";
  }
  return b;
}

std::string ToCode(const Op& op) {
  char b[256];
  snprintf(b, sizeof b,
           "{K::%s, {%d, %d, %d, %d}, %" PRId64 ", %" PRId64 ", 0x%" PRIx64
           "ull}",
           KName(op.k), op.h[0], op.h[1], op.h[2], op.h[3], op.a, op.b, op.c);
  return b;
}

std::string Describe(const Outcome& o, const Op& op) {
  std::string s = "ret " + std::to_string(o.ret);
  if (o.err > 0)
    s += std::string(" errno ") +
         (strerrorname_np(o.err) ? strerrorname_np(o.err) : "?");
  if (o.err < 0)
    s += " (errno changed on success to " + std::to_string(-o.err) + ")";
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

std::vector<Op> ParseOps(const std::string& text) {
  std::vector<Op> ops;
  size_t pos = 0;
  while ((pos = text.find("{K::", pos)) != std::string::npos) {
    size_t end = text.find('\n', pos);
    std::string line = text.substr(
        pos + 4, end == std::string::npos ? std::string::npos : end - pos - 4);
    pos = end;
    char name[32];
    Op op{K::kCount, {0, 0, 0, 0}, 0, 0, 0};
    unsigned long long c = 0;
    long long a = 0, b = 0;
    if (sscanf(line.c_str(),
               "%31[A-Za-z0-9], {%d, %d, %d, %d}, %lld, %lld, %llx", name,
               &op.h[0], &op.h[1], &op.h[2], &op.h[3], &a, &b, &c) != 8) {
      continue;
    }
    for (int k = 0; k < static_cast<int>(K::kCount); ++k) {
      if (std::string(KName(static_cast<K>(k))) == name)
        op.k = static_cast<K>(k);
    }
    if (op.k == K::kCount) continue;
    op.a = a;
    op.b = b;
    op.c = c;
    ops.push_back(op);
    if (end == std::string::npos) break;
  }
  return ops;
}

std::string Report(const std::vector<Op>& ops, const Mismatch& m) {
  std::string s;
  s += "  differs at op " + std::to_string(m.index) + " (" + m.what +
       "): " + Describe(m.op) + "\n";
  s += "    kernel: " + Describe(m.kernel, m.op) + "\n";
  s += "    uepoll: " + Describe(m.uepoll, m.op) + "\n";
  s += "  sequence (" + std::to_string(ops.size()) +
       " ops; h<i> = the i-th "
       "descriptor created, fd#<n> = the n-th number of the span):\n";
  for (size_t i = 0; i < ops.size(); ++i) {
    s += "    #" + std::to_string(i) + "  " + Describe(ops[i]) + "\n";
  }
  s += "  as code for tests/difffuzz/regressions_test.cc:\n";
  for (const Op& op : ops) s += "    " + ToCode(op) + ",\n";
  return s;
}

}  // namespace difffuzz
