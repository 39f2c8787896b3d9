// Pipes (the kernel's fs/pipe.c): a shared buffer of 16 page slots and two
// File ends. See pipe.cc.
#ifndef UEPOLL_SRC_SOURCES_PIPE_H_
#define UEPOLL_SRC_SOURCES_PIPE_H_

namespace uepoll::impl {

// uepoll_pipe2: flags O_CLOEXEC | O_NONBLOCK | O_DIRECT. 0 or -errno.
int CreatePipe(int fds[2], int flags);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_PIPE_H_
