/* uepoll/rename.h: the libc and epoll names as macros for uepoll's calls.
 *
 * A program written against <sys/epoll.h>, <sys/eventfd.h>, <unistd.h> and
 * friends moves onto uepoll by including this header, or with no edit at
 * all by compiling with `-include uepoll/rename.h` and linking libuepoll:
 * epoll_create1(0) becomes uepoll_epoll_create1(0), read(fd, buf, n)
 * becomes uepoll_read(fd, buf, n), and so on for
 *
 *   at every call, in C and C++:
 *     epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait
 *     epoll_pwait2 eventfd eventfd_read eventfd_write pipe2 socketpair dup3
 *     timerfd_create timerfd_settime timerfd_gettime
 *     readv writev preadv pwritev sendto recvfrom sendmsg recvmsg
 *     sendmmsg recvmmsg fstatfs fstatvfs posix_fadvise posix_fallocate
 *     fallocate readahead sync_file_range syncfs
 *     ppoll pselect closefrom fstatat statx
 *   at every call in C, and in C++ only at libc's number of arguments:
 *     read write close dup dup2 pipe poll fcntl close_range fstat pread
 *     pwrite getsockopt setsockopt getsockname getpeername sendfile splice
 *     lseek fsync fdatasync
 *   in C only (common member names in C++):
 *     shutdown send recv select ioctl
 *
 * Every uepoll_* call passes a kernel descriptor (a file, a TCP socket) to
 * libc, so renamed code keeps working on them; socketpair() creates
 * uepoll's pair for AF_UNIX stream sockets only and the kernel's otherwise.
 *
 * The header includes the system headers that declare these names first,
 * so their declarations stay libc's. The macros are function-like: a name
 * not followed by `(` (a function pointer such as `&close`, a struct
 * member's declaration) is not renamed, and reaches libc.
 *
 * Pitfalls (why the uepoll-interpose library exists too):
 *  - Include it after every other header, or with -include before all of
 *    them: a header read after it sees the macros in its own code.
 *  - Members and other identifiers that share a name are renamed too where
 *    they are called: ops->read(ctx, buf, n) becomes ops->uepoll_read(...).
 *    In C++ the most common names only rename when called with the libc
 *    call's number of arguments (read/write: 3, close/dup/pipe: 1, dup2: 2,
 *    poll: 3, fcntl: 2 or 3), so that std::istream::read(s, n),
 *    std::ostream::write(s, n), std::fstream::close() and io_context::poll()
 *    keep their names; a member with the same count still collides (asio's
 *    and uepoll's own close(ec), dup(ec): include the header after
 *    <uepoll/uepoll.hpp>, and do not call those in renamed code). C++ does
 *    not rename shutdown, send, recv, select or ioctl (members such as
 *    shutdown(how, ec) and send(buf) are common): call uepoll_shutdown and
 *    the others by their uepoll_ names. C++ needs __VA_OPT__ (GCC 8,
 *    Clang 6; a -Wpedantic warning before C++20).
 *  - Only the program's own code is renamed: libraries it links (libevent,
 *    libuv...) and calls libc makes internally still see kernel
 *    descriptors only. For those, use libuepoll-interpose.so (README.md).
 *  - A uepoll object lives in this process: a pipe meant for a child
 *    process (fork and exec) must stay the kernel's.
 *  - Not renamed: syscall() (libuepoll-interpose.so defines it), and the
 *    calls that return new kernel numbers (open, socket, accept...). A
 *    uepoll number whose placeholder libc closes internally (fclose of an
 *    fdopen'ed number) keeps its object in renamed code until uepoll_close
 *    or a uepoll call is given the number again, even after the kernel gave
 *    it to a file the program opened (docs/semantics.md D16); the
 *    interposer releases such an object when the kernel hands the number
 *    out. */
#ifndef UEPOLL_RENAME_H_
#define UEPOLL_RENAME_H_

#include <fcntl.h>
#include <poll.h>
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

#include <uepoll/uepoll.h>

/* Calls uepoll has no name for, built from those it has. Static inline:
 * a header with no library of its own. */
