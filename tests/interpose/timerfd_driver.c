/* timerfd through the interposer: an ordinary program (libc names only, no
 * uepoll library linked) arms a periodic timerfd, waits for it with epoll
 * and reads it, sets and gets it, and checks the errors of settime and
 * gettime on other files. The expectations are the same in every run;
 * argv[1] says whose timerfd it is:
 *   kernel  no interposer: everything is the kernel's;
 *   uepoll  interposed (UEPOLL_INTERPOSE unset: every kind): uepoll's;
 *   mixed   UEPOLL_INTERPOSE=epoll,eventfd: timerfd_create is the
 *           kernel's, while timerfd_settime, timerfd_gettime, read and
 *           the epoll instance are uepoll's, which must hand the kernel
 *           timerfd to libc (an event library with precise timers hung
 *           when they did not).
 * With libevent present, argv[2] == "libevent" runs the same through
 * libevent's epoll backend with EVENT_BASE_FLAG_PRECISE_TIMER, which waits
 * with a timerfd of its own (timerfd_driver_libevent). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#ifdef UEPOLL_TIMERFD_DRIVER_LIBEVENT
#include <event2/event.h>
#endif

static int g_failed;
static __typeof__(&uepoll_is_uepoll_fd) g_is_uepoll_fd;

#define CHECK(cond, ...)                           \
  do {                                             \
    if (!(cond)) {                                 \
      fprintf(stderr, "FAIL line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);                \
      fputc('\n', stderr);                         \
      g_failed = 1;                                \
    }                                              \
  } while (0)

/* Whether fd is a kernel timerfd, by its /proc link. */
static int IsKernelTimerfd(int fd) {
  char path[64], link[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n <= 0) return 0;
  link[n] = '\0';
  return strcmp(link, "anon_inode:[timerfd]") == 0;
}

static void CheckWhose(const char *mode, int fd) {
  /* Looked up once an object exists: the interposer brings uepoll into
   * the process at the first one (src/interpose/engine.c). */
  if (!g_is_uepoll_fd) {
    *(void **)&g_is_uepoll_fd = dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd");
  }
  int ours = g_is_uepoll_fd ? g_is_uepoll_fd(fd) : 0;
  if (strcmp(mode, "uepoll") == 0) {
    CHECK(ours == 1, "timerfd %d is not uepoll's", fd);
  } else {
    CHECK(ours == 0, "timerfd %d is uepoll's", fd);
    CHECK(IsKernelTimerfd(fd), "timerfd %d is not a kernel timerfd", fd);
  }
}

static struct itimerspec Spec(long value_ns, long interval_ns) {
  struct itimerspec s;
  s.it_value.tv_sec = value_ns / 1000000000;
  s.it_value.tv_nsec = value_ns % 1000000000;
  s.it_interval.tv_sec = interval_ns / 1000000000;
  s.it_interval.tv_nsec = interval_ns % 1000000000;
  return s;
}

