/* The engine's load and attach (src/interpose/engine.c) against what
 * other threads do meanwhile, each case in fresh processes (the engine
 * comes once per process):
 *   dlopen PLUGIN  another thread is inside dlopen of a plugin whose
 *                  constructor makes a pipe, while this thread's first
 *                  epoll_create1 waits for the loader's lock: both finish
 *                  (a lock held across the engine's dlopen deadlocked);
 *   restore N      16 threads save and restore their handlers while the
 *                  first epoll_create1 attaches the engine: the old action
 *                  each gets is its own handler, never the engine's
 *                  trampoline (restoring that made it call itself), each
 *                  handler still runs, and the kernel's action for each is
 *                  not the handler itself (it is wrapped, as one
 *                  installed through the engine); N fresh processes;
 *   fork N         a thread forks while the engine attaches, and each
 *                  child resets a handler: no child hangs in signal(); N
 *                  fresh processes;
 *   handler N      a signal lands while this thread is inside sigaction,
 *                  and its handler makes the first epoll: no hang (the
 *                  attach would wait for the sigaction the handler
 *                  interrupted), and the next epoll_create1 of the thread
 *                  loads the engine; N fresh processes;
 *   nested N       a signal lands while another thread is inside
 *                  sigaction, and its handler calls sigaction once this
 *                  thread's first epoll_create1 waits for that thread:
 *                  both go on at once (an attach that waited holding the
 *                  lock the handler's call takes went on only when it gave
 *                  up waiting, and said so on stderr); N fresh processes;
 *   inflight N     another thread's sigaction installs a handler and is
 *                  held inside libc, before its system call, until this
 *                  thread's first epoll_create1 is attaching the engine
 *                  (a seccomp filter traps the call; the SIGSYS handler
 *                  waits, then makes it): the attach waits for it, so the
 *                  handler ends up wrapped; N fresh processes (x86-64);
 *   abandoned N    a signal handler leaves this thread's sigaction with
 *                  siglongjmp before its system call (a seccomp trap):
 *                  another thread's first epoll_create1 still loads the
 *                  engine, after about a second, and a handler installed
 *                  then is wrapped; N fresh processes (x86-64);
 *   forksig N      another thread calls sigaction over and over while
 *                  this one forks N children, each of which makes the
 *                  first epoll: it loads the engine, and no child waits
 *                  for a sigaction of a thread it does not have (until
 *                  the attach gives up, and says so on stderr).
 * No sleeps: threads wait for each other's progress counters, and the
 * dlopen case polls the waiting thread's state in /proc. alarm() turns a
 * hang into a failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

static int IsUepoll(int fd) {
  int (*f)(int);
  *(void **)&f = dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd");
  return f != NULL && f(fd) == 1;
}

/* ---- dlopen ---------------------------------------------------------- */

static sem_t g_in_ctor;
static atomic_int g_main_loading;
static pid_t g_main_tid;

/* Whether thread tid is asleep (S or D in /proc). */
static int Asleep(pid_t tid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return paren && (paren[2] == 'S' || paren[2] == 'D');
}

/* Called by the plugin's constructor, under the loader's lock: returns
 * once the main thread, inside its first epoll_create1, sleeps (on that
 * lock: nothing else there can block it). */
__attribute__((visibility("default"))) void lazy_races_plugin_hook(void) {
  sem_post(&g_in_ctor);
  while (!atomic_load(&g_main_loading)) sched_yield();
  while (!Asleep(g_main_tid)) sched_yield();
}

static void *OpenPlugin(void *path) {
  return dlopen((const char *)path, RTLD_NOW | RTLD_LOCAL);
}