static inline int uepoll_rename_eventfd_read(int fd, eventfd_t *value) {
  return uepoll_read(fd, value, sizeof *value) == (ssize_t)sizeof *value ? 0
                                                                         : -1;
}
static inline int uepoll_rename_eventfd_write(int fd, eventfd_t value) {
  return uepoll_write(fd, &value, sizeof value) == (ssize_t)sizeof value ? 0
                                                                         : -1;
}
/* uepoll has AF_UNIX stream pairs; every other pair is the kernel's (the
 * macro is not defined yet: this is libc's socketpair). */
static inline int uepoll_rename_socketpair(int domain, int type, int protocol,
                                           int sv[2]) {
  if (domain == AF_UNIX && (type & 0xf) == SOCK_STREAM) {
    return uepoll_socketpair(domain, type, protocol, sv);
  }
  return socketpair(domain, type, protocol, sv);
}

/* Names no common member function shares: renamed at any call. */
#define epoll_create(size) uepoll_epoll_create(size)
#define epoll_create1(flags) uepoll_epoll_create1(flags)
#define epoll_ctl(epfd, op, fd, event) uepoll_epoll_ctl(epfd, op, fd, event)
#define epoll_wait(epfd, events, maxevents, timeout) \
  uepoll_epoll_wait(epfd, events, maxevents, timeout)
#define epoll_pwait(epfd, events, maxevents, timeout, sigmask) \
  uepoll_epoll_pwait(epfd, events, maxevents, timeout, sigmask)
#define epoll_pwait2(epfd, events, maxevents, timeout, sigmask) \
  uepoll_epoll_pwait2(epfd, events, maxevents, timeout, sigmask)
#define eventfd(initval, flags) uepoll_eventfd(initval, flags)
#define eventfd_read(fd, value) uepoll_rename_eventfd_read(fd, value)
#define eventfd_write(fd, value) uepoll_rename_eventfd_write(fd, value)
#define pipe2(pipefd, flags) uepoll_pipe2(pipefd, flags)
#define socketpair(domain, type, protocol, sv) \
  uepoll_rename_socketpair(domain, type, protocol, sv)
#define dup3(oldfd, newfd, flags) uepoll_dup3(oldfd, newfd, flags)
#define timerfd_create(clockid, flags) uepoll_timerfd_create(clockid, flags)
#define timerfd_settime(fd, flags, new_value, old_value) \
  uepoll_timerfd_settime(fd, flags, new_value, old_value)
#define timerfd_gettime(fd, curr_value) uepoll_timerfd_gettime(fd, curr_value)
#define readv(fd, iov, iovcnt) uepoll_readv(fd, iov, iovcnt)
#define writev(fd, iov, iovcnt) uepoll_writev(fd, iov, iovcnt)
#define preadv(fd, iov, iovcnt, offset) uepoll_preadv(fd, iov, iovcnt, offset)
#define pwritev(fd, iov, iovcnt, offset) uepoll_pwritev(fd, iov, iovcnt, offset)
#define sendto(fd, buf, len, flags, dest, destlen) \
  uepoll_sendto(fd, buf, len, flags, dest, destlen)
#define recvfrom(fd, buf, len, flags, src, srclen) \
  uepoll_recvfrom(fd, buf, len, flags, src, srclen)
#define sendmsg(fd, msg, flags) uepoll_sendmsg(fd, msg, flags)
#define recvmsg(fd, msg, flags) uepoll_recvmsg(fd, msg, flags)
#define sendmmsg(fd, vec, vlen, flags) uepoll_sendmmsg(fd, vec, vlen, flags)
#define recvmmsg(fd, vec, vlen, flags, timeout) \
  uepoll_recvmmsg(fd, vec, vlen, flags, timeout)
#define ppoll(fds, nfds, tmo, sigmask) uepoll_ppoll(fds, nfds, tmo, sigmask)
#define pselect(nfds, r, w, e, timeout, sigmask) \
  uepoll_pselect(nfds, r, w, e, timeout, sigmask)
#define closefrom(lowfd) uepoll_closefrom(lowfd)
#define fstatat(dirfd, path, st, flags) uepoll_fstatat(dirfd, path, st, flags)
#define statx(dirfd, path, flags, mask, stx) \
  uepoll_statx(dirfd, path, flags, mask, stx)
#define fstatfs(fd, buf) uepoll_fstatfs(fd, buf)
#define fstatvfs(fd, buf) uepoll_fstatvfs(fd, buf)
#define posix_fadvise(fd, offset, len, advice) \
  uepoll_posix_fadvise(fd, offset, len, advice)
