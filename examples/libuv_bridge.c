/* A libuv loop drives uepoll objects through one watchable uepoll instance.
 *
 * uepoll_epoll_make_watchable makes the instance's own number readable to
 * the kernel (and so to libuv, which polls it like a socket) exactly while
 * the instance has events. The loop watches that one number; its callback
 * harvests the instance with a zero timeout and serves the uepoll objects
 * inside, which another thread fills without a system call per event.
 *
 * Here: a uepoll pipe carries numbered messages and a uepoll eventfd
 * counts them; the program checks that every message arrived once, in
 * order, and exits 0. */
#define _POSIX_C_SOURCE 200809L /* uv.h needs POSIX's types under -std=c99 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <uv.h>

#include <uepoll/uepoll.h>

#define MESSAGES 10000

struct bridge {
  int ep;               /* the watchable instance: what libuv watches */
  int pipe_rd, pipe_wr; /* inside it, with efd */
  int efd;
  uint64_t next;  /* the next message number expected on the pipe */
  uint64_t count; /* what efd counted */
  int bad;
};

static void *produce(void *arg) {
  struct bridge *b = arg;
  uint64_t i, one = 1;
  for (i = 0; i < MESSAGES; ++i) {
    /* The pipe's write end blocks while the pipe is full. */
    if (uepoll_write(b->pipe_wr, &i, sizeof i) != sizeof i ||
        uepoll_write(b->efd, &one, sizeof one) != sizeof one)
      return b; /* failed */
  }
  return NULL;
}

/* libuv says the instance is readable: harvest it without waiting. */
static void on_ready(uv_poll_t *h, int status, int events) {
  struct bridge *b = h->data;
  struct epoll_event ev[16];
  int i, n = status == 0 ? uepoll_epoll_wait(b->ep, ev, 16, 0) : -1;
  (void)events;
  if (n < 0) b->bad = 1;
  for (i = 0; i < n; ++i) {
    if (ev[i].data.fd == b->pipe_rd) {
      uint64_t msg[64];
      ssize_t k, r = uepoll_read(b->pipe_rd, msg, sizeof msg);
      for (k = 0; k < r / 8; ++k)
        if (msg[k] != b->next++) b->bad = 1;
    } else {
      uint64_t c = 0;
      if (uepoll_read(b->efd, &c, sizeof c) != sizeof c) b->bad = 1;
      b->count += c;
    }
  }
  /* Level-triggered: while events remain, libuv calls again. */
  if (b->bad || (b->next == MESSAGES && b->count == MESSAGES)) {
    uv_poll_stop(h);
    uv_close((uv_handle_t *)h, NULL);
  }
}

int main(void) {
  struct bridge b = {0};
  struct epoll_event ev = {0};
  int p[2];
  uv_loop_t loop;
  uv_poll_t watch;
  pthread_t producer;
  void *failed;

  b.ep = uepoll_epoll_create1(EPOLL_CLOEXEC);
  if (b.ep < 0 || uepoll_epoll_make_watchable(b.ep) < 0) return 1;
  if (uepoll_pipe2(p, O_CLOEXEC) < 0) return 1;
  b.pipe_rd = p[0];
  b.pipe_wr = p[1];
  uepoll_fcntl(b.pipe_rd, F_SETFL, O_NONBLOCK); /* the loop never blocks */
  b.efd = uepoll_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ev.events = EPOLLIN;
  ev.data.fd = b.pipe_rd;
  uepoll_epoll_ctl(b.ep, EPOLL_CTL_ADD, b.pipe_rd, &ev);
  ev.data.fd = b.efd;
  uepoll_epoll_ctl(b.ep, EPOLL_CTL_ADD, b.efd, &ev);

  uv_loop_init(&loop);
  uv_poll_init(&loop, &watch, b.ep); /* the instance's own number */
  watch.data = &b;
  uv_poll_start(&watch, UV_READABLE, on_ready);
  pthread_create(&producer, NULL, produce, &b);
  uv_run(&loop, UV_RUN_DEFAULT); /* until on_ready closes the handle */
  pthread_join(producer, &failed);
  if (failed) b.bad = 1;
  uv_loop_close(&loop);

  uepoll_close(b.pipe_rd);
  uepoll_close(b.pipe_wr);
  uepoll_close(b.efd);
  uepoll_close(b.ep);
  printf("libuv_bridge: %llu messages, %llu counted%s\n",
         (unsigned long long)b.next, (unsigned long long)b.count,
         b.bad ? ", FAILED" : "");
  return b.bad || b.next != MESSAGES || b.count != MESSAGES;
}
