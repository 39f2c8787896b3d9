/* interpose.next.forkctor: a fork made by a library's constructor before
 * the interposer's, while another thread is inside the interposer's
 * resolution of libc's table (next_ctor_lib.c). The child starts up and
 * opens a file; the parent reports how the child ended: 0 it exited 0, 5
 * it was killed after ten seconds (it waited for the guard, or for the
 * loader's list lock, for good), 4 the thread was never held, -1 the
 * set-up failed. Run with LD_PRELOAD="<interposer>:next_hold.so" and
 * NEXT_CTOR=1, or NEXT_CTOR=raw or clone (interpose.next.forkctor.raw,
 * .clone: the fork is syscall(SYS_fork) or syscall(SYS_clone)). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int next_ctor_is_child(void);
int next_ctor_result(void);

int main(void) {
  if (next_ctor_is_child()) {
    int fd = openat(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : 3);
  }
  int r = next_ctor_result();
  printf("next (forkctor): %s (%d)\n", r == 0 ? "passed" : "FAILED", r);
  return r == 0 ? 0 : 1;
}
