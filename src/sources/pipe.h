// Pipes (the kernel's fs/pipe.c): a shared buffer of 16 page slots and two
// File ends. See pipe.cc.
#ifndef UEPOLL_SRC_SOURCES_PIPE_H_
#define UEPOLL_SRC_SOURCES_PIPE_H_

#include <sys/types.h>

namespace uepoll::impl {

class File;

// uepoll_pipe2: flags O_CLOEXEC | O_NONBLOCK | O_DIRECT. 0 or -errno.
int CreatePipe(int fds[2], int flags);

// fcntl F_GETPIPE_SZ / F_SETPIPE_SZ on f: the pipe's capacity in bytes, or
// -errno (EBADF when f is not a pipe, as the kernel's get_pipe_info).
long PipeFcntl(File* f, int cmd, unsigned long arg);

// A pipe end's read or write with the caller's blocking choice instead of
// the file's O_NONBLOCK (splice, sendfile: capi/sendfile_api.cc). f is a
// pipe end open for that direction; a count or -errno, as read and write.
class IoIter;
ssize_t PipeReadIter(File* f, IoIter& it, bool nonblock);
ssize_t PipeWriteIter(File* f, IoIter& it, bool nonblock);
// Whether two pipe ends belong to one pipe.
bool SamePipe(File* a, File* b);

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_PIPE_H_
