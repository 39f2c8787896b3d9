// Private descriptors: the kernel descriptors uepoll makes for itself (a
// thread's sleep descriptors, the process's wake eventfd, a watchable
// instance's mirror, the clock-step detector, descriptors in flight).
//
// The kernel gives every new descriptor the lowest free number, which is
// the number the application's next open() would have had. A library that
// keeps descriptors of its own at those numbers changes the numbers an
// application gets after it has closed everything (third-party suites
// check for descriptor leaks by comparing them). So each private
// descriptor is moved to the top of the numbers the process may use (just
// below the soft RLIMIT_NOFILE, or below 1024 where the limit is higher:
// the kernel's table grows to the highest open number, and every fork
// copies it), where an application reaches only after it has opened
// hundreds of descriptors (BridgeCorners.OwnDescriptorsLeaveTheLowNumbersFree,
// BridgeCorners.OwnDescriptorsKeepTheKernelTableSmall).
//
// They remain descriptors: closefrom() and close_range() can close them,
// and every user of one checks its identity before each use (parker.h,
// wake_fd.h) instead of trusting the number.
#ifndef UEPOLL_SRC_BASE_PRIVATE_FD_H_
#define UEPOLL_SRC_BASE_PRIVATE_FD_H_

namespace uepoll::impl {

// Moves fd (a descriptor just made, close-on-exec) to a high number and
// returns the number it is at now: the new one, or fd itself when no high
// number is free (the descriptor stays usable). errno is preserved.
int MovePrivateFd(int fd);

// A new close-on-exec descriptor for fd's file at a high number (the
// lowest free one where none is), or -1. errno is preserved.
int DupPrivateFd(int fd);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_PRIVATE_FD_H_
