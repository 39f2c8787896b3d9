// Steps of CLOCK_REALTIME, for TFD_TIMER_CANCEL_ON_SET.
//
// The kernel tells its cancel-on-set timerfds about a step of the wall
// clock (settimeofday, clock_settime, a leap second, resume) from
// clock_was_set(). User space has no such hook, except through the kernel's
// own timerfd: one kernel timerfd on CLOCK_REALTIME, armed absolute at the
// end of time with TFD_TIMER_CANCEL_ON_SET, fails its read with ECANCELED
// once per step. uepoll makes that descriptor when the first uepoll timerfd
// asks for cancel-on-set, and counts the steps it reports.
//
// The count is read on demand (one nonblocking read(2) per call): a step is
// seen when a cancel-on-set timerfd is read, polled or set, not at the
// moment it happens (docs/semantics.md).
#ifndef UEPOLL_SRC_TIMER_CLOCK_SET_H_
#define UEPOLL_SRC_TIMER_CLOCK_SET_H_

#include <cstdint>

namespace uepoll::impl {

// How many steps of CLOCK_REALTIME this process has seen. Never fails: if
// the kernel descriptor cannot be made, steps are not detected and the
// count stays put. Leaves errno unchanged.
uint64_t ClockSetGeneration();

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_TIMER_CLOCK_SET_H_
