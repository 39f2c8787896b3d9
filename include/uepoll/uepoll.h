/* uepoll: Linux epoll semantics for objects that live inside a process.
 *
 * This header mirrors <sys/epoll.h>, <sys/eventfd.h>, <unistd.h>, <fcntl.h>,
 * <sys/socket.h>, <sys/uio.h>, <sys/select.h>, <sys/ioctl.h> and <poll.h>:
 * every function takes the libc types and constants (struct epoll_event,
 * EPOLL*, EFD_*, SOCK_*, MSG_*, O_*, struct pollfd, struct iovec, struct
 * msghdr, fd_set), so epoll code ports by renaming calls.
 *
 * Errors: a failing call returns -1 and sets errno to the value the kernel
 * would give; errno is left untouched on success. No C++ exception crosses
 * this boundary. A NULL pointer where the kernel would fault gives EFAULT.
 *
 * Descriptors: by default every uepoll descriptor is a number the kernel
 * reserved for it in the process's descriptor table (a placeholder that
 * libc calls refuse), so uepoll and kernel numbers never collide, numbers
 * are small and lowest-free-first, and RLIMIT_NOFILE applies. Every call
 * below that takes a descriptor also accepts a kernel descriptor and then
 * does exactly what the libc call does. uepoll_set_fd_mode selects the
 * opt-in disjoint numbering instead.
 *
 * Compiles as C99 and as C++.
 */
struct statx;   /* <sys/stat.h> declares it under _GNU_SOURCE only */
struct mmsghdr; /* <sys/socket.h>: the same */
struct statfs;  /* <sys/vfs.h>, not included here */
struct statvfs; /* <sys/statvfs.h>, not included here */
#ifndef UEPOLL_UEPOLL_H_
#define UEPOLL_UEPOLL_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#if defined(__GNUC__)
#define UEPOLL_API __attribute__((visibility("default")))
#else
#define UEPOLL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Descriptor numbering, chosen once per process (before the first uepoll
 * descriptor is created; the environment variable UEPOLL_FD_MODE=disjoint
 * or =kernel sets the default):
 *
 * UEPOLL_FD_MODE_KERNEL (the default): each uepoll descriptor is a number
 *   the kernel reserved with a placeholder descriptor (O_PATH, close-on-
 *   exec): lowest free first, shared with kernel descriptors, counted by
 *   RLIMIT_NOFILE, usable in fd-indexed tables and FD_SET. Creating or
 *   closing a descriptor costs one syscall.
 * UEPOLL_FD_MODE_DISJOINT: numbers from UEPOLL_FD_BASE, lowest free first
 *   in that range, with no syscall at create or close. A number a thread
 *   closed is kept for that thread's next create (at most 8 per thread);
 *   other threads' creates skip it while that thread runs. Such numbers break
 *   fd-indexed tables and select(), a uepoll object cannot be dup2'ed onto
 *   a kernel number, and an instance cannot hold kernel descriptors.
 *
 * Returns 0, or -1 with errno EINVAL (unknown mode) or EBUSY (a uepoll
 * descriptor was already created under the other mode). */
#define UEPOLL_FD_MODE_KERNEL 0
#define UEPOLL_FD_MODE_DISJOINT 1
UEPOLL_API int uepoll_set_fd_mode(int mode);
/* The current numbering mode. */
UEPOLL_API int uepoll_get_fd_mode(void);

/* The first number of UEPOLL_FD_MODE_DISJOINT. Linux caps RLIMIT_NOFILE at
 * fs.nr_open, itself at most 2^30 - 64 on 64-bit kernels (INT_MAX rounded
 * down to BITS_PER_LONG), so no kernel descriptor reaches this value. */
#define UEPOLL_FD_BASE 0x40000000

/* Nonzero if fd is an open uepoll descriptor (in either mode). */
UEPOLL_API int uepoll_is_uepoll_fd(int fd);

