/* A program built as distributions build theirs (-O2 -D_FORTIFY_SOURCE=2):
 * read, pread, recv, recvfrom, poll, ppoll, FD_SET and open become glibc's
 * fortified entry points (__read_chk, __recv_chk, __poll_chk, __fdelt_chk,
 * __open_2...), which call glibc's internal functions. Run as it is and
 * under libuepoll-interpose.so, with the same expectations; argv[1] says
 * whose objects they must be. CMakeLists.txt checks that the binary calls
 * the fortified names. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#if !defined(__OPTIMIZE__) || _FORTIFY_SOURCE < 2
#error "built without -O2 -D_FORTIFY_SOURCE=2"
#endif

static int failures;
#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "FAIL line %d: %s (errno: %s)\n", __LINE__, #cond, \
              strerror(errno));                                          \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

/* uepoll_is_uepoll_fd, looked up at each call: the interposer brings
 * uepoll into the process at the first object (src/interpose/engine.c). */
static int IsUepollNow(int fd) {
  int (*f)(int);
  *(void **)&f = dlsym(RTLD_DEFAULT, "uepoll_is_uepoll_fd");
  return f ? f(fd) : 0;
}

int main(int argc, char **argv) {
  int expect_uepoll = argc == 2 && strcmp(argv[1], "uepoll") == 0;
  int (*is_uepoll)(int);
  is_uepoll = IsUepollNow;
  int sv[2], p[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  CHECK(pipe(p) == 0);
  CHECK((is_uepoll ? is_uepoll(sv[0]) : 0) == expect_uepoll);
  CHECK((is_uepoll ? is_uepoll(p[0]) : 0) == expect_uepoll);
  char buf[16];
  /* Counts the compiler cannot see: the fortified paths. */
  volatile size_t n16 = sizeof buf, n2 = 2;
  volatile nfds_t two = 2;
  CHECK(write(p[1], "abc", 3) == 3);
  CHECK(read(p[0], buf, n16) == 3);       /* __read_chk */
  CHECK(pread(p[0], buf, n16, 0) == -1 && /* __pread_chk */
        errno == ESPIPE);
  CHECK(send(sv[0], "hello", 5, 0) == 5);
  struct pollfd fds[2] = {{sv[1], POLLIN, 0}, {p[0], POLLIN, 0}};
  CHECK(poll(fds, two, 1000) == 1 && fds[0].revents == POLLIN); /* __poll_chk */
  struct timespec ts = {1, 0};
  CHECK(ppoll(fds, two, &ts, NULL) == 1); /* __ppoll_chk */
  CHECK(recv(sv[1], buf, n2, 0) == 2);    /* __recv_chk */
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  CHECK(recvfrom(sv[1], buf, n16, 0, (struct sockaddr *)&ss, &len) ==
        3); /* __recvfrom_chk */
  fd_set rs;
  FD_ZERO(&rs);
  FD_SET(sv[1], &rs); /* __fdelt_chk */
  FD_SET(p[0], &rs);
  CHECK(send(sv[0], "x", 1, 0) == 1);
  struct timeval tv = {1, 0};
  CHECK(select((sv[1] > p[0] ? sv[1] : p[0]) + 1, &rs, NULL, NULL, &tv) == 1);
  CHECK(FD_ISSET(sv[1], &rs) && !FD_ISSET(p[0], &rs));
  volatile int flags = O_RDONLY | O_CLOEXEC; /* __open_2 */
  int f = open("/dev/null", flags);
  CHECK(f >= 0);
  close(f);
  for (int i = 0; i < 2; ++i) {
    CHECK(close(sv[i]) == 0);
    CHECK(close(p[i]) == 0);
  }
  printf("fortify (%s): %s\n", argv[1] ? argv[1] : "?",
         failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