static int DlopenCase(const char *plugin) {
  alarm(30);
  g_main_tid = gettid();
  sem_init(&g_in_ctor, 0, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, OpenPlugin, (void *)plugin) != 0) return 1;
  while (sem_wait(&g_in_ctor) != 0 && errno == EINTR) {
  }
  atomic_store(&g_main_loading, 1);
  int ep = epoll_create1(0);
  void *handle = NULL;
  pthread_join(t, &handle);
  if (handle == NULL) {
    fprintf(stderr, "FAIL: dlopen %s: %s\n", plugin, dlerror());
    return 1;
  }
  int *result = dlsym(handle, "lazy_plugin_pipe_result");
  int *fds = dlsym(handle, "lazy_plugin_fds");
  char c = 0;
  if (ep < 0 || !IsUepoll(ep) || !result || *result != 0 || !fds ||
      !IsUepoll(fds[0]) || write(fds[1], "p", 1) != 1 ||
      read(fds[0], &c, 1) != 1 || c != 'p') {
    fprintf(stderr, "FAIL: ep %d (uepoll %d), plugin pipe %d\n", ep,
            ep >= 0 && IsUepoll(ep), result ? *result : -3);
    return 1;
  }
  /* Every object released before exit (LeakSanitizer checks at exit). */
  if (close(fds[0]) != 0 || close(fds[1]) != 0 || close(ep) != 0) {
    fprintf(stderr, "FAIL: close\n");
    return 1;
  }
  return 0;
}

/* ---- restore ----------------------------------------------------------- */

enum { kThreads = 16 };
static atomic_int g_stop, g_iterations[kThreads], g_foreign, g_runs;
static void OnSignal(int sig) {
  (void)sig;
  atomic_fetch_add(&g_runs, 1);
}

static void *SaveAndRestore(void *arg) {
  int i = (int)(long)arg, sig = SIGRTMIN + i;
  struct sigaction ign, old;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  while (!atomic_load(&g_stop)) {
    sigaction(sig, &ign, &old);
    if (old.sa_handler != OnSignal) atomic_store(&g_foreign, 1);
    sigaction(sig, &old, NULL);
    atomic_fetch_add(&g_iterations[i], 1);
  }
  return NULL;
}

static void WaitForIterations(int at_least_more_than[kThreads]) {
  for (int i = 0; i < kThreads; ++i) {
    while (atomic_load(&g_iterations[i]) <= at_least_more_than[i] + 1) {
      sched_yield();
    }
  }
}

/* The handler the kernel holds for sig, read past the interposer (a raw
 * rt_sigaction is not interposed). */
static void (*KernelHandler(int sig))(int) {
  struct {
    void (*handler)(int);
    unsigned long flags;
    void *restorer;
    unsigned long mask;
  } k;
  if (syscall(SYS_rt_sigaction, sig, NULL, &k, sizeof k.mask) != 0) {
    return NULL;
  }
  return k.handler;
}

static int RestoreOnce(void) {
  alarm(30);
  for (int i = 0; i < kThreads; ++i) signal(SIGRTMIN + i, OnSignal);
  pthread_t t[kThreads];
  int seen[kThreads] = {0};
  for (long i = 0; i < kThreads; ++i) {
    if (pthread_create(&t[i], NULL, SaveAndRestore, (void *)i) != 0) return 1;
  }
  WaitForIterations(seen); /* every thread is in its loop */
  int ep = epoll_create1(0);
  for (int i = 0; i < kThreads; ++i) seen[i] = atomic_load(&g_iterations[i]);
  WaitForIterations(seen); /* and went round after the attach */
  atomic_store(&g_stop, 1);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
  int raw = 0; /* handlers the kernel calls directly: left unwrapped */
  for (int i = 0; i < kThreads; ++i) {
    raw += KernelHandler(SIGRTMIN + i) == OnSignal;
  }
  for (int i = 0; i < kThreads; ++i) raise(SIGRTMIN + i);
  if (ep < 0 || !IsUepoll(ep) || atomic_load(&g_foreign) ||
      atomic_load(&g_runs) != kThreads || raw != 0) {
    fprintf(stderr,
            "FAIL: ep %d, foreign old action %d, handlers ran %d/%d, "
            "unwrapped %d\n",
            ep, atomic_load(&g_foreign), atomic_load(&g_runs), kThreads, raw);
    return 1;
  }
  return 0;
}