/* Crossing a process boundary (uepoll extension; docs/design.md, "Crossing
 * a process boundary"). A uepoll pipe, socket pair or eventfd lives in the
 * process's memory: a fork() child gets a copy, exec() drops it, and the
 * kernel cannot pass it over a socket. Exporting turns such an object into
 * the kernel's equivalent at the same numbers (a kernel pipe, socketpair
 * or eventfd holding the same buffered data in order, message boundaries,
 * descriptors in flight, O_NONBLOCK, O_DIRECT, FD_CLOEXEC of each number,
 * EFD_SEMAPHORE, shutdown state and a closed peer), and moves each epoll
 * registration watching it into its instance's kernel half with the same
 * events and data; calls in progress on it (a thread asleep in a read) go
 * on in the kernel object. From then on it is a kernel descriptor like any
 * other. Epoll instances, timerfds and user objects have no kernel
 * equivalent (EOPNOTSUPP); docs/semantics.md D12 says what a child sees of
 * them.
 *
 * uepoll_export_fd converts the object at fd (both ends of a pipe, both
 * sockets of a pair, every number of each): 0 (also for a kernel
 * descriptor: nothing to do), or -1 with errno EBADF, EOPNOTSUPP (cannot
 * convert, or the disjoint numbering), EMFILE, ENFILE, ENOMEM.
 *
 * uepoll_export_all converts every object that can be converted, or with
 * UEPOLL_EXPORT_INHERITABLE only those with a number whose FD_CLOEXEC is
 * clear (what an exec passes on). Returns how many, or -1 (EINVAL: flags).
 *
 * uepoll_set_fork_mode: UEPOLL_FORK_COPY (the library's default) leaves
 * fork() alone: the child has copies (docs/semantics.md D12);
 * UEPOLL_FORK_SHARE runs uepoll_export_all(0) at every fork() (a
 * pthread_atfork prepare handler), so that parent and child share the
 * kernel objects, as they would have from the start. libuepoll-interpose.so
 * sets UEPOLL_FORK_SHARE (and converts at vfork, exec and posix_spawn: see
 * README.md). 0, or -1 with errno EINVAL. uepoll_get_fork_mode returns the
 * mode. A program that never forks or exports pays nothing. */
#define UEPOLL_EXPORT_INHERITABLE 1
#define UEPOLL_FORK_COPY 0
#define UEPOLL_FORK_SHARE 1
UEPOLL_API int uepoll_export_fd(int fd);
UEPOLL_API int uepoll_export_all(int flags);
UEPOLL_API int uepoll_set_fork_mode(int mode);
UEPOLL_API int uepoll_get_fork_mode(void);

/* epoll */
UEPOLL_API int uepoll_epoll_create(int size);
UEPOLL_API int uepoll_epoll_create1(int flags);
UEPOLL_API int uepoll_epoll_ctl(int epfd, int op, int fd,
                                struct epoll_event *event);
UEPOLL_API int uepoll_epoll_wait(int epfd, struct epoll_event *events,
                                 int maxevents, int timeout);
UEPOLL_API int uepoll_epoll_pwait(int epfd, struct epoll_event *events,
                                  int maxevents, int timeout,
                                  const sigset_t *sigmask);
UEPOLL_API int uepoll_epoll_pwait2(int epfd, struct epoll_event *events,
                                   int maxevents,
                                   const struct timespec *timeout,
                                   const sigset_t *sigmask);

/* Watchable instances (uepoll extension): an instance whose own number the
 * kernel's epoll, poll() and select() - and so any event loop: libuv, Asio,
 * libevent, libev, a loop of the application's own - can watch. The number
 * is then readable (EPOLLIN, POLLIN, the select read set) exactly while the
 * instance has events to report, as the kernel's rule for an epoll
 * descriptor: level-triggered watchers see it readable until a harvest
 * empties the instance, edge-triggered ones get an edge at every transition
 * to ready; nested instances and kernel descriptors inside propagate to it,
 * with no uepoll thread running (the kernel carries them).
 * When the loop reports it readable, harvest it with uepoll_epoll_wait (a
 * zero timeout; an edge-triggered watcher harvests until that returns 0).
 * Cost: a watchable instance makes two syscalls when its ready list goes
 * from empty to non-empty and one when a harvest empties it, plus the
 * kernel half's one per harvest; never one per event. Instances that are
 * not watchable pay one load of a flag on those paths.
 *
 * uepoll_epoll_make_watchable makes an instance watchable (0, or -1 with
 * errno EBADF, EINVAL (not an instance), EMFILE/ENOMEM, EPERM in the
 * disjoint numbering). (A call rather than a flag of uepoll_epoll_create1:
 * every flag bit other than EPOLL_CLOEXEC must stay EINVAL there, as on
 * Linux.) uepoll_epoll_ctl(kernel_epfd, ADD, fd) and
 * libc's epoll_ctl accept a watchable instance's number. Wakeup loops
 * through kernel epoll instances are refused ELOOP, and chains through
 * both kinds are held to the kernel's depth: every instance's kernel half
 * holds the kernel halves of the instances nested in it, so the kernel
 * sees the whole graph (docs/semantics.md D1, D32). */
