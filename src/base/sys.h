// sys: every libc call uepoll makes on a descriptor (a kernel descriptor
// passed to a uepoll_* call, a placeholder, an instance's kernel epoll, the
// parker's and the bridge's own descriptors) goes through here, so that the
// one place that decides how libc is reached is this file: a build that
// interposes the libc names (libuepoll-interpose.so) must reach the next
// definition of each name, not its own: see base/libc_calls.h.
//
// Each function behaves exactly as its libc namesake: -1 and errno on
// failure, errno untouched on success.
#ifndef UEPOLL_SRC_BASE_SYS_H_
#define UEPOLL_SRC_BASE_SYS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "base/libc_calls.h"

namespace uepoll::impl::sys {

// Next()'s answer once it was asked: 0 not yet, 1 not interposed, else
// the interposer's table. Asking costs two calls across libraries (the
// interposer's entry, then its pthread_once), made on every libc call of an
// interposed process before this cache: about 16 instructions per call.
inline std::atomic<uintptr_t> g_next_libc{0};

inline const uepoll_libc_calls* NextSlow() {
  const uepoll_libc_calls* t =
      &uepoll_interpose_libc != nullptr ? uepoll_interpose_libc() : nullptr;
  // Release: the table's entries were written (the interposer's
  // pthread_once) before a thread that reads the cache calls them.
  g_next_libc.store(t ? reinterpret_cast<uintptr_t>(t) : 1,
                    std::memory_order_release);
  return t;
}

// libc's definitions when libuepoll-interpose.so has replaced the public
// names, else null (base/libc_calls.h). The answer never changes while the
// process runs: the weak reference is bound at load time, and the table
// the interposer returns is built once; so it is asked once and kept.
inline const uepoll_libc_calls* Next() {
#if defined(__SANITIZE_THREAD__)
  // Under ThreadSanitizer the cached form made a cancellation that unwinds
  // out of a libc call end in std::terminate (CxxCancel.*, Cancel.*,
  // CancelScenario.*: 29 tests), as the lambda of UEPOLL_SYS did; why is
  // not understood. That build asks every time, as before the cache.
  return &uepoll_interpose_libc != nullptr ? uepoll_interpose_libc() : nullptr;
#endif
  uintptr_t v = g_next_libc.load(std::memory_order_acquire);
  if (v > 1) [[likely]] {
    return reinterpret_cast<const uepoll_libc_calls*>(v);
  }
  return v ? nullptr : NextSlow();
}

// UEPOLL_SYS(name, args...): the next definition of name if interposed,
// libc's own otherwise. An expression, not a lambda that would ask Next()
// once: under ThreadSanitizer such a lambda is a frame of its own around
// libc's noexcept syscall(), and a cancellation unwinding out of that call
// ends in std::terminate (CxxCancel.*, Cancel.*, UserCancel.*).
#define UEPOLL_SYS(name, ...) \
  (Next() != nullptr ? Next()->name(__VA_ARGS__) : ::name(__VA_ARGS__))

inline ssize_t Read(int fd, void* buf, size_t n) {
  return UEPOLL_SYS(read, fd, buf, n);
}
inline ssize_t Write(int fd, const void* buf, size_t n) {
  return UEPOLL_SYS(write, fd, buf, n);
}
inline int Close(int fd) { return UEPOLL_SYS(close, fd); }
inline int Dup(int fd) { return UEPOLL_SYS(dup, fd); }
inline int Dup3(int oldfd, int newfd, int flags) {
  return UEPOLL_SYS(dup3, oldfd, newfd, flags);
}
inline int Dup2(int oldfd, int newfd) { return UEPOLL_SYS(dup2, oldfd, newfd); }
inline int Fcntl(int fd, int cmd, unsigned long arg) {
  return UEPOLL_SYS(fcntl, fd, cmd, arg);
}
inline int Shutdown(int fd, int how) { return UEPOLL_SYS(shutdown, fd, how); }
inline off_t Lseek(int fd, off_t off, int whence) {
  return UEPOLL_SYS(lseek, fd, off, whence);
}
inline int Fsync(int fd) { return UEPOLL_SYS(fsync, fd); }
inline int Fdatasync(int fd) { return UEPOLL_SYS(fdatasync, fd); }
inline int PosixFadvise(int fd, off_t off, off_t len, int advice) {
  return UEPOLL_SYS(posix_fadvise, fd, off, len, advice);
}
inline int PosixFallocate(int fd, off_t off, off_t len) {
  return UEPOLL_SYS(posix_fallocate, fd, off, len);
}
inline int Fallocate(int fd, int mode, off_t off, off_t len) {
  return UEPOLL_SYS(fallocate, fd, mode, off, len);
}
inline ssize_t Readahead(int fd, off_t off, size_t count) {
  return UEPOLL_SYS(readahead, fd, off, count);
}
inline int SyncFileRange(int fd, off_t off, off_t n, unsigned int flags) {
  return UEPOLL_SYS(sync_file_range, fd, off, n, flags);
}
inline int Syncfs(int fd) { return UEPOLL_SYS(syncfs, fd); }
inline int Open(const char* path, int flags) {
  return UEPOLL_SYS(open, path, flags);
}
inline int EpollCreate1(int flags) { return UEPOLL_SYS(epoll_create1, flags); }
inline int Eventfd(unsigned int initval, int flags) {
  return UEPOLL_SYS(eventfd, initval, flags);
}
inline int EpollCtl(int epfd, int op, int fd, epoll_event* ev) {
  return UEPOLL_SYS(epoll_ctl, epfd, op, fd, ev);
}
inline int EpollPwait2(int epfd, epoll_event* evs, int maxevents,
                       const timespec* timeout, const sigset_t* mask) {
  return UEPOLL_SYS(epoll_pwait2, epfd, evs, maxevents, timeout, mask);
}
inline int EpollPwait(int epfd, epoll_event* evs, int maxevents, int timeout,
                      const sigset_t* mask) {
  return UEPOLL_SYS(epoll_pwait, epfd, evs, maxevents, timeout, mask);
}
inline int Ppoll(pollfd* fds, nfds_t n, const timespec* timeout,
                 const sigset_t* mask) {
  return UEPOLL_SYS(ppoll, fds, n, timeout, mask);
}
inline int TimerfdCreate(int clockid, int flags) {
  return UEPOLL_SYS(timerfd_create, clockid, flags);
}
inline int TimerfdSettime(int fd, int flags, const itimerspec* value,
                          itimerspec* old) {
  return UEPOLL_SYS(timerfd_settime, fd, flags, value, old);
}
inline int TimerfdGettime(int fd, itimerspec* value) {
  return UEPOLL_SYS(timerfd_gettime, fd, value);
}

inline ssize_t Readv(int fd, const iovec* iov, int n) {
  return UEPOLL_SYS(readv, fd, iov, n);
}
inline ssize_t Writev(int fd, const iovec* iov, int n) {
  return UEPOLL_SYS(writev, fd, iov, n);
}
inline ssize_t Preadv(int fd, const iovec* iov, int n, off_t off) {
  return UEPOLL_SYS(preadv, fd, iov, n, off);
}
inline ssize_t Pwritev(int fd, const iovec* iov, int n, off_t off) {
  return UEPOLL_SYS(pwritev, fd, iov, n, off);
}
inline ssize_t Sendto(int fd, const void* buf, size_t n, int flags,
                      const sockaddr* addr, socklen_t len) {
  return UEPOLL_SYS(sendto, fd, buf, n, flags, addr, len);
}
inline ssize_t Recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* addr,
                        socklen_t* len) {
  return UEPOLL_SYS(recvfrom, fd, buf, n, flags, addr, len);
}
inline ssize_t Sendmsg(int fd, const msghdr* msg, int flags) {
  return UEPOLL_SYS(sendmsg, fd, msg, flags);
}
inline ssize_t Recvmsg(int fd, msghdr* msg, int flags) {
  return UEPOLL_SYS(recvmsg, fd, msg, flags);
}
inline int Sendmmsg(int fd, mmsghdr* vec, unsigned int vlen, int flags) {
  return UEPOLL_SYS(sendmmsg, fd, vec, vlen, flags);
}
inline int Recvmmsg(int fd, mmsghdr* vec, unsigned int vlen, int flags,
                    timespec* timeout) {
  return UEPOLL_SYS(recvmmsg, fd, vec, vlen, flags, timeout);
}
inline int Ioctl(int fd, unsigned long request, unsigned long arg) {
  return UEPOLL_SYS(ioctl, fd, request, arg);
}
inline int Select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  return UEPOLL_SYS(select, n, r, w, e, timeout);
}
inline int Pselect(int n, fd_set* r, fd_set* w, fd_set* e,
                   const timespec* timeout, const sigset_t* mask) {
  return UEPOLL_SYS(pselect, n, r, w, e, timeout, mask);
}