/* ---- fork -------------------------------------------------------------- */

static atomic_int g_forks, g_hung;
static void *ForkLoop(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(10);
      signal(SIGPIPE, SIG_DFL);
      _exit(0);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
      atomic_store(&g_hung, 2);
      break;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) atomic_store(&g_hung, 1);
    atomic_fetch_add(&g_forks, 1);
  }
  return NULL;
}

static void Ignore(int sig) { (void)sig; }

static int ForkOnce(void) {
  alarm(60);
  for (int s = 1; s < 32; ++s) {
    if (s != SIGKILL && s != SIGSTOP && s != SIGALRM && s != SIGCHLD &&
        s != SIGSEGV && s != SIGABRT)
      signal(s, Ignore);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, ForkLoop, NULL) != 0) return 1;
  while (atomic_load(&g_forks) < 1) sched_yield();
  int ep = epoll_create1(0);
  int at = atomic_load(&g_forks);
  while (atomic_load(&g_forks) < at + 2 && !atomic_load(&g_hung)) {
    sched_yield();
  }
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
  if (ep < 0 || !IsUepoll(ep) || atomic_load(&g_hung)) {
    fprintf(stderr, "FAIL: ep %d, a child %s\n", ep,
            atomic_load(&g_hung) == 1 ? "hung or failed" : "was not reaped");
    return 1;
  }
  return 0;
}

/* ---- handler ------------------------------------------------------- */

static atomic_int g_handler_ep = -2, g_queries;
static pthread_t g_main_thread;

static void MakeEpollInHandler(int sig) {
  (void)sig;
  int saved = errno;
  if (atomic_load(&g_handler_ep) == -2) {
    atomic_store(&g_handler_ep, epoll_create1(0));
  }
  errno = saved;
}

static void *SignalMain(void *arg) {
  (void)arg;
  while (atomic_load(&g_queries) < 100) sched_yield();
  pthread_kill(g_main_thread, SIGUSR1);
  return NULL;
}

/* 1 if the handler's epoll landed inside a sigaction (the kernel's: the
 * engine is not loaded from there), 0 if outside it, -1 on failure. */
static int HandlerOnce(void) {
  alarm(10);
  g_main_thread = pthread_self();
  signal(SIGUSR1, MakeEpollInHandler);
  pthread_t t;
  if (pthread_create(&t, NULL, SignalMain, NULL) != 0) return -1;
  struct sigaction cur;
  while (atomic_load(&g_handler_ep) == -2) {
    sigaction(SIGUSR2, NULL, &cur); /* the engine is not in yet */
    atomic_fetch_add(&g_queries, 1);
  }
  pthread_join(t, NULL);
  int hep = atomic_load(&g_handler_ep);
  int inside = hep >= 0 && !IsUepoll(hep);
  int ep = epoll_create1(0);
  if (hep < 0 || ep < 0 || !IsUepoll(ep)) {
    fprintf(stderr, "FAIL: the handler's epoll %d, the next %d (uepoll %d)\n",
            hep, ep, ep >= 0 && IsUepoll(ep));
    return -1;
  }
  close(hep);
  close(ep);
  return inside;
}

/* Each run reports by exit status: 0 inside, 1 outside, 2 failed. */
static int HandlerCase(int n) {
  int inside = 0, failed = 0;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      int r = HandlerOnce();
      _exit(r < 0 ? 2 : r == 1 ? 0 : 1);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return 1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      ++inside;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 1) {
      fprintf(stderr, "run %d: %s %d\n", i,
              WIFSIGNALED(st) ? "killed by signal" : "exit status",
              WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
      ++failed;
    }
  }
  printf("handler: %d of %d runs' handlers ran inside a sigaction\n", inside,
         n);
  /* A run whose signal landed between two sigactions tests nothing. */
  if (failed || inside == 0) {
    fprintf(stderr, "FAIL: %d of %d runs failed, %d inside\n", failed, n,
            inside);
    return 1;
  }
  return 0;
}

/* ---- nested -------------------------------------------------------- */

