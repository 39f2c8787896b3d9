/* libuepoll-interpose.so, the process boundary: fork, vfork, exec and
 * posix_spawn in the interposer's default mode (README.md, "What the
 * default mode does at fork, vfork and exec").
 *
 * uepoll's pipes, socket pairs and eventfds live in this process's memory;
 * the kernel's files are shared by a fork() child and passed on by exec().
 * So at each crossing the objects that cross are turned into the kernel's
 * equivalent objects at the same numbers (uepoll_export_all, kernel/
 * export.h), with their contents, flags and epoll registrations:
 *  - fork(): every one, before libc's fork runs its handlers (and
 *    uepoll_set_fork_mode(UEPOLL_FORK_SHARE), set as the engine comes into
 *    the process (engine.c), catches a fork
 *    that does not come through this symbol), so parent and child share
 *    them; _Fork() (no handlers) converts here too;
 *  - vfork(): a vfork child shares the parent's memory, so its close() and
 *    dup2() would change the parent's uepoll table. vfork is a fork here
 *    (everything converted, as above), and the parent waits until the
 *    child has called exec or exited, as after a vfork (Onload's default);
 *  - exec*(), posix_spawn*(), system(), popen(): the objects that have a
 *    number without FD_CLOEXEC (what the new image inherits), and each
 *    descriptor posix_spawn_file_actions_adddup2 names (glibc's spawn
 *    child makes its dup2 itself, unseen by the interposer);
 *  - the same through syscall() (interpose_syscall.c) and libc's
 *    clone(): SYS_vfork is vfork, SYS_execve and SYS_execveat the exec
 *    above; SYS_fork, and a clone without CLONE_VM, as _Fork; a clone
 *    with CLONE_VM that is not a thread converts every object too, in
 *    the parent (below).
 * UEPOLL_FORK_MODE=copy keeps the copies instead (docs/semantics.md D12).
 *
 * Objects that cannot be converted (epoll instances, timerfds, user
 * objects) cross as before: a copy in a fork child, nothing after exec. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <uepoll/uepoll.h>

#include "interpose/interpose.h"

#define EXPORT __attribute__((visibility("default")))

/* libc's definition of name, looked up on first use (these calls are not
 * in base/libc_calls.h: the engine never makes them). Two threads may look
 * it up at once: each stores the same pointer, atomically. */
#define NEXT(type, name)                                 \
  static type Next_##name(void) {                        \
    static type fn;                                      \
    type f = __atomic_load_n(&fn, __ATOMIC_RELAXED);     \
    if (!f) {                                            \
      void *p = dlsym(RTLD_NEXT, #name);                 \
      memcpy(&f, &p, sizeof p); /* POSIX's dlsym rule */ \
      __atomic_store_n(&fn, f, __ATOMIC_RELAXED);        \
    }                                                    \
    return f;                                            \
  }

typedef pid_t (*fork_fn)(void);
typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvp_fn)(const char *, char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[],
                           int);
typedef int (*spawn_fn)(pid_t *, const char *,
                        const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[],
                        char *const[]);
typedef int (*adddup2_fn)(posix_spawn_file_actions_t *, int, int);
typedef int (*system_fn)(const char *);
typedef FILE *(*popen_fn)(const char *, const char *);
typedef int (*pipe2_fn)(int[2], int);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef int (*close_fn)(int);

NEXT(fork_fn, fork)
NEXT(fork_fn, _Fork)
NEXT(execve_fn, execve)
NEXT(execvp_fn, execvp)
NEXT(execvpe_fn, execvpe)
NEXT(fexecve_fn, fexecve)
NEXT(execveat_fn, execveat)
NEXT(spawn_fn, posix_spawn)
NEXT(spawn_fn, posix_spawnp)
NEXT(adddup2_fn, posix_spawn_file_actions_adddup2)
NEXT(system_fn, system)
NEXT(popen_fn, popen)
NEXT(pipe2_fn, pipe2)
NEXT(read_fn, read)
NEXT(close_fn, close)

