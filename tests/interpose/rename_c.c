/* A plain epoll program: nothing in it names uepoll. Built twice: as it
 * is (the kernel's objects) and with `-include uepoll/rename.h` (uepoll's,
 * with the kernel's datagram socketpair passed through); the expectations
 * are the same, and the renamed build also checks whose objects they are. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;
static void Check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "FAIL line %d: %s (errno: %s)\n", line, what,
            strerror(errno));
    ++failures;
  }
}
#define CHECK(cond) Check((cond), #cond, __LINE__)
#ifdef UEPOLL_RENAME_H_
#define CHECK_OWNER(fd, is_uepoll) CHECK(uepoll_is_uepoll_fd(fd) == (is_uepoll))
#else
#define CHECK_OWNER(fd, is_uepoll) ((void)0)
#endif

enum { kPipe, kPipe2, kEventfd, kStream, kDgram, kTimer, kSources };

int main(void) {
  int p[2], q[2], s[2], d[2];
  int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  CHECK(pipe(p) == 0);
  CHECK(pipe2(q, O_NONBLOCK) == 0);
  int e = eventfd(0, EFD_NONBLOCK);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, s) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, d) == 0);
  int t = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  CHECK(e >= 0 && t >= 0);
  CHECK_OWNER(ep, 1);
  CHECK_OWNER(p[0], 1);
  CHECK_OWNER(q[1], 1);
  CHECK_OWNER(e, 1);
  CHECK_OWNER(s[0], 1);
  CHECK_OWNER(t, 1);
  CHECK_OWNER(d[0], 0);

  /* fcntl (2 and 3 arguments), dup, dup3, close: the copy is the object. */
  CHECK(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == 0);
  int x = dup(p[0]);
  CHECK(x >= 0);
  int y = fcntl(x, F_DUPFD, 200);
  CHECK(y >= 200);
  CHECK(dup3(x, y, O_CLOEXEC) == y);
  CHECK(fcntl(y, F_GETFD) == FD_CLOEXEC);
  CHECK(close(p[0]) == 0 && close(x) == 0);
  p[0] = dup2(y, p[0]);
  CHECK(p[0] >= 0 && close(y) == 0);
  CHECK((fcntl(p[0], F_GETFL) & O_NONBLOCK) != 0);

  int rfd[kSources] = {p[0], q[0], e, s[0], d[0], t};
  for (int i = 0; i < kSources; ++i) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, rfd[i], &ev) == 0);
  }
  CHECK(write(p[1], "a", 1) == 1);
  CHECK(write(q[1], "bc", 2) == 2);
  CHECK(eventfd_write(e, 3) == 0);
  CHECK(write(s[1], "xyz", 3) == 3);
  CHECK(write(d[1], "dg", 2) == 2);
  struct itimerspec soon = {.it_value = {.tv_nsec = 1000000}};
  CHECK(timerfd_settime(t, 0, &soon, NULL) == 0);

  /* Each source reports EPOLLIN once, and is drained when it does. */
  const ssize_t want[kSources] = {1, 2, 8, 3, 2, 8};
  int seen[kSources] = {0};
  int total = 0;
  while (total < kSources) {
    struct epoll_event evs[8];
    int n = epoll_wait(ep, evs, 8, 10000);
    CHECK(n > 0);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      uint32_t k = evs[i].data.u32;
      CHECK(k < kSources && evs[i].events == EPOLLIN);
      if (k >= kSources) continue;
      ++seen[k];
      ++total;
      char buf[16];
      CHECK(read(rfd[k], buf, sizeof buf) == want[k]);
    }
  }
  for (int i = 0; i < kSources; ++i) CHECK(seen[i] == 1);
  uint64_t v;
  CHECK(eventfd_read(e, &v) == -1 && errno == EAGAIN);

  /* Everything drained: poll sees nothing; then the stream's end of file. */
  struct pollfd pfd[kSources];
  for (int i = 0; i < kSources; ++i) {
    pfd[i].fd = rfd[i];
    pfd[i].events = POLLIN;
  }
  CHECK(poll(pfd, kSources, 0) == 0);
  /* fork(): the child has the objects (uepoll's are copies, the kernel's
   * are shared) and uses them on its own; the parent's are still empty
   * afterwards either way. */
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    struct epoll_event ev;
    char b[4];
    int ok = write(q[1], "cd", 2) == 2 && epoll_wait(ep, &ev, 1, 10000) == 1 &&
             ev.data.u32 == kPipe2 && read(q[0], b, sizeof b) == 2 &&
             close(q[0]) == 0 && epoll_wait(ep, &ev, 1, 0) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(poll(pfd, kSources, 0) == 0);
  char c;
  CHECK(write(q[1], "e", 1) == 1 && read(q[0], &c, 1) == 1 && c == 'e');

  /* The I/O surface: vectored, socket and select calls on the objects. */
  {
    char a[2] = {'v', 'w'}, b[3] = {'x', 'y', 'z'}, got[8] = {0};
    struct iovec out[2] = {{a, 2}, {b, 3}};
    CHECK(writev(q[1], out, 2) == 5);
    int avail = -1;
    CHECK(ioctl(q[0], FIONREAD, &avail) == 0 && avail == 5);
    struct iovec in[2] = {{got, 1}, {got + 1, 7}};
    CHECK(readv(q[0], in, 2) == 5 && memcmp(got, "vwxyz", 5) == 0);
    CHECK(send(s[1], "ok", 2, MSG_NOSIGNAL) == 2);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(s[0], &rs);
    struct timeval tv = {10, 0};
    CHECK(select(s[0] + 1, &rs, NULL, NULL, &tv) == 1 && FD_ISSET(s[0], &rs));
    CHECK(recv(s[0], got, sizeof got, MSG_PEEK) == 2);
    struct iovec one = {got, sizeof got};
    struct msghdr mh = {.msg_iov = &one, .msg_iovlen = 1};
    CHECK(recvmsg(s[0], &mh, 0) == 2 && memcmp(got, "ok", 2) == 0);
    struct iovec two = {"ok", 2};
    struct mmsghdr batch[2] = {{.msg_hdr = {.msg_iov = &two, .msg_iovlen = 1}},
                               {.msg_hdr = {.msg_iov = &two, .msg_iovlen = 1}}};
    CHECK(sendmmsg(s[1], batch, 2, 0) == 2 && batch[1].msg_len == 2);
    batch[0].msg_hdr = mh;
    batch[1].msg_hdr = mh;
    CHECK(recvmmsg(s[0], batch, 2, MSG_WAITFORONE, NULL) == 1 &&
          batch[0].msg_len == 4);
  }

  /* The calls any descriptor gets: stat, socket options and names. */
  {
    struct stat st, st2;
    CHECK(fstat(p[0], &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(fstat(p[1], &st2) == 0 && st2.st_ino == st.st_ino);
    CHECK(fstatat(s[0], "", &st, AT_EMPTY_PATH) == 0 && S_ISSOCK(st.st_mode));
    struct statfs sfs;
    struct statvfs sv;
    CHECK(fstatfs(p[0], &sfs) == 0 && sfs.f_type == 0x50495045);
    CHECK(fstatvfs(e, &sv) == 0 && sv.f_namemax == 255);
    CHECK(posix_fadvise(p[0], 0, 0, POSIX_FADV_SEQUENTIAL) == ESPIPE);
    CHECK(fallocate(e, 0, 0, 1) == -1 && errno == ENODEV);
    CHECK(syncfs(s[0]) == 0);
    int type = 0;
    socklen_t len = sizeof type;
    CHECK(getsockopt(s[0], SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
          type == SOCK_STREAM);
    struct sockaddr_storage ss;
    len = sizeof ss;
    CHECK(getsockname(s[0], (struct sockaddr *)&ss, &len) == 0 &&
          ss.ss_family == AF_UNIX);
    char b2[4];
    CHECK(pread(q[0], b2, 1, 0) == -1 && errno == ESPIPE);
    CHECK(lseek(q[0], 0, SEEK_CUR) == -1 && errno == ESPIPE);
    CHECK(lseek(e, 0, SEEK_CUR) == 0);
    CHECK(fsync(s[0]) == -1 && errno == EINVAL);
    CHECK(fdatasync(e) == -1 && errno == EINVAL);
  }

  CHECK(shutdown(s[1], SHUT_WR) == 0);
  CHECK(poll(&pfd[kStream], 1, 10000) == 1 && pfd[kStream].revents == POLLIN);
  CHECK(read(s[0], &c, 1) == 0);

  int all[] = {ep, p[0], p[1], q[0], q[1], e, s[0], s[1], d[0], d[1], t};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
    CHECK(close(all[i]) == 0);
  CHECK(close(ep) == -1 && errno == EBADF);
  printf("%s: %s\n",
#ifdef UEPOLL_RENAME_H_
         "renamed",
#else
         "kernel",
#endif
         failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
