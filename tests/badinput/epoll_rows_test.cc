// Bad input to epoll_create/epoll_create1/epoll_ctl/epoll_wait/pwait/pwait2:
// one row per errno path, each checked for errno and unchanged state; and
// successful calls, each checked for an untouched errno.
#include <limits.h>

#include "badinput/bad_input.h"

namespace uepoll_test {
namespace {

#define CALL(expr)     \
  [](Env& e) -> long { \
    (void)e;           \
    return (expr);     \
  }

long Ctl(Env& e, int epfd, int op, int fd, uint32_t events) {
  struct epoll_event ev {};
  ev.events = events;
  ev.data.u64 = 7;
  return e.b->epoll_ctl(epfd, op, fd, &ev);
}
int Made(Env& e, int fd) {
  e.made->push_back(fd);
  return fd;
}
long Wait(Env& e, int epfd, int max, bool null_events = false) {
  epoll_event evs[8];
  return e.b->epoll_wait(epfd, null_events ? nullptr : evs, max, 0);
}
long Pwait(Env& e, int epfd, int max, bool null_events = false) {
  epoll_event evs[8];
  sigset_t none;
  sigemptyset(&none);
  return e.b->epoll_pwait(epfd, null_events ? nullptr : evs, max, 0, &none);
}
long Pwait2(Env& e, int epfd, int max, long sec, long nsec,
            bool null_events = false) {
  epoll_event evs[8];
  struct timespec ts = {sec, nsec};
  return e.b->epoll_pwait2(epfd, null_events ? nullptr : evs, max, &ts,
                           nullptr);
}

constexpr int kBadOp = 17;
constexpr int kTooMany = INT_MAX / 12 + 1;

const BadRow kCreate[] = {
    {"epoll_create(0)", CALL(e.b->epoll_create(0)), EINVAL},
    {"epoll_create(-1)", CALL(e.b->epoll_create(-1)), EINVAL},
    {"epoll_create(INT_MIN)", CALL(e.b->epoll_create(INT_MIN)), EINVAL},
    {"epoll_create1(1)", CALL(e.b->epoll_create1(1)), EINVAL},
    {"epoll_create1(O_NONBLOCK)", CALL(e.b->epoll_create1(O_NONBLOCK)), EINVAL},
    {"epoll_create1(-1)", CALL(e.b->epoll_create1(-1)), EINVAL},
    {"epoll_create1(CLOEXEC|1)", CALL(e.b->epoll_create1(EPOLL_CLOEXEC | 1)),
     EINVAL},
};

const BadRow kCtl[] = {
    {"ADD with NULL event",
     CALL(e.b->epoll_ctl(e.ep, EPOLL_CTL_ADD, e.rd, nullptr)), EFAULT},
    {"MOD with NULL event",
     CALL(e.b->epoll_ctl(e.ep, EPOLL_CTL_MOD, e.efd, nullptr)), EFAULT},
    {"NULL event beats closed epfd and fd",
     CALL(e.b->epoll_ctl(e.closed, EPOLL_CTL_ADD, e.closed, nullptr)), EFAULT},
    {"NULL event beats unknown op",
     CALL(e.b->epoll_ctl(e.ep, kBadOp, e.efd, nullptr)), EFAULT},
    {"DEL ignores NULL: closed epfd",
     CALL(e.b->epoll_ctl(e.closed, EPOLL_CTL_DEL, e.efd, nullptr)), EBADF},
    {"closed epfd", CALL(Ctl(e, e.closed, EPOLL_CTL_ADD, e.rd, EPOLLIN)),
     EBADF},
    {"negative epfd", CALL(Ctl(e, -1, EPOLL_CTL_ADD, e.rd, EPOLLIN)), EBADF},
    {"closed target", CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.closed, EPOLLIN)),
     EBADF},
    {"negative target", CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, -5, EPOLLIN)), EBADF},
    {"closed target beats eventfd as epfd",
     CALL(Ctl(e, e.efd, EPOLL_CTL_ADD, e.closed, EPOLLIN)), EBADF},
    {"regular file target", CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.file, EPOLLIN)),
     EPERM, State::kKept, true},
    {"regular file target beats eventfd as epfd",
     CALL(Ctl(e, e.efd, EPOLL_CTL_ADD, e.file, EPOLLIN)), EPERM, State::kKept,
     true},
    {"regular file as epfd", CALL(Ctl(e, e.file, EPOLL_CTL_ADD, e.rd, EPOLLIN)),
     EINVAL, State::kKept, true},
    {"eventfd as epfd", CALL(Ctl(e, e.efd, EPOLL_CTL_ADD, e.rd, EPOLLIN)),
     EINVAL},
    {"pipe as epfd", CALL(Ctl(e, e.rd, EPOLL_CTL_ADD, e.efd, EPOLLIN)), EINVAL},
    {"socket as epfd", CALL(Ctl(e, e.s0, EPOLL_CTL_MOD, e.efd, EPOLLIN)),
     EINVAL},
    {"instance adds itself", CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.ep, EPOLLIN)),
     EINVAL},
    {"instance adds its dup",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, Made(e, e.b->dup(e.ep)), EPOLLIN)),
     EINVAL},
    {"EXCLUSIVE in MOD",
     CALL(Ctl(e, e.ep, EPOLL_CTL_MOD, e.efd, EPOLLIN | EPOLLEXCLUSIVE)),
     EINVAL},
    {"EXCLUSIVE with PRI",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.rd, EPOLLPRI | EPOLLEXCLUSIVE)),
     EINVAL},
    {"EXCLUSIVE with ONESHOT",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.rd,
              EPOLLIN | EPOLLONESHOT | EPOLLEXCLUSIVE)),
     EINVAL},
    {"EXCLUSIVE on an epoll target",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, Made(e, e.b->epoll_create1(0)),
              EPOLLIN | EPOLLEXCLUSIVE)),
     EINVAL},
    {"EXCLUSIVE bit check beats EEXIST",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.efd, EPOLLRDHUP | EPOLLEXCLUSIVE)),
     EINVAL},
    {"ADD of existing item", CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.efd, EPOLLOUT)),
     EEXIST},
    {"MOD of missing item", CALL(Ctl(e, e.ep, EPOLL_CTL_MOD, e.rd, EPOLLIN)),
     ENOENT},
    {"DEL of missing item",
     CALL(e.b->epoll_ctl(e.ep, EPOLL_CTL_DEL, e.s0, nullptr)), ENOENT},
    {"unknown op on registered fd", CALL(Ctl(e, e.ep, kBadOp, e.efd, EPOLLOUT)),
     EINVAL},
    {"unknown op on unregistered fd", CALL(Ctl(e, e.ep, kBadOp, e.rd, EPOLLIN)),
     EINVAL},
    {"op 0", CALL(Ctl(e, e.ep, 0, e.rd, EPOLLIN)), EINVAL},
    {"op -1", CALL(Ctl(e, e.ep, -1, e.efd, EPOLLIN)), EINVAL},
    {"unknown op on closed target", CALL(Ctl(e, e.ep, kBadOp, e.closed, 0)),
     EBADF},
    {"ADD closing a cycle",
     [](Env& e) -> long {
       int inner = Made(e, e.b->epoll_create1(0));
       if (Ctl(e, e.ep, EPOLL_CTL_ADD, inner, EPOLLIN) != 0) return 0;
       return Ctl(e, inner, EPOLL_CTL_ADD, e.ep, EPOLLIN);
     },
     ELOOP},
};

