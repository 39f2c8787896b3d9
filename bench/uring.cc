#include "uring.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef UEPOLL_BENCH_HAVE_LIBURING
#include <liburing.h>
#include <poll.h>
#include <sys/syscall.h>

#include <atomic>
#include <unordered_map>
#endif

namespace uepoll_bench {
namespace {

int KEventfd(unsigned int v, int f) { return ::eventfd(v, f); }

int Fail(int e) {
  errno = e;
  return -1;
}

#ifdef UEPOLL_BENCH_HAVE_LIBURING

// Linux 6.12 turned io_uring_getevents_arg's pad into min_wait_usec and
// added IORING_FEAT_MIN_TIMEOUT; Debian 12's headers predate both, so the
// layout and the bit are spelled out here and the bit is checked at run
// time.
struct GeteventsArg {
  uint64_t sigmask;
  uint32_t sigmask_sz;
  uint32_t min_wait_usec;
  uint64_t ts;
};
static_assert(sizeof(GeteventsArg) == sizeof(io_uring_getevents_arg),
              "the kernel's struct io_uring_getevents_arg");
constexpr unsigned kFeatMinTimeout = 1u << 15;

// user_data of the ring's own requests (poll removals): never an event.
constexpr uint64_t kInternalTag = ~uint64_t{0} - 1;

struct Ring {
  io_uring ring;
  unsigned features = 0;
  bool disabled = false;  // R_DISABLED until the first wait enables it
  // tag -> (fd, mask) of the armed polls, to re-arm a multishot poll that
  // the kernel ended (a completion without IORING_CQE_F_MORE). Used by the
  // thread that owns the ring at the time (setup, then the waiter).
  std::unordered_map<uint64_t, std::pair<int, unsigned>> polls;
};

// Rings by descriptor number: read on every call from several threads,
// written only at create and close, so lookups share the line read-only.
constexpr int kMaxRings = 1 << 16;
std::atomic<Ring*> g_rings[kMaxRings];

Ring* Find(int fd) {
  if (fd < 0 || fd >= kMaxRings) return nullptr;
  return g_rings[fd].load(std::memory_order_acquire);
}

int URingCreate(int flags) {
  if (flags & ~EPOLL_CLOEXEC) return Fail(EINVAL);
  auto* r = new Ring;
  io_uring_params p;
  // SINGLE_ISSUER + DEFER_TASKRUN, the setup io_uring's authors recommend
  // for a ring with one owner thread: completion work runs only when the
  // owner asks for events, and a sleeping waiter is woken only once enough
  // completions are pending for its wait (which is what makes min_wait
  // batch). R_DISABLED: the owner is the thread that enables the ring, at
  // its first wait (Enable), not the thread that creates it.
  static const unsigned kFlags[] = {
      IORING_SETUP_R_DISABLED | IORING_SETUP_SINGLE_ISSUER |
          IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,  // Linux < 6.1
      0};                                                     // Linux < 5.19
  int ret = -EINVAL;
  for (unsigned setup : kFlags) {
    memset(&p, 0, sizeof(p));
    p.flags = setup | IORING_SETUP_CQSIZE;
    p.cq_entries = 4096;
    ret = io_uring_queue_init_params(256, &r->ring, &p);
    if (ret != -EINVAL) break;
  }
  if (ret < 0) {
    delete r;
    return Fail(-ret);
  }
  r->disabled = p.flags & IORING_SETUP_R_DISABLED;
  r->features = p.features;
  int fd = r->ring.ring_fd;
  if (fd >= kMaxRings) {
    io_uring_queue_exit(&r->ring);
    delete r;
    return Fail(EMFILE);
  }
  g_rings[fd].store(r, std::memory_order_release);
  return fd;
}

// The first wait makes its thread the ring's owner (SINGLE_ISSUER).
bool Enable(Ring* r) {
  if (!r->disabled) return true;
  // Debian 12's liburing.so lacks io_uring_enable_rings: the syscall.
  if (syscall(__NR_io_uring_register, r->ring.ring_fd,
              IORING_REGISTER_ENABLE_RINGS, nullptr, 0) < 0)
    return false;
  r->disabled = false;
  return true;
}

io_uring_sqe* Sqe(Ring* r) {
  io_uring_sqe* sqe = io_uring_get_sqe(&r->ring);
  if (!sqe && !r->disabled) {  // the SQ is full: flush it and try again
    io_uring_submit(&r->ring);
    sqe = io_uring_get_sqe(&r->ring);
  }
  return sqe;
}

bool Arm(Ring* r, int fd, unsigned mask, uint64_t tag) {
  io_uring_sqe* sqe = Sqe(r);
  if (!sqe) return false;
  io_uring_prep_poll_multishot(sqe, fd, mask);
  io_uring_sqe_set_data64(sqe, tag);
  return true;
}

int URingCtl(int epfd, int op, int fd, struct epoll_event* ev) {
  Ring* r = Find(epfd);
  if (!r) return Fail(EBADF);
  if (op == EPOLL_CTL_ADD) {
    if (!ev) return Fail(EFAULT);
    // A multishot poll reports each wakeup: no ONESHOT, EXCLUSIVE or MOD.
    if (ev->events & (EPOLLONESHOT | EPOLLEXCLUSIVE)) return Fail(EINVAL);
    unsigned mask = ev->events & (POLLIN | POLLOUT | POLLPRI | POLLRDHUP);
    if (r->polls.count(ev->data.u64)) return Fail(EEXIST);
    if (!Arm(r, fd, mask, ev->data.u64)) return Fail(ENOMEM);
    r->polls[ev->data.u64] = {fd, mask};
    return 0;
  }
  if (op == EPOLL_CTL_DEL) {
    for (auto it = r->polls.begin(); it != r->polls.end(); ++it) {
      if (it->second.first != fd) continue;
      io_uring_sqe* sqe = Sqe(r);
      if (!sqe) return Fail(ENOMEM);
      io_uring_prep_poll_remove(sqe, it->first);
      io_uring_sqe_set_data64(sqe, kInternalTag);
      r->polls.erase(it);
      return 0;
    }
    return Fail(ENOENT);
  }
  return Fail(EINVAL);
}

// Moves up to max completions into evs as events.
int Reap(Ring* r, struct epoll_event* evs, int max) {
  int n = 0;
  unsigned head, seen = 0;
  io_uring_cqe* cqe;
  io_uring_for_each_cqe(&r->ring, head, cqe) {
    if (n == max) break;
    ++seen;
    uint64_t tag = cqe->user_data;
    if (tag == kInternalTag) continue;
    if (!(cqe->flags & IORING_CQE_F_MORE)) {  // the poll ended: re-arm it
      auto it = r->polls.find(tag);
      if (it != r->polls.end())
        Arm(r, it->second.first, it->second.second, tag);
    }
    if (cqe->res <= 0) continue;  // ended or cancelled: no event
    evs[n].events = uint32_t(cqe->res);
    evs[n].data.u64 = tag;
    ++n;
  }
  io_uring_cq_advance(&r->ring, seen);
  return n;
}

// Waits until a completion is ready (timeout_ms -1: forever, 0: not at
// all), submitting the pending polls first.
int URingWait(int epfd, struct epoll_event* evs, int max, int timeout_ms) {
  Ring* r = Find(epfd);
  if (!r) return Fail(EBADF);
  if (max <= 0) return Fail(EINVAL);
  if (!Enable(r)) return -1;
  for (;;) {
    if (io_uring_sq_ready(&r->ring) == 0) {
      int n = Reap(r, evs, max);
      if (n) return n;
    }
    io_uring_cqe* cqe = nullptr;
    int ret;
    if (timeout_ms == 0) {
      // Non-blocking: submit what is pending, then run completion work
      // while the ring says some is pending (IORING_SQ_TASKRUN). A kernel
      // entry without a wait runs at most a small batch of it (20 items in
      // Linux 6.x with DEFER_TASKRUN), hence the loop.
      if (io_uring_sq_ready(&r->ring)) io_uring_submit(&r->ring);
      int n = Reap(r, evs, max);
      while (n < max &&
             (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_TASKRUN)) {
        ret = io_uring_get_events(&r->ring);
        if (ret < 0) return n ? n : Fail(-ret);
        n += Reap(r, evs + n, max - n);
      }
      return n;
    } else if (timeout_ms < 0) {
      ret = io_uring_submit_and_wait(&r->ring, 1);
    } else {
      __kernel_timespec ts = {timeout_ms / 1000,
                              (timeout_ms % 1000) * 1000000LL};
      ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, nullptr);
      if (ret == -ETIME) return Reap(r, evs, max);
    }
    if (ret < 0) return Fail(-ret);
    int n = Reap(r, evs, max);
    if (n || timeout_ms == 0) return n;
  }
}

// io_uring's own min_wait (Linux 6.12): wait up to min_wait for max
// completions; at min_wait return if any is ready, else wait on for one.
int URingWaitMin(int epfd, struct epoll_event* evs, int max, int timeout_ms,
                 uint64_t min_wait_ns) {
  Ring* r = Find(epfd);
  if (!r) return Fail(EBADF);
  if (!(r->features & kFeatMinTimeout)) return Fail(EOPNOTSUPP);
  if (timeout_ms >= 0) return Fail(EINVAL);  // not needed by the workloads
  if (!Enable(r)) return -1;
  if (io_uring_sq_ready(&r->ring)) io_uring_submit(&r->ring);
  for (;;) {
    GeteventsArg arg = {};
    arg.min_wait_usec = uint32_t(min_wait_ns / 1000);
    long ret = syscall(__NR_io_uring_enter, r->ring.ring_fd, 0, unsigned(max),
                       IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg,
                       sizeof(arg));
    // ETIME: the minimum wait ended (with or without completions).
    if (ret < 0 && errno != ETIME) return -1;
    int n = Reap(r, evs, max);
    if (n) return n;
    if (ret < 0) break;  // nothing came in the window: wait for the first
  }
  return URingWait(epfd, evs, max, -1);
}

int URingClose(int fd) {
  Ring* r = Find(fd);
  if (!r) return ::close(fd);
  g_rings[fd].store(nullptr, std::memory_order_release);
  io_uring_queue_exit(&r->ring);  // closes the ring's descriptor
  delete r;
  return 0;
}

#else  // !UEPOLL_BENCH_HAVE_LIBURING

int URingCreate(int) { return Fail(ENOSYS); }
int URingCtl(int, int, int, struct epoll_event*) { return Fail(ENOSYS); }
int URingWait(int, struct epoll_event*, int, int) { return Fail(ENOSYS); }
int URingClose(int fd) { return ::close(fd); }
constexpr auto URingWaitMin = nullptr;

#endif

const Backend kIoUring = {"io_uring",   "io_uring:",      true,     URingCreate,
                          URingCtl,     URingWait,        KEventfd, ::pipe2,
                          ::socketpair, ::read,           ::write,  URingClose,
                          URingWaitMin, /*is_uring=*/true};

}  // namespace

const Backend& IoUringBackend() { return kIoUring; }

bool IoUringAvailable(std::string* why) {
#ifdef UEPOLL_BENCH_HAVE_LIBURING
  int fd = URingCreate(0);
  if (fd < 0) {
    *why = std::string("io_uring_setup: ") + strerror(errno);
    return false;
  }
  URingClose(fd);
  return true;
#else
  *why =
      "uepoll-bench was built without liburing (liburing-dev absent at "
      "configure time)";
  return false;
#endif
}

}  // namespace uepoll_bench
