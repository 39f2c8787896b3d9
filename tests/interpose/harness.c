#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

/* The program links no uepoll library (the header is for the types): its
 * calls are looked up, and exist only when the interposer, which loads
 * libuepoll, is in the process. */
static __typeof__(&uepoll_is_uepoll_fd) g_is_uepoll_fd;
static __typeof__(&uepoll_epoll_get_params) g_get_params;

enum { kFdScan = 1024, kWaitSeconds = 60 };

void HarnessFail(struct Harness *h, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL %s: ", h->library);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  __atomic_store_n(&h->failed, 1, __ATOMIC_RELAXED);
}

static int Failed(struct Harness *h) {
  return __atomic_load_n(&h->failed, __ATOMIC_RELAXED);
}

void HarnessInit(struct Harness *h, const char *library, int argc,
                 char **argv) {
  memset(h, 0, sizeof *h);
  h->library = library;
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->cv, NULL);
  if (argc != 2 ||
      (strcmp(argv[1], "kernel") != 0 && strcmp(argv[1], "uepoll") != 0 &&
       strcmp(argv[1], "mixed") != 0)) {
    fprintf(stderr, "usage: %s kernel|uepoll|mixed\n", argv[0]);
    exit(2);
  }
  h->expect_uepoll = strcmp(argv[1], "kernel") != 0;
  h->mixed = strcmp(argv[1], "mixed") == 0;
  /* The interposer brings the engine in at the first uepoll object
   * (src/interpose/engine.c): before any, it is in no run's process. */
  if (dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd") != NULL) {
    HarnessFail(h, "uepoll is in the process before any object");
  }
}

/* uepoll's calls, looked up when first needed (once the program has made
 * an object); -1 where uepoll is not in the process. */
static int IsUepollFd(int fd) {
  if (!g_is_uepoll_fd) {
    *(void **)&g_is_uepoll_fd = dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd");
  }
  return g_is_uepoll_fd ? g_is_uepoll_fd(fd) : -1;
}
static int GetParams(int fd, struct uepoll_params *p) {
  if (!g_get_params) {
    *(void **)&g_get_params = dlsym(RTLD_DEFAULT, "uepoll_epoll_get_params");
  }
  return g_get_params ? g_get_params(fd, p) : -1;
}

static void SetNonblock(struct Harness *h, int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    HarnessFail(h, "fcntl O_NONBLOCK on %d: %s", fd, strerror(errno));
  }
}

/* Moves fd to the lowest free number >= 100 with fcntl(F_DUPFD) or dup(),
 * and closes the old one: the copies must stay the same object. */
static int Renumber(struct Harness *h, int fd, int use_dupfd) {
  int n = use_dupfd ? fcntl(fd, F_DUPFD_CLOEXEC, 100) : dup(fd);
  if (n < 0) {
    HarnessFail(h, "dup of %d: %s", fd, strerror(errno));
    return fd;
  }
  if (close(fd) != 0) HarnessFail(h, "close %d: %s", fd, strerror(errno));
  return n;
}

static struct Source *Add(struct Harness *h, enum SourceKind kind,
                          const char *name, int rfd, int wfd, int edge) {
  struct Source *s = &h->src[h->nsrc++];
  s->kind = kind;
  s->name = name;
  s->rfd = rfd;
  s->wfd = wfd;
  s->edge = edge;
  s->uepoll_kind = h->mixed ? kind == kEventfdSource : kind != kDgramSource;
  if (rfd < 0 || wfd < 0)
    HarnessFail(h, "creating %s: %s", name, strerror(errno));
  return s;
}

