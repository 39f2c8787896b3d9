// uepoll_sendfile and uepoll_splice where a uepoll pipe or socket is one
// end (or both); two kernel ends go to libc. pread and pwrite, which no
// uepoll object supports.
//
// The checks follow fs/read_write.c (do_sendfile) and fs/splice.c
// (__do_splice, do_splice) of Linux 6.18, in their order: which ends may
// pair (sendfile's source needs splice_read: files and sockets, not
// pipes; splice needs a pipe at one end at least; offsets only where the
// file is seekable, ESPIPE on a pipe), the access modes (EBADF), O_APPEND
// (EINVAL). A kernel end is classified by fcntl(F_GETFL) and fstat.
//
// The bytes move through a buffer, so nothing may be taken from a source
// that the destination cannot take (docs/semantics.md D30): a source that
// cannot seek (a pipe, a socket) is read only in pieces of at most 4096
// bytes, and only while the destination is writable (which for a pipe or
// a socket means a piece of that size fits); a regular file is read at an
// offset (pread) and its offset advanced by what was written.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include <uepoll/uepoll.h>

#include "base/alloc.h"
#include "base/sys.h"
#include "capi/errors.h"
#include "capi/user_access.h"
#include "core/fd_table.h"
#include "core/io_iter.h"
#include "sources/pipe.h"
#include "sources/unix_common.h"

