/* The interposer loads the engine at the first uepoll object
 * (src/interpose/engine.c), and not before: a process that makes none
 * (a shell's commands, a CGI child) does not load libuepoll and the C++
 * runtime. Checked here, in the mode argv[1] names:
 *   lazy     (UEPOLL_INTERPOSE unset) descriptor calls on the kernel's
 *            files, signal handlers, syscall() and kernel-only
 *            constructors leave the engine out; epoll_create1 brings it in;
 *            then the handlers installed before it are the engine's
 *            (wrapped, as if installed through uepoll_sigaction) and the
 *            fork mode is the interposer's (argv[2]: share or copy);
 *   none     (UEPOLL_INTERPOSE=none) epoll_create1 makes the kernel's
 *            instance and the engine never comes;
 *   missing  (the interposer copied alone to a directory without
 *            libuepoll) the first constructor says on stderr, once, that
 *            the engine cannot be loaded, and every object is the
 *            kernel's. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

static int failures;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static int FindEngine(struct dl_phdr_info *info, size_t size, void *found) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "/libuepoll.so")) {
    *(int *)found = 1;
  }
  return 0;
}
static int EngineLoaded(void) {
  int found = 0;
  dl_iterate_phdr(FindEngine, &found);
  return found;
}

/* Whether the kernel holds handler itself on sig, past every wrapper: 1 or
 * 0, or `expected` under ThreadSanitizer, whose runtime installs a handler
 * of its own in the kernel for every one (the delivery checks still run
 * there). */
#ifdef __SANITIZE_THREAD__
#define KERNEL_HOLDS(sig, handler, expected) (expected)
#else
#define KERNEL_HOLDS(sig, handler, expected) \
  (KernelHandler(sig) == (uintptr_t)(handler))
#endif

/* The kernel's view of a signal's action, past every wrapper. */
struct kernel_sigaction {
  uintptr_t handler;
  unsigned long flags;
  void *restorer;
  uint64_t mask;
};
__attribute__((unused)) static uintptr_t KernelHandler(int sig) {
  struct kernel_sigaction k;
  if (syscall(SYS_rt_sigaction, sig, NULL, &k, sizeof k.mask) != 0) return 0;
  return k.handler;
}

static volatile sig_atomic_t usr1_runs, usr2_runs, hup_signo;
static void OnUsr1(int sig) {
  (void)sig;
  ++usr1_runs;
}
static void OnUsr2(int sig) {
  (void)sig;
  ++usr2_runs;
}
static void OnHup(int sig, siginfo_t *info, void *ctx) {
  (void)sig;
  (void)ctx;
  hup_signo = info->si_signo;
}

/* What a program that never makes a uepoll object does: each call gets the
 * kernel's answer. */
