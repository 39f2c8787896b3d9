// TEMPORARY: link stubs until the engine lands. Every call fails ENOSYS.
#include <errno.h>
#include <stdarg.h>
#include <uepoll/debug.h>
#include <uepoll/uepoll.h>
extern "C" {
#define STUB { errno = ENOSYS; return -1; }
int uepoll_is_uepoll_fd(int fd) { return fd >= UEPOLL_FD_BASE; }
int uepoll_epoll_create(int) STUB
int uepoll_epoll_create1(int) STUB
int uepoll_epoll_ctl(int, int, int, struct epoll_event *) STUB
int uepoll_epoll_wait(int, struct epoll_event *, int, int) STUB
int uepoll_epoll_pwait(int, struct epoll_event *, int, int, const sigset_t *) STUB
int uepoll_epoll_pwait2(int, struct epoll_event *, int, const struct timespec *, const sigset_t *) STUB
int uepoll_eventfd(unsigned int, int) STUB
int uepoll_pipe(int[2]) STUB
int uepoll_pipe2(int[2], int) STUB
int uepoll_socketpair(int, int, int, int[2]) STUB
int uepoll_shutdown(int, int) STUB
ssize_t uepoll_read(int, void *, size_t) STUB
ssize_t uepoll_write(int, const void *, size_t) STUB
int uepoll_close(int) STUB
int uepoll_dup(int) STUB
int uepoll_dup2(int, int) STUB
int uepoll_dup3(int, int, int) STUB
int uepoll_fcntl(int, int, ...) STUB
int uepoll_poll(struct pollfd *, nfds_t, int) STUB
int uepoll_debug_live_counts(struct uepoll_live_counts *c) { *c = {}; return 0; }
long uepoll_debug_set_fd_limit(long) STUB
long uepoll_debug_fd_capacity(void) { return 1 << 22; }
}
