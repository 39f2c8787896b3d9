// An eventfd written as a user-defined object (uepoll_obj_create), and a
// third test backend that is uepoll with it in place of the built-in
// eventfd. A suite instantiated over kernel, uepoll and this backend runs
// one body on a kernel eventfd, on uepoll's and on the user object, with
// one set of expectations: what a user object does under epoll, poll,
// dup/close and blocking reads is then exactly what a kernel object does.
//
// The object keeps the kernel eventfd's rules: a 64-bit counter, IN when
// non-zero, OUT while a write of 1 fits (count < 2^64 - 2), reads of 8
// bytes or more, writes of exactly 8, EFD_SEMAPHORE; a write wakes with
// EPOLLIN and a read with EPOLLOUT, as eventfd_write/eventfd_read do.
#ifndef UEPOLL_TESTS_USEROBJ_USER_EVENTFD_H_
#define UEPOLL_TESTS_USEROBJ_USER_EVENTFD_H_

#include "support/backend.h"

namespace uepoll_test {

// uepoll_eventfd's signature; flags EFD_SEMAPHORE | EFD_NONBLOCK |
// EFD_CLOEXEC.
int UserEventfd(unsigned int initval, int flags);

// uepoll with UserEventfd as its eventfd ("userobj").
const Backend& UserObjectBackend();

// How many user eventfds were released (their last close ran the release
// callback) and how many exist: for leak checks of the callbacks' own
// state.
long UserEventfdsReleased();
long UserEventfdsLive();

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_USEROBJ_USER_EVENTFD_H_
