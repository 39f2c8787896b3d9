// uepoll_fstat, uepoll_fstatat, uepoll_statx, uepoll_fstatfs,
// uepoll_fstatvfs: what the kernel reports for the file a uepoll object
// stands for (Linux 6.18, measured on the reference machine):
//
//   pipe      S_IFIFO | 0600, pipefs's device, one inode for both ends,
//             the creator's ids, times of the creation (pipefs never
//             updates them);
//   socket    S_IFSOCK | 0777, sockfs's device, one inode per socket, the
//             creator's ids, all times zero;
//   others    eventfds, instances, timerfds and user objects: the kernel's
//             one anonymous inode, which every such file shares (its
//             number, ids, times and device, exactly).
//
// nlink 1, size 0, blocks 0, blksize 4096, rdev 0 for all. fstatfs and
// fstatvfs report the kind's pseudo-filesystem (pipefs, sockfs,
// anon_inodefs): its magic, 4096-byte blocks, no blocks or files, names of
// 255 bytes, its device as the filesystem id. The kernel's
// answer for the kind is read once per process from a kernel object of that
// kind (a pipe, a socket, an eventfd, made and closed at the first stat of
// a uepoll object of that kind); uepoll then changes what belongs to the
// object: its inode number (unique among uepoll objects, at or above 2^32,
// where the kernel's pseudo-filesystem numbers never reach), its ids and
// times. docs/semantics.md D29 says what a program can tell apart.
//
// Arguments are checked by the kernel itself: the call is first made on the
// number's own kernel file (the placeholder), which gives the kernel's
// errno for flags, masks, paths and buffers, and its answer is then
// replaced. A path that names another file (absolute, or not empty) is
// never replaced.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include <uepoll/uepoll.h>

#include "base/mutex.h"
#include "base/sys.h"
#include "capi/errors.h"
#include "capi/stand_in.h"
#include "core/fd_table.h"
#include "core/inode.h"

