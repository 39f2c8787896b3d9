#include "backend.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "report.h"

namespace uepoll_bench {
namespace {

int KEventfd(unsigned int v, int f) { return ::eventfd(v, f); }

int UWaitMin(int epfd, struct epoll_event* evs, int max, int timeout_ms,
             uint64_t min_wait_ns) {
  struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  struct uepoll_wait_args args = {};
  args.timeout = timeout_ms < 0 ? nullptr : &ts;
  args.min_wait_ns = min_wait_ns;
  return uepoll_epoll_pwait3(epfd, evs, max, &args);
}

const Backend kKernel = {"kernel",     "",           true,     ::epoll_create1,
                         ::epoll_ctl,  ::epoll_wait, KEventfd, ::pipe2,
                         ::socketpair, ::read,       ::write,  ::close,
                         nullptr,      false,        ::writev, ::recvmsg};

const Backend kUepoll = {"uepoll",
                         "uepoll_",
                         false,
                         uepoll_epoll_create1,
                         uepoll_epoll_ctl,
                         uepoll_epoll_wait,
                         uepoll_eventfd,
                         uepoll_pipe2,
                         uepoll_socketpair,
                         uepoll_read,
                         uepoll_write,
                         uepoll_close,
                         UWaitMin,
                         false,
                         uepoll_writev,
                         uepoll_recvmsg};

}  // namespace

const Backend& KernelBackend() { return kKernel; }
const Backend& UepollBackend() { return kUepoll; }

std::string CallError(const Backend& b, const char* call) {
  int e = errno;
  std::string s = std::string(b.prefix) + call + ": " + strerror(e);
  if (e == ENOSYS && !b.is_kernel) s += " (the uepoll engine has not landed)";
  return s;
}

long RaiseFdLimit(const Backend& b, long want) {
  if (b.is_kernel) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
    if (rl.rlim_cur != RLIM_INFINITY && static_cast<long>(rl.rlim_cur) < want) {
      rlim_t target = static_cast<rlim_t>(want);
      if (rl.rlim_max != RLIM_INFINITY) target = std::min(target, rl.rlim_max);
      rl.rlim_cur = target;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY ? want : static_cast<long>(rl.rlim_cur);
  }
  long cap = uepoll_debug_fd_capacity();
  long target = cap > 0 ? std::min(want, cap) : want;
  long prev = uepoll_debug_set_fd_limit(target);
  if (prev < 0) return -1;  // unknown: the calls themselves will tell
  if (prev > target) {      // never lower a limit someone else raised
    uepoll_debug_set_fd_limit(prev);
    return prev;
  }
  return target;
}

bool HangEmptyChain(const Backend& b, FdList& fds, int epfd,
                    unsigned long levels, std::string* err) {
  std::vector<int> chain;
  for (unsigned long i = 0; i < levels; ++i) {
    chain.push_back(fds.Add(b.epoll_create1(0)));
    if (chain.back() < 0) {
      *err = CallError(b, "epoll_create1");
      return false;
    }
  }
  struct epoll_event ev = {};
  ev.events = EPOLLHUP;  // anything: the chain never reports
  ev.data.u64 = levels;
  for (unsigned long i = levels; i > 0; --i) {
    int parent = i == 1 ? epfd : chain[i - 2];
    if (b.epoll_ctl(parent, EPOLL_CTL_ADD, chain[i - 1], &ev) < 0) {
      *err = CallError(b, "epoll_ctl(ADD nested)");
      return false;
    }
  }
  return true;
}

bool StopFd::Create(const Backend& b, FdList& fds, std::string* err) {
  fd = fds.Add(b.eventfd(0, EFD_NONBLOCK));
  if (fd < 0) *err = CallError(b, "eventfd");
  return fd >= 0;
}

bool StopFd::AddTo(const Backend& b, int epfd, std::string* err) const {
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = kStopTag;
  if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0) return true;
  *err = CallError(b, "epoll_ctl(ADD stop)");
  return false;
}

void StopFd::Fire(const Backend& b) const {
  uint64_t one = 1;
  if (fd >= 0) b.write(fd, &one, sizeof(one));
}

void NoteFdMode(const Backend& b, Result& r) {
  if (!b.is_kernel && uepoll_get_fd_mode() == UEPOLL_FD_MODE_DISJOINT)
    r.params.push_back({"disjoint", 1});
}

}  // namespace uepoll_bench
