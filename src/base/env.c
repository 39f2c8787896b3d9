/* env.c: see env.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "base/env.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A system call with up to four arguments, made here: -errno on failure,
 * and errno untouched. Neither libc's syscall() (the interposer defines
 * that name, and its table may be what is being resolved) nor a libc
 * wrapper (a sanitizer's interceptor, before its runtime is up). */
static long Raw(long nr, long a, long b, long c, long d) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = d;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
                   : "memory");
  return x0;
#else
  (void)nr, (void)a, (void)b, (void)c, (void)d;
  return -ENOSYS;
#endif
}

/* The initial environment's entries are NUL-terminated NAME=value
 * strings, read a chunk at a time: each entry is matched against "name="
 * byte by byte, skipped to its end at the first difference, and copied
 * out once "name=" has matched. The first entry that matches is the
 * answer, as getenv's is. */
static int FromInitialEnvironment(const char *name, char *buf, size_t len) {
  long fd = Raw(SYS_openat, AT_FDCWD, (long)"/proc/self/environ",
                O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return -1;
  enum { kMatching, kSkipping, kCopying } state = kMatching;
  size_t name_len = 0; /* by hand: no libc call before libc's start-up */
  while (name[name_len] != '\0') ++name_len;
  size_t matched = 0; /* bytes of "name=" matched in this entry */
  size_t copied = 0;  /* bytes of the value copied to buf */
  int result = 0;
  char chunk[512];
  for (;;) {
    long n = Raw(SYS_read, fd, (long)chunk, sizeof chunk, 0);
    if (n == -EINTR) continue;
    if (n < 0) {
      result = -1;
      break;
    }
    if (n == 0) {
      /* A last entry without its NUL still ends at the end. */
      if (state == kCopying) {
        buf[copied] = '\0';
        result = 1;
      }
      break;
    }
    for (long i = 0; i < n && result == 0; ++i) {
      char c = chunk[i];
      if (state == kCopying) {
        if (c == '\0') {
          buf[copied] = '\0';
          result = 1;
        } else if (copied + 1 >= len) {
          result = -2;
        } else {
          buf[copied++] = c;
        }
      } else if (c == '\0') {
        state = kMatching;
        matched = 0;
      } else if (state == kMatching) {
        char want = matched < name_len ? name[matched] : '=';
        if (c != want) {
          state = kSkipping;
        } else if (++matched > name_len) {
          state = kCopying;
        }
      }
    }
    if (result != 0) break;
  }
  (void)Raw(SYS_close, fd, 0, 0, 0);
  return result;
}

/* libc's start-up sets environ, then its program name (glibc's
 * __libc_init_first: the name is "" until then, argv[0] after). */
static int LibcStarted(void) {
  return environ != NULL || program_invocation_name[0] != '\0';
}

int uepoll_env_get(const char *name, char *buf, size_t len) {
  if (len == 0) return -2;
  if (!LibcStarted()) return FromInitialEnvironment(name, buf, len);
  const char *v = getenv(name);
  if (v == NULL) return 0;
  size_t n = strlen(v);
  if (n >= len) return -2;
  memcpy(buf, v, n + 1);
  return 1;
}
