/* Calls before any initialization: Early() runs from the executable's
 * .preinit_array, which the dynamic loader calls before the initializers of
 * every shared library, libuepoll's and the interposer's included. It uses
 * epoll, a pipe and an eventfd; main() checks that every step worked, on
 * uepoll's objects when interposed, and that they still work now.
 *   kernel   not interposed: every object the kernel's;
 *   uepoll   interposed: every object uepoll's;
 *   launch M not interposed: runs this program again as M (epoll or
 *            disjoint), with only the environment below, preloading
 *            $UEPOLL_TEST_PRELOAD; the settings are read from the
 *            initial environment, since libc had not set environ up when
 *            the first call read them (src/base/env.h):
 *   epoll    UEPOLL_INTERPOSE=epoll made the instance uepoll's and the
 *            pipe and the eventfd the kernel's, here and in main;
 *            UEPOLL_FORK_MODE=copy is in force. The settings come past
 *            20,000 bytes of another variable and after names that differ
 *            from theirs by one character, and UEPOLL_INTERPOSE is named
 *            twice (the first counts, as getenv's answer does);
 *   disjoint every object uepoll's, numbered in UEPOLL_FD_MODE=disjoint
 *            (whose instances cannot hold the kernel's pipe). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

static int early_result = -1; /* 0: every step worked */
static int early_fds[3] = {-1, -1, -1};
static int early_environ_null = -1;

static void Early(void) {
  int p[2];
  int step = 1;
  early_environ_null = environ == NULL;
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

static int Launch(const char *self, const char *mode) {
  const char *preload = getenv("UEPOLL_TEST_PRELOAD");
  if (preload == NULL) {
    fprintf(stderr, "launch: set UEPOLL_TEST_PRELOAD to the interposer\n");
    return 2;
  }
  /* /proc/self/environ is read 512 bytes at a time: the filler and the
   * three names before the setting (64 bytes) put "UEPOLL_INTERPOSE=" 8
   * bytes before the 40th chunk's end, so its name crosses into the next. */
  static char filler[20400 + sizeof "FILLER="];
  memcpy(filler, "FILLER=", 7);
  memset(filler + 7, 'x', sizeof filler - 8);
  char ld_preload[4096];
  snprintf(ld_preload, sizeof ld_preload, "LD_PRELOAD=%s", preload);
  char *epoll_env[16] = {filler,
                         "UEPOLL_INTERPOSEX=all",
                         "UEPOLL_INTERPOS=all",
                         "XUEPOLL_INTERPOSE=all",
                         "UEPOLL_INTERPOSE=epoll",
                         "UEPOLL_INTERPOSE=all",
                         "UEPOLL_FORK_MODE=copy",
                         ld_preload};
  char *disjoint_env[16] = {"UEPOLL_FD_MODE=disjoint", ld_preload};
  char **env = strcmp(mode, "epoll") == 0 ? epoll_env : disjoint_env;
  /* The sanitizers' settings go on, after the ones above. */
  static const char *const kKeep[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS",
                                      "TSAN_OPTIONS", "LSAN_OPTIONS"};
  char keep[4][1024];
  int n = 0;
  while (env[n] != NULL) ++n;
  for (int i = 0; i < 4; ++i) {
    const char *v = getenv(kKeep[i]);
    if (v == NULL) continue;
    snprintf(keep[i], sizeof keep[i], "%s=%s", kKeep[i], v);
    env[n++] = keep[i];
  }
  char *args[] = {(char *)self, (char *)mode, NULL};
  execve("/proc/self/exe", args, env);
  perror("launch: execve");
  return 2;
}

static int (*Engine(const char *name))(int) {
  int (*f)(int);
  *(void **)&f = dlsym(RTLD_DEFAULT, name);
  return f;
}

/* The settings of mode epoll or disjoint, in force in main. */
static int CheckSettings(int epoll) {
  int failures = 0;
  int (*is_uepoll)(int) = Engine("uepoll_is_uepoll_fd");
  int later_pipe[2];
  int later_eventfd = eventfd(0, 0);
  if (later_eventfd < 0 || pipe(later_pipe) != 0 ||
      is_uepoll(later_eventfd) != !epoll ||
      is_uepoll(later_pipe[0]) != !epoll) {
    fprintf(stderr, "FAIL: main's pipe or eventfd is %s\n",
            epoll ? "uepoll's" : "the kernel's");
    ++failures;
  }
  failures += close(later_eventfd) != 0;
  failures += close(later_pipe[0]) != 0 || close(later_pipe[1]) != 0;
  int (*get_fork_mode)(void);
  int (*get_fd_mode)(void);
  *(void **)&get_fork_mode = dlsym(RTLD_DEFAULT, "uepoll_get_fork_mode");
  *(void **)&get_fd_mode = dlsym(RTLD_DEFAULT, "uepoll_get_fd_mode");
  int want_fork = epoll ? UEPOLL_FORK_COPY : UEPOLL_FORK_SHARE;
  if (get_fork_mode == NULL || get_fork_mode() != want_fork) {
    fprintf(stderr, "FAIL: the fork mode is not %d\n", want_fork);
    ++failures;
  }
  int want_fd = epoll ? UEPOLL_FD_MODE_KERNEL : UEPOLL_FD_MODE_DISJOINT;
  if (get_fd_mode == NULL || get_fd_mode() != want_fd) {
    fprintf(stderr, "FAIL: the descriptor mode is not %d\n", want_fd);
    ++failures;
  }
  return failures;
}

int main(int argc, char **argv) {
  const char *mode = argc >= 2 ? argv[1] : "";
  if (strcmp(mode, "launch") == 0 && argc == 3) return Launch(argv[0], argv[2]);
  /* Which of the instance, the pipe and the eventfd are uepoll's. */
  int expect_uepoll[3] = {0, 0, 0};
  int settings = strcmp(mode, "epoll") == 0 || strcmp(mode, "disjoint") == 0;
  if (strcmp(mode, "uepoll") == 0 || strcmp(mode, "disjoint") == 0) {
    expect_uepoll[0] = expect_uepoll[1] = expect_uepoll[2] = 1;
  } else if (strcmp(mode, "epoll") == 0) {
    expect_uepoll[0] = 1;
  } else if (strcmp(mode, "kernel") != 0) {
    fprintf(stderr, "usage: %s kernel|uepoll|launch epoll|launch disjoint\n",
            argv[0]);
    return 2;
  }
  int failures = 0;
  if (settings && early_environ_null != 1) {
    fprintf(stderr, "FAIL: environ was %s in .preinit_array\n",
            early_environ_null ? "not looked at" : "set");
    return 1;
  }
  if (early_result != 0) {
    fprintf(stderr, "FAIL: the early calls stopped at step %d\n", early_result);
    return 1;
  }
  int (*is_uepoll)(int) = Engine("uepoll_is_uepoll_fd");
  for (int i = 0; i < 3; ++i) {
    int got = is_uepoll ? is_uepoll(early_fds[i]) : 0;
    if (got != expect_uepoll[i]) {
      fprintf(stderr, "FAIL: descriptor %d: uepoll_is_uepoll_fd %d\n",
              early_fds[i], got);
      ++failures;
    }
  }
  if (settings) failures += CheckSettings(strcmp(mode, "epoll") == 0);
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