UEPOLL_API int uepoll_epoll_make_watchable(int epfd);

/* min_wait batching and per-instance parameters (uepoll extensions).
 *
 * uepoll_epoll_pwait3 is epoll_pwait2 with its arguments in a struct, so
 * that there is room for a minimum wait: wait up to min_wait_ns for
 * maxevents events; when min_wait_ns has passed, return if at least one
 * event is ready; otherwise keep waiting to the timeout and return at the
 * first event. A zero timeout ignores min_wait_ns; a signal ends the wait
 * at once (events already ready are returned, else EINTR). */
struct uepoll_wait_args {
  const struct timespec *timeout; /* NULL: forever; {0, 0}: do not wait */
  uint64_t min_wait_ns;           /* 0: no minimum wait */
  const sigset_t *sigmask;        /* NULL: keep the thread's mask */
  uint64_t flags;                 /* must be 0 */
};
UEPOLL_API int uepoll_epoll_pwait3(int epfd, struct epoll_event *events,
                                   int maxevents,
                                   const struct uepoll_wait_args *args);

/* Mirrors struct epoll_params of the kernel's EPIOCSPARAMS/EPIOCGPARAMS,
 * plus the instance's default min_wait, used by uepoll_epoll_wait, _pwait
 * and _pwait2 (uepoll_epoll_pwait3 uses its own args->min_wait_ns).
 * Busy polling: a wait that would sleep first spins up to busy_poll_usecs
 * checking for events (never for a zero timeout). Validation as the
 * kernel's: pad != 0, busy_poll_usecs > INT32_MAX or prefer_busy_poll > 1
 * -> EINVAL; busy_poll_budget > 64 without CAP_NET_ADMIN -> EPERM; a
 * descriptor that is not an instance -> ENOTTY. */
struct uepoll_params {
  uint32_t busy_poll_usecs;
  uint16_t busy_poll_budget;
  uint8_t prefer_busy_poll;
  uint8_t pad; /* must be 0 */
  uint64_t min_wait_ns;
};
UEPOLL_API int uepoll_epoll_set_params(int epfd,
                                       const struct uepoll_params *params);
UEPOLL_API int uepoll_epoll_get_params(int epfd, struct uepoll_params *params);

/* sources */
UEPOLL_API int uepoll_eventfd(unsigned int initval, int flags);
UEPOLL_API int uepoll_pipe(int pipefd[2]);
UEPOLL_API int uepoll_pipe2(int pipefd[2], int flags);
UEPOLL_API int uepoll_socketpair(int domain, int type, int protocol, int sv[2]);
UEPOLL_API int uepoll_shutdown(int sockfd, int how);

/* descriptors and I/O */
UEPOLL_API ssize_t uepoll_read(int fd, void *buf, size_t count);
UEPOLL_API ssize_t uepoll_write(int fd, const void *buf, size_t count);
UEPOLL_API int uepoll_close(int fd);
UEPOLL_API int uepoll_dup(int oldfd);
UEPOLL_API int uepoll_dup2(int oldfd, int newfd);
UEPOLL_API int uepoll_dup3(int oldfd, int newfd, int flags);
UEPOLL_API int uepoll_fcntl(int fd, int cmd, ...);
UEPOLL_API int uepoll_poll(struct pollfd *fds, nfds_t nfds, int timeout);
/* lseek, fsync and fdatasync answer as the kernel does for the file each
 * object stands for: a pipe or a socket cannot seek (ESPIPE), an eventfd,
 * timerfd, instance or user object is at position 0 and stays there, and
 * none can be synced (EINVAL). */
