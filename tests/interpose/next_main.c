/* The interposer's table of libc's definitions, found by one walk over
 * the loaded objects' symbol tables (src/interpose/next_symbols.c); the
 * once-guards at a fork are next_ctor_main.c's. Run with
 * LD_PRELOAD="<interposer>:next_probe.so[:next_shim.so]" (the dlopen and
 * plugin cases preload nothing; interpose.next.audit runs table under an
 * auditor, next_audit.so, that binds dup to its own function):
 *   table        every entry of the table is what dlsym(RTLD_NEXT) finds
 *                after the interposer (next_probe.so asks it from there),
 *                a name it finds nowhere the interposer's stand-in;
 *   shim         as table, and the entries next_shim.so defines are its
 *                own: lseek's default version, not its hidden one;
 *                fsync's resolved target, not its resolver; dup;
 *   weak         as table, preloaded with next_weak.so: dup is its own;
 *                fsync, which it defines weak, its own too, or libc's
 *                where LD_DYNAMIC_WEAK is set; fdatasync, which it has
 *                as a hidden symbol, libc's;
 *   weak-early   as weak, the table resolved from the executable's
 *                .preinit_array, before libc has set environ up: whether
 *                LD_DYNAMIC_WEAK is set comes from the initial
 *                environment (src/base/env.h);
 *   forkwalk     a thread sits inside dl_iterate_phdr (holding the
 *                loader's list lock, which glibc does not reset in a
 *                child) while this thread forks: the child's first
 *                openat finishes (a child that walked the loaded objects
 *                to resolve it waited for good);
 *   dlopen I S   not preloaded: opens the interposer I, then S
 *                (next_shim.so), each RTLD_LOCAL, and calls I's openat:
 *                libc's opens, not S's, which is after I in load order
 *                but not where dlsym(RTLD_NEXT) looks from I;
 *   check S      opens S (next_shim.so) RTLD_LOCAL, then asks the walk
 *                for read and for a name only S defines: the walk finds
 *                S's, dlsym does not, so the walk's answers are dropped;
 *   plugin Y P   not preloaded: opens Y (next_y.so), then P
 *                (next_plugin.so, which needs the interposer, Y and
 *                next_shim.so in that order), each RTLD_LOCAL: the
 *                interposer's lseek is Y's, first among P's dependencies
 *                after it, though next_shim.so's comes after it in load
 *                order and Y's before.
 * alarm() turns a hang into a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
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

static void *Entry(void *const *slot) {
  void *entry;
  memcpy(&entry, slot, sizeof entry);
  return entry;
}

static void Weak(void) {
  /* The walk checks the first name an object answered against dlsym: dup
   * must come first, or the check would catch what this mode is about. */
  CHECK(offsetof(struct uepoll_libc_calls, dup) <
                offsetof(struct uepoll_libc_calls, fsync) &&
            offsetof(struct uepoll_libc_calls, dup) <
                offsetof(struct uepoll_libc_calls, fdatasync),
        "the table no longer lists dup before fsync and fdatasync");
  const struct uepoll_libc_calls *(*libc)(void);
  void *p = Need("uepoll_interpose_libc");
  memcpy(&libc, &p, sizeof p);
  const struct uepoll_libc_calls *t = libc();
  void *entry = Entry((void *const *)&t->dup);
  CHECK(entry == ShimWants("next_weak_dup"), "dup: %p (%s)", entry,
        ObjectOf(entry));
  entry = Entry((void *const *)&t->fsync);
  if (getenv("LD_DYNAMIC_WEAK") != NULL) {
    CHECK(entry != ShimWants("next_weak_fsync"),
          "fsync: next_weak.so's weak one, under LD_DYNAMIC_WEAK");
  } else {
    CHECK(entry == ShimWants("next_weak_fsync"), "fsync: %p (%s)", entry,
          ObjectOf(entry));
  }
  entry = Entry((void *const *)&t->fdatasync);
  CHECK(entry != ShimWants("next_weak_fdatasync"),
        "fdatasync: next_weak.so's hidden one");
}

static void *Sym(void *handle, const char *name) {
  void *p = dlsym(handle, name);
  if (p == NULL) {
    fprintf(stderr, "%s: %s\n", name, dlerror());
    exit(2);
  }
  return p;
}

/* Waits up to ten seconds for a fork child to exit 0; one that does not
 * is killed and fails the case. */
static void ExpectChildExits(pid_t pid, const char *what) {
  CHECK(pid > 0, "fork: %s", strerror(errno));
  if (pid <= 0) return;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int status = 0;
  pid_t r;
  while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= 10) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      CHECK(0, "the child's %s still waits after 10 s", what);
      return;
    }
    sched_yield();
  }
  CHECK(r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child's %s: status %d", what, status);
}

