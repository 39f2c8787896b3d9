/* Entry points of libuepoll that only libuepoll-interpose.so calls: not in
 * the public headers, exported (uepoll.map matches uepoll_*) so that the
 * interposer, a separate library, can reach them. Their contract may
 * change with any release; both libraries are built from one tree.
 * C and C++ (the interposer is C). */
#ifndef UEPOLL_SRC_CAPI_INTERPOSE_HOOKS_H_
#define UEPOLL_SRC_CAPI_INTERPOSE_HOOKS_H_

#include <uepoll/uepoll.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernel just handed out `fd` (open, socket, accept, a kernel pipe...
 * returned it): if uepoll still records an object at that number, the
 * object's placeholder was closed behind uepoll's back (a close libc made
 * internally, a raw system call) and the number is the kernel's new file
 * now. The object loses the number as a close would (its last close
 * releases it: a pipe's peer sees EOF). Nothing happens for a number
 * uepoll does not record; errno is left alone. */
UEPOLL_API void uepoll_forget_orphan(int fd);

#ifdef __cplusplus
}
#endif

#endif /* UEPOLL_SRC_CAPI_INTERPOSE_HOOKS_H_ */
