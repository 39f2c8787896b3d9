/* An out-of-tree program that uses an installed uepoll: built by
 * tests/consumer against the tree `cmake --install` produces, once through
 * find_package(uepoll) and once through pkg-config. Plain C99, so that the
 * public C header is checked to serve C programs as installed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <uepoll/uepoll.h>

int main(void) {
  int fd = uepoll_eventfd(0, EFD_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    fprintf(stderr, "consumer: uepoll_eventfd: %s (errno %d)\n", strerror(err),
            err);
    return 1;
  }
  if (!uepoll_is_uepoll_fd(fd)) {
    fprintf(stderr, "consumer: fd %d is outside uepoll's range\n", fd);
    return 1;
  }
  if (uepoll_close(fd) != 0) {
    int err = errno;
    fprintf(stderr, "consumer: uepoll_close(%d): %s (errno %d)\n", fd,
            strerror(err), err);
    return 1;
  }
  printf("consumer: opened and closed uepoll eventfd %d\n", fd);
  return 0;
}