const BadRow kWait[] = {
    {"wait: closed epfd", CALL(Wait(e, e.closed, 1)), EBADF},
    {"wait: negative epfd", CALL(Wait(e, -1, 1)), EBADF},
    {"wait: closed epfd beats maxevents 0", CALL(Wait(e, e.closed, 0)), EBADF},
    {"wait: maxevents 0", CALL(Wait(e, e.ep, 0)), EINVAL},
    {"wait: maxevents -1", CALL(Wait(e, e.ep, -1)), EINVAL},
    {"wait: maxevents INT_MAX/12+1", CALL(Wait(e, e.ep, kTooMany)), EINVAL},
    {"wait: eventfd", CALL(Wait(e, e.efd, 1)), EINVAL},
    {"wait: pipe", CALL(Wait(e, e.wr, 1)), EINVAL},
    {"wait: socket", CALL(Wait(e, e.s1, 1)), EINVAL},
    {"wait: NULL events with a ready item", CALL(Wait(e, e.ep, 1, true)),
     EFAULT},
    {"pwait: closed epfd", CALL(Pwait(e, e.closed, 1)), EBADF},
    {"pwait: maxevents 0", CALL(Pwait(e, e.ep, 0)), EINVAL},
    {"pwait: eventfd", CALL(Pwait(e, e.efd, 1)), EINVAL},
    {"pwait: NULL events with a ready item", CALL(Pwait(e, e.ep, 1, true)),
     EFAULT},
    {"pwait2: tv_sec -1", CALL(Pwait2(e, e.ep, 1, -1, 0)), EINVAL},
    {"pwait2: tv_nsec 1e9", CALL(Pwait2(e, e.ep, 1, 0, 1000000000)), EINVAL},
    {"pwait2: tv_nsec -1", CALL(Pwait2(e, e.ep, 1, 0, -1)), EINVAL},
    {"pwait2: bad timespec beats closed epfd",
     CALL(Pwait2(e, e.closed, 1, 0, -1)), EINVAL},
    {"pwait2: bad timespec beats eventfd", CALL(Pwait2(e, e.efd, 1, -3, 0)),
     EINVAL},
    {"pwait2: closed epfd", CALL(Pwait2(e, e.closed, 1, 0, 0)), EBADF},
    {"pwait2: maxevents 0", CALL(Pwait2(e, e.ep, 0, 0, 0)), EINVAL},
    {"pwait2: eventfd", CALL(Pwait2(e, e.efd, 1, 0, 0)), EINVAL},
    {"pwait2: NULL events with a ready item",
     CALL(Pwait2(e, e.ep, 1, 0, 0, true)), EFAULT},
};