static atomic_int g_in_handler, g_started, g_handler_done;

static void SigactionInHandler(int sig) {
  (void)sig;
  int saved = errno;
  atomic_store(&g_in_handler, 1);
  while (!atomic_load(&g_started)) sched_yield();
  /* This thread's sigaction, interrupted, holds the attach back (which
   * then sleeps); or it had left, and the attach finished and the main
   * thread sleeps in pthread_join. */
  while (!Asleep(g_main_tid)) sched_yield();
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  if (sigaction(SIGUSR2, &dfl, NULL) == 0) atomic_store(&g_handler_done, 1);
  errno = saved;
}

static void *QueryUntilStopped(void *arg);

/* Sends stderr to a temporary file until SaidGaveUp reads it: 0, or -1. */
static int CaptureStderr(FILE **err, int *saved_stderr) {
  *err = tmpfile();
  *saved_stderr = dup(2);
  if (*err == NULL || *saved_stderr < 0) return -1;
  return dup2(fileno(*err), 2) == 2 ? 0 : -1;
}

/* What the interposer said on stderr meanwhile: the attach's line for a
 * sigaction it gave up waiting for means it waited for the handler while
 * the handler waited for it. */
static int SaidGaveUp(FILE *err, int saved_stderr) {
  char said[1024];
  fflush(stderr);
  dup2(saved_stderr, 2);
  long n = pread(fileno(err), said, sizeof said - 1, 0);
  said[n > 0 ? n : 0] = '\0';
  if (strstr(said, "in flight")) {
    fprintf(stderr, "FAIL: the attach gave up waiting: %s", said);
    return 1;
  }
  return 0;
}

static int NestedOnce(void) {
  alarm(10);
  FILE *err;
  int saved_stderr;
  if (CaptureStderr(&err, &saved_stderr) != 0) return 1;
  g_main_tid = gettid();
  /* Once now: the interposer's fopen looks libc's up at its first call,
   * which would wait for the loader's lock the attach holds. */
  (void)Asleep(g_main_tid);
  signal(SIGUSR1, SigactionInHandler);
  pthread_t t;
  if (pthread_create(&t, NULL, QueryUntilStopped, NULL) != 0) return 1;
  while (atomic_load(&g_queries) < 100) sched_yield();
  pthread_kill(t, SIGUSR1);
  while (!atomic_load(&g_in_handler)) sched_yield();
  atomic_store(&g_started, 1);
  int ep = epoll_create1(0);
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
  if (SaidGaveUp(err, saved_stderr)) return 1;
  if (ep < 0 || !IsUepoll(ep) || !atomic_load(&g_handler_done)) {
    fprintf(stderr, "FAIL: ep %d (uepoll %d), the handler's sigaction %d\n", ep,
            ep >= 0 && IsUepoll(ep), atomic_load(&g_handler_done));
    return 1;
  }
  close(ep);
  return 0;
}

/* ---- inflight ------------------------------------------------------ */

#if defined(__x86_64__)
static atomic_int g_trapped;

/* A system call past every library (the SIGSYS handler's). */
static long RawSyscall4(long n, long a, long b, long c, long d) {
  long r;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(r)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return r;
}

/* Makes the trapped call, with an old-action pointer the filter lets
 * through, and returns its result. */
static void MakeTrapped(ucontext_t *uc) {
  unsigned long old[4];
  uc->uc_mcontext.gregs[REG_RAX] =
      RawSyscall4(SYS_rt_sigaction, uc->uc_mcontext.gregs[REG_RDI],
                  uc->uc_mcontext.gregs[REG_RSI], (long)old,
                  uc->uc_mcontext.gregs[REG_R10]);
}

/* The trapped rt_sigaction(SIGRTMIN, act, NULL): the first waits until
 * the main thread sleeps (in the attach's wait for this call, or, had the
 * attach not waited, in pthread_join), then each is made as asked. */
