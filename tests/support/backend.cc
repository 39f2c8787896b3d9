#include "support/backend.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

namespace uepoll_test {
namespace {

int KFcntl(int fd, int cmd, long arg) { return ::fcntl(fd, cmd, arg); }
int UFcntl(int fd, int cmd, long arg) { return uepoll_fcntl(fd, cmd, arg); }
int KEventfd(unsigned int v, int f) { return ::eventfd(v, f); }
// The raw syscall: ASan's poll() interceptor reads all nfds entries before
// the kernel can refuse a huge nfds with EINVAL, which the bad-input rows
// test on purpose.
int KPoll(struct pollfd* fds, nfds_t n, int timeout) {
  return static_cast<int>(::syscall(SYS_poll, fds, n, timeout));
}

// The raw syscall with a copy of the timeout, which is what glibc's ppoll
// does; raw for the reason KPoll is.
int KPpoll(struct pollfd* fds, nfds_t n, const struct timespec* timeout,
           const sigset_t* mask) {
  struct timespec copy;
  if (timeout) copy = *timeout;
  return static_cast<int>(::syscall(SYS_ppoll, fds, n,
                                    timeout ? &copy : nullptr, mask,
                                    mask ? _NSIG / 8 : 0));
}
int KIoctl(int fd, unsigned long request, void* arg) {
  return ::ioctl(fd, request, arg);
}
int UIoctl(int fd, unsigned long request, void* arg) {
  return uepoll_ioctl(fd, request, arg);
}

int KStatx(int dirfd, const char* path, int flags, unsigned int mask,
           struct statx* stx) {
  return ::statx(dirfd, path, flags, mask, stx);
}
int KGetsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  return ::getsockname(fd, addr, len);
}
int KGetpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  return ::getpeername(fd, addr, len);
}
ssize_t KSplice(int in, off_t* off_in, int out, off_t* off_out, size_t n,
                unsigned int flags) {
  return ::splice(in, off_in, out, off_out, n, flags);
}

long KSetLimit(long limit) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  long prev = static_cast<long>(rl.rlim_cur);
  rl.rlim_cur = static_cast<rlim_t>(limit);
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  return prev;
}

const Backend kKernel = {
    "kernel", true, ::epoll_create, ::epoll_create1, ::epoll_ctl, ::epoll_wait,
    ::epoll_pwait, ::epoll_pwait2, KEventfd, ::pipe, ::pipe2, ::socketpair,
    ::shutdown, ::read, ::write, ::close, ::dup, ::dup2, ::dup3, KFcntl, KPoll,
    ::readv, ::writev, ::preadv, ::pwritev, ::send, ::recv, ::sendto,
    ::recvfrom, ::sendmsg, ::recvmsg, KPpoll, ::select, ::pselect, KIoctl,
    KSetLimit,
    // Just below RLIMIT_NOFILE's usual soft limit: never open in the tests.
    1000, ::timerfd_create, ::timerfd_settime, ::timerfd_gettime, ::fstat,
    ::fstatat, KStatx, ::getsockopt, ::setsockopt, KGetsockname, KGetpeername,
    ::sendfile, KSplice, ::close_range, ::pread, ::lseek, ::fsync, ::fdatasync,
    ::sendmmsg, ::recvmmsg, ::fstatfs, ::fstatvfs, ::posix_fadvise,
    ::posix_fallocate, ::fallocate, ::readahead, ::sync_file_range, ::syncfs};

// uepoll's descriptor limit: RLIMIT_NOFILE, as for the kernel, when its
// numbers are the kernel's (the default); its own limit in the disjoint
// mode.
long USetLimit(long limit) {
  if (uepoll_get_fd_mode() == UEPOLL_FD_MODE_KERNEL) return KSetLimit(limit);
  return uepoll_debug_set_fd_limit(limit);
}

const Backend kUepoll = {
    "uepoll", false, uepoll_epoll_create, uepoll_epoll_create1,
    uepoll_epoll_ctl, uepoll_epoll_wait, uepoll_epoll_pwait,
    uepoll_epoll_pwait2, uepoll_eventfd, uepoll_pipe, uepoll_pipe2,
    uepoll_socketpair, uepoll_shutdown, uepoll_read, uepoll_write, uepoll_close,
    uepoll_dup, uepoll_dup2, uepoll_dup3, UFcntl, uepoll_poll, uepoll_readv,
    uepoll_writev, uepoll_preadv, uepoll_pwritev, uepoll_send, uepoll_recv,
    uepoll_sendto, uepoll_recvfrom, uepoll_sendmsg, uepoll_recvmsg,
    uepoll_ppoll, uepoll_select, uepoll_pselect, UIoctl, USetLimit,
    // As for the kernel: uepoll numbers are small.
    1000, uepoll_timerfd_create, uepoll_timerfd_settime, uepoll_timerfd_gettime,
    uepoll_fstat, uepoll_fstatat, uepoll_statx, uepoll_getsockopt,
    uepoll_setsockopt, uepoll_getsockname, uepoll_getpeername, uepoll_sendfile,
    uepoll_splice, uepoll_close_range, uepoll_pread, uepoll_lseek, uepoll_fsync,
    uepoll_fdatasync, uepoll_sendmmsg, uepoll_recvmmsg, uepoll_fstatfs,
    uepoll_fstatvfs, uepoll_posix_fadvise, uepoll_posix_fallocate,
    uepoll_fallocate, uepoll_readahead, uepoll_sync_file_range, uepoll_syncfs};

}  // namespace

const Backend& KernelBackend() { return kKernel; }
const Backend& UepollBackend() { return kUepoll; }
std::string BackendName(const Backend* b) { return b->name; }

}  // namespace uepoll_test
