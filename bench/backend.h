// The two implementations every workload runs on: the kernel's epoll (libc
// calls on real descriptors) and uepoll. Same signatures, so a workload is
// written once and measured twice in the same binary and the same run.
#ifndef UEPOLL_BENCH_BACKEND_H_
#define UEPOLL_BENCH_BACKEND_H_

#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <string>
#include <vector>

namespace uepoll_bench {

struct Backend {
  const char* name;    // "kernel", "uepoll" or "io_uring": the JSON "backend"
  const char* prefix;  // prepended to call names in error messages
  bool is_kernel;
  int (*epoll_create1)(int flags);
  int (*epoll_ctl)(int epfd, int op, int fd, struct epoll_event* ev);
  int (*epoll_wait)(int epfd, struct epoll_event* evs, int max, int timeout);
  int (*eventfd)(unsigned int initval, int flags);
  int (*pipe2)(int fds[2], int flags);
  int (*socketpair)(int domain, int type, int protocol, int sv[2]);
  ssize_t (*read)(int fd, void* buf, size_t n);
  ssize_t (*write)(int fd, const void* buf, size_t n);
  int (*close)(int fd);
  // epoll_wait with a minimum wait (timeout_ms -1: forever); nullptr where
  // the backend has none (the kernel never merged min_wait).
  int (*wait_min)(int epfd, struct epoll_event* evs, int max, int timeout_ms,
                  uint64_t min_wait_ns);
  // io_uring (uring.h): epoll's calls mapped onto a ring; is_kernel is also
  // set, as its descriptors and I/O are the kernel's.
  bool is_uring = false;
  // Vectored and message I/O (the _msg forms of throughput and pingpong);
  // nullptr where the backend has no such form (io_uring here).
  ssize_t (*writev)(int fd, const struct iovec* iov, int n) = nullptr;
  ssize_t (*recvmsg)(int fd, struct msghdr* msg, int flags) = nullptr;
};

struct Result;
// On uepoll in the disjoint numbering (UEPOLL_FD_MODE=disjoint), adds the
// parameter disjoint=1, so that the two modes' rows tell apart.
void NoteFdMode(const Backend& b, Result& r);

const Backend& KernelBackend();
const Backend& UepollBackend();

// "uepoll_epoll_ctl: Function not implemented" for the current errno.
std::string CallError(const Backend& b, const char* call);

// Raises the backend's descriptor limit towards `want` (RLIMIT_NOFILE's soft
// limit up to its hard limit for the kernel, uepoll's own limit up to the
// table capacity for uepoll). Returns the limit now in force (maybe < want).
long RaiseFdLimit(const Backend& b, long want);

// Closes every descriptor it holds on destruction, so a measurement that
// fails half-way through setup leaks nothing into the next one.
class FdList {
 public:
  explicit FdList(const Backend& b) : b_(b) {}
  FdList(const FdList&) = delete;
  FdList& operator=(const FdList&) = delete;
  ~FdList() { CloseAll(); }
  int Add(int fd) {
    if (fd >= 0) fds_.push_back(fd);
    return fd;
  }
  void CloseAll() {
    for (int fd : fds_) b_.close(fd);
    fds_.clear();
  }
  void Reserve(size_t n) { fds_.reserve(n); }

 private:
  const Backend& b_;
  std::vector<int> fds_;
};

// perf's -N: a chain of `levels` empty instances hung under epfd. Nothing in
// it ever becomes ready; it only makes epfd a participant in nesting (the
// checks and locking a nested instance pays for).
bool HangEmptyChain(const Backend& b, FdList& fds, int epfd,
                    unsigned long levels, std::string* err);

// Tags in epoll_event.data.u64 that are not descriptors.
inline constexpr uint64_t kStopTag = ~uint64_t{0};
inline constexpr uint64_t kInstanceTag = uint64_t{1} << 62;

// A never-read eventfd in every instance a thread may block on. Writing it
// once wakes every waiter, and, level-triggered, keeps waking them: that is
// how a measurement ends, however the backend behaves.
struct StopFd {
  int fd = -1;
  bool Create(const Backend& b, FdList& fds, std::string* err);
  bool AddTo(const Backend& b, int epfd, std::string* err) const;
  void Fire(const Backend& b) const;
};

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_BACKEND_H_
