// The two backends every differential test runs on: the kernel (libc calls on
// real descriptors) and uepoll. One table of function pointers each, with the
// same signatures, so a test body is written once.
#ifndef UEPOLL_TESTS_SUPPORT_BACKEND_H_
#define UEPOLL_TESTS_SUPPORT_BACKEND_H_

#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <time.h>

#include <string>

namespace uepoll_test {

struct Backend {
  const char* name;  // "kernel" or "uepoll"
  bool is_kernel;
  int (*epoll_create)(int size);
  int (*epoll_create1)(int flags);
  int (*epoll_ctl)(int epfd, int op, int fd, struct epoll_event* ev);
  int (*epoll_wait)(int epfd, struct epoll_event* evs, int max, int timeout);
  int (*epoll_pwait)(int epfd, struct epoll_event* evs, int max, int timeout,
                     const sigset_t* mask);
  int (*epoll_pwait2)(int epfd, struct epoll_event* evs, int max,
                      const struct timespec* timeout, const sigset_t* mask);
  int (*eventfd)(unsigned int initval, int flags);
  int (*pipe)(int fds[2]);
  int (*pipe2)(int fds[2], int flags);
  int (*socketpair)(int domain, int type, int protocol, int sv[2]);
  int (*shutdown)(int fd, int how);
  ssize_t (*read)(int fd, void* buf, size_t n);
  ssize_t (*write)(int fd, const void* buf, size_t n);
  int (*close)(int fd);
  int (*dup)(int fd);
  int (*dup2)(int oldfd, int newfd);
  int (*dup3)(int oldfd, int newfd, int flags);
  int (*fcntl)(int fd, int cmd, long arg);
  int (*poll)(struct pollfd* fds, nfds_t n, int timeout);
  ssize_t (*readv)(int fd, const struct iovec* iov, int iovcnt);
  ssize_t (*writev)(int fd, const struct iovec* iov, int iovcnt);
  ssize_t (*preadv)(int fd, const struct iovec* iov, int iovcnt, off_t off);
  ssize_t (*pwritev)(int fd, const struct iovec* iov, int iovcnt, off_t off);
  ssize_t (*send)(int fd, const void* buf, size_t n, int flags);
  ssize_t (*recv)(int fd, void* buf, size_t n, int flags);
  ssize_t (*sendto)(int fd, const void* buf, size_t n, int flags,
                    const struct sockaddr* addr, socklen_t addrlen);
  ssize_t (*recvfrom)(int fd, void* buf, size_t n, int flags,
                      struct sockaddr* addr, socklen_t* addrlen);
  ssize_t (*sendmsg)(int fd, const struct msghdr* msg, int flags);
  ssize_t (*recvmsg)(int fd, struct msghdr* msg, int flags);
  // ppoll as glibc's (the timeout is not written back).
  int (*ppoll)(struct pollfd* fds, nfds_t n, const struct timespec* timeout,
               const sigset_t* mask);
  int (*select)(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* tv);
  int (*pselect)(int n, fd_set* r, fd_set* w, fd_set* e,
                 const struct timespec* timeout, const sigset_t* mask);
  int (*ioctl)(int fd, unsigned long request, void* arg);
  // The descriptor limit: RLIMIT_NOFILE for the kernel, uepoll's own limit
  // for uepoll. Returns the previous limit, or -1.
  long (*set_fd_limit)(long limit);
  // A descriptor number that is certainly not open on this backend.
  int closed_fd;
  // timerfd (tests/timerfd).
  int (*timerfd_create)(int clockid, int flags);
  int (*timerfd_settime)(int fd, int flags, const struct itimerspec* value,
                         struct itimerspec* old);
  int (*timerfd_gettime)(int fd, struct itimerspec* cur);
  // The calls any descriptor gets (tests/conformance/descriptor_calls_test,
  // sendfile_splice_test, sigio_test, close_range_test).
  int (*fstat)(int fd, struct stat* st);
  int (*fstatat)(int dirfd, const char* path, struct stat* st, int flags);
  int (*statx)(int dirfd, const char* path, int flags, unsigned int mask,
               struct statx* stx);
  int (*getsockopt)(int fd, int level, int name, void* val, socklen_t* len);
  int (*setsockopt)(int fd, int level, int name, const void* val,
                    socklen_t len);
  int (*getsockname)(int fd, struct sockaddr* addr, socklen_t* len);
  int (*getpeername)(int fd, struct sockaddr* addr, socklen_t* len);
  ssize_t (*sendfile)(int out, int in, off_t* off, size_t n);
  ssize_t (*splice)(int in, off_t* off_in, int out, off_t* off_out, size_t n,
                    unsigned int flags);
  int (*close_range)(unsigned int first, unsigned int last, int flags);
  ssize_t (*pread)(int fd, void* buf, size_t n, off_t off);
  off_t (*lseek)(int fd, off_t off, int whence);
  int (*fsync)(int fd);
  int (*fdatasync)(int fd);
  int (*sendmmsg)(int fd, struct mmsghdr* vec, unsigned int vlen, int flags);
  int (*recvmmsg)(int fd, struct mmsghdr* vec, unsigned int vlen, int flags,
                  struct timespec* timeout);
  int (*fstatfs)(int fd, struct statfs* buf);
  int (*fstatvfs)(int fd, struct statvfs* buf);
  // The calls about a file's pages (posix_fadvise and posix_fallocate
  // return the error number).
  int (*posix_fadvise)(int fd, off_t off, off_t len, int advice);
  int (*posix_fallocate)(int fd, off_t off, off_t len);
  int (*fallocate)(int fd, int mode, off_t off, off_t len);
  ssize_t (*readahead)(int fd, off_t off, size_t count);
  int (*sync_file_range)(int fd, off_t off, off_t n, unsigned int flags);
  int (*syncfs)(int fd);
};

const Backend& KernelBackend();
const Backend& UepollBackend();

// For INSTANTIATE_TEST_SUITE_P name generators.
std::string BackendName(const Backend* b);

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SUPPORT_BACKEND_H_
