/* realprog.crossing.*: the interposer's fork, vfork, exec and posix_spawn,
 * seen by a plain program (no uepoll call): run as it is (kernel) and
 * under LD_PRELOAD of libuepoll-interpose.so (uepoll's pipes, eventfds
 * and socket pairs), with one set of expectations.
 *  - vfork: the child closes and dup2s the parent's descriptors and
 *    execs; the parent's objects are untouched and its pipe carries the
 *    child's output;
 *  - posix_spawn: a close-on-exec pipe dup2'ed onto the child's stdout by
 *    a file action;
 *  - fork: a socket pair whose buffered bytes and later writes both sides
 *    see; an eventfd the child signals;
 *  - `sh -c 'ls / | wc -l'` under the same environment: the shell's own
 *    pipe crosses its fork and exec;
 *  - syscall(): a child made by SYS_fork, SYS_clone and SYS_clone3 (no
 *    CLONE_VM; clone3 skipped where a seccomp filter refuses it) writes
 *    into a pipe its parent reads, and an image started by SYS_execve
 *    reads a pipe made after the fork. (SYS_vfork cannot be called safely
 *    from C: its child returns into the frame its parent is suspended in.
 *    Untested.)
 *  - libc's clone(): a child of its own memory writes into the parent's
 *    pipe; a CLONE_VM|CLONE_VFORK child execs a shell that writes into
 *    it, and the parent's own writes still reach it; another dup2s a
 *    close-on-exec pipe onto its stdout before its exec; clone() without
 *    a function fails EINVAL.
 * Prints what failed; exit 0 when nothing did. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static int failures;

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      printf("FAILED: %s (line %d, errno %d)\n", #cond, __LINE__, errno); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

static ssize_t ReadAll(int fd, char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r <= 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

static int Wait(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static void VforkChildChangesOnlyItsOwnTable(void) {
  int out[2], spare[2];
  CHECK(pipe2(out, O_CLOEXEC) == 0);
  CHECK(pipe2(spare, O_CLOEXEC) == 0);
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  CHECK(efd >= 0);
  pid_t pid = vfork();
  if (pid == 0) {
    /* As a subprocess module's child does: close what it does not need,
     * put the pipe on stdout, exec. */
    close(efd);
    close(spare[0]);
    close(spare[1]);
    dup2(out[1], 1);
    execlp("echo", "echo", "from vfork", (char *)NULL);
    _exit(127);
  }
  CHECK(pid > 0);
  close(out[1]);
  char buf[64] = {0};
  CHECK(ReadAll(out[0], buf, sizeof buf - 1) == 11);
  CHECK(strcmp(buf, "from vfork\n") == 0);
  CHECK(Wait(pid) == 0);
  /* The parent's descriptors the child closed still work here. */
  uint64_t v = 3;
  CHECK(write(efd, &v, sizeof v) == 8);
  CHECK(read(efd, &v, sizeof v) == 8 && v == 3);
  CHECK(write(spare[1], "s", 1) == 1);
  CHECK(read(spare[0], buf, 1) == 1 && buf[0] == 's');
  close(out[0]);
  close(spare[0]);
  close(spare[1]);
  close(efd);
}