UEPOLL_API off_t uepoll_lseek(int fd, off_t offset, int whence);
UEPOLL_API int uepoll_fsync(int fd);
UEPOLL_API int uepoll_fdatasync(int fd);

/* Signal handlers that call uepoll (uepoll extension). uepoll's locks are
 * user-space locks, so a handler that interrupts a thread inside uepoll and
 * calls uepoll itself (a self-pipe write, a close) could wait for that
 * thread forever (docs/semantics.md D11). uepoll_sigaction is sigaction(2),
 * with the same arguments, errors and reported old action, except that a
 * handler it installs is put off while the interrupted thread holds a uepoll
 * lock, and runs, with its siginfo, context, mask and flags, as soon as the
 * thread holds none; locks are never held across a sleep, so a blocked call
 * is interrupted as before. Fault signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 * SIGTRAP, SIGSYS) go to sigaction unchanged. A handler that sends on a
 * uepoll socket pair still must not interrupt malloc (the send allocates;
 * eventfd and pipe writes are the safe self-pipes: D11). libuepoll-interpose.so
 * installs every handler (sigaction, signal, bsd_signal, sysv_signal)
 * through it. */
struct sigaction; /* <signal.h> declares it only for POSIX sources */
UEPOLL_API int uepoll_sigaction(int sig, const struct sigaction *act,
                                struct sigaction *oldact);

/* Vectored I/O (<sys/uio.h>). readv and writev take the kernel's checks of
 * the array (at most IOV_MAX segments: EINVAL; each length a valid ssize_t:
 * EINVAL; the total clamped to 0x7ffff000) and do one read or write of the
 * total: a pipe write of up to PIPE_BUF bytes stays atomic, a datagram is
 * one message. preadv and pwritev fail ESPIPE on every uepoll object (EINVAL
 * first for a negative offset), as on pipes, sockets and anonymous inodes. */
UEPOLL_API ssize_t uepoll_readv(int fd, const struct iovec *iov, int iovcnt);
UEPOLL_API ssize_t uepoll_writev(int fd, const struct iovec *iov, int iovcnt);
UEPOLL_API ssize_t uepoll_preadv(int fd, const struct iovec *iov, int iovcnt,
                                 off_t offset);
UEPOLL_API ssize_t uepoll_pwritev(int fd, const struct iovec *iov, int iovcnt,
                                  off_t offset);

/* Socket calls (<sys/socket.h>) on uepoll socket pairs (AF_UNIX SOCK_STREAM,
 * SOCK_DGRAM, SOCK_SEQPACKET) with the flags MSG_DONTWAIT, MSG_PEEK,
 * MSG_NOSIGNAL, MSG_WAITALL, MSG_TRUNC, MSG_CMSG_CLOEXEC, and SCM_RIGHTS
 * descriptor passing (uepoll and kernel descriptors; a truncated control
 * buffer sets MSG_CTRUNC and closes what did not fit). ENOTSOCK on any other
 * uepoll object. Out-of-band data (MSG_OOB) is not supported; see
 * docs/semantics.md for that and the other differences. */
UEPOLL_API ssize_t uepoll_send(int sockfd, const void *buf, size_t len,
                               int flags);
UEPOLL_API ssize_t uepoll_recv(int sockfd, void *buf, size_t len, int flags);
UEPOLL_API ssize_t uepoll_sendto(int sockfd, const void *buf, size_t len,
                                 int flags, const struct sockaddr *dest_addr,
                                 socklen_t addrlen);
UEPOLL_API ssize_t uepoll_recvfrom(int sockfd, void *buf, size_t len, int flags,
                                   struct sockaddr *src_addr,
                                   socklen_t *addrlen);
UEPOLL_API ssize_t uepoll_sendmsg(int sockfd, const struct msghdr *msg,
                                  int flags);
