/* libev (Debian's libev.so.4, unmodified) on the epoll backend, watching
 * the harness's sources with ev_io and woken from the writer thread with
 * ev_async (libev's own eventfd). See harness.h. */
#include <ev.h>
#include <stdio.h>

#include "harness.h"

static struct Harness h;
static struct ev_loop *loop;
static ev_async wake;
static ev_timer watchdog;
static ev_io io[kMaxSources];

static void OnIo(struct ev_loop *l, ev_io *w, int revents) {
  (void)l;
  if (!(revents & EV_READ)) HarnessFail(&h, "ev_io revents %#x", revents);
  HarnessDrain(&h, w->data);
}

static void OnWake(struct ev_loop *l, ev_async *w, int revents) {
  (void)w;
  (void)revents;
  if (HarnessAsync(&h)) ev_break(l, EVBREAK_ALL);
}

static void OnWatchdog(struct ev_loop *l, ev_timer *w, int revents) {
  (void)w;
  (void)revents;
  HarnessFail(&h, "the loop still runs after 120 s");
  ev_break(l, EVBREAK_ALL);
}

static void Send(void *ctx) { ev_async_send(ctx, &wake); }

int main(int argc, char **argv) {
  HarnessInit(&h, "libev", argc, argv);
  loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
  if (!loop || ev_backend(loop) != EVBACKEND_EPOLL) {
    HarnessFail(&h, "no epoll backend");
    return 1;
  }
  HarnessOpen(&h);
  for (int i = 0; i < h.nsrc; ++i) {
    ev_io_init(&io[i], OnIo, h.src[i].rfd, EV_READ);
    io[i].data = &h.src[i];
    ev_io_start(loop, &io[i]);
  }
  ev_async_init(&wake, OnWake);
  ev_async_start(loop, &wake);
  ev_timer_init(&watchdog, OnWatchdog, 120., 0.);
  ev_timer_start(loop, &watchdog);
  h.async_send = Send;
  h.async_ctx = loop;
  HarnessCheckObjects(&h, 1);

  HarnessStartWriter(&h);
  ev_run(loop, 0);
  HarnessJoinWriter(&h);

  int status = HarnessFinish(&h);
  for (int i = 0; i < h.nsrc; ++i) ev_io_stop(loop, &io[i]);
  ev_async_stop(loop, &wake);
  ev_timer_stop(loop, &watchdog);
  HarnessCloseSources(&h);
  ev_loop_destroy(loop);
  if (HarnessCheckNoUepollLeft(&h)) status = 1;
  printf("libev: %s\n", status ? "FAILED" : "passed");
  return status;
}
