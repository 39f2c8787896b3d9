/* Entry points of libuepoll that only libuepoll-interpose.so calls: not in
 * the public headers, exported (uepoll.map matches uepoll_*) so that the
 * interposer, a separate library, can reach them. Their contract may
 * change with any release; both libraries are built from one tree.
 * C and C++ (the interposer is C). */
#ifndef UEPOLL_SRC_CAPI_INTERPOSE_HOOKS_H_
#define UEPOLL_SRC_CAPI_INTERPOSE_HOOKS_H_

#include <uepoll/uepoll.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel just handed out `fd` (open, socket, accept, a kernel pipe...
 * returned it): if uepoll still records an object at that number, the
 * object's placeholder was closed behind uepoll's back (a close libc made
 * internally, a raw system call) and the number is the kernel's new file
 * now. The object loses the number as a close would (its last close
 * releases it: a pipe's peer sees EOF). Nothing happens for a number
 * uepoll does not record; errno is left alone. */
UEPOLL_API void uepoll_forget_orphan(int fd);

/* ---- the engine's table, for a lazily loaded engine -----------------------
 *
 * libuepoll-interpose.so does not link libuepoll: a process that never
 * creates a uepoll object must not pay for loading the engine and the C++
 * runtime at every exec (docs/design.md, "The interposer loads the engine
 * on first use"). It reaches the engine through this table of every
 * uepoll_* entry point it calls. */
#define UEPOLL_ENGINE_CALLS(X) \
  X(uepoll_close)              \
  X(uepoll_close_range)        \
  X(uepoll_closefrom)          \
  X(uepoll_dup)                \
  X(uepoll_dup2)               \
  X(uepoll_dup3)               \
  X(uepoll_epoll_create)       \
  X(uepoll_epoll_create1)      \
  X(uepoll_epoll_ctl)          \
  X(uepoll_epoll_pwait)        \
  X(uepoll_epoll_pwait2)       \
  X(uepoll_epoll_wait)         \
  X(uepoll_eventfd)            \
  X(uepoll_export_all)         \
  X(uepoll_export_fd)          \
  X(uepoll_fallocate)          \
  X(uepoll_fcntl)              \
  X(uepoll_fdatasync)          \
  X(uepoll_forget_orphan)      \
  X(uepoll_fstat)              \
  X(uepoll_fstatat)            \
  X(uepoll_fstatfs)            \
  X(uepoll_fstatvfs)           \
  X(uepoll_fsync)              \
  X(uepoll_get_fork_mode)      \
  X(uepoll_getpeername)        \
  X(uepoll_getsockname)        \
  X(uepoll_getsockopt)         \
  X(uepoll_ioctl)              \
  X(uepoll_is_uepoll_fd)       \
  X(uepoll_lseek)              \
  X(uepoll_pipe)               \
  X(uepoll_pipe2)              \
  X(uepoll_poll)               \
  X(uepoll_posix_fadvise)      \
  X(uepoll_posix_fallocate)    \
  X(uepoll_ppoll)              \
  X(uepoll_pread)              \
  X(uepoll_preadv)             \
  X(uepoll_pselect)            \
  X(uepoll_pwrite)             \
  X(uepoll_pwritev)            \
  X(uepoll_read)               \
  X(uepoll_readahead)          \
  X(uepoll_readv)              \
  X(uepoll_recv)               \
  X(uepoll_recvfrom)           \
  X(uepoll_recvmmsg)           \
  X(uepoll_recvmsg)            \
  X(uepoll_select)             \
  X(uepoll_send)               \
  X(uepoll_sendfile)           \
  X(uepoll_sendmmsg)           \
  X(uepoll_sendmsg)            \
  X(uepoll_sendto)             \
  X(uepoll_set_fork_mode)      \
  X(uepoll_setsockopt)         \
  X(uepoll_shutdown)           \
  X(uepoll_sigaction)          \
  X(uepoll_socketpair)         \
  X(uepoll_splice)             \
  X(uepoll_statx)              \
  X(uepoll_sync_file_range)    \
  X(uepoll_syncfs)             \
  X(uepoll_timerfd_create)     \
  X(uepoll_timerfd_gettime)    \
  X(uepoll_timerfd_settime)    \
  X(uepoll_write)              \
  X(uepoll_writev)

struct uepoll_engine_calls {
  /* sizeof(struct uepoll_engine_calls) in the engine's build: an
   * interposer from another build, whose table differs, refuses it. */
  unsigned long size;
#ifdef __cplusplus /* qualified: a member may not rename what it names */
#define UEPOLL_ENGINE_MEMBER(name) __typeof__(&::name) name;
#else
#define UEPOLL_ENGINE_MEMBER(name) __typeof__(&name) name;
#endif
  UEPOLL_ENGINE_CALLS(UEPOLL_ENGINE_MEMBER)
#undef UEPOLL_ENGINE_MEMBER
};

/* Defined by libuepoll-interpose.so only; weak in the engine, whose
 * constructor calls it with its table when the interposer is in the
 * process (capi/interpose_attach.cc): so the interposer finds the one
 * engine whether it loaded it or the program linked it. */
#ifndef UEPOLL_INTERPOSE_BUILD
__attribute__((weak))
#endif
void uepoll_interpose_attach(const struct uepoll_engine_calls *calls);

#ifdef __cplusplus
}
#endif

#endif /* UEPOLL_SRC_CAPI_INTERPOSE_HOOKS_H_ */