UEPOLL_API ssize_t uepoll_recvmsg(int sockfd, struct msghdr *msg, int flags);
/* sendmmsg and recvmmsg: one sendmsg or recvmsg per entry, each entry's
 * length written to its msg_len, the count of messages returned (an error
 * only when the first fails). recvmmsg's timeout is looked at between
 * messages only, and is updated to the time left, as the kernel's. */
UEPOLL_API int uepoll_sendmmsg(int sockfd, struct mmsghdr *msgvec,
                               unsigned int vlen, int flags);
UEPOLL_API int uepoll_recvmmsg(int sockfd, struct mmsghdr *msgvec,
                               unsigned int vlen, int flags,
                               struct timespec *timeout);

/* ppoll, select and pselect over any mix of uepoll and kernel descriptors,
 * as glibc presents them: select writes the time left back into *timeout,
 * ppoll and pselect leave theirs alone; a signal mask is installed for the
 * sleep only. */
UEPOLL_API int uepoll_ppoll(struct pollfd *fds, nfds_t nfds,
                            const struct timespec *tmo_p,
                            const sigset_t *sigmask);
UEPOLL_API int uepoll_select(int nfds, fd_set *readfds, fd_set *writefds,
                             fd_set *exceptfds, struct timeval *timeout);
UEPOLL_API int uepoll_pselect(int nfds, fd_set *readfds, fd_set *writefds,
                              fd_set *exceptfds, const struct timespec *timeout,
                              const sigset_t *sigmask);

/* ioctl: FIONBIO, FIOCLEX, FIONCLEX on any uepoll descriptor; FIONREAD on
 * pipes; SIOCINQ (FIONREAD), SIOCOUTQ, SIOCATMARK on sockets; EPIOCSPARAMS
 * and EPIOCGPARAMS on instances. Anything else fails as the kernel fails it
 * for that kind of file (ENOTTY, EINVAL on an instance).
 *
 * Signal-driven I/O, as the kernel's: FIOASYNC (and fcntl F_SETFL O_ASYNC)
 * on a pipe end or socket puts it in signal-driven mode, and its owner
 * (fcntl F_SETOWN, F_SETOWN_EX; F_GETOWN, F_GETOWN_EX, F_GETOWNER_UIDS
 * read it back) gets SIGIO, or the F_SETSIG signal with si_code, si_band
 * and si_fd, whenever the kernel would send one: after every read or write
 * of a pipe, when data arrives on a socket or room appears after a send
 * found none, and when the peer closes or shuts down. Other objects keep
 * an owner and a signal but never signal, and FIOASYNC fails ENOTTY on
 * them (F_SETFL ignores O_ASYNC), as on eventfds. docs/semantics.md D28
 * says what differs. fcntl also answers F_GETPIPE_SZ and F_SETPIPE_SZ on
 * pipes; leases, locks and the rest fail EINVAL (D3). */
UEPOLL_API int uepoll_ioctl(int fd, unsigned long request, ...);

/* close_range and closefrom (<unistd.h>, glibc 2.34): every uepoll object
 * whose number is in [first, last] is closed as uepoll_close closes it,
 * then the kernel's call closes what else is there. flags
 * CLOSE_RANGE_CLOEXEC marks the numbers close-on-exec instead (uepoll
 * objects included), CLOSE_RANGE_UNSHARE is passed to the kernel; other
 * bits, or first > last: EINVAL, nothing closed. uepoll_closefrom(lowfd)
 * is uepoll_close_range(max(lowfd, 0), ~0U, 0) and, as glibc's, fails
 * only by aborting when the kernel's call cannot close a descriptor. */
UEPOLL_API int uepoll_close_range(unsigned int first, unsigned int last,
                                  int flags);
UEPOLL_API void uepoll_closefrom(int lowfd);

