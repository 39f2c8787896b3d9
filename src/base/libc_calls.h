/* libc_calls: the libc functions uepoll reaches through base/sys.h, and the
 * ones the interpose library (src/interpose) passes through to, as one list.
 *
 * When libuepoll-interpose.so is in the process it defines the libc names
 * itself, so a plain call to read() from the engine would come back into
 * the interposer and recurse. The interposer therefore resolves the next
 * definition of every name below (dlsym(RTLD_NEXT): libc's) into a table
 * and hands it out through uepoll_interpose_libc(), which libuepoll
 * references weakly: null without the interposer, and then sys.h calls the
 * names directly, as it always did (no indirection, and a sanitizer's
 * interceptors see every call).
 *
 * Both libraries are built from one tree and installed together: the
 * table's layout is private to them. A new call goes into this list once.
 * C and C++: the interposer is written in C, so that its definitions of
 * the libc names match glibc's declarations exactly. */
#ifndef UEPOLL_SRC_BASE_LIBC_CALLS_H_
#define UEPOLL_SRC_BASE_LIBC_CALLS_H_

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

/* X(name) for every libc function in the table. */
#define UEPOLL_LIBC_CALLS(X) \
  X(read)                    \
  X(write)                   \
  X(close)                   \
  X(dup)                     \
  X(dup2)                    \
  X(dup3)                    \
  X(fcntl)                   \
  X(shutdown)                \
  X(lseek)                   \
  X(fsync)                   \
  X(fdatasync)               \
  X(posix_fadvise)           \
  X(posix_fallocate)         \
  X(fallocate)               \
  X(readahead)               \
  X(sync_file_range)         \
  X(syncfs)                  \
  X(open)                    \
  X(pipe)                    \
  X(pipe2)                   \
  X(socketpair)              \
  X(poll)                    \
  X(ppoll)                   \
  X(epoll_create)            \
  X(epoll_create1)           \
  X(epoll_ctl)               \
  X(epoll_wait)              \
  X(epoll_pwait)             \
  X(epoll_pwait2)            \
  X(eventfd)                 \
  X(eventfd_read)            \
  X(eventfd_write)           \
  X(timerfd_create)          \
  X(timerfd_settime)         \
  X(timerfd_gettime)         \
  X(readv)                   \
  X(writev)                  \
  X(preadv)                  \
  X(pwritev)                 \
  X(sendto)                  \
  X(recvfrom)                \
  X(sendmsg)                 \
  X(recvmsg)                 \
  X(sendmmsg)                \
  X(recvmmsg)                \
  X(ioctl)                   \
  X(select)                  \
  X(pselect)                 \
  X(fstat)                   \
  X(fstatfs)                 \
  X(fstatvfs)                \
  X(fstatat)                 \
  X(statx)                   \
  X(socket)                  \
  X(getsockopt)              \
  X(setsockopt)              \
  X(getsockname)             \
  X(getpeername)             \
  X(sendfile)                \
  X(splice)                  \
  X(close_range)             \
  X(closefrom)               \
  X(pread)                   \
  X(pwrite)                  \
  X(syscall)                 \
  X(sigaction)

#ifdef __cplusplus
#define UEPOLL_LIBC_GLOBAL(name) ::name
extern "C" {
#else
#define UEPOLL_LIBC_GLOBAL(name) name
#endif

struct uepoll_libc_calls {
#define UEPOLL_LIBC_MEMBER(name) __typeof__(&UEPOLL_LIBC_GLOBAL(name)) name;
  UEPOLL_LIBC_CALLS(UEPOLL_LIBC_MEMBER)
#undef UEPOLL_LIBC_MEMBER
};

/* Defined by libuepoll-interpose.so only; weak here, so that its address
 * is null everywhere else (libuepoll.so alone, libuepoll.a). */
#ifndef UEPOLL_INTERPOSE_BUILD
__attribute__((weak))
#endif
const struct uepoll_libc_calls*
uepoll_interpose_libc(void);

#ifdef __cplusplus
}
#endif

#endif /* UEPOLL_SRC_BASE_LIBC_CALLS_H_ */