void HarnessOpen(struct Harness *h) {
  int p[2] = {-1, -1};
  if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) p[0] = p[1] = -1;
  Add(h, kPipeSource, "pipe2", p[0], p[1], 0);
  if (pipe2(p, O_NONBLOCK) != 0) p[0] = p[1] = -1;
  Add(h, kPipeSource, "pipe2-et", p[0], p[1], 1);
  if (pipe(p) != 0) p[0] = p[1] = -1;
  SetNonblock(h, p[0]);
  Add(h, kPipeSource, "pipe-dup", Renumber(h, p[0], 0), p[1], 0);
  if (pipe(p) != 0) p[0] = p[1] = -1;
  SetNonblock(h, p[0]);
  Add(h, kPipeSource, "pipe-dupfd-et", Renumber(h, p[0], 1), p[1], 1);

  int e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  Add(h, kEventfdSource, "eventfd", e, e, 0);
  e = eventfd(0, EFD_NONBLOCK);
  Add(h, kEventfdSource, "eventfd-api-et", e, e, 1)->use_eventfd_api = 1;
  e = eventfd(0, 0);
  SetNonblock(h, e);
  Add(h, kEventfdSource, "eventfd-fcntl", e, e, 0);

  /* The writer's ends block: a full buffer waits for the loop. */
  int sv[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    sv[0] = sv[1] = -1;
  SetNonblock(h, sv[0]);
  Add(h, kStreamSource, "socketpair-stream", sv[0], sv[1], 0);
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) sv[0] = sv[1] = -1;
  SetNonblock(h, sv[0]);
  Add(h, kStreamSource, "socketpair-stream-et", sv[0], sv[1], 1);
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
    sv[0] = sv[1] = -1;
  SetNonblock(h, sv[0]);
  Add(h, kDgramSource, "socketpair-dgram(kernel)", sv[0], sv[1], 0);
}

static const char *KernelKind(int fd) {
  static char link[128];
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0) return NULL;
  link[n] = '\0';
  return link;
}

static int CountEpollInstances(struct Harness *h) {
  int count = 0;
  for (int fd = 0; fd < kFdScan; ++fd) {
    if (h->expect_uepoll) {
      struct uepoll_params p;
      if (IsUepollFd(fd) == 1 && GetParams(fd, &p) == 0) ++count;
    } else {
      const char *k = KernelKind(fd);
      if (k && strcmp(k, "anon_inode:[eventpoll]") == 0) ++count;
    }
  }
  return count;
}

void HarnessCheckObjects(struct Harness *h, int epoll_instances) {
  if (Failed(h)) return;
  for (int i = 0; i < h->nsrc; ++i) {
    struct Source *s = &h->src[i];
    if (h->expect_uepoll) {
      int want = s->uepoll_kind;
      if (IsUepollFd(s->rfd) != want || IsUepollFd(s->wfd) != want) {
        HarnessFail(h, "%s (%d, %d): uepoll_is_uepoll_fd %d %d, expected %d",
                    s->name, s->rfd, s->wfd, IsUepollFd(s->rfd),
                    IsUepollFd(s->wfd), want);
      }
    } else {
      const char *k = KernelKind(s->rfd);
      const char *want = s->kind == kPipeSource      ? "pipe:"
                         : s->kind == kEventfdSource ? "anon_inode:[eventfd]"
                                                     : "socket:";
      if (!k || strncmp(k, want, strlen(want)) != 0) {
        HarnessFail(h, "%s: the kernel calls it %s, expected %s", s->name,
                    k ? k : "(closed)", want);
      }
    }
  }
  int n = CountEpollInstances(h);
  if (n != epoll_instances) {
    HarnessFail(h, "%d %s epoll instances, expected %d", n,
                h->expect_uepoll ? "uepoll" : "kernel", epoll_instances);
  }
}

/* ---- the loop's side ---------------------------------------------------- */

