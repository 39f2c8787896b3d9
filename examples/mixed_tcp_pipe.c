/* mixed_tcp_pipe: one uepoll instance watching a kernel TCP socket and
 * uepoll pipes, with handlers in an array indexed by descriptor.
 *
 * A client connects to a TCP listener on loopback and sends lines; the
 * server side forwards each line through a uepoll pipe to a "worker" end,
 * which answers back over the socket. Every call is the epoll code a program
 * already has, renamed: uepoll_accept does not exist and is not needed,
 * because the kernel's sockets go through the same uepoll_* calls as
 * uepoll's own pipes, and uepoll descriptors are ordinary small numbers, so
 * the handler table needs no translation.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <uepoll/uepoll.h>

#define MAX_FDS 1024 /* as FD_SETSIZE: uepoll numbers are small */
#define LINES 100

enum role { NONE, LISTENER, CONN, PIPE_OUT, CLIENT };
static enum role roles[MAX_FDS];

static int fail(const char *what) {
  fprintf(stderr, "mixed_tcp_pipe: %s: %s\n", what, strerror(errno));
  return 1;
}

static int watch(int ep, int fd, enum role r) {
  struct epoll_event ev;
  if (fd < 0 || fd >= MAX_FDS) return -1;
  roles[fd] = r;
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  return uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

int main(void) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int ep, lst, cli, conn = -1, p[2], sent = 0, answered = 0;
  char buf[64];

  ep = uepoll_epoll_create1(EPOLL_CLOEXEC);
  lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); /* the kernel's */
  if (ep < 0 || lst < 0) return fail("create");
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lst, (struct sockaddr *)&addr, sizeof addr) != 0 ||
      listen(lst, 4) != 0 ||
      getsockname(lst, (struct sockaddr *)&addr, &len) != 0) {
    return fail("listen");
  }
  cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (cli < 0 || connect(cli, (struct sockaddr *)&addr, sizeof addr) != 0) {
    return fail("connect");
  }
  if (uepoll_pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) return fail("pipe2");
  if (watch(ep, lst, LISTENER) || watch(ep, p[0], PIPE_OUT) ||
      watch(ep, cli, CLIENT)) {
    return fail("epoll_ctl");
  }
  if (uepoll_write(cli, "line\n", 5) != 5) return fail("write");
  sent = 1;

  while (answered < LINES) {
    struct epoll_event evs[8];
    int i, n = uepoll_epoll_wait(ep, evs, 8, 2000);
    if (n <= 0) return n ? fail("epoll_wait") : fail("timeout");
    for (i = 0; i < n; ++i) {
      int fd = evs[i].data.fd;
      ssize_t r;
      switch (roles[fd]) {
        case LISTENER: /* a kernel socket, accepted as usual */
          conn = accept4(lst, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (conn < 0 || watch(ep, conn, CONN)) return fail("accept");
          break;
        case CONN: /* kernel socket -> uepoll pipe */
          r = uepoll_read(fd, buf, sizeof buf);
          if (r <= 0) return fail("read conn");
          if (uepoll_write(p[1], buf, (size_t)r) != r) return fail("to pipe");
          break;
        case PIPE_OUT: /* uepoll pipe -> back over the kernel socket */
          r = uepoll_read(fd, buf, sizeof buf);
          if (r <= 0) return fail("read pipe");
          if (uepoll_write(conn, buf, (size_t)r) != r) return fail("answer");
          break;
        case CLIENT: /* the answer arrived: send the next line */
          r = uepoll_read(fd, buf, sizeof buf);
          if (r <= 0) return fail("read client");
          answered += (int)(r / 5);
          if (sent < LINES && uepoll_write(cli, "line\n", 5) == 5) ++sent;
          break;
        default:
          fprintf(stderr, "mixed_tcp_pipe: event for unknown fd %d\n", fd);
          return 1;
      }
    }
  }
  uepoll_close(conn);
  uepoll_close(cli);
  uepoll_close(lst);
  uepoll_close(p[0]);
  uepoll_close(p[1]);
  uepoll_close(ep);
  printf("mixed_tcp_pipe: %d lines through a kernel socket and a uepoll pipe\n",
         answered);
  return answered == LINES ? 0 : 1;
}
