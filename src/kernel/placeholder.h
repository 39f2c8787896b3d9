// Placeholders: the kernel descriptors that reserve uepoll's numbers in
// FdMode::kKernel (core/fd_table.h).
//
// A placeholder is an O_PATH descriptor of /dev/null (of / where /dev/null
// cannot be opened), close-on-exec whatever the uepoll descriptor's
// FD_CLOEXEC says: uepoll objects do not survive exec(), so neither should
// their numbers. Passed by mistake to libc, it fails loudly: read, write,
// send, recv, ioctl, fcntl(F_SETFL), epoll_ctl and epoll_wait give EBADF,
// fchdir and openat ENOTDIR, and poll() reports POLLNVAL. It is never
// readable, never a valid epoll target, and never hangs a caller.
//
// The kernel allocates the number (lowest free first, RLIMIT_NOFILE
// applies), so uepoll and kernel numbers cannot collide. An epoll
// instance's numbers hold its kernel half instead (kernel/kernel_half.h,
// File::OpenKernelFile); the functions here copy whatever kernel file a
// number has, so a dup of an instance shares it.
#ifndef UEPOLL_SRC_KERNEL_PLACEHOLDER_H_
#define UEPOLL_SRC_KERNEL_PLACEHOLDER_H_

namespace uepoll::impl {

// A new placeholder at the lowest free number >= minfd, or -errno
// (EMFILE, ENFILE, ENOMEM; EINVAL when minfd >= RLIMIT_NOFILE).
int MakePlaceholder(int minfd);

// A copy of oldfd's kernel file (fcntl F_DUPFD_CLOEXEC) at the lowest free
// number >= minfd; a new placeholder if oldfd has no kernel file any more
// (the application closed it with libc), never at oldfd itself. -errno on
// failure.
int CopyPlaceholder(int oldfd, int minfd);

// Puts a new placeholder at fd, replacing whatever the kernel has there;
// one the kernel made at fd itself (fd was its lowest free number) stays.
// 0 or -errno; errno is preserved.
int NewPlaceholderAt(int fd);

// Puts a copy of oldfd's kernel file at newfd (dup3, replacing whatever the
// kernel had there). 0 or -errno (EBADF: newfd beyond RLIMIT_NOFILE).
int CopyPlaceholderTo(int oldfd, int newfd);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_KERNEL_PLACEHOLDER_H_