void HarnessDrain(struct Harness *h, struct Source *s) {
  uint64_t got = 0;
  int eof = 0, err = 0;
  for (;;) {
    if (s->kind == kPipeSource || s->kind == kStreamSource) {
      unsigned char buf[512];
      ssize_t n = read(s->rfd, buf, sizeof buf);
      if (n <= 0) {
        eof = n == 0;
        err = n < 0 && errno != EAGAIN ? errno : 0;
        break;
      }
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != (unsigned char)(s->next_seq & 0xff)) s->bad_seq = 1;
        ++s->next_seq;
      }
      got += (uint64_t)n;
    } else if (s->kind == kEventfdSource) {
      uint64_t v;
      int r = s->use_eventfd_api
                  ? eventfd_read(s->rfd, &v)
                  : (read(s->rfd, &v, sizeof v) == sizeof v ? 0 : -1);
      if (r != 0) {
        err = errno != EAGAIN ? errno : 0;
        break;
      }
      s->next_seq += v;
      got += v;
    } else {
      uint64_t v;
      ssize_t n = read(s->rfd, &v, sizeof v);
      if (n != sizeof v) {
        err = n < 0 && errno != EAGAIN ? errno : (n >= 0 ? EMSGSIZE : 0);
        break;
      }
      if (v != s->next_seq) s->bad_seq = 1;
      ++s->next_seq;
      ++got;
    }
  }
  pthread_mutex_lock(&h->mu);
  if (eof) HarnessFail(h, "%s: unexpected end of file", s->name);
  if (err) HarnessFail(h, "%s: read: %s", s->name, strerror(err));
  s->received = s->next_seq;
  ++s->callbacks;
  if (got == 0) ++s->empty_callbacks;
  if (h->lockstep) ++s->lockstep_callbacks;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

int HarnessAsync(struct Harness *h) {
  pthread_mutex_lock(&h->mu);
  ++h->async_calls;
  int stop = h->stop;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  return stop;
}

/* ---- the writer thread ----------------------------------------------------
 */

static void WriteAll(struct Harness *h, struct Source *s, const void *buf,
                     size_t n) {
  for (;;) {
    ssize_t r =
        s->kind == kEventfdSource && s->use_eventfd_api
            ? (eventfd_write(s->wfd, *(const uint64_t *)buf) == 0 ? (ssize_t)n
                                                                  : -1)
            : write(s->wfd, buf, n);
    if (r == (ssize_t)n) return;
    if (r < 0 && errno == EAGAIN) {
      /* A full pipe: wait for the loop to read (poll() is interposed). */
      struct pollfd pfd = {.fd = s->wfd, .events = POLLOUT};
      if (poll(&pfd, 1, kWaitSeconds * 1000) == 1) continue;
    }
    HarnessFail(h, "%s: write: %zd, %s", s->name, r, strerror(errno));
    return;
  }
}

static void WriteUnit(struct Harness *h, struct Source *s, uint64_t seq) {
  if (s->kind == kPipeSource || s->kind == kStreamSource) {
    unsigned char b = (unsigned char)(seq & 0xff);
    WriteAll(h, s, &b, 1);
  } else if (s->kind == kEventfdSource) {
    uint64_t one = 1;
    WriteAll(h, s, &one, sizeof one);
  } else {
    WriteAll(h, s, &seq, sizeof seq);
  }
}

/* Waits under h->mu until *value >= want; fails after kWaitSeconds. */
static int WaitFor(struct Harness *h, const uint64_t *value, uint64_t want,
                   const char *what) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += kWaitSeconds;
  int ok = 1;
  pthread_mutex_lock(&h->mu);
  while (*value < want && !Failed(h)) {
    if (pthread_cond_timedwait(&h->cv, &h->mu, &deadline) == ETIMEDOUT) {
      ok = 0;
      break;
    }
  }
  uint64_t seen = *value;
  pthread_mutex_unlock(&h->mu);
  if (!ok) {
    HarnessFail(h, "%s: %llu after %d s, expected %llu (a lost wakeup?)", what,
                (unsigned long long)seen, kWaitSeconds,
                (unsigned long long)want);
  }
  return ok && !Failed(h);
}