static void KernelOnlyCalls(void) {
  int fd = open("/dev/null", O_RDWR);
  CHECK(fd >= 0);
  char buf[8];
  CHECK(read(fd, buf, sizeof buf) == 0);
  CHECK(write(fd, "abc", 3) == 3);
  struct stat st;
  CHECK(fstat(fd, &st) == 0 && S_ISCHR(st.st_mode));
  struct pollfd p = {.fd = fd, .events = POLLIN};
  CHECK(poll(&p, 1, 0) == 1 && (p.revents & POLLIN));
  CHECK(fcntl(fd, F_GETFL) >= 0);
  int d = dup(fd);
  CHECK(d >= 0 && dup2(fd, d) == d && close(d) == 0);
  CHECK(isatty(fd) == 0);
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  struct timeval tv = {0, 0};
  CHECK(select(fd + 1, &r, NULL, NULL, &tv) == 1);
  CHECK(close(fd) == 0);
  CHECK(close(fd) == -1 && errno == EBADF);
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  CHECK(s >= 0);
  int one = 1, avail = -1;
  CHECK(setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  CHECK(ioctl(s, FIONREAD, &avail) == 0 && avail == 0);
  CHECK(close(s) == 0);
  int sv[2]; /* a datagram pair is the kernel's in every mode */
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
  CHECK(send(sv[0], "x", 1, 0) == 1 && recv(sv[1], buf, 1, 0) == 1);
  CHECK(close(sv[0]) == 0 && close(sv[1]) == 0);
  CHECK(syscall(SYS_getpid) == getpid());
  CHECK(syscall(SYS_close, 1 << 20) == -1 && errno == EBADF);
}

static int IsUepoll(int fd) {
  int (*is_uepoll)(int);
  *(void **)&is_uepoll = dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd");
  return is_uepoll != NULL && is_uepoll(fd) == 1;
}

static int IsKernelEpoll(int fd) {
  char path[64], target[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n < 0) return 0;
  target[n] = '\0';
  return strcmp(target, "anon_inode:[eventpoll]") == 0;
}

int main(int argc, char **argv) {
  const char *mode = argc >= 2 ? argv[1] : "";
  int lazy = strcmp(mode, "lazy") == 0, none = strcmp(mode, "none") == 0,
      missing = strcmp(mode, "missing") == 0;
  if (!lazy && !none && !missing) {
    fprintf(stderr, "usage: %s lazy share|copy | none | missing\n", argv[0]);
    return 2;
  }
  CHECK(!EngineLoaded());

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnUsr1;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  CHECK(signal(SIGUSR2, OnUsr2) != SIG_ERR);
  sa.sa_sigaction = OnHup;
  sa.sa_flags = SA_SIGINFO;
  CHECK(sigaction(SIGHUP, &sa, NULL) == 0);
  /* Before the engine, the kernel holds the handlers themselves. */
  CHECK(KERNEL_HOLDS(SIGUSR1, OnUsr1, 1));
  CHECK(raise(SIGUSR1) == 0 && usr1_runs == 1);

  KernelOnlyCalls();
  CHECK(!EngineLoaded());

  /* In missing mode the message goes to a file, read back below. */
  FILE *err = NULL;
  int saved_stderr = -1;
  if (missing) {
    err = tmpfile();
    CHECK(err != NULL);
    saved_stderr = dup(2);
    CHECK(dup2(fileno(err), 2) == 2);
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  int p[2];
  CHECK(pipe(p) == 0);
  if (missing) {
    CHECK(dup2(saved_stderr, 2) == 2 && close(saved_stderr) == 0);
    char said[1024] = "";
    rewind(err);
    size_t n = fread(said, 1, sizeof said - 1, err);
    said[n] = '\0';
    CHECK(strstr(said, "libuepoll-interpose: cannot load libuepoll") == said);
    /* Said once, for the first constructor only. */
    CHECK(strchr(said, '\n') == said + n - 1);
    fclose(err);
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 9};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) == 0);
  CHECK(write(p[1], "y", 1) == 1);
  CHECK(epoll_wait(ep, &ev, 1, 10000) == 1 && ev.data.u32 == 9);

  if (lazy) {
    CHECK(EngineLoaded());
    CHECK(IsUepoll(ep) && IsUepoll(p[0]));
    /* The handlers installed before the engine are the engine's now:
     * the kernel holds its trampoline, a program still sees its own
     * handler, and a delivery still reaches it. */
    CHECK(!KERNEL_HOLDS(SIGUSR1, OnUsr1, 0));
    CHECK(!KERNEL_HOLDS(SIGUSR2, OnUsr2, 0));
    CHECK(!KERNEL_HOLDS(SIGHUP, OnHup, 0));
    struct sigaction old;
    CHECK(sigaction(SIGUSR1, NULL, &old) == 0 && old.sa_handler == OnUsr1);
    CHECK(sigaction(SIGHUP, NULL, &old) == 0 && old.sa_sigaction == OnHup &&
          (old.sa_flags & SA_SIGINFO));
    CHECK(raise(SIGUSR1) == 0 && usr1_runs == 2);
    CHECK(raise(SIGUSR2) == 0 && usr2_runs == 1);
    CHECK(raise(SIGHUP) == 0 && hup_signo == SIGHUP);
    int (*get_fork_mode)(void);
    *(void **)&get_fork_mode = dlsym(RTLD_DEFAULT, "uepoll_get_fork_mode");
    CHECK(get_fork_mode != NULL);
    if (get_fork_mode) {
      int share = argc >= 3 && strcmp(argv[2], "share") == 0;
      CHECK(get_fork_mode() == (share ? UEPOLL_FORK_SHARE : UEPOLL_FORK_COPY));
    }
  } else {
    CHECK(!EngineLoaded());
    CHECK(IsKernelEpoll(ep));
    CHECK(KERNEL_HOLDS(SIGUSR1, OnUsr1, 1));
    CHECK(raise(SIGUSR1) == 0 && usr1_runs == 2);
  }
  CHECK(close(p[0]) == 0 && close(p[1]) == 0 && close(ep) == 0);
  if (failures) return 1;
  printf("PASS %s\n", mode);
  return 0;
}