static void Direct(const char *mode) {
  int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  CHECK(t >= 0, "timerfd_create: %s", strerror(errno));
  if (t < 0) return;
  CheckWhose(mode, t);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0, "epoll_create1: %s", strerror(errno));
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, t, &ev) == 0, "epoll_ctl: %s",
        strerror(errno));
  struct itimerspec v = Spec(2000000, 2000000), old = Spec(7, 7), cur;
  CHECK(timerfd_settime(t, 0, &v, &old) == 0, "settime: %s", strerror(errno));
  CHECK(old.it_value.tv_sec == 0 && old.it_value.tv_nsec == 0,
        "old value of a disarmed timer");
  CHECK(timerfd_gettime(t, &cur) == 0, "gettime: %s", strerror(errno));
  CHECK(cur.it_interval.tv_nsec == 2000000, "interval %ld",
        (long)cur.it_interval.tv_nsec);
  unsigned long long total = 0;
  for (int i = 0; i < 100 && total < 10 && !g_failed; ++i) {
    struct epoll_event out;
    int n = epoll_wait(ep, &out, 1, 5000);
    CHECK(n == 1 && out.data.u64 == 7, "epoll_wait %d: %s", n, strerror(errno));
    if (n != 1) break;
    unsigned long long ticks = 0;
    CHECK(read(t, &ticks, 8) == 8 && ticks >= 1, "read: %s", strerror(errno));
    total += ticks;
  }
  CHECK(total >= 10, "%llu expirations", total);
  v = Spec(0, 0);
  CHECK(timerfd_settime(t, 0, &v, &old) == 0, "disarm: %s", strerror(errno));
  CHECK(old.it_interval.tv_nsec == 2000000, "old interval");
  CHECK(timerfd_gettime(t, &cur) == 0 && cur.it_value.tv_sec == 0 &&
            cur.it_value.tv_nsec == 0,
        "disarmed gettime");
  /* The kernel's errors for other files and closed numbers. */
  int m = memfd_create("timerfd-driver", MFD_CLOEXEC);
  v = Spec(1000000, 0);
  errno = 0;
  CHECK(timerfd_settime(m, 0, &v, NULL) == -1 && errno == EINVAL,
        "settime on a regular file: %s", strerror(errno));
  errno = 0;
  CHECK(timerfd_gettime(m, &cur) == -1 && errno == EINVAL,
        "gettime on a regular file: %s", strerror(errno));
  close(m);
  errno = 0;
  CHECK(timerfd_settime(m, 0, &v, NULL) == -1 && errno == EBADF,
        "settime on a closed number: %s", strerror(errno));
  close(ep);
  close(t);
}

#ifdef UEPOLL_TIMERFD_DRIVER_LIBEVENT
enum { kTimers = 8, kRounds = 5 };
static int g_fired[kTimers];
static struct event *g_ev[kTimers];
static struct event_base *g_base;
static int g_left = kTimers;

static void OnTimer(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  int i = (int)(long)arg;
  if (++g_fired[i] < kRounds) {
    struct timeval tv = {0, 1000 * (i + 1)};
    evtimer_add(g_ev[i], &tv);
  } else if (--g_left == 0) {
    event_base_loopbreak(g_base);
  }
}

static void WithLibevent(const char *mode) {
  struct event_config *cfg = event_config_new();
  event_config_avoid_method(cfg, "select");
  event_config_avoid_method(cfg, "poll");
  event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
  g_base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  CHECK(g_base && strcmp(event_base_get_method(g_base), "epoll") == 0,
        "no epoll backend");
  if (!g_base) return;
  /* libevent's timerfd: the only one in the process. */
  int found = -1;
  for (int fd = 0; fd < 1024; ++fd) {
    struct itimerspec cur;
    if (timerfd_gettime(fd, &cur) == 0) found = fd;
  }
  CHECK(found >= 0, "libevent made no timerfd");
  if (found >= 0) CheckWhose(mode, found);
  for (int i = 0; i < kTimers; ++i) {
    g_ev[i] = evtimer_new(g_base, OnTimer, (void *)(long)i);
    struct timeval tv = {0, 1000 * (i + 1)};
    evtimer_add(g_ev[i], &tv);
  }
  event_base_dispatch(g_base);
  for (int i = 0; i < kTimers; ++i) {
    CHECK(g_fired[i] == kRounds, "timer %d fired %d times", i, g_fired[i]);
    event_free(g_ev[i]);
  }
  event_base_free(g_base);
}
#endif

int main(int argc, char **argv) {
  if (argc < 2 ||
      (strcmp(argv[1], "kernel") != 0 && strcmp(argv[1], "uepoll") != 0 &&
       strcmp(argv[1], "mixed") != 0)) {
    fprintf(stderr, "usage: %s kernel|uepoll|mixed [libevent]\n", argv[0]);
    return 2;
  }
  /* A lost expiry must fail the run, not hang it. */
  alarm(60);
  /* No object yet: uepoll is in no run's process. */
  CHECK(dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd") == NULL,
        "uepoll is in the process before any object");
  if (argc > 2 && strcmp(argv[2], "libevent") == 0) {
#ifdef UEPOLL_TIMERFD_DRIVER_LIBEVENT
    WithLibevent(argv[1]);
#else
    fprintf(stderr, "built without libevent\n");
    return 2;
#endif
  } else {
    Direct(argv[1]);
  }
  printf("timerfd %s: %s\n", argv[1], g_failed ? "FAILED" : "passed");
  return g_failed;
}
