// Bad input to the source, descriptor and I/O calls of uepoll.h (eventfd,
// pipe, pipe2, socketpair, shutdown, read, write, close, dup, dup2, dup3,
// fcntl, poll): one row per errno path, and success rows for errno.
#include <limits.h>
#include <stdint.h>

#include <uepoll/uepoll.h>

#include "badinput/bad_input.h"

namespace uepoll_test {
namespace {

#define CALL(expr)     \
  [](Env& e) -> long { \
    (void)e;           \
    return (expr);     \
  }

int Made(Env& e, int fd) {
  e.made->push_back(fd);
  return fd;
}
long Pair(Env& e, int domain, int type, int protocol) {
  int sv[2];
  long r = e.b->socketpair(domain, type, protocol, sv);
  if (r == 0) {
    Made(e, sv[0]);
    Made(e, sv[1]);
  }
  return r;
}
long Pipe2(Env& e, int flags) {
  int p[2];
  long r = e.b->pipe2(p, flags);
  if (r == 0) {
    Made(e, p[0]);
    Made(e, p[1]);
  }
  return r;
}
long Read(Env& e, int fd, size_t n) {
  char buf[16];
  return e.b->read(fd, buf, n);
}
long Write(Env& e, int fd, size_t n) {
  char buf[16] = {1};
  return e.b->write(fd, buf, n);
}
long WriteCount(Env& e, int fd, uint64_t v) {
  return e.b->write(fd, &v, sizeof v);
}
long PollOne(Env& e, int fd, nfds_t n) {
  struct pollfd p = {fd, POLLIN, 0};
  return e.b->poll(&p, n, 0);
}

constexpr size_t kHuge = size_t{1} << 62;

const BadRow kEventfd[] = {
    {"eventfd flags 2", CALL(e.b->eventfd(0, 2)), EINVAL},
    {"eventfd flags O_APPEND", CALL(e.b->eventfd(0, O_APPEND)), EINVAL},
    {"eventfd flags -1", CALL(e.b->eventfd(1, -1)), EINVAL},
    {"eventfd flags O_RDWR|NONBLOCK",
     CALL(e.b->eventfd(0, O_RDWR | EFD_NONBLOCK)), EINVAL},
};

const BadRow kPipe[] = {
    {"pipe NULL", CALL(e.b->pipe(nullptr)), EFAULT},
    {"pipe2 NULL", CALL(e.b->pipe2(nullptr, 0)), EFAULT},
    {"pipe2 flags O_APPEND", CALL(Pipe2(e, O_APPEND)), EINVAL},
    {"pipe2 flags -1", CALL(Pipe2(e, -1)), EINVAL},
    {"pipe2 flags checked before NULL", CALL(e.b->pipe2(nullptr, O_APPEND)),
     EINVAL},
};

const BadRow kSocketpair[] = {
    {"socketpair AF_INET", CALL(Pair(e, AF_INET, SOCK_STREAM, 0)), EOPNOTSUPP},
    {"socketpair domain 12345", CALL(Pair(e, 12345, SOCK_STREAM, 0)),
     EAFNOSUPPORT},
    {"socketpair domain -1", CALL(Pair(e, -1, SOCK_STREAM, 0)), EAFNOSUPPORT},
    {"socketpair type 99", CALL(Pair(e, AF_UNIX, 99, 0)), EINVAL},
    {"socketpair type 12", CALL(Pair(e, AF_UNIX, 12, 0)), EINVAL},
    {"socketpair type -1", CALL(Pair(e, AF_UNIX, -1, 0)), EINVAL},
    {"socketpair type 7", CALL(Pair(e, AF_UNIX, 7, 0)), ESOCKTNOSUPPORT},
    {"socketpair type flag 0x1000",
     CALL(Pair(e, AF_UNIX, SOCK_STREAM | 0x1000, 0)), EINVAL},
    {"socketpair protocol 5", CALL(Pair(e, AF_UNIX, SOCK_STREAM, 5)),
     EPROTONOSUPPORT},
    {"socketpair NULL", CALL(e.b->socketpair(AF_UNIX, SOCK_STREAM, 0, nullptr)),
     EFAULT},
    // The kernel stores the descriptor numbers before it creates sockets.
    {"socketpair NULL beats bad domain",
     CALL(e.b->socketpair(12345, SOCK_STREAM, 0, nullptr)), EFAULT},
    {"socketpair NULL beats bad type",
     CALL(e.b->socketpair(AF_UNIX, 12, 0, nullptr)), EFAULT},
    {"socketpair bad flags beat NULL",
     CALL(e.b->socketpair(AF_UNIX, SOCK_STREAM | 0x100, 0, nullptr)), EINVAL},
};

const BadRow kShutdown[] = {
    {"shutdown closed", CALL(e.b->shutdown(e.closed, SHUT_RD)), EBADF},
    {"shutdown -1", CALL(e.b->shutdown(-1, SHUT_RD)), EBADF},
    {"shutdown pipe", CALL(e.b->shutdown(e.rd, SHUT_RD)), ENOTSOCK},
    {"shutdown eventfd", CALL(e.b->shutdown(e.efd, SHUT_WR)), ENOTSOCK},
    {"shutdown epoll", CALL(e.b->shutdown(e.ep, SHUT_RDWR)), ENOTSOCK},
    {"shutdown kind beats bad how", CALL(e.b->shutdown(e.wr, 7)), ENOTSOCK},
    {"shutdown how 3", CALL(e.b->shutdown(e.s1, 3)), EINVAL},
    {"shutdown how -1", CALL(e.b->shutdown(e.s0, -1)), EINVAL},
};

const BadRow kRead[] = {
    {"read closed", CALL(Read(e, e.closed, 8)), EBADF},
    {"read -1", CALL(Read(e, -1, 8)), EBADF},
    {"read epoll", CALL(Read(e, e.ep, 8)), EINVAL},
    {"read pipe write end", CALL(Read(e, e.wr, 8)), EBADF},
    {"read eventfd 7 bytes", CALL(Read(e, e.efd, 7)), EINVAL},
    {"read eventfd 0 bytes", CALL(Read(e, e.efd, 0)), EINVAL},
    // The kernel takes the count before the copy-out faults: it is lost.
    {"read eventfd NULL", CALL(e.b->read(e.efd, nullptr, 8)), EFAULT,
     State::kMayChange},
    {"read pipe NULL", CALL(e.b->read(e.rd, nullptr, 8)), EFAULT},
    {"read socket NULL", CALL(e.b->read(e.s0, nullptr, 8)), EFAULT},
    {"read pipe SIZE_MAX", CALL(Read(e, e.rd, SIZE_MAX)), EFAULT},
    {"read socket 2^62", CALL(Read(e, e.s0, kHuge)), EFAULT},
    {"read eventfd SIZE_MAX", CALL(Read(e, e.efd, SIZE_MAX)), EFAULT},
};

const BadRow kWrite[] = {
    {"write closed", CALL(Write(e, e.closed, 1)), EBADF},
    {"write -1", CALL(Write(e, -1, 1)), EBADF},
    {"write epoll", CALL(Write(e, e.ep, 8)), EINVAL},
    {"write pipe read end", CALL(Write(e, e.rd, 1)), EBADF},
    {"write eventfd 7 bytes", CALL(Write(e, e.efd, 7)), EINVAL},
    {"write eventfd 9 bytes", CALL(Write(e, e.efd, 9)), EINVAL},
    {"write eventfd 2^64-1", CALL(WriteCount(e, e.efd, ~uint64_t{0})), EINVAL},
    {"write eventfd NULL", CALL(e.b->write(e.efd, nullptr, 8)), EFAULT},
    {"write pipe NULL", CALL(e.b->write(e.wr, nullptr, 4)), EFAULT},
    {"write socket NULL", CALL(e.b->write(e.s1, nullptr, 4)), EFAULT},
    {"write pipe SIZE_MAX", CALL(Write(e, e.wr, SIZE_MAX)), EFAULT},
    {"write eventfd SIZE_MAX", CALL(Write(e, e.efd, SIZE_MAX)), EFAULT},
    {"write socket 2^62", CALL(Write(e, e.s1, kHuge)), EFAULT},
    {"write pipe without reader", CALL(Write(e, e.orphan, 1)), EPIPE},
    {"write socket after SHUT_WR", CALL(Write(e, e.shut, 1)), EPIPE},
};

const BadRow kPoll[] = {
    {"poll NULL with nfds 1", CALL(e.b->poll(nullptr, 1, 0)), EFAULT},
    {"poll nfds huge", CALL(PollOne(e, e.efd, ~nfds_t{0})), EINVAL},
};

const BadRow kCloseDup[] = {
    {"close closed", CALL(e.b->close(e.closed)), EBADF},
    {"close -1", CALL(e.b->close(-1)), EBADF},
    {"dup closed", CALL(e.b->dup(e.closed)), EBADF},
    {"dup -1", CALL(e.b->dup(-1)), EBADF},
    {"dup2 closed old", CALL(e.b->dup2(e.closed, e.efd)), EBADF},
    {"dup2 closed old onto itself", CALL(e.b->dup2(e.closed, e.closed)), EBADF},
    {"dup2 new -1", CALL(e.b->dup2(e.efd, -1)), EBADF},
    {"dup3 same fd", CALL(e.b->dup3(e.efd, e.efd, 0)), EINVAL},
    {"dup3 same closed fd", CALL(e.b->dup3(e.closed, e.closed, 0)), EINVAL},
    {"dup3 O_NONBLOCK", CALL(e.b->dup3(e.efd, e.closed, O_NONBLOCK)), EINVAL},
    {"dup3 flags checked before old", CALL(e.b->dup3(e.closed, e.efd, 1)),
     EINVAL},
    {"dup3 closed old", CALL(e.b->dup3(e.closed, e.efd, 0)), EBADF},
    {"dup3 new -1", CALL(e.b->dup3(e.efd, -1, 0)), EBADF},
};

const BadRow kFcntl[] = {
    {"fcntl closed", CALL(e.b->fcntl(e.closed, F_GETFL, 0)), EBADF},
    {"fcntl -1", CALL(e.b->fcntl(-1, F_GETFD, 0)), EBADF},
    {"fcntl unknown cmd", CALL(e.b->fcntl(e.efd, 9999, 0)), EINVAL},
    {"fcntl descriptor beats cmd", CALL(e.b->fcntl(e.closed, 9999, 0)), EBADF},
    {"F_SETFL closed", CALL(e.b->fcntl(e.closed, F_SETFL, O_NONBLOCK)), EBADF},
    {"F_SETFD closed", CALL(e.b->fcntl(e.closed, F_SETFD, FD_CLOEXEC)), EBADF},
    {"F_DUPFD -1", CALL(e.b->fcntl(e.efd, F_DUPFD, -1)), EINVAL},
    {"F_DUPFD INT_MAX", CALL(e.b->fcntl(e.efd, F_DUPFD, INT_MAX)), EINVAL},
    {"F_DUPFD_CLOEXEC -1", CALL(e.b->fcntl(e.efd, F_DUPFD_CLOEXEC, -1)),
     EINVAL},
    {"F_DUPFD closed", CALL(e.b->fcntl(e.closed, F_DUPFD, 0)), EBADF},
};

const GoodRow kGood[] = {
    {"eventfd", CALL(Made(e, e.b->eventfd(0, 0)))},
    {"eventfd all flags",
     CALL(
         Made(e, e.b->eventfd(3, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC)))},
    {"pipe",
     [](Env& e) -> long {
       int p[2];
       long r = e.b->pipe(p);
       if (r == 0) Made(e, p[0]), Made(e, p[1]);
       return r;
     }},
    {"pipe2", CALL(Pipe2(e, O_NONBLOCK | O_CLOEXEC))},
    {"socketpair", CALL(Pair(e, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0))},
    {"shutdown", CALL(e.b->shutdown(e.s0, SHUT_RD))},
    {"read eventfd", CALL(Read(e, e.efd, 8))},
    {"write eventfd", CALL(WriteCount(e, e.efd, 5))},
    {"read pipe", CALL(Read(e, e.rd, 8))},
    {"write pipe", CALL(Write(e, e.wr, 4))},
    {"write pipe 0 bytes", CALL(Write(e, e.wr, 0))},
    {"read socket", CALL(Read(e, e.s0, 8))},
    {"write socket", CALL(Write(e, e.s1, 4))},
    {"read at EOF", CALL(Read(e, e.shut_peer, 8))},
    {"close", CALL(e.b->close(e.b->dup(e.efd)))},
    {"dup", CALL(Made(e, e.b->dup(e.rd)))},
    {"dup2", CALL(Made(e, e.b->dup2(e.rd, e.closed)))},
    {"dup2 onto itself", CALL(e.b->dup2(e.rd, e.rd))},
    {"dup3", CALL(Made(e, e.b->dup3(e.rd, e.closed, O_CLOEXEC)))},
    {"F_GETFL", CALL(e.b->fcntl(e.efd, F_GETFL, 0))},
    {"F_SETFL", CALL(e.b->fcntl(e.efd, F_SETFL, 0))},
    {"F_GETFD", CALL(e.b->fcntl(e.efd, F_GETFD, 0))},
    {"F_SETFD", CALL(e.b->fcntl(e.efd, F_SETFD, FD_CLOEXEC))},
    {"F_DUPFD", CALL(Made(e, e.b->fcntl(e.efd, F_DUPFD, 0)))},
    {"F_DUPFD_CLOEXEC", CALL(Made(e, e.b->fcntl(e.efd, F_DUPFD_CLOEXEC, 0)))},
    {"poll nothing", CALL(e.b->poll(nullptr, 0, 0))},
    {"poll ready", CALL(PollOne(e, e.efd, 1))},
    {"poll closed fd (POLLNVAL)", CALL(PollOne(e, e.closed, 1))},
};

class BadInputIo : public BadInputTest {};

// One test per call family, so that a crash in one table does not hide
// the verdicts of the others.
TEST_P(BadInputIo, EventfdRows) { RunBad(kEventfd, std::size(kEventfd)); }
TEST_P(BadInputIo, PipeRows) { RunBad(kPipe, std::size(kPipe)); }
TEST_P(BadInputIo, SocketpairRows) {
  RunBad(kSocketpair, std::size(kSocketpair));
}
TEST_P(BadInputIo, ShutdownRows) { RunBad(kShutdown, std::size(kShutdown)); }
TEST_P(BadInputIo, ReadRows) { RunBad(kRead, std::size(kRead)); }
TEST_P(BadInputIo, WriteRows) { RunBad(kWrite, std::size(kWrite)); }
TEST_P(BadInputIo, PollRows) { RunBad(kPoll, std::size(kPoll)); }
TEST_P(BadInputIo, CloseAndDupRows) { RunBad(kCloseDup, std::size(kCloseDup)); }
TEST_P(BadInputIo, FcntlRows) { RunBad(kFcntl, std::size(kFcntl)); }
TEST_P(BadInputIo, SuccessLeavesErrnoUntouched) {
  RunGood(kGood, std::size(kGood));
}

// Not a differential behaviour: each backend owns its own number range.
TEST_P(BadInputIo, IsUepollFdTellsTheBackendsApart) {
  int efd = Eventfd();
  errno = 0x5eed;
  EXPECT_EQ(uepoll_is_uepoll_fd(efd) != 0, !IsKernel());
  EXPECT_EQ(uepoll_is_uepoll_fd(0), 0);  // the kernel's stdin
  EXPECT_EQ(uepoll_is_uepoll_fd(-1), 0);
  EXPECT_EQ(uepoll_is_uepoll_fd(B().closed_fd), 0);
  EXPECT_EQ(errno, 0x5eed);
}

UEPOLL_INSTANTIATE_BACKENDS(BadInputIo);

}  // namespace
}  // namespace uepoll_test
