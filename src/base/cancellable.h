// CancellableSyscall: a raw system call that is a cancellation point, as
// libc's blocking calls are, for the sleeps uepoll makes itself (the
// parker's futex, a waiter's epoll_pwait2 on an instance's kernel half).
//
// Asynchronous cancellation is enabled only around the syscall, in a frame
// that owns nothing, so a cancellation unwinds from here into the callers'
// destructors (a frame with cleanups must never be the one interrupted: its
// unwind tables only describe its call sites). Every caller up the stack
// therefore releases what it holds in destructors (RAII), never in code
// after the call. Returns the syscall's result with errno preserved from it.
//
// Pinned by tests/parker/parker_test.cc's Cancel.* (futex, and the masked
// sleep in the kernel half).
#ifndef UEPOLL_SRC_BASE_CANCELLABLE_H_
#define UEPOLL_SRC_BASE_CANCELLABLE_H_

namespace uepoll::impl {

long CancellableSyscall(long nr, long a1, long a2, long a3, long a4, long a5,
                        long a6);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_BASE_CANCELLABLE_H_