static void *Writer(void *arg) {
  struct Harness *h = arg;
  int ok = 1;
  pthread_mutex_lock(&h->mu);
  h->lockstep = 1;
  pthread_mutex_unlock(&h->mu);
  for (uint64_t r = 0; ok && r < kRounds; ++r) {
    for (int i = 0; ok && i < h->nsrc; ++i) {
      struct Source *s = &h->src[i];
      WriteUnit(h, s, r);
      ok = WaitFor(h, &s->received, r + 1, s->name);
    }
    if (!ok) break;
    h->async_send(h->async_ctx);
    ok = WaitFor(h, &h->async_calls, r + 1, "async wakeups");
  }
  pthread_mutex_lock(&h->mu);
  h->lockstep = 0;
  pthread_mutex_unlock(&h->mu);
  for (uint64_t b = 0; ok && b < kBurst; ++b) {
    for (int i = 0; i < h->nsrc; ++i) WriteUnit(h, &h->src[i], kRounds + b);
  }
  for (int i = 0; ok && i < h->nsrc; ++i) {
    ok = WaitFor(h, &h->src[i].received, kRounds + kBurst, h->src[i].name);
  }
  /* Stop the loop, on success or not: the async callback sees stop. */
  pthread_mutex_lock(&h->mu);
  h->stop = 1;
  pthread_mutex_unlock(&h->mu);
  h->async_send(h->async_ctx);
  return NULL;
}

void HarnessStartWriter(struct Harness *h) {
  if (pthread_create(&h->writer, NULL, Writer, h) != 0) {
    HarnessFail(h, "pthread_create");
    exit(1);
  }
}

void HarnessJoinWriter(struct Harness *h) { pthread_join(h->writer, NULL); }

/* ---- the results ------------------------------------------------------------
 */

void HarnessCloseSources(struct Harness *h) {
  for (int i = 0; i < h->nsrc; ++i) {
    struct Source *s = &h->src[i];
    if (close(s->rfd) != 0)
      HarnessFail(h, "close %s: %s", s->name, strerror(errno));
    if (s->wfd != s->rfd && close(s->wfd) != 0) {
      HarnessFail(h, "close %s: %s", s->name, strerror(errno));
    }
  }
}

int HarnessCheckNoUepollLeft(struct Harness *h) {
  int left = 0;
  for (int fd = 0; fd < kFdScan; ++fd) {
    if (h->expect_uepoll && IsUepollFd(fd) == 1) {
      HarnessFail(h, "uepoll descriptor %d left open", fd);
      ++left;
    }
  }
  int n = CountEpollInstances(h);
  if (n != 0) HarnessFail(h, "%d epoll instances left open", n);
  return left + n;
}

int HarnessFinish(struct Harness *h) {
  const uint64_t total = kRounds + kBurst;
  for (int i = 0; i < h->nsrc; ++i) {
    struct Source *s = &h->src[i];
    printf(
        "%s %-26s %s units %llu/%llu, callbacks %llu (lock step %llu/%d, "
        "empty %llu)%s\n",
        h->library, s->name, s->edge ? "ET" : "LT",
        (unsigned long long)s->received, (unsigned long long)total,
        (unsigned long long)s->callbacks,
        (unsigned long long)s->lockstep_callbacks, kRounds,
        (unsigned long long)s->empty_callbacks,
        s->bad_seq ? " OUT OF ORDER" : "");
    if (s->received != total || s->lockstep_callbacks != kRounds ||
        s->empty_callbacks != 0 || s->bad_seq) {
      HarnessFail(h, "%s: wrong counts", s->name);
    }
  }
  printf("%s %-26s    wakeups %llu/%d\n", h->library, "cross-thread",
         (unsigned long long)h->async_calls, kRounds + 1);
  if (h->async_calls != kRounds + 1) HarnessFail(h, "wrong wakeup count");
  fflush(stdout);
  return Failed(h) ? 1 : 0;
}