#define posix_fallocate(fd, offset, len) uepoll_posix_fallocate(fd, offset, len)
#define fallocate(fd, mode, offset, len) uepoll_fallocate(fd, mode, offset, len)
#define readahead(fd, offset, count) uepoll_readahead(fd, offset, count)
#define sync_file_range(fd, offset, nbytes, flags) \
  uepoll_sync_file_range(fd, offset, nbytes, flags)
#define syncfs(fd) uepoll_syncfs(fd)

#ifndef __cplusplus

#define read(fd, buf, count) uepoll_read(fd, buf, count)
#define write(fd, buf, count) uepoll_write(fd, buf, count)
#define close(fd) uepoll_close(fd)
#define shutdown(fd, how) uepoll_shutdown(fd, how)
#define dup(oldfd) uepoll_dup(oldfd)
#define dup2(oldfd, newfd) uepoll_dup2(oldfd, newfd)
#define pipe(pipefd) uepoll_pipe(pipefd)
#define poll(fds, nfds, timeout) uepoll_poll(fds, nfds, timeout)
#define fcntl(...) uepoll_fcntl(__VA_ARGS__)
#define send(fd, buf, len, flags) uepoll_send(fd, buf, len, flags)
#define recv(fd, buf, len, flags) uepoll_recv(fd, buf, len, flags)
#define select(nfds, r, w, e, timeout) uepoll_select(nfds, r, w, e, timeout)
#define ioctl(...) uepoll_ioctl(__VA_ARGS__)
#define close_range(first, last, flags) uepoll_close_range(first, last, flags)
#define fstat(fd, st) uepoll_fstat(fd, st)
#define pread(fd, buf, count, offset) uepoll_pread(fd, buf, count, offset)
#define pwrite(fd, buf, count, offset) uepoll_pwrite(fd, buf, count, offset)
#define getsockopt(fd, level, name, val, len) \
  uepoll_getsockopt(fd, level, name, val, len)
#define setsockopt(fd, level, name, val, len) \
  uepoll_setsockopt(fd, level, name, val, len)
#define getsockname(fd, addr, len) uepoll_getsockname(fd, addr, len)
#define getpeername(fd, addr, len) uepoll_getpeername(fd, addr, len)
#define sendfile(out, in, offset, count) uepoll_sendfile(out, in, offset, count)
#define splice(in, off_in, out, off_out, len, flags) \
  uepoll_splice(in, off_in, out, off_out, len, flags)
#define lseek(fd, offset, whence) uepoll_lseek(fd, offset, whence)
#define fsync(fd) uepoll_fsync(fd)
#define fdatasync(fd) uepoll_fdatasync(fd)

#else /* C++: rename by the number of arguments */

/* UEPOLL_RENAME_NARGS(args): 0 for none (`close()`), else the count (to
 * 12, far beyond any of these calls). */
#define UEPOLL_RENAME_NARGS(...)                                               \
  UEPOLL_RENAME_NARGS_(__VA_OPT__(__VA_ARGS__, ) 12, 11, 10, 9, 8, 7, 6, 5, 4, \
                       3, 2, 1, 0, ~)
#define UEPOLL_RENAME_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, \
                             a12, n, ...)                                  \
  n
#define UEPOLL_RENAME_CAT(a, b) UEPOLL_RENAME_CAT_(a, b)
#define UEPOLL_RENAME_CAT_(a, b) a##b
#define UEPOLL_RENAME_SECOND(...) UEPOLL_RENAME_SECOND_(__VA_ARGS__)
#define UEPOLL_RENAME_SECOND_(a, b, ...) b
/* name(args) with n arguments: if UEPOLL_RENAME_<name>_<n> is defined, it
 * expands to "~, uepoll_<name>," and the second item is uepoll's name;
 * otherwise the item is the name itself, which is not expanded again (a
 * macro is not expanded inside its own expansion): the call is left as
 * written. */