namespace uepoll::impl {
namespace {

constexpr size_t kPiece = 4096;       // what a writable pipe or socket takes
constexpr size_t kFileChunk = 65536;  // a seekable source's read
constexpr unsigned kSpliceFlagsAll = 0xf;  // SPLICE_F_ALL

enum class Kind {
  kUepollPipe,
  kUepollSocket,
  kUepollOther,  // eventfds, instances, timerfds, user objects
  kPipe,         // a kernel pipe or FIFO
  kFile,         // a kernel regular file or block device (seekable)
  kStream,       // another kernel file with read and write (a socket, a tty)
  kNoSplice,     // a kernel file without splice (anonymous inodes, dirs)
};

struct End {
  int fd = -1;
  File* f = nullptr;  // the uepoll object, or nullptr
  Kind kind = Kind::kNoSplice;
  uint32_t flags = 0;  // F_GETFL
  bool nonblock = false;
  off_t* pos = nullptr;  // kFile: where the next byte is read or written
  bool is_pipe() const {
    return kind == Kind::kUepollPipe || kind == Kind::kPipe;
  }
  bool readable() const { return (flags & O_ACCMODE) != O_WRONLY; }
  bool writable() const { return (flags & O_ACCMODE) != O_RDONLY; }
};

// fdget and what splice needs to know of the file: 0 or -EBADF.
int Classify(int fd, File* f, End* e) {
  e->fd = fd;
  e->f = f;
  if (f) {
    e->flags = f->flags();
    e->kind = f->kind() == FileKind::kPipe     ? Kind::kUepollPipe
              : f->kind() == FileKind::kSocket ? Kind::kUepollSocket
                                               : Kind::kUepollOther;
    return 0;
  }
  int fl = sys::Fcntl(fd, F_GETFL, 0);
  // fdget (not fdget_raw): an O_PATH descriptor is not open for splice.
  if (fl < 0 || (fl & O_PATH)) return -EBADF;
  e->flags = static_cast<uint32_t>(fl);
  struct stat st;
  if (sys::Fstat(fd, &st) != 0) return -EBADF;
  switch (st.st_mode & S_IFMT) {
    case S_IFIFO:
      e->kind = Kind::kPipe;
      break;
    case S_IFREG:
    case S_IFBLK:
      e->kind = Kind::kFile;
      break;
    case S_IFSOCK:
    case S_IFCHR:
      e->kind = Kind::kStream;
      break;
    default:
      e->kind = Kind::kNoSplice;
  }
  return 0;
}

// Whether the end can be read from by splice (f_op->splice_read) and
// written to (splice_write or write_iter).
bool CanSpliceRead(const End& e) {
  return e.kind == Kind::kUepollSocket || e.kind == Kind::kFile ||
         e.kind == Kind::kStream;
}
bool CanSpliceWrite(const End& e) {
  return e.kind == Kind::kUepollPipe || e.kind == Kind::kUepollSocket ||
         e.kind == Kind::kPipe || e.kind == Kind::kFile ||
         e.kind == Kind::kStream;
}

bool KernelReady(int fd, short events) {
  pollfd p{fd, events, 0};
  timespec zero{0, 0};
  return sys::Ppoll(&p, 1, &zero, nullptr) > 0;
}

// Up to n bytes from the source (nonblock: EAGAIN rather than waiting).
ssize_t ReadSome(End& s, void* buf, size_t n, bool nonblock) {
  iovec seg;
  IoIter it = IoIter::Single(buf, n, seg);
  switch (s.kind) {
    case Kind::kUepollPipe:
      return PipeReadIter(s.f, it, nonblock);
    case Kind::kUepollSocket: {
      RecvArgs a{&it, nonblock ? MSG_DONTWAIT : 0, nullptr, 0, 0, false};
      return AsUnixSocket(s.f)->RecvMsg(a);
    }
    case Kind::kFile: {
      ssize_t r = sys::Pread(s.fd, buf, n, *s.pos);
      return r < 0 ? -errno : r;
    }
    default: {
      if (nonblock && !KernelReady(s.fd, POLLIN)) return -EAGAIN;
      ssize_t r = sys::Read(s.fd, buf, n);
      return r < 0 ? -errno : r;
    }
  }
}

ssize_t WriteSome(End& d, const void* buf, size_t n, bool nonblock) {
  iovec seg;
  IoIter it = IoIter::Single(const_cast<void*>(buf), n, seg);
  switch (d.kind) {
    case Kind::kUepollPipe:
      return PipeWriteIter(d.f, it, nonblock);
    case Kind::kUepollSocket: {
      SendArgs a{&it, nonblock ? MSG_DONTWAIT : 0, nullptr, 0, nullptr, 0};
      return AsUnixSocket(d.f)->SendMsg(a);
    }
    case Kind::kFile: {
      ssize_t r = sys::Pwrite(d.fd, buf, n, *d.pos);
      return r < 0 ? -errno : r;
    }
    default: {
      if (nonblock && !KernelReady(d.fd, POLLOUT)) return -EAGAIN;
      ssize_t r = sys::Write(d.fd, buf, n);
      return r < 0 ? -errno : r;
    }
  }
}

// Whether a piece of kPiece bytes would go in now (an error to report
// counts: the write will say it).
bool Writable(End& d) {
  if (d.kind == Kind::kFile) return true;
  if (d.f) return d.f->Poll(0) & (EPOLLOUT | EPOLLERR);
  return KernelReady(d.fd, POLLOUT);
}

int WaitWritable(End& d) {
  pollfd p{d.fd, POLLOUT, 0};
  return uepoll_poll(&p, 1, -1) < 0 ? -errno : 0;
}

// Bytes already taken from a source that cannot give them back: written
// whole, waiting for room as long as it takes. The count written, or
// -errno if nothing was.
ssize_t WriteAll(End& d, const char* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = WriteSome(d, buf + done, n - done, false);
    if (w == -EAGAIN || w == -EINTR) {  // a nonblocking kernel file
      if (w == -EAGAIN && WaitWritable(d) != 0 && errno != EINTR) break;
      continue;
    }
    if (w <= 0) {
      if (!done) return w ? w : -EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  return static_cast<ssize_t>(done);
}

// Moves up to len bytes. `more`: keep reading once something was moved
// (sendfile's loop) rather than stopping when the source has no more now.
ssize_t Move(End& src, End& dst, size_t len, bool more) {
  const bool seekable = src.kind == Kind::kFile;
  const bool bounded = dst.kind != Kind::kFile;
  size_t cap = seekable ? kFileChunk : bounded ? kPiece : kFileChunk;
  char* buf = NewArray<char>(cap);
  if (!buf) return -ENOMEM;
  size_t total = 0;
  ssize_t err = 0;
  while (total < len) {
    if (bounded && !seekable && !Writable(dst)) {
      if (total) break;
      if (dst.nonblock) {
        err = -EAGAIN;
        break;
      }
      if (int e = WaitWritable(dst)) {
        err = e;
        break;
      }
      continue;
    }
    size_t chunk = std::min(len - total, cap);
    bool nb = src.nonblock || (total && !more);
    ssize_t n = ReadSome(src, buf, chunk, nb);
    if (n <= 0) {
      if (n < 0 && !total) err = n;
      break;
    }
    ssize_t w;
    if (seekable) {
      // Nothing is lost by a short write: the offset moves by what went.
      w = WriteSome(dst, buf, static_cast<size_t>(n), dst.nonblock);
    } else {
      w = WriteAll(dst, buf, static_cast<size_t>(n));
    }
    if (w <= 0) {
      if (!total) err = w ? w : -EAGAIN;
      break;
    }
    total += static_cast<size_t>(w);
    if (src.pos) *src.pos += w;
    if (dst.pos) *dst.pos += w;
    if (w < n || (static_cast<size_t>(n) < chunk && !more)) break;
  }
  DeleteArray(buf);
  return total ? static_cast<ssize_t>(total) : err;
}

// A kernel file's position as the offset to use and, at the end, to store.
struct FilePosition {
  int fd = -1;
  off_t pos = 0;
  bool Load(int f) {
    off_t p = lseek(f, 0, SEEK_CUR);
    if (p < 0) return false;
    fd = f;
    pos = p;
    return true;
  }
  ~FilePosition() {
    if (fd >= 0) lseek(fd, pos, SEEK_SET);
  }
};

ssize_t Sendfile(int out_fd, File* out_f, int in_fd, File* in_f, off_t* offset,
                 size_t count) {
  off_t pos = 0;
  if (offset) {
    if (UserFault(offset)) return -EFAULT;
    std::memcpy(&pos, offset, sizeof pos);
  }
  End in, out;
  if (Classify(in_fd, in_f, &in) || !in.readable()) return -EBADF;
  FilePosition fpos;
  if (offset) {
    if (in.kind != Kind::kFile) return -ESPIPE;  // FMODE_PREAD
    if (pos < 0) return -EINVAL;                 // rw_verify_area
    in.pos = &pos;
  } else if (in.kind == Kind::kFile) {
    if (!fpos.Load(in_fd)) return -errno;
    in.pos = &fpos.pos;
  }
  if (static_cast<ssize_t>(count) < 0) return -EINVAL;
  if (count > kMaxRwCount) count = kMaxRwCount;
  if (Classify(out_fd, out_f, &out) || !out.writable()) return -EBADF;
  if (!out.is_pipe() && (out.flags & O_APPEND)) return -EINVAL;
  if (!CanSpliceRead(in) || !CanSpliceWrite(out)) return -EINVAL;
  if (out.kind == Kind::kFile) {
    FilePosition opos;  // do_splice_direct writes at the file position
    if (!opos.Load(out_fd)) return -errno;
    out.pos = &opos.pos;
    in.nonblock = in.flags & O_NONBLOCK;
    ssize_t r = count ? Move(in, out, count, true) : 0;
    if (r >= 0 && offset) std::memcpy(offset, &pos, sizeof pos);
    return r;
  }
  // The source's blocking is its own; the destination's is its O_NONBLOCK.
  in.nonblock = in.flags & O_NONBLOCK;
  out.nonblock = out.flags & O_NONBLOCK;
  // Into a pipe: one round, as much as fits (splice_file_to_pipe); into a
  // socket: the whole count (do_splice_direct).
  ssize_t r = count ? Move(in, out, count, !out.is_pipe()) : 0;
  if (r >= 0 && offset) std::memcpy(offset, &pos, sizeof pos);
  return r;
}

ssize_t Splice(int fd_in, File* in_f, off_t* off_in, int fd_out, File* out_f,
               off_t* off_out, size_t len, unsigned int flags) {
  if (!len) return 0;
  if (flags & ~kSpliceFlagsAll) return -EINVAL;
  End in, out;
  if (Classify(fd_in, in_f, &in)) return -EBADF;
  if (Classify(fd_out, out_f, &out)) return -EBADF;
  if (in.is_pipe() && off_in) return -ESPIPE;
  if (out.is_pipe() && off_out) return -ESPIPE;
  off_t oin = 0, oout = 0;
  if (off_out) {
    if (UserFault(off_out)) return -EFAULT;
    std::memcpy(&oout, off_out, sizeof oout);
  }
  if (off_in) {
    if (UserFault(off_in)) return -EFAULT;
    std::memcpy(&oin, off_in, sizeof oin);
  }
  if (!in.readable() || !out.writable()) return -EBADF;
  if (static_cast<ssize_t>(len) < 0) return -EINVAL;
  if (len > kMaxRwCount) len = kMaxRwCount;
  const bool nb_flag = flags & SPLICE_F_NONBLOCK;
  FilePosition fpos;
  ssize_t r;
  if (in.is_pipe() && out.is_pipe()) {
    if (in.f && out.f && SamePipe(in.f, out.f)) return -EINVAL;
    in.nonblock = out.nonblock =
        nb_flag || ((in.flags | out.flags) & O_NONBLOCK);
    r = Move(in, out, len, false);
  } else if (in.is_pipe()) {
    if (off_out) {
      if (out.kind != Kind::kFile) return -EINVAL;  // FMODE_PWRITE
      if (oout < 0) return -EINVAL;
      out.pos = &oout;
    } else if (out.kind == Kind::kFile) {
      if (!fpos.Load(fd_out)) return -errno;
      out.pos = &fpos.pos;
    }
    if (out.flags & O_APPEND) return -EINVAL;
    if (!CanSpliceWrite(out)) return -EINVAL;
    in.nonblock = nb_flag || (in.flags & O_NONBLOCK);
    out.nonblock = nb_flag || (out.flags & O_NONBLOCK);
    r = Move(in, out, len, false);
  } else if (out.is_pipe()) {
    if (off_in) {
      if (in.kind != Kind::kFile) return -EINVAL;  // FMODE_PREAD
      if (oin < 0) return -EINVAL;
      in.pos = &oin;
    } else if (in.kind == Kind::kFile) {
      if (!fpos.Load(fd_in)) return -errno;
      in.pos = &fpos.pos;
    }
    if (!CanSpliceRead(in)) return -EINVAL;
    in.nonblock = nb_flag || (in.flags & O_NONBLOCK);
    out.nonblock = nb_flag || (out.flags & O_NONBLOCK);
    r = Move(in, out, len, false);
  } else {
    return -EINVAL;
  }
  if (r < 0) return r;
  if (off_out) std::memcpy(off_out, &oout, sizeof oout);
  if (off_in) std::memcpy(off_in, &oin, sizeof oin);
  return r;
}

}  // namespace
}  // namespace uepoll::impl

using uepoll::impl::FdTable;
using uepoll::impl::FileRef;
using uepoll::impl::ToErrno;
namespace sys = uepoll::impl::sys;

extern "C" {

ssize_t uepoll_sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  FileRef out = FdTable::Get().Lookup(out_fd);
  FileRef in = FdTable::Get().Lookup(in_fd);
  if (!out && !in) return sys::Sendfile(out_fd, in_fd, offset, count);
  int saved = errno;
  ssize_t r =
      uepoll::impl::Sendfile(out_fd, out.get(), in_fd, in.get(), offset, count);
  errno = saved;
  return ToErrno(r);
}

ssize_t uepoll_splice(int fd_in, off_t* off_in, int fd_out, off_t* off_out,
                      size_t len, unsigned int flags) {
  FileRef in = FdTable::Get().Lookup(fd_in);
  FileRef out = FdTable::Get().Lookup(fd_out);
  if (!out && !in) {
    return sys::Splice(fd_in, off_in, fd_out, off_out, len, flags);
  }
  int saved = errno;
  ssize_t r = uepoll::impl::Splice(fd_in, in.get(), off_in, fd_out, out.get(),
                                   off_out, len, flags);
  errno = saved;
  return ToErrno(r);
}

// pread and pwrite: EINVAL for a negative offset (ksys_pread64 checks it
// before the descriptor), then ESPIPE (no FMODE_PREAD), as on pipes and
// sockets.
ssize_t uepoll_pread(int fd, void* buf, size_t count, off_t offset) {
  if (!FdTable::Get().IsOpen(fd)) return sys::Pread(fd, buf, count, offset);
  if (offset < 0) return ToErrno<ssize_t>(-EINVAL);
  return ToErrno<ssize_t>(-ESPIPE);
}

ssize_t uepoll_pwrite(int fd, const void* buf, size_t count, off_t offset) {
  if (!FdTable::Get().IsOpen(fd)) return sys::Pwrite(fd, buf, count, offset);
  if (offset < 0) return ToErrno<ssize_t>(-EINVAL);
  return ToErrno<ssize_t>(-ESPIPE);
}

}  // extern "C"