static void PosixSpawnDup2sACloexecPipe(void) {
  int out[2];
  CHECK(pipe2(out, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  char *argv[] = {"echo", "from spawn", NULL};
  pid_t pid;
  CHECK(posix_spawnp(&pid, "echo", &fa, NULL, argv, environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  char buf[64] = {0};
  CHECK(ReadAll(out[0], buf, sizeof buf - 1) == 11);
  CHECK(strcmp(buf, "from spawn\n") == 0);
  CHECK(Wait(pid) == 0);
  close(out[0]);
}

static void ForkSharesSocketPairAndEventfd(void) {
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  int efd = eventfd(0, 0);
  CHECK(write(sv[0], "early", 5) == 5);
  pid_t pid = fork();
  if (pid == 0) {
    char b[5];
    int ok = ReadAll(sv[1], b, 5) == 5 && memcmp(b, "early", 5) == 0 &&
             write(sv[1], "reply", 5) == 5;
    uint64_t one = 1;
    ok = ok && write(efd, &one, sizeof one) == 8;
    _exit(ok ? 0 : 1);
  }
  CHECK(pid > 0);
  char b[8] = {0};
  CHECK(ReadAll(sv[0], b, 5) == 5 && memcmp(b, "reply", 5) == 0);
  uint64_t v = 0;
  CHECK(read(efd, &v, sizeof v) == 8 && v == 1);
  CHECK(Wait(pid) == 0);
  close(sv[0]);
  close(sv[1]);
  close(efd);
}

static void ShellPipeline(void) {
  FILE *expect = popen("ls / | wc -l", "r");
  char want[32] = {0}, got[32] = {0};
  CHECK(expect && fgets(want, sizeof want, expect));
  if (expect) pclose(expect);
  int out[2];
  CHECK(pipe(out) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execlp("sh", "sh", "-c", "ls / | wc -l", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  CHECK(ReadAll(out[0], got, sizeof got - 1) > 0);
  CHECK(strcmp(want, got) == 0);
  CHECK(Wait(pid) == 0);
  close(out[0]);
}

/* clone3's arguments, version 0 (64 bytes), as the kernel reads them. */
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size,
      tls;
};

static void RawProcessesShareAPipe(void) {
  static const char *const kHow[] = {"SYS_fork", "SYS_clone", "SYS_clone3"};
  for (int how = 0; how < 3; ++how) {
    int p[2];
    CHECK(pipe(p) == 0);
    struct CloneArgs args = {.exit_signal = SIGCHLD};
    long pid = how == 0   ? syscall(SYS_fork)
               : how == 1 ? syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L)
                          : syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) {
      char c = (char)('a' + how);
      _exit(write(p[1], &c, 1) == 1 ? 0 : 1);
    }
    if (pid < 0) {
      if (how == 2 && (errno == ENOSYS || errno == EPERM)) {
        printf("skipped: SYS_clone3 refused (errno %d)\n", errno);
      } else {
        printf("FAILED: %s: errno %d\n", kHow[how], errno);
        ++failures;
      }
      close(p[0]);
      close(p[1]);
      continue;
    }
    close(p[1]);
    /* The child's write, or end of file at its exit if it wrote into a
     * copy of the pipe that is not the parent's. */
    char c = 0;
    if (ReadAll(p[0], &c, 1) != 1 || c != 'a' + how) {
      printf("FAILED: %s: the child's byte did not reach the parent\n",
             kHow[how]);
      ++failures;
    }
    CHECK(Wait((pid_t)pid) == 0);
    close(p[0]);
  }
}

static void RawExecvePassesAPipeMadeAfterTheFork(void) {
  int out[2];
  CHECK(pipe(out) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    /* The pipe's read end at 7, the parent's write end at 8 (dash reads
     * one digit), each moved past 30 first so that neither dup2 closes
     * the other. */
    int q[2];
    if (pipe(q) != 0 || write(q[1], "raw exec\n", 9) != 9 || close(q[1]) != 0) {
      _exit(3);
    }
    int r = fcntl(q[0], F_DUPFD, 30), w = fcntl(out[1], F_DUPFD, 30);
    if (r < 0 || w < 0 || dup2(r, 7) != 7 || dup2(w, 8) != 8) _exit(3);
    char *argv[] = {"sh", "-c", "cat <&7 >&8", NULL};
    syscall(SYS_execve, "/bin/sh", argv, environ);
    _exit(127);
  }
  close(out[1]);
  char buf[32] = {0};
  CHECK(ReadAll(out[0], buf, sizeof buf - 1) == 9);
  CHECK(strcmp(buf, "raw exec\n") == 0);
  CHECK(Wait(pid) == 0);
  close(out[0]);
}

static int g_clone_fd = -1;

static int CloneChildWrites(void *arg) {
  (void)arg;
  return write(g_clone_fd, "c", 1) == 1 ? 0 : 1;
}

/* Shares the parent's memory until its exec: only async-signal-safe
 * calls, as after vfork. */
static int CloneChildExecs(void *arg) {
  char *const *argv = arg;
  execve("/bin/sh", argv, environ);
  _exit(127);
}

static int CloneChildDupsAndExecs(void *arg) {
  if (dup2(g_clone_fd, 1) != 1) _exit(3);
  return CloneChildExecs(arg);
}

static void LibcCloneCrosses(void) {
  static char stack[256 * 1024] __attribute__((aligned(16)));
  char *top = stack + sizeof stack;
  /* A child of its own memory; the parent's read ends at the child's
   * exit if the byte went into a copy of the pipe. */
  int p[2];
  CHECK(pipe(p) == 0);
  g_clone_fd = p[1];
  pid_t pid = clone(CloneChildWrites, top, SIGCHLD, NULL);
  CHECK(pid > 0);
  CHECK(close(p[1]) == 0);
  char c = 0;
  CHECK(ReadAll(p[0], &c, 1) == 1 && c == 'c');
  CHECK(Wait(pid) == 0);
  CHECK(close(p[0]) == 0);
  /* A child that execs, sharing memory, with a pipe made since (the
   * clone above converted every object there was); its shell writes
   * into the pipe through the number the parent made non-close-on-exec
   * at 8 (dash reads one digit). */
  CHECK(pipe(p) == 0);
  int w = fcntl(p[1], F_DUPFD, 30);
  CHECK(w >= 0 && dup2(w, 8) == 8 && close(w) == 0);
  char *argv[] = {"sh", "-c", "printf shell >&8", NULL};
  pid = clone(CloneChildExecs, top, CLONE_VM | CLONE_VFORK | SIGCHLD, argv);
  CHECK(pid > 0);
  CHECK(Wait(pid) == 0);
  CHECK(write(p[1], "+parent", 7) == 7);
  CHECK(close(p[1]) == 0 && close(8) == 0);
  char buf[32] = {0};
  CHECK(ReadAll(p[0], buf, sizeof buf - 1) == 12);
  CHECK(strcmp(buf, "shell+parent") == 0);
  close(p[0]);
  /* The usual spawn: a close-on-exec pipe, dup2'ed onto the child's
   * stdout by the child itself. */
  CHECK(pipe2(p, O_CLOEXEC) == 0);
  g_clone_fd = p[1];
  char *argv2[] = {"sh", "-c", "printf stdout", NULL};
  pid = clone(CloneChildDupsAndExecs, top, CLONE_VM | CLONE_VFORK | SIGCHLD,
              argv2);
  CHECK(pid > 0);
  CHECK(Wait(pid) == 0);
  CHECK(close(p[1]) == 0);
  memset(buf, 0, sizeof buf);
  CHECK(ReadAll(p[0], buf, sizeof buf - 1) == 6);
  CHECK(strcmp(buf, "stdout") == 0);
  close(p[0]);
  errno = 0;
  CHECK(clone(NULL, top, SIGCHLD, NULL) == -1 && errno == EINVAL);
}

int main(void) {
  VforkChildChangesOnlyItsOwnTable();
  PosixSpawnDup2sACloexecPipe();
  ForkSharesSocketPairAndEventfd();
  ShellPipeline();
  RawProcessesShareAPipe();
  RawExecvePassesAPipeMadeAfterTheFork();
  LibcCloneCrosses();
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
