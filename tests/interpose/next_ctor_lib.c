/* next_ctor_lib.so: a library the test program needs, whose constructor
 * runs before the interposer's (next_ctor_main.c). With NEXT_CTOR set, it
 * starts a thread whose close() makes the interposer resolve libc's
 * table, holds that thread inside the resolution's walk (next_hold.so),
 * and forks (NEXT_CTOR=raw: by syscall(SYS_fork); NEXT_CTOR=clone: by
 * syscall(SYS_clone), each of which reaches the interposer's syscall()
 * before anything else of it has run). The child
 * goes on starting up, so the interposer's
 * constructor runs in it with the table's guard running in a thread the
 * child does not have, and the loader's list lock held for good: it must
 * finish. The parent waits up to ten seconds for the child. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static int g_is_child;
static int g_result = -1; /* the parent's: 0 the child exited 0 */

static void *Resolver(void *arg) {
  (void)arg;
  void (*hold)(void);
  void *p = dlsym(RTLD_DEFAULT, "next_hold_my_next_walk");
  memcpy(&hold, &p, sizeof p);
  hold();
  close(-1); /* the interposer's: resolves libc's table */
  return NULL;
}

__attribute__((constructor)) static void Ctor(void) {
  if (getenv("NEXT_CTOR") == NULL) return;
  int (*held)(void);
  void (*release)(void);
  void *p = dlsym(RTLD_DEFAULT, "next_hold_held");
  void *q = dlsym(RTLD_DEFAULT, "next_hold_release");
  if (p == NULL || q == NULL) return; /* g_result stays -1: a failure */
  memcpy(&held, &p, sizeof p);
  memcpy(&release, &q, sizeof q);
  pthread_t thread;
  if (pthread_create(&thread, NULL, Resolver, NULL) != 0) return;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (!held()) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= 10) {
      g_result = 4; /* never held: the table was resolved already */
      release();
      pthread_join(thread, NULL);
      return;
    }
    sched_yield();
  }
  const char *how = getenv("NEXT_CTOR");
  pid_t pid = strcmp(how, "raw") == 0 ? (pid_t)syscall(SYS_fork)
              : strcmp(how, "clone") == 0
                  ? (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L)
                  : fork();
  if (pid == 0) {
    g_is_child = 1;
    return; /* the child starts up: the interposer's constructor next */
  }
  int status = 0;
  pid_t r = 0;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (pid > 0 && (r = waitpid(pid, &status, WNOHANG)) == 0) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= 10) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    sched_yield();
  }
  g_result = r == pid && WIFEXITED(status) ? WEXITSTATUS(status) : 5;
  release();
  pthread_join(thread, NULL);
}

EXPORT int next_ctor_is_child(void) { return g_is_child; }
EXPORT int next_ctor_result(void) { return g_result; }
