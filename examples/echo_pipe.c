/* echo_pipe: an epoll event loop, written against uepoll.
 *
 * A uepoll pipe's read end is registered with a uepoll epoll instance; each
 * message written to the write end is picked up by the reader when
 * epoll_wait reports it readable. Closing the write end then shows up as
 * EPOLLHUP and read() returns 0, as with a kernel pipe.
 *
 * The code is plain epoll code with each call renamed: uepoll_pipe2 for
 * pipe2, uepoll_epoll_wait for epoll_wait, and so on. Constants and types
 * (O_NONBLOCK, EPOLLIN, struct epoll_event) are the libc ones.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <uepoll/uepoll.h>

static int fail(const char *what) {
  fprintf(stderr, "echo_pipe: %s: %s\n", what, strerror(errno));
  return 1;
}

/* Waits up to one second for one event on ep; returns its mask, or 0 on
 * error or timeout (reported). */
static unsigned wait_one(int ep) {
  struct epoll_event ev;
  int n = uepoll_epoll_wait(ep, &ev, 1, 1000);
  if (n < 0) {
    fail("epoll_wait");
    return 0;
  }
  if (n == 0) {
    fprintf(stderr, "echo_pipe: epoll_wait timed out\n");
    return 0;
  }
  return ev.events;
}

int main(void) {
  static const char *const messages[] = {"hello", "from", "uepoll"};
  const size_t count = sizeof messages / sizeof messages[0];
  struct epoll_event reg;
  char buf[64];
  int fds[2];
  int ep;
  size_t i;
  ssize_t n;
  unsigned events;

  if (uepoll_pipe2(fds, O_NONBLOCK) != 0) return fail("pipe2");
  ep = uepoll_epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return fail("epoll_create1");
  memset(&reg, 0, sizeof reg);
  reg.events = EPOLLIN;
  reg.data.fd = fds[0];
  if (uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &reg) != 0) {
    return fail("epoll_ctl");
  }
  printf("echo_pipe: pipe %d -> %d watched by epoll instance %d\n", fds[1],
         fds[0], ep);

  for (i = 0; i < count; i++) {
    size_t len = strlen(messages[i]);
    if (uepoll_write(fds[1], messages[i], len) != (ssize_t)len) {
      return fail("write");
    }
    events = wait_one(ep);
    if (!(events & EPOLLIN)) return 1;
    n = uepoll_read(fds[0], buf, sizeof buf - 1);
    if (n < 0) return fail("read");
    buf[n] = '\0';
    printf("echo_pipe: EPOLLIN, read %zd bytes: \"%s\"\n", n, buf);
  }

  /* Drained: a nonblocking read now fails EAGAIN. */
  if (uepoll_read(fds[0], buf, sizeof buf) != -1 || errno != EAGAIN) {
    fprintf(stderr, "echo_pipe: expected EAGAIN from an empty pipe\n");
    return 1;
  }

  if (uepoll_close(fds[1]) != 0) return fail("close");
  events = wait_one(ep);
  if (!(events & EPOLLHUP)) {
    fprintf(stderr, "echo_pipe: no EPOLLHUP after closing the writer\n");
    return 1;
  }
  if (uepoll_read(fds[0], buf, sizeof buf) != 0) {
    fprintf(stderr, "echo_pipe: expected end of file\n");
    return 1;
  }
  printf("echo_pipe: writer closed: EPOLLHUP, read returns 0\n");

  if (uepoll_close(fds[0]) != 0 || uepoll_close(ep) != 0) {
    return fail("close");
  }
  printf("echo_pipe: moved %u messages through a uepoll pipe\n",
         (unsigned)count);
  return 0;
}