/* The calls a fork child makes on its way to an exec, looked up in the
 * parent before it forks. A lookup (dlsym) made in the child is made again
 * by every child, since its result stays in the child's copy of the
 * pointer: a server that forks a CGI child per request would pay, per
 * request, the page faults of running the dynamic loader's lookup code
 * and of writing the pointer's page (BENCHMARKS.md, "What a fork child
 * pays on its way to exec"). Once per process: the pointers then stay
 * set, in the parent and in every later child. */
static atomic_int g_child_calls_ready;

static void ResolveChildCalls(void) {
  if (atomic_load_explicit(&g_child_calls_ready, memory_order_acquire)) return;
  int saved = errno; /* dlsym does not promise to leave it */
  (void)Next_execve();
  (void)Next_execvp();
  (void)Next_execvpe();
  (void)Next_fexecve();
  (void)Next_execveat();
  (void)Next_posix_spawn();
  (void)Next_posix_spawnp();
  (void)Next_posix_spawn_file_actions_adddup2();
  (void)Next_system();
  (void)Next_popen();
  (void)Next_pipe2();
  (void)Next_read();
  (void)Next_close();
  (void)Next__Fork();
  atomic_store_explicit(&g_child_calls_ready, 1, memory_order_release);
  errno = saved;
}

/* Whether what crosses is shared: the fork mode the engine was given when
 * it came into the process (engine.c), and nothing to share before. */
static int Sharing(void) {
  const struct uepoll_engine_calls *e = Engine();
  return e != NULL && e->uepoll_get_fork_mode() == UEPOLL_FORK_SHARE;
}

/* What an exec passes on: every object with an inheritable number. errno
 * is the caller's again afterwards (an exec that succeeds never returns;
 * one that fails sets its own). */
static void ExportInheritable(void) {
  if (!Sharing()) return;
  int saved = errno;
  Engine()->uepoll_export_all(UEPOLL_EXPORT_INHERITABLE);
  errno = saved;
}

/* fork() converts first, then forks: before any pthread_atfork handler
 * (the library's own prepare handler then finds nothing left to do), so
 * that no handler's lock is held while objects convert. */
EXPORT pid_t fork(void) {
  ResolveChildCalls();
  if (Sharing()) {
    int saved = errno;
    Engine()->uepoll_export_all(0);
    errno = saved;
  }
  pid_t pid = Next_fork()();
  if (pid == 0) uepoll_interpose_fork_child();
  return pid;
}

/* _Fork is the fork a signal handler may call: no lookups beyond its own
 * (ResolveChildCalls' dlsym is not async-signal-safe). */
EXPORT pid_t _Fork(void) {
  if (Sharing()) {
    int saved = errno;
    Engine()->uepoll_export_all(0);
    errno = saved;
  }
  pid_t pid = Next__Fork()();
  if (pid == 0) uepoll_interpose_fork_child();
  return pid;
}

/* A new process or image made without libc's fork, vfork or exec:
 * syscall()'s SYS_fork, SYS_clone and SYS_clone3, and libc's clone(). One
 * of its own memory (no CLONE_VM) is made as _Fork makes one: the objects
 * that convert are shared with the child, which runs the fork-child
 * check; nothing else of libc's fork runs, as nothing would have. One
 * that shares memory but is not a thread (CLONE_VM without CLONE_THREAD:
 * a child that execs, as posix_spawn's does) converts every object too,
 * in the parent, first: the child's dup2 of a close-on-exec pipe onto its
 * stdout, and its exec, would otherwise convert in the memory it shares
 * with its parent and give the new kernel descriptors to its own table
 * only (the parent's read end then fails EBADF). */
enum CloneKind { kThread, kProcess, kSharedMemory };

static enum CloneKind KindOf(uint64_t flags) {
  if ((flags & CLONE_VM) == 0) return kProcess;
  return (flags & CLONE_THREAD) ? kThread : kSharedMemory;
}