static atomic_int g_in_walk, g_walk_released;

static int Park(struct dl_phdr_info *info, size_t size, void *data) {
  (void)info, (void)size, (void)data;
  atomic_store(&g_in_walk, 1);
  while (!atomic_load(&g_walk_released)) sched_yield();
  return 1;
}

static void *Walk(void *arg) {
  (void)arg;
  dl_iterate_phdr(Park, NULL);
  return NULL;
}

static void ForkWalk(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, Walk, NULL) != 0) {
    fprintf(stderr, "pthread_create failed\n");
    exit(2);
  }
  while (!atomic_load(&g_in_walk)) sched_yield();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = openat(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    _exit(fd >= 0 ? 0 : 3);
  }
  ExpectChildExits(pid, "first openat");
  atomic_store(&g_walk_released, 1);
  pthread_join(thread, NULL);
}

static void Check(const char *shim) {
  void *s = dlopen(shim, RTLD_NOW | RTLD_LOCAL);
  if (s == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(2);
  }
  void (*next)(const char *const *, void **, size_t);
  void *(*probe)(const char *);
  void *p = Need("uepoll_interpose_next_symbols");
  memcpy(&next, &p, sizeof p);
  p = Need("next_probe");
  memcpy(&probe, &p, sizeof p);
  static const char *const kNames[] = {"read", "next_shim_dup"};
  void *out[2];
  next(kNames, out, 2);
  CHECK(out[0] == probe("read"), "read: %p (%s)", out[0], ObjectOf(out[0]));
  CHECK(out[1] == NULL, "next_shim_dup: %p (%s), which dlsym does not find",
        out[1], ObjectOf(out[1]));
}

static void Plugin(const char *y, const char *plugin) {
  void *yh = dlopen(y, RTLD_NOW | RTLD_LOCAL);
  void *ph = yh ? dlopen(plugin, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (yh == NULL || ph == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    exit(2);
  }
  const struct uepoll_libc_calls *(*libc)(void);
  void *(*y_lseek)(void);
  void *(*shim_dup)(void);
  void *p = Sym(ph, "uepoll_interpose_libc");
  memcpy(&libc, &p, sizeof p);
  p = Sym(yh, "next_y_lseek");
  memcpy(&y_lseek, &p, sizeof p);
  p = Sym(ph, "next_shim_dup");
  memcpy(&shim_dup, &p, sizeof p);
  const struct uepoll_libc_calls *t = libc();
  void *entry;
  memcpy(&entry, &t->lseek, sizeof entry);
  CHECK(entry == y_lseek(), "lseek: %p (%s), not next_y.so's", entry,
        ObjectOf(entry));
  memcpy(&entry, &t->dup, sizeof entry);
  CHECK(entry == shim_dup(), "dup: %p (%s), not next_shim.so's", entry,
        ObjectOf(entry));
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

static int early_environ_null = -1;

/* Called with main's arguments, as the dynamic loader calls every entry of
 * .preinit_array. dup(-1) reaches the interposer's dup, the first call to
 * libc's table: the table is resolved here. */
static void Early(int argc, char **argv, char **envp) {
  (void)envp;
  if (argc < 2 || strcmp(argv[1], "weak-early") != 0) return;
  early_environ_null = environ == NULL;
  (void)dup(-1);
}

__attribute__((section(".preinit_array"),
               used)) static void (*const kEarly)(int, char **,
                                                  char **) = Early;

int main(int argc, char **argv) {
  alarm(30);
  const char *mode = argc >= 2 ? argv[1] : "";
  if (strcmp(mode, "table") == 0) {
    Table();
  } else if (strcmp(mode, "shim") == 0) {
    Table();
    Shim();
  } else if (strcmp(mode, "weak") == 0) {
    Table();
    Weak();
  } else if (strcmp(mode, "weak-early") == 0) {
    CHECK(early_environ_null == 1,
          "environ in .preinit_array: %s (the case is not early)",
          early_environ_null ? "not run" : "set");
    Table();
    Weak();
  } else if (strcmp(mode, "forkwalk") == 0) {
    ForkWalk();
  } else if (strcmp(mode, "dlopen") == 0 && argc == 4) {
    Dlopened(argv[2], argv[3]);
  } else if (strcmp(mode, "check") == 0 && argc == 3) {
    Check(argv[2]);
  } else if (strcmp(mode, "plugin") == 0 && argc == 4) {
    Plugin(argv[2], argv[3]);
  } else {
    fprintf(stderr,
            "usage: %s table|shim|weak|weak-early|forkwalk|dlopen I S|check "
            "S|plugin Y P\n",
            argv[0]);
    return 2;
  }
  printf("next (%s): %s\n", mode, failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