static void OnTrap(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)si;
  ucontext_t *uc = ctx;
  if (atomic_exchange(&g_trapped, 1) == 0) {
    while (!atomic_load(&g_started)) sched_yield();
    while (!Asleep(g_main_tid)) sched_yield();
  }
  MakeTrapped(uc);
}

/* Traps rt_sigaction(SIGRTMIN, non-null act, NULL old) on every thread,
 * into on_trap (a SIGSYS handler): 0, or -1 (said on stderr). */
static int TrapInstallsOfSigrtmin(void (*on_trap)(int, siginfo_t *, void *)) {
  struct sigaction trap;
  memset(&trap, 0, sizeof trap);
  trap.sa_sigaction = on_trap;
  trap.sa_flags = SA_SIGINFO;
  if (sigaction(SIGSYS, &trap, NULL) != 0) {
    perror("FAIL: SIGSYS handler");
    return -1;
  }
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 11),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigaction, 0, 9),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)SIGRTMIN, 0, 7),
      /* act: a stack or data address, never below 4 GiB here. */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
               offsetof(struct seccomp_data, args) + 8 + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, 0),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
               offsetof(struct seccomp_data, args) + 16),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
               offsetof(struct seccomp_data, args) + 16 + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
              &prog) != 0) {
    perror("FAIL: seccomp filter");
    return -1;
  }
  return 0;
}

static void *InstallOnSignal(void *arg) {
  (void)arg;
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = OnSignal;
  return (void *)(long)sigaction(SIGRTMIN, &act, NULL);
}

static int InflightOnce(void) {
  alarm(10);
  g_main_tid = gettid();
  (void)Asleep(g_main_tid); /* fopen's look-up of libc, now (nested) */
  if (TrapInstallsOfSigrtmin(OnTrap) != 0) return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, InstallOnSignal, NULL) != 0) return 1;
  while (!atomic_load(&g_trapped)) sched_yield();
  atomic_store(&g_started, 1);
  int ep = epoll_create1(0);
  void *r = NULL;
  pthread_join(t, &r);
  int raw = KernelHandler(SIGRTMIN) == OnSignal;
  raise(SIGRTMIN);
  if (ep < 0 || !IsUepoll(ep) || r != NULL || raw ||
      atomic_load(&g_runs) != 1) {
    fprintf(stderr,
            "FAIL: ep %d (uepoll %d), sigaction %ld, handler unwrapped %d, "
            "ran %d\n",
            ep, ep >= 0 && IsUepoll(ep), (long)r, raw, atomic_load(&g_runs));
    return 1;
  }
  close(ep);
  return 0;
}
#endif

/* ---- abandoned ----------------------------------------------------- */

#if defined(__x86_64__)
static sigjmp_buf g_jump;
static atomic_int g_jumped;

/* The first trapped call is left: the handler jumps out of it, as a
 * program's timeout handler may out of any async-signal-safe call. */
static void JumpOutOfTrap(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)si;
  if (!atomic_exchange(&g_jumped, 1)) siglongjmp(g_jump, 1);
  MakeTrapped(ctx);
}

static void *CreateEpoll(void *arg) {
  (void)arg;
  return (void *)(long)epoll_create1(0);
}

static int AbandonedOnce(void) {
  alarm(20);
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_handler = OnSignal;
  if (TrapInstallsOfSigrtmin(JumpOutOfTrap) != 0) return 1;
  if (sigsetjmp(g_jump, 1) == 0) {
    sigaction(SIGRTMIN, &act, NULL);
    fprintf(stderr, "FAIL: the trapped sigaction returned\n");
    return 1;
  }
  /* Another thread's first epoll (this one's share of the count is left
   * for good, and it makes the kernel's objects until the engine is in). */
  pthread_t t;
  void *r = NULL;
  if (pthread_create(&t, NULL, CreateEpoll, NULL) != 0) return 1;
  pthread_join(t, &r);
  int ep = (int)(long)r;
  int installed = sigaction(SIGRTMIN, &act, NULL);
  int raw = KernelHandler(SIGRTMIN) == OnSignal;
  raise(SIGRTMIN);
  if (ep < 0 || !IsUepoll(ep) || installed != 0 || raw ||
      atomic_load(&g_runs) != 1) {
    fprintf(stderr,
            "FAIL: ep %d (uepoll %d), sigaction %d, handler unwrapped %d, "
            "ran %d\n",
            ep, ep >= 0 && IsUepoll(ep), installed, raw, atomic_load(&g_runs));
    return 1;
  }
  close(ep);
  return 0;
}
#endif