namespace uepoll::impl {
namespace {

enum StatKind { kAnon = 0, kFifo = 1, kSock = 2, kKinds = 3 };

// The kernel's answer for a file of one kind.
struct KindReference {
  Mutex mu;
  std::atomic<bool> ready{false};
  struct stat st GUARDED_BY(mu);
  struct statx stx GUARDED_BY(mu);         // requested with STATX_MNT_ID
  struct statx stx_unique GUARDED_BY(mu);  // with STATX_MNT_ID_UNIQUE
  struct statfs sfs GUARDED_BY(mu);
  struct statvfs svfs GUARDED_BY(mu);
};
KindReference g_refs[kKinds];

#ifndef STATX_MNT_ID_UNIQUE
constexpr unsigned int kStatxMntIdUnique = 0x4000U;
#else
constexpr unsigned int kStatxMntIdUnique = STATX_MNT_ID_UNIQUE;
#endif

// The reference of kind k, made on first use; nullptr when no kernel
// object can be made now (the caller then reports what it knows without
// the filesystem's device and mount: D29).
KindReference* Reference(StatKind k) {
  KindReference& r = g_refs[k];
  if (r.ready.load(std::memory_order_acquire)) return &r;
  int saved = errno;
  MutexLock l(r.mu);
  if (!r.ready.load(std::memory_order_relaxed)) {
    // A pipe's read end: the reference of both ends (a FIFO's mode and
    // filesystem do not depend on the direction).
    int fds[2];
    FileKind kind = k == kFifo   ? FileKind::kPipe
                    : k == kSock ? FileKind::kSocket
                                 : FileKind::kEventfd;
    int fd = MakeStandInOf(kind, true, fds) == 0 ? fds[0] : -1;
    bool ok = fd >= 0 && sys::Fstat(fd, &r.st) == 0 &&
              sys::Statx(fd, "", AT_EMPTY_PATH,
                         STATX_BASIC_STATS | STATX_BTIME | STATX_MNT_ID,
                         &r.stx) == 0 &&
              sys::Statx(fd, "", AT_EMPTY_PATH,
                         STATX_BASIC_STATS | STATX_BTIME | kStatxMntIdUnique,
                         &r.stx_unique) == 0 &&
              sys::Fstatfs(fd, &r.sfs) == 0 && sys::Fstatvfs(fd, &r.svfs) == 0;
    CloseStandIn(fds);
    if (ok) r.ready.store(true, std::memory_order_release);
  }
  errno = saved;
  return r.ready.load(std::memory_order_relaxed) ? &r : nullptr;
}

StatKind KindOf(File* f) {
  switch (f->kind()) {
    case FileKind::kPipe:
      return kFifo;
    case FileKind::kSocket:
      return kSock;
    default:
      return kAnon;
  }
}

// What every kind shares when no reference could be made.
void FallbackStat(StatKind k, struct stat* st) {
  std::memset(st, 0, sizeof *st);
  st->st_mode = k == kFifo   ? (S_IFIFO | 0600)
                : k == kSock ? (S_IFSOCK | 0777)
                             : 0600;
  st->st_nlink = 1;
  st->st_blksize = 4096;
}

void FillStat(File* f, struct stat* out) {
  StatKind k = KindOf(f);
  struct stat st;
  if (KindReference* r = Reference(k)) {
    MutexLock l(r->mu);
    st = r->st;
  } else {
    FallbackStat(k, &st);
  }
  if (InodeIdentity* id = f->Inode()) {
    st.st_ino = InodeNumber(id);
    InodeOwner(id, &st.st_uid, &st.st_gid);
    st.st_atim = st.st_mtim = st.st_ctim = id->created;
  }
  std::memcpy(out, &st, sizeof st);
}

// The kind's filesystem: simple_statfs's answer and ST_VALID, as every
// pseudo-filesystem gives it; the filesystem id is its device, unknown
// without a reference (0, as st_dev then: D29).
void FallbackStatfs(StatKind k, struct statfs* sfs) {
  constexpr long kPipefsMagic = 0x50495045, kSockfsMagic = 0x534F434B,
                 kAnonInodeFsMagic = 0x09041934;
  constexpr long kStValid = 0x20;
  std::memset(sfs, 0, sizeof *sfs);
  sfs->f_type = k == kFifo   ? kPipefsMagic
                : k == kSock ? kSockfsMagic
                             : kAnonInodeFsMagic;
  sfs->f_bsize = 4096;
  sfs->f_frsize = 4096;
  sfs->f_namelen = 255;
  sfs->f_flags = kStValid;
}

void FillStatfs(File* f, struct statfs* out) {
  StatKind k = KindOf(f);
  struct statfs sfs;
  if (KindReference* r = Reference(k)) {
    MutexLock l(r->mu);
    sfs = r->sfs;
  } else {
    FallbackStatfs(k, &sfs);
  }
  std::memcpy(out, &sfs, sizeof sfs);
}

// glibc's statvfs from the statfs above (ST_VALID is not a statvfs flag).
void FillStatvfs(File* f, struct statvfs* out) {
  StatKind k = KindOf(f);
  struct statvfs v;
  if (KindReference* r = Reference(k)) {
    MutexLock l(r->mu);
    v = r->svfs;
  } else {
    struct statfs sfs;
    FallbackStatfs(k, &sfs);
    std::memset(&v, 0, sizeof v);
    v.f_bsize = static_cast<unsigned long>(sfs.f_bsize);
    v.f_frsize = static_cast<unsigned long>(sfs.f_frsize);
    v.f_namemax = static_cast<unsigned long>(sfs.f_namelen);
  }
  std::memcpy(out, &v, sizeof v);
}

statx_timestamp Timestamp(const timespec& t) {
  statx_timestamp s{};
  s.tv_sec = t.tv_sec;
  s.tv_nsec = static_cast<uint32_t>(t.tv_nsec);
  return s;
}

void FillStatx(File* f, unsigned int mask, struct statx* out) {
  StatKind k = KindOf(f);
  struct statx stx;
  if (KindReference* r = Reference(k)) {
    MutexLock l(r->mu);
    stx = (mask & kStatxMntIdUnique) ? r->stx_unique : r->stx;
  } else {
    struct stat st;
    FallbackStat(k, &st);
    std::memset(&stx, 0, sizeof stx);
    stx.stx_mask = STATX_BASIC_STATS;
    stx.stx_mode = static_cast<uint16_t>(st.st_mode);
    stx.stx_nlink = 1;
    stx.stx_blksize = 4096;
  }
  if (InodeIdentity* id = f->Inode()) {
    stx.stx_ino = InodeNumber(id);
    InodeOwner(id, &stx.stx_uid, &stx.stx_gid);
    stx.stx_atime = stx.stx_mtime = stx.stx_ctime = Timestamp(id->created);
  }
  std::memcpy(out, &stx, sizeof stx);
}

// The path names the directory descriptor's own file.
bool SelfPath(const char* path, int flags) {
  return (flags & AT_EMPTY_PATH) && (!path || path[0] == '\0');
}

}  // namespace
}  // namespace uepoll::impl