/* fstat, fstatat and statx (<sys/stat.h>) on uepoll objects report what
 * the kernel reports for the file each stands for: a pipe is S_IFIFO 0600
 * on pipefs (one inode for both ends), a socket S_IFSOCK 0777 on sockfs
 * (one inode each), every other object the kernel's anonymous inode (as
 * an eventfd, an epoll instance or a timerfd). st_ino is unique among
 * uepoll objects and equal across dups; fstatat and statx answer for the
 * object only for an empty path with AT_EMPTY_PATH (any other path is the
 * kernel's). Arguments are checked by the kernel, in its order.
 * docs/semantics.md D29 says which fields differ from a kernel object's. */
UEPOLL_API int uepoll_fstat(int fd, struct stat *statbuf);
UEPOLL_API int uepoll_fstatat(int dirfd, const char *pathname,
                              struct stat *statbuf, int flags);
UEPOLL_API int uepoll_statx(int dirfd, const char *pathname, int flags,
                            unsigned int mask, struct statx *statxbuf);
/* fstatfs (<sys/vfs.h>) and fstatvfs (<sys/statvfs.h>): the kind's
 * pseudo-filesystem, as the kernel reports it (pipefs, sockfs,
 * anon_inodefs). */
UEPOLL_API int uepoll_fstatfs(int fd, struct statfs *buf);
UEPOLL_API int uepoll_fstatvfs(int fd, struct statvfs *buf);
/* posix_fadvise, posix_fallocate, fallocate, readahead, sync_file_range
 * and syncfs: on a uepoll object, the kernel's answer for an object of the
 * same kind and access mode (a pipe's end, a socket, an anonymous-inode
 * file). Nothing changes; EMFILE or ENFILE when no kernel object can be
 * made for the question (docs/semantics.md D36). posix_fadvise and
 * posix_fallocate return the error number, the others -1 and errno. */
UEPOLL_API int uepoll_posix_fadvise(int fd, off_t offset, off_t len,
                                    int advice);
UEPOLL_API int uepoll_posix_fallocate(int fd, off_t offset, off_t len);
UEPOLL_API int uepoll_fallocate(int fd, int mode, off_t offset, off_t len);
UEPOLL_API ssize_t uepoll_readahead(int fd, off_t offset, size_t count);
UEPOLL_API int uepoll_sync_file_range(int fd, off_t offset, off_t nbytes,
                                      unsigned int flags);
UEPOLL_API int uepoll_syncfs(int fd);

/* Socket options and names on uepoll socket pairs, with the kernel's
 * values, errno and length rules (ENOTSOCK on other uepoll objects). The
 * pair's own state answers SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ERROR,
 * SO_ACCEPTCONN, SO_PEERCRED, SO_PEERGROUPS, SO_PEERPIDFD, SO_COOKIE and
 * SO_MEMINFO; every other option, and every setsockopt, is checked and
 * read back by a transient kernel socket of the same type, so what the
 * kernel accepts and reports is what uepoll does. What an option changes
 * in the data path (buffer sizes, low-water marks, timeouts, SO_PASSCRED's
 * credentials, filters) is not applied: docs/semantics.md D4. Names: a
 * socket pair's sockets are unnamed (the family alone, length 2); a
 * datagram socket whose peer is gone fails getpeername ENOTCONN. */
UEPOLL_API int uepoll_getsockopt(int sockfd, int level, int optname,
                                 void *optval, socklen_t *optlen);
UEPOLL_API int uepoll_setsockopt(int sockfd, int level, int optname,
                                 const void *optval, socklen_t optlen);
UEPOLL_API int uepoll_getsockname(int sockfd, struct sockaddr *addr,
                                  socklen_t *addrlen);
UEPOLL_API int uepoll_getpeername(int sockfd, struct sockaddr *addr,
                                  socklen_t *addrlen);

/* sendfile and splice (<sys/sendfile.h>, <fcntl.h>) where a uepoll pipe or
 * socket is one end (or both), with the kernel's rules for which ends may
 * pair (sendfile: in_fd a file or a socket, not a pipe; splice: one end a
 * pipe, offsets only on the other end) and its errno. The bytes move
 * through a buffer: never more than the destination takes, and nothing is
 * lost or reordered (docs/semantics.md D30 says how the counts of a
 * nonblocking call can differ). pread and pwrite fail ESPIPE on uepoll
 * objects, as on pipes and sockets. */