inline int Fstat(int fd, struct stat* st) { return UEPOLL_SYS(fstat, fd, st); }
inline int Fstatfs(int fd, struct statfs* buf) {
  return UEPOLL_SYS(fstatfs, fd, buf);
}
inline int Fstatvfs(int fd, struct statvfs* buf) {
  return UEPOLL_SYS(fstatvfs, fd, buf);
}
inline int Fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  return UEPOLL_SYS(fstatat, dirfd, path, st, flags);
}
inline int Statx(int dirfd, const char* path, int flags, unsigned int mask,
                 struct statx* stx) {
  return UEPOLL_SYS(statx, dirfd, path, flags, mask, stx);
}
inline int Socket(int domain, int type, int protocol) {
  return UEPOLL_SYS(socket, domain, type, protocol);
}
inline int Pipe2(int fds[2], int flags) {
  return UEPOLL_SYS(pipe2, fds, flags);
}
inline int Getsockopt(int fd, int level, int name, void* val, socklen_t* len) {
  return UEPOLL_SYS(getsockopt, fd, level, name, val, len);
}
inline int Setsockopt(int fd, int level, int name, const void* val,
                      socklen_t len) {
  return UEPOLL_SYS(setsockopt, fd, level, name, val, len);
}
inline int Getsockname(int fd, sockaddr* addr, socklen_t* len) {
  return UEPOLL_SYS(getsockname, fd, addr, len);
}
inline int Getpeername(int fd, sockaddr* addr, socklen_t* len) {
  return UEPOLL_SYS(getpeername, fd, addr, len);
}
inline ssize_t Sendfile(int out, int in, off_t* off, size_t n) {
  return UEPOLL_SYS(sendfile, out, in, off, n);
}
inline ssize_t Splice(int in, loff_t* off_in, int out, loff_t* off_out,
                      size_t n, unsigned int flags) {
  return UEPOLL_SYS(splice, in, off_in, out, off_out, n, flags);
}
inline int CloseRange(unsigned int first, unsigned int last, int flags) {
  return UEPOLL_SYS(close_range, first, last, flags);
}
inline void Closefrom(int lowfd) { UEPOLL_SYS(closefrom, lowfd); }
inline ssize_t Pread(int fd, void* buf, size_t n, off_t off) {
  return UEPOLL_SYS(pread, fd, buf, n, off);
}
inline ssize_t Pwrite(int fd, const void* buf, size_t n, off_t off) {
  return UEPOLL_SYS(pwrite, fd, buf, n, off);
}
// libc's sigaction, never the interposer's (which installs through
// uepoll_sigaction, capi/signal_api.cc).
inline int Sigaction(int sig, const struct sigaction* act,
                     struct sigaction* old) {
  return UEPOLL_SYS(sigaction, sig, act, old);
}

// libc's syscall() with six arguments, never the interposer's (which sends
// the calls uepoll owns back into uepoll).
inline long Syscall(long nr, long a1, long a2, long a3, long a4, long a5,
                    long a6) {
  return UEPOLL_SYS(syscall, nr, a1, a2, a3, a4, a5, a6);
}
#undef UEPOLL_SYS

}  // namespace uepoll::impl::sys

#endif  // UEPOLL_SRC_BASE_SYS_H_