/* ---- forksig ------------------------------------------------------- */

static void *QueryUntilStopped(void *arg) {
  (void)arg;
  struct sigaction cur;
  while (!atomic_load(&g_stop)) {
    sigaction(SIGUSR2, NULL, &cur);
    atomic_fetch_add(&g_queries, 1);
  }
  return NULL;
}

static int ForkSigCase(int n) {
  pthread_t t;
  if (pthread_create(&t, NULL, QueryUntilStopped, NULL) != 0) return 1;
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    int at = atomic_load(&g_queries);
    while (atomic_load(&g_queries) < at + 2) sched_yield(); /* in its loop */
    pid_t pid = fork();
    if (pid == 0) {
      alarm(10);
      FILE *err;
      int saved_stderr;
      if (CaptureStderr(&err, &saved_stderr) != 0) _exit(1);
      int ep = epoll_create1(0);
      if (SaidGaveUp(err, saved_stderr)) _exit(1);
      _exit(ep >= 0 && IsUepoll(ep) ? 0 : 1);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
      failed = n;
      break;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "child %d: %s %d\n", i,
              WIFSIGNALED(st) ? "killed by signal" : "exit status",
              WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
      failed = 1;
      break; /* one is enough: a hang costs its alarm */
    }
  }
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
  if (failed) fprintf(stderr, "FAIL: a child of %d\n", n);
  return failed != 0;
}

/* Runs once(...) in n fresh processes; the parent makes no uepoll object,
 * so each child starts without the engine. */
static int Repeat(int n, int (*once)(void)) {
  int failed = 0;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) _exit(once());
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return 1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "run %d: %s %d\n", i,
              WIFSIGNALED(st) ? "killed by signal" : "exit status",
              WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
      ++failed;
      break; /* one is enough: a hang costs its alarm */
    }
  }
  if (failed) fprintf(stderr, "FAIL: a run of %d\n", n);
  return failed != 0;
}

/* The cases but dlopen: each runs once() in N fresh processes (Repeat),
 * or run(N) itself; neither where it needs x86-64 (skipped). */
static const struct {
  const char *name;
  int (*once)(void);
  int (*run)(int n);
} kCases[] = {
    {"restore", RestoreOnce, NULL},   {"fork", ForkOnce, NULL},
    {"handler", NULL, HandlerCase},   {"nested", NestedOnce, NULL},
#if defined(__x86_64__)
    {"inflight", InflightOnce, NULL}, {"abandoned", AbandonedOnce, NULL},
#else
    {"inflight", NULL, NULL},       {"abandoned", NULL, NULL},
#endif
    {"forksig", NULL, ForkSigCase},
};

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "dlopen") == 0) {
    int r = DlopenCase(argv[2]);
    if (r == 0) puts("PASS dlopen");
    return r;
  }
  for (size_t i = 0; argc == 3 && i < sizeof kCases / sizeof kCases[0]; ++i) {
    if (strcmp(argv[1], kCases[i].name) != 0) continue;
    if (!kCases[i].once && !kCases[i].run) {
      printf("SKIP %s: x86-64 only\n", kCases[i].name);
      return 77;
    }
    int n = atoi(argv[2]);
    int r = kCases[i].once ? Repeat(n, kCases[i].once) : kCases[i].run(n);
    if (r == 0) printf("PASS %s\n", kCases[i].name);
    return r;
  }
  fprintf(stderr,
          "usage: %s dlopen PLUGIN | restore N | fork N | handler N | "
          "nested N | inflight N | abandoned N | forksig N\n",
          argv[0]);
  return 2;
}
