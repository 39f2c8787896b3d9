// NoCancel: pthread_cancel held off for a scope.
//
// Teardown that runs the application's code or libc's cancellation points
// (a release callback, close() of a kernel descriptor in flight) in the
// middle of uepoll's own bookkeeping (a collection's hitlist, a list of
// descriptors half destroyed, a pair lock held) cannot be unwound half
// way: the rest would leak or stay locked. The kernel never interrupts a
// release either. A cancellation that arrives meanwhile stays pending and
// is acted on at the thread's next cancellation point after the scope.
//
// Restoring the state cannot act on a pending request itself unless the
// thread runs with asynchronous cancellation, which no uepoll call is
// made with (POSIX: uepoll functions are not async-cancel-safe).
#ifndef UEPOLL_SRC_SOURCES_NO_CANCEL_H_
#define UEPOLL_SRC_SOURCES_NO_CANCEL_H_

#include <pthread.h>

namespace uepoll::impl {

class NoCancel {
 public:
  NoCancel() { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old_); }
  ~NoCancel() { pthread_setcancelstate(old_, nullptr); }
  NoCancel(const NoCancel&) = delete;
  NoCancel& operator=(const NoCancel&) = delete;

 private:
  int old_ = PTHREAD_CANCEL_ENABLE;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_NO_CANCEL_H_