using uepoll::impl::FdTable;
using uepoll::impl::FileRef;
using uepoll::impl::ToErrno;
namespace sys = uepoll::impl::sys;

namespace uepoll::impl {
namespace {

// libc's calls with the caller's buffer, or a scratch one when that is
// NULL (which libc's declarations do not allow): the kernel's checks of
// everything else first, then EFAULT, as the kernel's copy-out fails last.
int KernelFstat(int fd, struct stat* st) {
  struct stat scratch;
  if (sys::Fstat(fd, st ? st : &scratch) != 0) return -1;
  return st ? 0 : ToErrno(-EFAULT);
}
int KernelFstatat(int dirfd, const char* path, struct stat* st, int flags) {
  struct stat scratch;
  if (sys::Fstatat(dirfd, path, st ? st : &scratch, flags) != 0) return -1;
  return st ? 0 : ToErrno(-EFAULT);
}
int KernelFstatfs(int fd, struct statfs* sfs) {
  struct statfs scratch;
  if (sys::Fstatfs(fd, sfs ? sfs : &scratch) != 0) return -1;
  return sfs ? 0 : ToErrno(-EFAULT);
}
int KernelFstatvfs(int fd, struct statvfs* v) {
  struct statvfs scratch;
  if (sys::Fstatvfs(fd, v ? v : &scratch) != 0) return -1;
  return v ? 0 : ToErrno(-EFAULT);
}
int KernelStatx(int dirfd, const char* path, int flags, unsigned int mask,
                struct statx* stx) {
  struct statx scratch;
  if (sys::Statx(dirfd, path, flags, mask, stx ? stx : &scratch) != 0) {
    return -1;
  }
  return stx ? 0 : ToErrno(-EFAULT);
}

}  // namespace
}  // namespace uepoll::impl

extern "C" {

int uepoll_fstat(int fd, struct stat* st) {
  FileRef f = FdTable::Get().Lookup(fd);
  if (!f) return uepoll::impl::KernelFstat(fd, st);
  // The kernel checks the arguments on the placeholder; a number whose
  // placeholder was closed behind uepoll's back (D16) still answers.
  if (uepoll::impl::KernelFstat(fd, st) != 0 && errno != EBADF) return -1;
  if (!st) return ToErrno(-EFAULT);
  uepoll::impl::FillStat(f.get(), st);
  return 0;
}

int uepoll_fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  FileRef f = FdTable::Get().Lookup(dirfd);
  int r = uepoll::impl::KernelFstatat(dirfd, path, st, flags);
  if (!f || !uepoll::impl::SelfPath(path, flags)) return r;
  if (r != 0 && errno != EBADF) return -1;
  if (!st) return ToErrno(-EFAULT);
  uepoll::impl::FillStat(f.get(), st);
  return 0;
}

int uepoll_statx(int dirfd, const char* path, int flags, unsigned int mask,
                 struct statx* stx) {
  FileRef f = FdTable::Get().Lookup(dirfd);
  int r = uepoll::impl::KernelStatx(dirfd, path, flags, mask, stx);
  if (!f || !uepoll::impl::SelfPath(path, flags)) return r;
  if (r != 0 && errno != EBADF) return -1;
  if (!stx) return ToErrno(-EFAULT);
  uepoll::impl::FillStatx(f.get(), mask, stx);
  return 0;
}

int uepoll_fstatfs(int fd, struct statfs* buf) {
  FileRef f = FdTable::Get().Lookup(fd);
  if (!f) return uepoll::impl::KernelFstatfs(fd, buf);
  if (uepoll::impl::KernelFstatfs(fd, buf) != 0 && errno != EBADF) return -1;
  if (!buf) return ToErrno(-EFAULT);
  uepoll::impl::FillStatfs(f.get(), buf);
  return 0;
}

int uepoll_fstatvfs(int fd, struct statvfs* buf) {
  FileRef f = FdTable::Get().Lookup(fd);
  if (!f) return uepoll::impl::KernelFstatvfs(fd, buf);
  if (uepoll::impl::KernelFstatvfs(fd, buf) != 0 && errno != EBADF) return -1;
  if (!buf) return ToErrno(-EFAULT);
  uepoll::impl::FillStatvfs(f.get(), buf);
  return 0;
}

}  // extern "C"
