/* Calls before any initialization: Early() runs from the executable's
 * .preinit_array, which the dynamic loader calls before the initializers of
 * every shared library, libuepoll's and the interposer's included. It uses
 * epoll, a pipe and an eventfd; main() checks that every step worked, on
 * uepoll's objects when interposed, and that they still work now. */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int early_result = -1; /* 0: every step worked */
static int early_fds[3] = {-1, -1, -1};

static void Early(void) {
  int p[2];
  int step = 1;
  /* The first calls resolve libc's names in the interposer: a success
   * leaves errno alone all the same. */
  errno = 4321;
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0 || pipe(p) != 0 || errno != 4321) goto out;
  ++step;
  int e = eventfd(0, EFD_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
  if (e < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) != 0) goto out;
  ++step;
  char c = 'x';
  if (write(p[1], &c, 1) != 1 || epoll_wait(ep, &ev, 1, 10000) != 1 ||
      ev.data.u32 != 7 || read(p[0], &c, 1) != 1 || c != 'x') {
    goto out;
  }
  ++step;
  early_fds[0] = ep;
  early_fds[1] = p[0];
  early_fds[2] = e;
  if (close(p[1]) != 0) goto out;
  step = 0;
out:
  early_result = step;
}

__attribute__((section(".preinit_array"),
               used)) static void (*const kPreinit)(void) = Early;

int main(int argc, char **argv) {
  int expect_uepoll = argc == 2 && strcmp(argv[1], "uepoll") == 0;
  int failures = 0;
  if (early_result != 0) {
    fprintf(stderr, "FAIL: the early calls stopped at step %d\n", early_result);
    return 1;
  }
  int (*is_uepoll)(int);
  *(void **)&is_uepoll = dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd");
  for (int i = 0; i < 3; ++i) {
    int got = is_uepoll ? is_uepoll(early_fds[i]) : 0;
    if (got != expect_uepoll) {
      fprintf(stderr, "FAIL: descriptor %d: uepoll_is_uepoll_fd %d\n",
              early_fds[i], got);
      ++failures;
    }
  }
  /* The write end was closed in the constructor: end of file, reported. */
  struct epoll_event ev;
  char c;
  if (epoll_wait(early_fds[0], &ev, 1, 10000) != 1 ||
      read(early_fds[1], &c, 1) != 0) {
    fprintf(stderr, "FAIL: no end of file on the pipe\n");
    ++failures;
  }
  if (eventfd_write(early_fds[2], 2) != 0) ++failures;
  eventfd_t v = 0;
  if (eventfd_read(early_fds[2], &v) != 0 || v != 2) ++failures;
  for (int i = 0; i < 3; ++i) failures += close(early_fds[i]) != 0;
  printf("early: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
