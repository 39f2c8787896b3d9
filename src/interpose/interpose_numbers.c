/* The calls that hand out new kernel numbers, for stale uepoll objects.
 *
 * A uepoll number is a placeholder in the kernel's table. When the
 * placeholder is closed behind uepoll's back (by a close libc makes
 * internally, fclose of an fdopen'ed number, a raw system call), the
 * kernel may give the number to its next new file while uepoll still maps
 * it to the object. Every call here is libc's, then Fresh (interpose.h):
 * the stale object loses the number, as a close would, and calls on the
 * number reach the kernel's new file (docs/semantics.md D16). The other
 * number-returning paths are the constructors in interpose.c (in the modes
 * where they make the kernel's objects), recvmsg over a kernel socket, the
 * dups (the engine's own ForgetOrphan) and syscall() (interpose_syscall.c).
 *
 * What is not seen: numbers libc hands out internally without the public
 * name (opendir, getaddrinfo's sockets, ...) unless listed here by the
 * public function that returns them.
 */
/* Before any system header: the GNU declarations (interpose.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "interpose/interpose.h"

/* X(return type, name, parameter list): libc's definitions of the names
 * this file defines, resolved as interpose.c resolves its own. */
#define NUMBER_CALLS(X)                                       \
  X(int, openat, (int, const char *, int, ...))               \
  X(int, __open_2, (const char *, int))                       \
  X(int, __open64_2, (const char *, int))                     \
  X(int, __openat_2, (int, const char *, int))                \
  X(int, __openat64_2, (int, const char *, int))              \
  X(int, creat, (const char *, mode_t))                       \
  X(int, accept, (int, struct sockaddr *, socklen_t *))       \
  X(int, accept4, (int, struct sockaddr *, socklen_t *, int)) \
  X(int, signalfd, (int, const sigset_t *, int))              \
  X(int, inotify_init, (void))                                \
  X(int, inotify_init1, (int))                                \
  X(int, memfd_create, (const char *, unsigned int))          \
  X(int, pidfd_open, (pid_t, unsigned int))                   \
  X(int, mkstemp, (char *))                                   \
  X(int, mkostemp, (char *, int))                             \
  X(int, posix_openpt, (int))                                 \
  X(FILE *, fopen, (const char *, const char *))              \
  X(FILE *, fopen64, (const char *, const char *))            \
  X(FILE *, freopen, (const char *, const char *, FILE *))    \
  X(FILE *, tmpfile, (void))                                  \
  X(FILE *, popen, (const char *, const char *))              \
  X(DIR *, opendir, (const char *))

static struct {
#define MEMBER(ret, name, params) ret(*name) params;
  NUMBER_CALLS(MEMBER)
#undef MEMBER
} g_next;

static void *MissingPointer(void) {
  errno = ENOSYS;
  return NULL;
}

static void ResolveNext(void) {
  int saved = errno;
  static const char *const kNames[] = {
#define NAME(ret, name, params) #name,
      NUMBER_CALLS(NAME)
#undef NAME
  };
  void *found[sizeof kNames / sizeof kNames[0]];
  uepoll_interpose_next_symbols(kNames, found, sizeof kNames / sizeof *kNames);
  size_t i = 0;
#define RESOLVE(ret, name, params)                                           \
  {                                                                          \
    void *p = found[i++];                                                    \
    if (p) {                                                                 \
      memcpy(&g_next.name, &p, sizeof p);                                    \
    } else if (__builtin_types_compatible_p(ret, int)) {                     \
      g_next.name =                                                          \
          (__typeof__(g_next.name))(void (*)(void))uepoll_interpose_missing; \
    } else {                                                                 \
      g_next.name = (__typeof__(g_next.name))(void (*)(void))MissingPointer; \
    }                                                                        \
  }
  NUMBER_CALLS(RESOLVE)
#undef RESOLVE
  errno = saved;
}

#define Next() (Once(kOnceNext, ResolveNext), &g_next)

/* In the constructor, with libc's table: a fork child then never resolves
 * (next_symbols.c). */
void uepoll_interpose_resolve_numbers(void) { Once(kOnceNext, ResolveNext); }

static FILE *FreshFile(FILE *f) {
  if (f) Fresh(fileno(f));
  return f;
}

/* open's mode argument exists when the flags create a file. */
static int NeedsMode(int flags) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

/* Declares `mode`: open's variadic mode argument, read only when the flags
 * say it was passed (after `flags`, the last named parameter). */
#define OPEN_MODE(mode, flags) \
  mode_t mode = 0;             \
  if (NeedsMode(flags)) {      \
    va_list ap;                \
    va_start(ap, flags);       \
    mode = va_arg(ap, mode_t); \
    va_end(ap);                \
  }