/* Before the clone; errno is the caller's again afterwards. */
static void BeforeClone(enum CloneKind kind) {
  if (kind == kThread || !Sharing()) return;
  int saved = errno;
  Engine()->uepoll_export_all(0);
  errno = saved;
}

/* libc's syscall(): from libc's table once that is resolved, else looked
 * up here (a library's constructor may fork while another thread
 * resolves the table: interpose.next.forkctor.clone). */
typedef long (*syscall_fn)(long, ...);
NEXT(syscall_fn, syscall)
static syscall_fn RawSyscall(void) {
  if (atomic_load_explicit(&uepoll_interpose_g_once[kOnceLibc],
                           memory_order_acquire) == kOnceDone) {
    return Libc()->syscall;
  }
  return Next_syscall();
}

/* clone3's kind, its flags read with process_vm_readv, so that a bad
 * pointer fails EFAULT in the kernel's clone3, as it would have, instead
 * of faulting here. Where that call is refused (a seccomp filter), a
 * process: converting costs the objects only their speed. */
static enum CloneKind Clone3Kind(long args, long size) {
  if (size < (long)sizeof(uint64_t)) return kThread; /* EINVAL: nothing */
  uint64_t flags = 0;
  struct iovec local = {&flags, sizeof flags};
  struct iovec remote = {(void *)args, sizeof flags};
  long got = RawSyscall()(SYS_process_vm_readv, (long)getpid(), &local, 1L,
                          &remote, 1L, 0L);
  if (got != (long)sizeof flags) return errno == EFAULT ? kThread : kProcess;
  return KindOf(flags);
}

long uepoll_interpose_clone(long n, long a0, long a1, long a2, long a3, long a4,
                            long a5) {
  int saved = errno;
  enum CloneKind kind = n == SYS_fork    ? kProcess
                        : n == SYS_clone ? KindOf((uint64_t)a0)
                                         : Clone3Kind(a0, a1);
  errno = saved;
  BeforeClone(kind);
  long r = RawSyscall()(n, a0, a1, a2, a3, a4, a5);
  if (kind == kProcess && r == 0) uepoll_interpose_fork_child();
  return r;
}

/* libc's clone(): the child of a process clone starts with the fork-child
 * check, then the caller's function, given its argument from the child's
 * copy of this frame. The three optional arguments are read whatever the
 * caller passed, as libc's clone (assembly) reads their registers. */
typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);
NEXT(clone_fn, clone)

struct CloneStart {
  int (*fn)(void *);
  void *arg;
};

static int ProcessCloneStart(void *p) {
  const struct CloneStart *start = p;
  uepoll_interpose_fork_child();
  return start->fn(start->arg);
}

__attribute__((no_sanitize_address)) EXPORT int clone(int (*fn)(void *),
                                                      void *stack, int flags,
                                                      void *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  pid_t *parent_tid = va_arg(ap, pid_t *);
  void *tls = va_arg(ap, void *);
  pid_t *child_tid = va_arg(ap, pid_t *);
  va_end(ap);
  enum CloneKind kind = KindOf((uint64_t)(unsigned)flags);
  /* No function or stack: libc's EINVAL, nothing converted. */
  if (fn == NULL || stack == NULL) kind = kThread;
  BeforeClone(kind);
  if (kind != kProcess) {
    return Next_clone()(fn, stack, flags, arg, parent_tid, tls, child_tid);
  }
  struct CloneStart start = {fn, arg};
  return Next_clone()(ProcessCloneStart, stack, flags, &start, parent_tid, tls,
                      child_tid);
}

/* vfork as fork, the parent held until the child execs or exits: a
 * close-on-exec pipe whose write end only the child keeps, so the parent's
 * read ends (EOF) at the child's exec or exit. */
