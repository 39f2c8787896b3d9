/* libevent (Debian's libevent_core and libevent_pthreads, unmodified) on
 * the epoll backend, watching the harness's sources with
 * EV_READ|EV_PERSIST events, half of them EV_ET, and woken from the writer
 * thread with event_active (libevent's notification eventfd). See
 * harness.h. */
#include <event2/event.h>
#include <event2/thread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static struct Harness h;
static struct event_base *base;
static struct event *wake;

static void OnRead(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  if (!(what & EV_READ)) HarnessFail(&h, "event what %#x", (unsigned)what);
  HarnessDrain(&h, arg);
}

static void OnWake(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  if (HarnessAsync(&h)) event_base_loopbreak(base);
}

static void OnWatchdog(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  (void)arg;
  HarnessFail(&h, "the loop still runs after 120 s");
  event_base_loopbreak(base);
}

static void Send(void *ctx) { event_active(ctx, EV_READ, 1); }

int main(int argc, char **argv) {
  struct event *ev[kMaxSources];
  HarnessInit(&h, "libevent", argc, argv);
  if (evthread_use_pthreads() != 0) {
    HarnessFail(&h, "evthread_use_pthreads");
    return 1;
  }
  struct event_config *cfg = event_config_new();
  event_config_avoid_method(cfg, "select");
  event_config_avoid_method(cfg, "poll");
  base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  if (!base || strcmp(event_base_get_method(base), "epoll") != 0) {
    HarnessFail(&h, "no epoll backend");
    return 1;
  }
  HarnessOpen(&h);
  for (int i = 0; i < h.nsrc; ++i) {
    short what = EV_READ | EV_PERSIST | (h.src[i].edge ? EV_ET : 0);
    ev[i] = event_new(base, h.src[i].rfd, what, OnRead, &h.src[i]);
    if (!ev[i] || event_add(ev[i], NULL) != 0) {
      HarnessFail(&h, "event_add %s", h.src[i].name);
      return 1;
    }
  }
  wake = event_new(base, -1, 0, OnWake, NULL);
  struct event *watchdog = evtimer_new(base, OnWatchdog, NULL);
  struct timeval limit = {120, 0};
  evtimer_add(watchdog, &limit);
  h.async_send = Send;
  h.async_ctx = wake;
  HarnessCheckObjects(&h, 1);

  HarnessStartWriter(&h);
  event_base_dispatch(base);
  HarnessJoinWriter(&h);

  int status = HarnessFinish(&h);
  for (int i = 0; i < h.nsrc; ++i) event_free(ev[i]);
  event_free(wake);
  event_free(watchdog);
  HarnessCloseSources(&h);
  event_base_free(base);
  libevent_global_shutdown();
  if (HarnessCheckNoUepollLeft(&h)) status = 1;
  printf("libevent: %s\n", status ? "FAILED" : "passed");
  return status;
}
