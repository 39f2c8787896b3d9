/* Compiled as strict C99 (-std=c99 -pedantic -Werror -Wall -Wextra): the
 * public C headers must serve C programs, not only C++ ones. */
#include <stdio.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

int uepoll_h_alone_fd_base(void);
long debug_h_alone_files(const struct uepoll_live_counts *c);

/* Each call has the type of the libc call it mirrors, so epoll code ports by
 * renaming calls: initialising a pointer from a function of another type is
 * a constraint violation, which -Werror turns into a build failure. */
static void check_signatures(void) {
  int (*create)(int) = uepoll_epoll_create;
  int (*create1)(int) = uepoll_epoll_create1;
  int (*ctl)(int, int, int, struct epoll_event *) = uepoll_epoll_ctl;
  int (*wait)(int, struct epoll_event *, int, int) = uepoll_epoll_wait;
  int (*pwait)(int, struct epoll_event *, int, int, const sigset_t *) =
      uepoll_epoll_pwait;
  int (*efd)(unsigned int, int) = uepoll_eventfd;
  int (*pipe_fn)(int[2]) = uepoll_pipe;
  int (*pipe2_fn)(int[2], int) = uepoll_pipe2;
  int (*spair)(int, int, int, int[2]) = uepoll_socketpair;
  int (*shut)(int, int) = uepoll_shutdown;
  ssize_t (*read_fn)(int, void *, size_t) = uepoll_read;
  ssize_t (*write_fn)(int, const void *, size_t) = uepoll_write;
  int (*close_fn)(int) = uepoll_close;
  int (*dup_fn)(int) = uepoll_dup;
  int (*dup2_fn)(int, int) = uepoll_dup2;
  int (*dup3_fn)(int, int, int) = uepoll_dup3;
  int (*fcntl_fn)(int, int, ...) = uepoll_fcntl;
  int (*poll_fn)(struct pollfd *, nfds_t, int) = uepoll_poll;
  int (*counts)(struct uepoll_live_counts *) = uepoll_debug_live_counts;
  long (*set_limit)(long) = uepoll_debug_set_fd_limit;
  long (*capacity)(void) = uepoll_debug_fd_capacity;
  int (*set_mode)(int) = uepoll_set_fd_mode;
  int (*get_mode)(void) = uepoll_get_fd_mode;
  (void)create, (void)create1, (void)ctl, (void)wait, (void)pwait;
  (void)efd, (void)pipe_fn, (void)pipe2_fn, (void)spair, (void)shut;
  (void)read_fn, (void)write_fn, (void)close_fn, (void)dup_fn;
  (void)dup2_fn, (void)dup3_fn, (void)fcntl_fn, (void)poll_fn;
  (void)counts, (void)set_limit, (void)capacity, (void)set_mode;
  (void)get_mode;
}

int main(void) {
  struct uepoll_live_counts zero = {0, 0, 0, 0};
  check_signatures();
  if (uepoll_h_alone_fd_base() != UEPOLL_FD_BASE ||
      debug_h_alone_files(&zero) != 0) {
    fprintf(stderr, "the headers disagree between translation units\n");
    return 1;
  }
  {
    int efd = uepoll_eventfd(0, 0);
    if (efd < 0 || !uepoll_is_uepoll_fd(efd) || uepoll_is_uepoll_fd(0) ||
        uepoll_get_fd_mode() != UEPOLL_FD_MODE_KERNEL || uepoll_close(efd)) {
      fprintf(stderr, "uepoll descriptors are not what uepoll.h says\n");
      return 1;
    }
  }
  printf("uepoll.h and debug.h compile as strict C99\n");
  return 0;
}
