// bridge: an event loop of the application's own, on the kernel's epoll,
// serving N eventfds that another thread signals. Only what the loop
// watches differs:
//
//   kernel  the N eventfds are kernel ones, each registered in the loop's
//           kernel epoll instance: every signal is a write(2), every
//           event a read(2);
//   uepoll  the N eventfds are uepoll ones, inside one watchable uepoll
//           instance (uepoll_epoll_make_watchable), and the loop's kernel
//           epoll watches only that instance's number: a wakeup harvests
//           it with uepoll_epoll_wait(..., 0) and reads the eventfds
//           without system calls.
//
//   producer (CPU 0)                        loop (CPU 1)
//     write eventfd i ... ---> [kernel: N eventfds]   <--- epoll_wait(kep)
//                              [uepoll: e{N eventfds}] <-- epoll_wait(kep)
//                                                          + uepoll harvest
//
// Every event is one token: the producer signals eventfd i only once the
// loop has read its previous token (a flag per eventfd), so each signal is
// exactly one event (every read must return 1, or the run fails) and at
// most N are outstanding. The first run lets the producer go as fast as
// the loop takes tokens (the high event rate; rate 0 in the JSON); the
// others pace it by spinning on the clock (--rate, a list). Figures:
// events/s, events per kernel wakeup (events / the loop's epoll_wait calls
// that returned), the loop thread's CPU per event, and syscalls per event
// of the whole process (the counted pass).
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include <atomic>
#include <memory>

#include <uepoll/uepoll.h>

#include "workloads.h"

