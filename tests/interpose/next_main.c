/* The interposer's table of libc's definitions, found by one walk over
 * the loaded objects' symbol tables (src/interpose/next_symbols.c), and
 * its once-guards (src/interpose/engine.c). Run with
 * LD_PRELOAD="<interposer>:next_probe.so[:next_shim.so][:next_hold.so]":
 *   table        every entry of the table is what dlsym(RTLD_NEXT) finds
 *                after the interposer (next_probe.so asks it from there),
 *                a name it finds nowhere the interposer's stand-in;
 *   shim         as table, and the entries next_shim.so defines are its
 *                own: lseek's default version, not its hidden one;
 *                fsync's resolved target, not its resolver; dup;
 *   forkonce     a thread's first openat is held inside the walk of its
 *                set-up (next_hold.so's dl_iterate_phdr) while this
 *                thread forks: the child's own first openat finishes
 *                (a guard left "running" in the child waited for good),
 *                and so does the held thread's once let go;
 *   dlopen I S   not preloaded: opens the interposer I, then S
 *                (next_shim.so), each RTLD_LOCAL, and calls I's openat:
 *                libc's opens, not S's, which is after I in load order
 *                but not where dlsym(RTLD_NEXT) looks from I.
 * alarm() turns a hang into a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/libc_calls.h"

static int failures;

#define CHECK(cond, ...)                     \
  do {                                       \
    if (!(cond)) {                           \
      fprintf(stderr, "FAILED %s: ", #cond); \
      fprintf(stderr, __VA_ARGS__);          \
      fputc('\n', stderr);                   \
      ++failures;                            \
    }                                        \
  } while (0)

static void *Need(const char *name) {
  void *p = dlsym(RTLD_DEFAULT, name);
  if (p == NULL) {
    fprintf(stderr, "%s not in the process: run with LD_PRELOAD\n", name);
    exit(2);
  }
  return p;
}

static const char *ObjectOf(void *p) {
  Dl_info info;
  return p && dladdr(p, &info) && info.dli_fname ? info.dli_fname : "?";
}

static void Table(void) {
  const struct uepoll_libc_calls *(*libc)(void);
  void *(*probe)(const char *);
  void *p = Need("uepoll_interpose_libc");
  memcpy(&libc, &p, sizeof p);
  p = Need("next_probe");
  memcpy(&probe, &p, sizeof p);
  const struct uepoll_libc_calls *t = libc();
  /* The stand-in for a name found nowhere: the entry of a name no object
   * defines, if any; each such entry must be the same function. */
  void *missing = NULL;
  int names = 0, found = 0;
#define CHECK_ENTRY(name)                                                    \
  {                                                                          \
    void *entry;                                                             \
    memcpy(&entry, &t->name, sizeof entry);                                  \
    void *want = probe(#name);                                               \
    ++names;                                                                 \
    if (want != NULL) {                                                      \
      ++found;                                                               \
      CHECK(entry == want, "%s: table %p (%s), dlsym %p (%s)", #name, entry, \
            ObjectOf(entry), want, ObjectOf(want));                          \
    } else {                                                                 \
      CHECK(entry != NULL && (missing == NULL || entry == missing),          \
            "%s: found nowhere, table %p", #name, entry);                    \
      missing = entry;                                                       \
    }                                                                        \
  }
  UEPOLL_LIBC_CALLS(CHECK_ENTRY)
#undef CHECK_ENTRY
  /* libc defines all but a few of them (older ones lack some). */
  CHECK(found >= names - 4, "%d of %d names found", found, names);
}

static void *ShimWants(const char *what) {
  void *(*f)(void);
  void *p = Need(what);
  memcpy(&f, &p, sizeof p);
  return f();
}

static void Shim(void) {
  const struct uepoll_libc_calls *(*libc)(void);
  void *p = Need("uepoll_interpose_libc");
  memcpy(&libc, &p, sizeof p);
  const struct uepoll_libc_calls *t = libc();
  void *entry;
  memcpy(&entry, &t->lseek, sizeof entry);
  CHECK(entry == ShimWants("next_shim_lseek"), "lseek: %p (%s)", entry,
        ObjectOf(entry));
  memcpy(&entry, &t->fsync, sizeof entry);
  CHECK(entry == ShimWants("next_shim_fsync"), "fsync: %p (%s)", entry,
        ObjectOf(entry));
  memcpy(&entry, &t->dup, sizeof entry);
  CHECK(entry == ShimWants("next_shim_dup"), "dup: %p (%s)", entry,
        ObjectOf(entry));
}

static void *HeldOpen(void *arg) {
  (void)arg;
  void (*hold)(void);
  void *p = Need("next_hold_my_next_walk");
  memcpy(&hold, &p, sizeof p);
  hold();
  int fd = openat(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) close(fd);
  return (void *)(long)(fd >= 0);
}

static void ForkOnce(void) {
  int (*held)(void);
  void (*release)(void);
  void *p = Need("next_hold_held");
  memcpy(&held, &p, sizeof p);
  p = Need("next_hold_release");
  memcpy(&release, &p, sizeof p);
  pthread_t thread;
  if (pthread_create(&thread, NULL, HeldOpen, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    exit(2);
  }
  /* Until the thread is inside its set-up's walk (alarm() bounds it: a
   * set-up done before the thread's openat never holds). */
  while (!held()) sched_yield();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = openat(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : 3);
  }
  CHECK(pid > 0, "fork: %s", strerror(errno));
  int status = -1;
  if (pid > 0) {
    /* Ten seconds for the child; a child that waits for the guard for
     * good is killed and fails the case. */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t r;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec >= 10) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        CHECK(0, "the child's first openat still waits after 10 s");
        status = 0;
        break;
      }
      sched_yield();
    }
    if (r == pid) {
      CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the child's openat: status %d", status);
    }
  }
  release();
  void *ok = NULL;
  pthread_join(thread, &ok);
  CHECK(ok != NULL, "the held thread's openat failed");
}

static void Dlopened(const char *interposer, const char *shim) {
  void *i = dlopen(interposer, RTLD_NOW | RTLD_LOCAL);
  void *s = i ? dlopen(shim, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (i == NULL || s == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(2);
  }
  int (*openat_i)(int, const char *, int, ...);
  int (*calls)(void);
  void *p = dlsym(i, "openat");
  memcpy(&openat_i, &p, sizeof p);
  p = dlsym(s, "next_shim_openat_calls");
  memcpy(&calls, &p, sizeof p);
  if (openat_i == NULL || calls == NULL) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    exit(2);
  }
  int fd = openat_i(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0, "openat: %s", strerror(errno));
  if (fd >= 0) close(fd);
  CHECK(calls() == 0, "the interposer's openat called next_shim.so's %d times",
        calls());
}

int main(int argc, char **argv) {
  alarm(30);
  const char *mode = argc >= 2 ? argv[1] : "";
  if (strcmp(mode, "table") == 0) {
    Table();
  } else if (strcmp(mode, "shim") == 0) {
    Table();
    Shim();
  } else if (strcmp(mode, "forkonce") == 0) {
    ForkOnce();
  } else if (strcmp(mode, "dlopen") == 0 && argc == 4) {
    Dlopened(argv[2], argv[3]);
  } else {
    fprintf(stderr, "usage: %s table|shim|forkonce|dlopen I S\n", argv[0]);
    return 2;
  }
  printf("next (%s): %s\n", mode, failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
