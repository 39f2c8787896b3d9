// uepoll_sigaction: sigaction(2) for handlers that may call uepoll. The
// kernel holds Trampoline; the application's handler and flags are kept
// here. Trampoline runs the handler unless this thread holds a uepoll
// lock, and then puts the signal off (base/signal_defer.h says how, and
// why). The interposer's sigaction, signal, bsd_signal and sysv_signal
// install through here (src/interpose/interpose_signal.c).
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>

#include <uepoll/uepoll.h>

#include "base/fork_path.h"
#include "base/mutex.h"
#include "base/signal_defer.h"
#include "base/sys.h"

namespace uepoll::impl {
namespace {

constexpr int kMaxSignal = 64;
// The flags Trampoline carries out itself instead of the kernel.
constexpr int kEmulated = SA_SIGINFO | SA_NODEFER | SA_RESETHAND;

// What the application installed on a signal, while the kernel holds
// Trampoline there. Written under g_mu, read by Trampoline.
struct UserAction {
  std::atomic<void*> handler{nullptr};  // sa_handler or sa_sigaction
  std::atomic<int> flags{0};            // the application's sa_flags
  // One more at each change of the action, stored (release) after the
  // two above: a delivery that finds it unchanged under g_mu was for the
  // action that is still there.
  std::atomic<unsigned> gen{0};
};
UserAction g_actions[kMaxSignal + 1];
// One install at a time, so that the kernel's action and g_actions agree.
// A handler may take it: Trampoline runs handlers only where this thread
// holds no uepoll lock.
Mutex g_mu;
std::atomic<void (*)(int)> g_reset_hook{nullptr};

void Changed(UserAction& a) {
  a.gen.store(a.gen.load(std::memory_order_relaxed) + 1,
              std::memory_order_release);
}

// Signals the kernel raises for the instruction that just ran (a fault, a
// trap) cannot wait: putting one off would run the instruction again. They
// keep libc's sigaction, and so do the two that cannot be caught.
bool Deferrable(int sig) {
  switch (sig) {
    case SIGSEGV:
    case SIGBUS:
    case SIGILL:
    case SIGFPE:
    case SIGTRAP:
    case SIGSYS:
    case SIGKILL:
    case SIGSTOP:
      return false;
    default:
      return sig >= 1 && sig <= kMaxSignal;
  }
}

void Trampoline(int sig, siginfo_t* info, void* context) {
  if (InSignalCritical()) {
    // Blocked when this handler returns (the kernel restores the
    // context's mask), and pending again, with the same siginfo: the
    // kernel delivers it when ReleaseDeferredSignals unblocks it.
    int saved = errno;
    sigaddset(&static_cast<ucontext_t*>(context)->uc_sigmask, sig);
    t_signal_defer.deferred |= uint64_t{1} << (sig - 1);
    siginfo_t again = *info;
    sys::Syscall(SYS_rt_tgsigqueueinfo, getpid(), gettid(), sig,
                 reinterpret_cast<long>(&again), 0, 0);
    errno = saved;
    return;
  }
  unsigned gen = g_actions[sig].gen.load(std::memory_order_acquire);
  void* handler = g_actions[sig].handler.load(std::memory_order_acquire);
  int flags = g_actions[sig].flags.load(std::memory_order_relaxed);
  // Null: the action changed to the default or to ignore while this
  // delivery was on its way, and it is dropped.
  if (handler == nullptr) return;
  if (flags & SA_RESETHAND) {
    if (auto hook = g_reset_hook.load(std::memory_order_acquire)) hook(sig);
    // As the kernel does on delivery: the default again, from now on. Not
    // over an action installed since this delivery read the one above
    // (another thread's sigaction, or this handler's own): the kernel
    // would have reset at delivery, before that install, which stays
    // (SignalDefer.AnInstallWhileAResetHandDeliveryIsOnItsWayStays).
    MutexLock l(g_mu);
    if (g_actions[sig].gen.load(std::memory_order_relaxed) == gen) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      int saved = errno;
      sys::Sigaction(sig, &dfl, nullptr);
      errno = saved;
      g_actions[sig].handler.store(nullptr, std::memory_order_release);
      Changed(g_actions[sig]);
    }
  }
  if (flags & SA_NODEFER) {
    sigset_t self;
    sigemptyset(&self);
    sigaddset(&self, sig);
    pthread_sigmask(SIG_UNBLOCK, &self, nullptr);
  }
  // What the handler allocates in uepoll comes from the handler arena, not
  // malloc, which the handler may have interrupted (base/handler_arena.h).
  uintptr_t outer = t_signal_defer.handler_frame;
  t_signal_defer.handler_frame =
      reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (flags & SA_SIGINFO) {
    reinterpret_cast<void (*)(int, siginfo_t*, void*)>(handler)(sig, info,
                                                                context);
  } else {
    reinterpret_cast<void (*)(int)>(handler)(sig);
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_signal_defer.handler_frame = outer;
}

bool IsTrampoline(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == Trampoline;
}

}  // namespace

void SetSignalResetHookForTest(void (*hook)(int sig)) {
  g_reset_hook.store(hook, std::memory_order_release);
}

}  // namespace uepoll::impl

using namespace uepoll::impl;

extern "C" UEPOLL_FORK_PATH int uepoll_sigaction(int sig,
                                                 const struct sigaction* act,
                                                 struct sigaction* oldact) {
  if (!Deferrable(sig)) return sys::Sigaction(sig, act, oldact);
  MutexLock l(g_mu);
  // One call to the kernel, which sets the new action (if any) and reports
  // the one it replaced; libc's own answer for a number it refuses (EINVAL:
  // its two reserved signals), with nothing changed.
  struct sigaction cur;
  // What g_actions held before this call: the handler behind a trampoline
  // the kernel reports as replaced.
  void* was = g_actions[sig].handler.load(std::memory_order_relaxed);
  int was_flags = g_actions[sig].flags.load(std::memory_order_relaxed);
  if (!act) {
    if (sys::Sigaction(sig, nullptr, &cur) != 0) return -1;
  } else if (act->sa_handler == SIG_DFL || act->sa_handler == SIG_IGN) {
    if (sys::Sigaction(sig, act, &cur) != 0) return -1;
    g_actions[sig].handler.store(nullptr, std::memory_order_release);
    Changed(g_actions[sig]);
  } else {
    struct sigaction k = *act;
    k.sa_sigaction = Trampoline;
    k.sa_flags = (act->sa_flags & ~kEmulated) | SA_SIGINFO;
    // Published before the kernel can run Trampoline with it.
    g_actions[sig].flags.store(act->sa_flags, std::memory_order_relaxed);
    g_actions[sig].handler.store(
        (act->sa_flags & SA_SIGINFO)
            ? reinterpret_cast<void*>(act->sa_sigaction)
            : reinterpret_cast<void*>(act->sa_handler),
        std::memory_order_release);
    if (sys::Sigaction(sig, &k, &cur) != 0) {
      int err = errno;
      g_actions[sig].flags.store(was_flags, std::memory_order_relaxed);
      g_actions[sig].handler.store(was, std::memory_order_release);
      errno = err;
      return -1;
    }
    Changed(g_actions[sig]);
  }
  struct sigaction prev = cur;
  if (IsTrampoline(cur)) {
    // What a plain sigaction would have reported: the application's
    // handler and flags, the kernel's copy of the mask.
    prev.sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(was);
    prev.sa_flags = (cur.sa_flags & ~kEmulated) | (was_flags & kEmulated);
  }
  if (oldact) *oldact = prev;
  return 0;
}