namespace uepoll_bench {
namespace {

double ThreadCpuNs() {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  auto ns = [](const timeval& tv) {
    return double(tv.tv_sec) * 1e9 + double(tv.tv_usec) * 1e3;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct alignas(64) Token {
  // 1 while a signal is outstanding. Release by the loop after its read
  // pairs with the producer's acquire before its next write of this
  // eventfd, so a write never overtakes the read of the previous token.
  std::atomic<uint8_t> pending{0};
};

}  // namespace

Result MeasureBridge(const Backend& b, unsigned long nfds,
                     unsigned long maxevents, double rate, bool edge,
                     double runtime) {
  Result r;
  r.workload = "bridge";
  r.backend = b.name;
  r.threads = 2;
  r.params = {{"fds", double(nfds)}, {"rate", rate}};
  if (edge) r.params.push_back({"edge", 1});
  r.ops_label = "events/s";
  const Backend& k = KernelBackend();  // the loop is always the kernel's
  FdList kfds(k), ufds(b);
  RaiseFdLimit(b, long(nfds + 64));
  int kep = kfds.Add(k.epoll_create1(EPOLL_CLOEXEC));
  if (kep < 0) return r.error = CallError(k, "epoll_create1"), r;
  StopFd stop;
  if (!stop.Create(k, kfds, &r.error) || !stop.AddTo(k, kep, &r.error))
    return r;
  int uep = -1;  // uepoll: the watchable instance
  if (!b.is_kernel) {
    uep = ufds.Add(b.epoll_create1(EPOLL_CLOEXEC));
    if (uep < 0) return r.error = CallError(b, "epoll_create1"), r;
    if (uepoll_epoll_make_watchable(uep) < 0)
      return r.error = CallError(b, "epoll_make_watchable"), r;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = kInstanceTag;
    if (k.epoll_ctl(kep, EPOLL_CTL_ADD, uep, &ev) < 0)
      return r.error = CallError(k, "epoll_ctl(ADD instance)"), r;
  }
  std::vector<int> fds;
  for (unsigned long i = 0; i < nfds; ++i) {
    int fd = ufds.Add(b.eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (fd < 0) return r.error = CallError(b, "eventfd"), r;
    fds.push_back(fd);
    struct epoll_event ev = {};
    ev.events = EPOLLIN | (edge ? uint32_t{EPOLLET} : 0u);
    ev.data.u64 = i;
    int ep = b.is_kernel ? kep : uep;
    if (b.epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD eventfd)"), r;
  }
  std::unique_ptr<Token[]> tokens(new Token[nfds]);

  std::atomic<bool> done{false};
  Failure failure;
  Gate gate;
  ThreadGroup group;
  uint64_t events = 0, wakeups = 0;
  double loop_cpu = 0;
  group.Spawn([&] {
    PinToCpu(1);
    gate.Arrive();
    double cpu0 = ThreadCpuNs();
    std::vector<struct epoll_event> kev(maxevents), uev(maxevents);
    const int max = int(maxevents);
    // Reads one token of eventfd i; false (failure set) if it was not
    // exactly one.
    auto take = [&](uint64_t i) {
      uint64_t v = 0;
      if (b.read(fds[i], &v, sizeof v) != sizeof v)
        return failure.Set(CallError(b, "read(eventfd)")), false;
      if (v != 1)
        return failure.Set("eventfd read " + std::to_string(v) + ", want 1"),
               false;
      tokens[i].pending.store(0, std::memory_order_release);
      ++events;
      return true;
    };
    for (;;) {
      int n = k.epoll_wait(kep, kev.data(), max, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return failure.Set(CallError(k, "epoll_wait"));
      ++wakeups;
      for (int j = 0; j < n; ++j) {
        uint64_t tag = kev[size_t(j)].data.u64;
        if (tag == kStopTag) {
          loop_cpu = ThreadCpuNs() - cpu0;
          return;
        }
        if (tag != kInstanceTag) {
          if (!take(tag)) return;
          continue;
        }
        // One harvest per wakeup, as an event loop's callback does; what
        // it leaves keeps the instance readable for the next epoll_wait.
        int m = b.epoll_wait(uep, uev.data(), max, 0);
        if (m < 0) return failure.Set(CallError(b, "epoll_wait(harvest)"));
        for (int h = 0; h < m; ++h) {
          if (!take(uev[size_t(h)].data.u64)) return;
        }
      }
    }
  });
  uint64_t writes = 0;
  group.Spawn([&] {
    PinToCpu(0);
    gate.Arrive();
    const int64_t step = rate > 0 ? int64_t(1e9 / rate) : 0;
    int64_t next = NowNs();
    size_t i = 0;
    const uint64_t one = 1;
    while (!done.load(std::memory_order_relaxed)) {
      if (step) {
        next += step;
        while (NowNs() < next) CpuRelax();
      }
      // The next eventfd whose token the loop has taken back.
      while (tokens[i].pending.load(std::memory_order_acquire)) {
        i = (i + 1) % nfds;
        if (done.load(std::memory_order_relaxed)) return;
        CpuRelax();
      }
      tokens[i].pending.store(1, std::memory_order_relaxed);
      if (b.write(fds[i], &one, sizeof one) != sizeof one)
        return failure.Set(CallError(b, "write(eventfd)"));
      ++writes;
      i = (i + 1) % nfds;
    }
  });
  gate.WaitArrivals(2);
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  failure.SleepFor(PassRuntime(runtime));
  done.store(true);
  sys.Stop();
  double secs = double(NowNs() - t0) / 1e9;
  stop.Fire(k);
  group.JoinAll(20, "bridge threads");
  if (failure.failed()) return r.error = failure.message(), r;
  if (!events) return r.error = "no event was delivered", r;
  // Events in the window; the last few taken after it are within noise.
  r.ops_per_sec = double(events) / secs;
  sys.Finish(&r, double(events));
  r.metrics = {
      {"events_per_wakeup", double(events) / double(wakeups ? wakeups : 1),
       "events/wakeup", true},
      {"loop_cpu_per_event_ns", loop_cpu / double(events), "loop CPU ns/event",
       false},
      {"signals", double(writes), "", true},
  };
  return r;
}

int CmdBridge(int argc, char** argv) {
  CommonOptions c;
  unsigned long nfds = 256, maxevents = 64;
  std::vector<unsigned long> rates = {100000};
  bool paced_only = false, edge = false;
  std::vector<Option> opts = {
      {'f', "fds", Option::kUint, &nfds, "eventfds (default 256)"},
      {'m', "maxevents", Option::kUint, &maxevents,
       "maxevents of the loop's waits and harvests (default 64)"},
      {0, "rate", Option::kList, &rates,
       "paced runs: signals per second (default 100000)"},
      {0, "paced-only", Option::kFlag, &paced_only,
       "skip the run where the producer goes as fast as the loop takes "
       "signals"},
      {'E', "edge", Option::kFlag, &edge,
       "register the eventfds edge-triggered (default level-triggered)"},
  };
  if (int rc = ParseCommand("uepoll-bench bridge [<options>]", argc, argv,
                            &opts, &c);
      rc >= 0)
    return rc;
  if (nfds == 0 || nfds > 100000) return BadUsage("-f/--fds: 1..100000");
  if (maxevents == 0 || maxevents > 4096)
    return BadUsage("-m/--maxevents: 1..4096");
  for (unsigned long rt : rates)
    if (rt > 100000000) return BadUsage("--rate: at most 1e8");
  if (!paced_only) rates.insert(rates.begin(), 0);  // 0: unpaced
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  const auto be = c.For(false);
  Progress progress(int(be.size() * rates.size()));
  for (unsigned long rt : rates)
    for (const Backend* b : be)
      RunMeasurement(progress, report, "bridge", *b,
                     "rate=" + (rt ? std::to_string(rt) : std::string("max")),
                     [&] {
                       return MeasureBridge(*b, nfds, maxevents, double(rt),
                                            edge, runtime);
                     });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
