/* vpoll_device: a virtual device in mask mode (uepoll_vpoll_create).
 *
 * A "device" thread owns a mask-mode descriptor and sets its readiness
 * directly: EPOLLIN when it has a message for the reader, EPOLLPRI for an
 * urgent one, EPOLLRDHUP and then EPOLLHUP when it shuts down. The main
 * thread runs an ordinary epoll loop on it and acknowledges each event
 * by clearing the bit it handled (the device waits for that before it
 * goes on). The loop sees exactly the bits the device set, as it would see
 * a socket's.
 *
 * Exits 0 if the loop saw the device's events in order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <uepoll/uepoll.h>

static int device_fd;
static int ack_ep; /* the device waits here for the loop's acknowledgement */
static int ack_fd;

static const uint32_t script[] = {EPOLLIN, EPOLLIN,    EPOLLPRI,
                                  EPOLLIN, EPOLLRDHUP, EPOLLHUP};
#define NSTEPS (sizeof script / sizeof script[0])

static void *device(void *arg) {
  size_t i;
  (void)arg;
  for (i = 0; i < NSTEPS; ++i) {
    struct epoll_event ev;
    if (uepoll_vpoll_ctl(device_fd, UEPOLL_VPOLL_ADDEVENTS, script[i]) != 0)
      return "vpoll_ctl";
    if (script[i] == EPOLLHUP) break; /* the last one needs no ack */
    if (uepoll_epoll_wait(ack_ep, &ev, 1, 10000) != 1) return "ack wait";
    if (uepoll_vpoll_ctl(ack_fd, UEPOLL_VPOLL_DELEVENTS, EPOLLIN) != 0)
      return "ack clear";
  }
  return NULL;
}

int main(void) {
  struct epoll_event ev;
  pthread_t t;
  void *err = NULL;
  size_t seen = 0;
  int ep;

  device_fd = uepoll_vpoll_create(0, O_NONBLOCK);
  ack_fd = uepoll_vpoll_create(0, O_NONBLOCK);
  ep = uepoll_epoll_create1(0);
  ack_ep = uepoll_epoll_create1(0);
  if (device_fd < 0 || ack_fd < 0 || ep < 0 || ack_ep < 0) {
    fprintf(stderr, "vpoll_device: create: %s\n", strerror(errno));
    return 1;
  }
  ev.events = EPOLLIN | EPOLLPRI | EPOLLRDHUP; /* ERR and HUP always */
  ev.data.fd = device_fd;
  uepoll_epoll_ctl(ep, EPOLL_CTL_ADD, device_fd, &ev);
  ev.events = EPOLLIN;
  ev.data.fd = ack_fd;
  uepoll_epoll_ctl(ack_ep, EPOLL_CTL_ADD, ack_fd, &ev);

  pthread_create(&t, NULL, device, NULL);
  while (seen < NSTEPS) {
    uint32_t bit;
    if (uepoll_epoll_wait(ep, &ev, 1, 10000) != 1) {
      fprintf(stderr, "vpoll_device: no event after %zu steps\n", seen);
      return 1;
    }
    /* Level-triggered: exactly the bits set now. One is new each step. */
    bit = ev.events;
    if (bit != script[seen]) {
      fprintf(stderr, "vpoll_device: step %zu: got 0x%x, want 0x%x\n", seen,
              (unsigned)bit, (unsigned)script[seen]);
      return 1;
    }
    printf("vpoll_device: %s\n", bit == EPOLLIN      ? "message"
                                 : bit == EPOLLPRI   ? "urgent message"
                                 : bit == EPOLLRDHUP ? "device closing"
                                                     : "device gone");
    ++seen;
    if (bit == EPOLLHUP) break;
    /* Handled: clear the bit, then let the device go on. */
    uepoll_vpoll_ctl(device_fd, UEPOLL_VPOLL_DELEVENTS, bit);
    uepoll_vpoll_ctl(ack_fd, UEPOLL_VPOLL_ADDEVENTS, EPOLLIN);
  }
  pthread_join(t, &err);
  if (err) {
    fprintf(stderr, "vpoll_device: device thread: %s failed\n", (char *)err);
    return 1;
  }
  uepoll_close(ep);
  uepoll_close(ack_ep);
  uepoll_close(ack_fd);
  uepoll_close(device_fd);
  return seen == NSTEPS ? 0 : 1;
}