const GoodRow kGood[] = {
    {"epoll_create(1)", CALL(Made(e, e.b->epoll_create(1)))},
    {"epoll_create1(0)", CALL(Made(e, e.b->epoll_create1(0)))},
    {"epoll_create1(CLOEXEC)", CALL(Made(e, e.b->epoll_create1(EPOLL_CLOEXEC)))},
    {"ctl ADD", CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.rd, EPOLLIN))},
    {"ctl ADD with unknown bits",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.rd, EPOLLIN | (1u << 20)))},
    {"ctl ADD EXCLUSIVE",
     CALL(Ctl(e, e.ep, EPOLL_CTL_ADD, e.s0, EPOLLIN | EPOLLEXCLUSIVE))},
    {"ctl MOD", CALL(Ctl(e, e.ep, EPOLL_CTL_MOD, e.efd, EPOLLOUT))},
    {"ctl DEL with NULL",
     CALL(e.b->epoll_ctl(e.ep, EPOLL_CTL_DEL, e.efd, nullptr))},
    {"wait returning 1", CALL(Wait(e, e.ep, 1))},
    {"wait returning 0", CALL(Wait(e, Made(e, e.b->epoll_create1(0)), 4))},
    {"wait with NULL events and nothing ready",
     CALL(Wait(e, Made(e, e.b->epoll_create1(0)), 4, true))},
    {"pwait", CALL(Pwait(e, e.ep, 8))},
    {"pwait2 zero timespec", CALL(Pwait2(e, e.ep, 8, 0, 0))},
    {"pwait2 NULL timespec",
     [](Env& e) -> long {
       epoll_event ev[1];
       return e.b->epoll_pwait2(e.ep, ev, 1, nullptr, nullptr);
     }},
};

class BadInputEpoll : public BadInputTest {};

TEST_P(BadInputEpoll, EpollCreateRows) { RunBad(kCreate, std::size(kCreate)); }
TEST_P(BadInputEpoll, EpollCtlRows) { RunBad(kCtl, std::size(kCtl)); }
TEST_P(BadInputEpoll, EpollWaitRows) { RunBad(kWait, std::size(kWait)); }
TEST_P(BadInputEpoll, SuccessLeavesErrnoUntouched) {
  RunGood(kGood, std::size(kGood));
}

UEPOLL_INSTANTIATE_BACKENDS(BadInputEpoll);

}  // namespace
}  // namespace uepoll_test