EXPORT pid_t vfork(void) {
  int p[2];
  int saved = errno;
  if (Next_pipe2()(p, O_CLOEXEC) != 0) {
    ResolveChildCalls();
    errno = saved;
    pid_t pid = Next_fork()();
    if (pid == 0) uepoll_interpose_fork_child();
    return pid;
  }
  pid_t pid = fork(); /* converts, as above */
  int err = errno;
  if (pid == 0) {
    Next_close()(p[0]);
    errno = saved;
    return 0;
  }
  Next_close()(p[1]);
  if (pid > 0) {
    char c;
    while (Next_read()(p[0], &c, 1) < 0 && errno == EINTR) {
    }
  }
  Next_close()(p[0]);
  errno = pid < 0 ? err : saved;
  return pid;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  ExportInheritable();
  return Next_execve()(path, argv, envp);
}
EXPORT int execv(const char *path, char *const argv[]) {
  ExportInheritable();
  return Next_execve()(path, argv, environ);
}
EXPORT int execvp(const char *file, char *const argv[]) {
  ExportInheritable();
  return Next_execvp()(file, argv);
}
EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  ExportInheritable();
  return Next_execvpe()(file, argv, envp);
}
EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  ExportInheritable();
  return Next_fexecve()(fd, argv, envp);
}
EXPORT int execveat(int dirfd, const char *path, char *const argv[],
                    char *const envp[], int flags) {
  ExportInheritable();
  return Next_execveat()(dirfd, path, argv, envp, flags);
}

/* execl, execlp, execle: the arguments into an array, then the v forms
 * above (glibc's call its internal execve, which nothing sees). */
static char **ArgvOf(const char *arg0, va_list ap) {
  va_list count;
  va_copy(count, ap);
  size_t n = 1;
  while (va_arg(count, char *) != NULL) ++n;
  va_end(count);
  char **argv = malloc((n + 1) * sizeof *argv);
  if (!argv) return NULL;
  argv[0] = (char *)arg0;
  for (size_t i = 1; i <= n; ++i) argv[i] = va_arg(ap, char *);
  return argv;
}

EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char **argv = ArgvOf(arg, ap);
  va_end(ap);
  if (!argv) return -1;
  int r = execv(path, argv);
  free(argv);
  return r;
}
EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char **argv = ArgvOf(arg, ap);
  va_end(ap);
  if (!argv) return -1;
  int r = execvp(file, argv);
  free(argv);
  return r;
}
EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  char **argv = ArgvOf(arg, ap);
  char *const *envp = va_arg(ap, char *const *);
  va_end(ap);
  if (!argv) return -1;
  int r = execve(path, argv, envp);
  free(argv);
  return r;
}

EXPORT int posix_spawn(pid_t *pid, const char *path,
                       const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[],
                       char *const envp[]) {
  ExportInheritable();
  return Next_posix_spawn()(pid, path, fa, attr, argv, envp);
}
EXPORT int posix_spawnp(pid_t *pid, const char *file,
                        const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[],
                        char *const envp[]) {
  ExportInheritable();
  return Next_posix_spawnp()(pid, file, fa, attr, argv, envp);
}
/* The spawn child dup2s fd itself, in the kernel: fd must be the kernel's
 * object by then, whatever its FD_CLOEXEC. */
EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa,
                                            int fd, int newfd) {
  if (Sharing() && IsUepoll(fd)) {
    int saved = errno;
    Engine()->uepoll_export_fd(fd);
    errno = saved;
  }
  return Next_posix_spawn_file_actions_adddup2()(fa, fd, newfd);
}
EXPORT int system(const char *command) {
  ExportInheritable();
  return Next_system()(command);
}
EXPORT FILE *popen(const char *command, const char *type) {
  ExportInheritable();
  FILE *f = Next_popen()(command, type);
  /* Its pipe's number is the kernel's: a uepoll object still recorded
   * there is stale (interpose.h). */
  if (f) Fresh(fileno(f));
  return f;
}