EXPORT int open(const char *path, int flags, ...) {
  OPEN_MODE(mode, flags);
  return Fresh(Libc()->open(path, flags, mode));
}
EXPORT int open64(const char *path, int flags, ...) {
  OPEN_MODE(mode, flags);
  return Fresh(Libc()->open(path, flags, mode));
}
EXPORT int openat(int dirfd, const char *path, int flags, ...) {
  OPEN_MODE(mode, flags);
  return Fresh(Next()->openat(dirfd, path, flags, mode));
}
EXPORT int openat64(int dirfd, const char *path, int flags, ...) {
  OPEN_MODE(mode, flags);
  return Fresh(Next()->openat(dirfd, path, flags, mode));
}
/* The fortified opens (_FORTIFY_SOURCE, flags without O_CREAT). */
EXPORT int __open_2(const char *path, int flags) {
  return Fresh(Next()->__open_2(path, flags));
}
EXPORT int __open64_2(const char *path, int flags) {
  return Fresh(Next()->__open64_2(path, flags));
}
EXPORT int __openat_2(int dirfd, const char *path, int flags) {
  return Fresh(Next()->__openat_2(dirfd, path, flags));
}
EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
  return Fresh(Next()->__openat64_2(dirfd, path, flags));
}
EXPORT int creat(const char *path, mode_t mode) {
  return Fresh(Next()->creat(path, mode));
}
EXPORT int creat64(const char *path, mode_t mode) {
  return Fresh(Next()->creat(path, mode));
}

EXPORT int socket(int domain, int type, int protocol) {
  return Fresh(Libc()->socket(domain, type, protocol));
}
/* accept on a uepoll object: a socket pair's socket never listens
 * (unix_accept: EOPNOTSUPP for a datagram socket, EINVAL otherwise);
 * anything else is not a socket. */
static int AcceptUepoll(int fd) {
  int type;
  socklen_t len = sizeof type;
  /* Reached only for a uepoll number: the engine is in the process. */
  if (Engine()->uepoll_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return -1;
  errno = type == SOCK_DGRAM ? EOPNOTSUPP : EINVAL;
  return -1;
}
EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len) {
  if (IsUepoll(fd)) return AcceptUepoll(fd);
  return Fresh(Next()->accept(fd, addr.__sockaddr__, len));
}
EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags) {
  if (IsUepoll(fd)) return AcceptUepoll(fd);
  return Fresh(Next()->accept4(fd, addr.__sockaddr__, len, flags));
}
/* signalfd with a number changes that signalfd: only -1 makes one. */
EXPORT int signalfd(int fd, const sigset_t *mask, int flags) {
  if (fd != -1 && IsUepoll(fd)) {
    errno = EINVAL; /* not a signalfd */
    return -1;
  }
  int r = Next()->signalfd(fd, mask, flags);
  return fd == -1 ? Fresh(r) : r;
}
EXPORT int inotify_init(void) { return Fresh(Next()->inotify_init()); }
EXPORT int inotify_init1(int flags) {
  return Fresh(Next()->inotify_init1(flags));
}
EXPORT int memfd_create(const char *name, unsigned int flags) {
  return Fresh(Next()->memfd_create(name, flags));
}
EXPORT int pidfd_open(pid_t pid, unsigned int flags) {
  return Fresh(Next()->pidfd_open(pid, flags));
}
EXPORT int mkstemp(char *tmpl) { return Fresh(Next()->mkstemp(tmpl)); }
EXPORT int mkstemp64(char *tmpl) { return Fresh(Next()->mkstemp(tmpl)); }
EXPORT int mkostemp(char *tmpl, int flags) {
  return Fresh(Next()->mkostemp(tmpl, flags));
}
EXPORT int mkostemp64(char *tmpl, int flags) {
  return Fresh(Next()->mkostemp(tmpl, flags));
}
EXPORT int posix_openpt(int flags) {
  return Fresh(Next()->posix_openpt(flags));
}

EXPORT FILE *fopen(const char *path, const char *mode) {
  return FreshFile(Next()->fopen(path, mode));
}
EXPORT FILE *fopen64(const char *path, const char *mode) {
  return FreshFile(Next()->fopen64(path, mode));
}
EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream) {
  return FreshFile(Next()->freopen(path, mode, stream));
}
EXPORT FILE *tmpfile(void) { return FreshFile(Next()->tmpfile()); }
EXPORT FILE *tmpfile64(void) { return FreshFile(Next()->tmpfile()); }
/* popen is crossing.c's: it exports what the child inherits first, then
 * releases a stale object at the pipe's number. */
EXPORT DIR *opendir(const char *name) {
  DIR *d = Next()->opendir(name);
  if (d) Fresh(dirfd(d));
  return d;
}