UEPOLL_API ssize_t uepoll_sendfile(int out_fd, int in_fd, off_t *offset,
                                   size_t count);
UEPOLL_API ssize_t uepoll_splice(int fd_in, off_t *off_in, int fd_out,
                                 off_t *off_out, size_t len,
                                 unsigned int flags);
UEPOLL_API ssize_t uepoll_pread(int fd, void *buf, size_t count, off_t offset);
UEPOLL_API ssize_t uepoll_pwrite(int fd, const void *buf, size_t count,
                                 off_t offset);

/* EPOLL_CTL_MIN_WAIT of the min_wait patch set (seed 004), never merged
 * into Linux (whose epoll_ctl fails op 4 with EINVAL): ev->data.u64 is the
 * instance's minimum wait in microseconds (kept to its low 32 bits, as the
 * patch's unsigned int field did), 0 turns it off, fd is ignored; the call
 * returns the previous value in microseconds (at most INT_MAX). The value
 * is the min_wait_ns of uepoll_epoll_set_params (times 1000), used by
 * uepoll_epoll_wait, _pwait and _pwait2 when maxevents > 1, never for a
 * zero timeout. Errors: event NULL -> EFAULT, epfd not open -> EBADF, not
 * an instance -> EINVAL. */
#define UEPOLL_EPOLL_CTL_MIN_WAIT 4

/* timerfd (<sys/timerfd.h>)
 *
 * The kernel's timerfd, call for call: clocks CLOCK_REALTIME,
 * CLOCK_MONOTONIC, CLOCK_BOOTTIME, and CLOCK_REALTIME_ALARM /
 * CLOCK_BOOTTIME_ALARM for threads with CAP_WAKE_ALARM (EPERM otherwise;
 * they do not wake a suspended machine); flags TFD_NONBLOCK, TFD_CLOEXEC;
 * settime flags TFD_TIMER_ABSTIME, TFD_TIMER_CANCEL_ON_SET. A read needs 8
 * bytes (EINVAL below) and returns the number of expirations since the last
 * read, counting the periods an interval timer skipped; EAGAIN when none
 * with TFD_NONBLOCK, otherwise it blocks. Readable is EPOLLIN alone. Errors
 * in the kernel's order: settime: EFAULT (new_value NULL), EINVAL (flags,
 * tv_nsec outside [0, 1e9), negative tv_sec), EBADF, EINVAL (not a timerfd),
 * EPERM (alarm clock), ECANCELED (cancel-on-set after a clock step).
 *
 * Expiries are run by one uepoll thread ("uepoll-timer"), started by the
 * first settime that arms a timer and sleeping without a timeout while
 * nothing is armed; it blocks all signals and does not keep the process
 * alive. Deviations (docs/semantics.md): a read into a NULL buffer fails
 * EFAULT without consuming the expirations; a step of the realtime clock is
 * seen by timers at the timer thread's next wakeup (or, for
 * TFD_TIMER_CANCEL_ON_SET, when the timerfd is read, polled or set), not at
 * the step itself. */
UEPOLL_API int uepoll_timerfd_create(int clockid, int flags);
UEPOLL_API int uepoll_timerfd_settime(int fd, int flags,
                                      const struct itimerspec *new_value,
                                      struct itimerspec *old_value);
UEPOLL_API int uepoll_timerfd_gettime(int fd, struct itimerspec *curr_value);