#define UEPOLL_RENAME_PICK(name, ...)                                    \
  UEPOLL_RENAME_SECOND(                                                  \
      UEPOLL_RENAME_CAT(                                                 \
          UEPOLL_RENAME_,                                                \
          UEPOLL_RENAME_CAT(name##_, UEPOLL_RENAME_NARGS(__VA_ARGS__))), \
      name, )                                                            \
  (__VA_ARGS__)

#define UEPOLL_RENAME_read_3 ~, uepoll_read,
#define UEPOLL_RENAME_write_3 ~, uepoll_write,
#define UEPOLL_RENAME_close_1 ~, uepoll_close,
#define UEPOLL_RENAME_dup_1 ~, uepoll_dup,
#define UEPOLL_RENAME_dup2_2 ~, uepoll_dup2,
#define UEPOLL_RENAME_pipe_1 ~, uepoll_pipe,
#define UEPOLL_RENAME_poll_3 ~, uepoll_poll,
#define UEPOLL_RENAME_fcntl_2 ~, uepoll_fcntl,
#define UEPOLL_RENAME_fcntl_3 ~, uepoll_fcntl,
/* Names that members share too (std::list::splice, Asio's socket_ops::
 * getsockopt with 7 arguments): renamed at libc's count only. */
#define UEPOLL_RENAME_close_range_3 ~, uepoll_close_range,
#define UEPOLL_RENAME_fstat_2 ~, uepoll_fstat,
#define UEPOLL_RENAME_pread_4 ~, uepoll_pread,
#define UEPOLL_RENAME_pwrite_4 ~, uepoll_pwrite,
#define UEPOLL_RENAME_getsockopt_5 ~, uepoll_getsockopt,
#define UEPOLL_RENAME_setsockopt_5 ~, uepoll_setsockopt,
#define UEPOLL_RENAME_getsockname_3 ~, uepoll_getsockname,
#define UEPOLL_RENAME_getpeername_3 ~, uepoll_getpeername,
#define UEPOLL_RENAME_sendfile_4 ~, uepoll_sendfile,
#define UEPOLL_RENAME_splice_6 ~, uepoll_splice,
#define UEPOLL_RENAME_lseek_3 ~, uepoll_lseek,
#define UEPOLL_RENAME_fsync_1 ~, uepoll_fsync,
#define UEPOLL_RENAME_fdatasync_1 ~, uepoll_fdatasync,

#define read(...) UEPOLL_RENAME_PICK(read, __VA_ARGS__)
#define write(...) UEPOLL_RENAME_PICK(write, __VA_ARGS__)
#define close(...) UEPOLL_RENAME_PICK(close, __VA_ARGS__)
#define dup(...) UEPOLL_RENAME_PICK(dup, __VA_ARGS__)
#define dup2(...) UEPOLL_RENAME_PICK(dup2, __VA_ARGS__)
#define pipe(...) UEPOLL_RENAME_PICK(pipe, __VA_ARGS__)
#define poll(...) UEPOLL_RENAME_PICK(poll, __VA_ARGS__)
#define fcntl(...) UEPOLL_RENAME_PICK(fcntl, __VA_ARGS__)
#define close_range(...) UEPOLL_RENAME_PICK(close_range, __VA_ARGS__)
#define fstat(...) UEPOLL_RENAME_PICK(fstat, __VA_ARGS__)
#define pread(...) UEPOLL_RENAME_PICK(pread, __VA_ARGS__)
#define pwrite(...) UEPOLL_RENAME_PICK(pwrite, __VA_ARGS__)
#define getsockopt(...) UEPOLL_RENAME_PICK(getsockopt, __VA_ARGS__)
#define setsockopt(...) UEPOLL_RENAME_PICK(setsockopt, __VA_ARGS__)
#define getsockname(...) UEPOLL_RENAME_PICK(getsockname, __VA_ARGS__)
#define getpeername(...) UEPOLL_RENAME_PICK(getpeername, __VA_ARGS__)
#define sendfile(...) UEPOLL_RENAME_PICK(sendfile, __VA_ARGS__)
#define splice(...) UEPOLL_RENAME_PICK(splice, __VA_ARGS__)
#define lseek(...) UEPOLL_RENAME_PICK(lseek, __VA_ARGS__)
#define fsync(...) UEPOLL_RENAME_PICK(fsync, __VA_ARGS__)
#define fdatasync(...) UEPOLL_RENAME_PICK(fdatasync, __VA_ARGS__)

#endif /* __cplusplus */

#endif /* UEPOLL_RENAME_H_ */
