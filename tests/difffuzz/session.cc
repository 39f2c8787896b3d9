// uepoll-difffuzz: a Session's setup and destruction (see interp.h).
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.h>

#include "difffuzz/interp.h"

namespace difffuzz {

// ---------------------------------------------------------------- session

namespace {

// Under the kernel numbering, uepoll's long-lived descriptors of its own
// (the bridge, this thread's two sleep descriptors) are made once, before
// any session lines the numbers up, so that they sit below the regions
// (numbering.h) instead of taking a number the uepoll side would get.
void MakeUepollsOwnDescriptors() {
  static const bool done = [] {
    int a = uepoll_epoll_create1(EPOLL_CLOEXEC);
    int b = uepoll_epoll_create1(EPOLL_CLOEXEC);
    int e = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev {};
    ev.events = EPOLLIN;
    uepoll_epoll_ctl(a, EPOLL_CTL_ADD, e, &ev);  // a kernel half
    uepoll_epoll_ctl(b, EPOLL_CTL_ADD, a, &ev);  // the bridge
    uepoll_epoll_wait(b, &ev, 1, 1);             // a sleep on descriptors
    uepoll_close(b);
    uepoll_close(a);
    ::close(e);
    return true;
  }();
  (void)done;
}

}  // namespace

Session::Session(const Options& opt)
    : opt_(opt), numbering_(kFdSpan, opt.numbering) {
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old);
  old_sigpipe_ = reinterpret_cast<void*>(old.sa_handler);

  // Disjoint: uepoll numbers come from their own range, so that a
  // handle's two numbers line up (interp.h). Kernel: the library's
  // default, where instances can hold kernel descriptors; each side gets a
  // region of the one table (numbering.h).
  const bool kernel_mode = opt.numbering == NumberingMode::kKernel;
  if (uepoll_set_fd_mode(kernel_mode ? UEPOLL_FD_MODE_KERNEL
                                     : UEPOLL_FD_MODE_DISJOINT) != 0) {
    setup_error_ = kernel_mode
                       ? "cannot select uepoll's kernel numbering (this "
                         "process already uses the disjoint one)"
                       : "cannot select uepoll's disjoint numbering";
    return;
  }
  if (kernel_mode) MakeUepollsOwnDescriptors();
  uepoll_live_counts c{};
  uepoll_debug_live_counts(&c);
  if (c.descriptors != 0) {
    setup_error_ = "uepoll descriptors are open before the session";
    return;
  }
  // The state check's scratch instances, at numbers no op names: below
  // the regions (kernel numbering), beyond every offset (disjoint).
  kscratch_ = ::epoll_create1(EPOLL_CLOEXEC);
  uscratch_ = uepoll_epoll_create1(EPOLL_CLOEXEC);
  if (!kernel_mode && uscratch_ >= 0) {
    const int far = UEPOLL_FD_BASE + kFdSpan + 64;
    int moved = uepoll_dup2(uscratch_, far);
    uepoll_close(uscratch_);
    uscratch_ = moved;
  }
  if (kscratch_ < 0 || uscratch_ < 0) {
    setup_error_ = "cannot make the state check's scratch instances";
    return;
  }
  uepoll_debug_live_counts(&c);
  live_files_ = c.files;
  live_items_ = c.items;
  live_descriptors_ = c.descriptors;
  live_instances_ = c.instances;

  if (!numbering_.Setup(&setup_error_)) return;
  cur_.assign(kFdSpan + 8, -1);
  ok_ = true;
}

Session::~Session() {
  if (!torn_down_) {
    // Kernel side first: sanitizer runtimes (UBSan's vptr check) need free
    // kernel descriptors for themselves while uepoll calls run.
    if (ok_) {
      for (int off = 0; off < kFdSpan; ++off) ::close(numbering_.Fd(true, off));
    }
    if (ok_ || opt_.numbering == NumberingMode::kDisjoint) {
      for (int off = 0; off < kFdSpan; ++off)
        uepoll_close(numbering_.Fd(false, off));
    }
  }
  numbering_.Restore();
  if (kscratch_ >= 0) ::close(kscratch_);
  if (uscratch_ >= 0) uepoll_close(uscratch_);
  struct sigaction old {};
  old.sa_handler = reinterpret_cast<void (*)(int)>(old_sigpipe_);
  sigaction(SIGPIPE, &old, nullptr);
}

}  // namespace difffuzz