/* User-defined pollable objects (uepoll extension)
 *
 * Any object of the application can be watched like an eventfd: epoll
 * (LT, ET, ONESHOT, EXCLUSIVE, nesting), poll(), dup/close, blocking reads.
 * The model is the kernel's driver contract: the object answers its
 * readiness now (`poll`, the kernel's f_op->poll) and, when its state
 * changes, wakes its watchers with a hint (uepoll_obj_notify, the kernel's
 * wake_up_poll).
 *
 * uepoll_obj_create returns a descriptor (flags: O_NONBLOCK, O_CLOEXEC) for
 * an object made of `ops` (copied) and `ctx`; if objp is not NULL it
 * receives the owner's handle, for notify, which the owner releases with
 * uepoll_obj_put. Errors: EINVAL (flags, or ops->poll NULL), EFAULT (ops
 * NULL), ENOMEM, EMFILE.
 *
 *   poll     required: the current readiness, EPOLL* bits (IN, OUT, PRI,
 *            ERR, HUP, RDHUP, RDNORM, ...; other bits are ignored).
 *   read     optional (EINVAL without): uepoll_read on the descriptor.
 *   write    optional (EINVAL without): uepoll_write on the descriptor.
 *            Both return a byte count (at most count) or -errno. They must
 *            not block: when they return -EAGAIN on a descriptor without
 *            O_NONBLOCK, the caller sleeps in uepoll until the next notify
 *            and then calls them again (a handled signal ends the sleep
 *            with EINTR, or restarts it under SA_RESTART).
 *   release  optional: called once at the last close of the descriptors,
 *            after every epoll registration of the object was removed. ctx
 *            is the caller's again afterwards (not called if create fails).
 *
 * The callback rules:
 *  - poll runs with uepoll locks held (the epoll instance being harvested,
 *    and its parents when instances nest). It must answer and return: it
 *    must not block (it would stall every epoll_wait and epoll_ctl on the
 *    instances watching the object, though not the wakeups), and must not
 *    call any uepoll function, notify included. Debug builds abort with a
 *    message when it calls notify or uepoll, or re-enters a lock it holds.
 *    It may take the application's own locks, provided those are never
 *    held while calling uepoll functions other than uepoll_obj_notify.
 *    It must not reach a cancellation point with cancellation enabled.
 *  - read, write and release run with no uepoll lock held and may call
 *    uepoll (notify, close, dup, sendmsg, create, ...), even when the
 *    release is run by the collector of descriptors in flight. release
 *    runs with cancellation disabled: a pthread_cancel of its thread is
 *    acted on at that thread's next cancellation point after it.
 *  - notify may be called from any thread, under the application's locks
 *    too, and after the last close (it then does nothing). Change the state
 *    poll reads before calling it, under a lock that poll also takes or
 *    with sequentially consistent atomics. With nobody watching it costs
 *    one atomic load; with watchers it takes no lock on the common path and
 *    makes a syscall only to wake a sleeping thread. events is the hint:
 *    the bits that changed, or 0 for "anything may have changed".
 *
 * Mask mode (the vpoll model): uepoll_vpoll_create returns a descriptor
 * whose readiness is a mask the owner sets directly; watchers see exactly
 * those bits, including EPOLLHUP, EPOLLERR, EPOLLPRI and EPOLLRDHUP.
 * uepoll_vpoll_ctl changes it: ADDEVENTS sets bits and wakes watchers with
 * them as the hint, DELEVENTS clears bits and wakes nobody, SETEVENTS
 * replaces the mask and wakes watchers with the new mask (if not 0). Errors:
 * EINVAL (flags, a bit that is not a readiness bit, an unknown op, a
 * descriptor that is not a mask-mode object), EBADF. Reads and writes of
 * such a descriptor fail EINVAL. */
struct uepoll_obj; /* opaque: the owner's handle on a user object */
struct uepoll_obj_ops {
  uint32_t (*poll)(void *ctx);
  ssize_t (*read)(void *ctx, void *buf, size_t count);
  ssize_t (*write)(void *ctx, const void *buf, size_t count);
  void (*release)(void *ctx);
};
UEPOLL_API int uepoll_obj_create(const struct uepoll_obj_ops *ops, void *ctx,
                                 int flags, struct uepoll_obj **objp);
UEPOLL_API void uepoll_obj_notify(struct uepoll_obj *obj, uint32_t events);
UEPOLL_API void uepoll_obj_put(struct uepoll_obj *obj);

#define UEPOLL_VPOLL_ADDEVENTS 1
#define UEPOLL_VPOLL_DELEVENTS 2
#define UEPOLL_VPOLL_SETEVENTS 3
UEPOLL_API int uepoll_vpoll_create(uint32_t events, int flags);
UEPOLL_API int uepoll_vpoll_ctl(int fd, int op, uint32_t events);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* UEPOLL_UEPOLL_H_ */
