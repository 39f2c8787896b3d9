// churn (reference-counted instances, so that closing a watched file never
// takes a global lock): every thread repeatedly creates a source, ADDs it to
// one shared instance, signals it, harvests with a non-blocking wait and closes
// it without DEL, so the close has to unhook the registration (the kernel's
// eventpoll_release_file path). One op is one such cycle.
#include <errno.h>
#include <sys/eventfd.h>

#include <atomic>

#include "workloads.h"

namespace uepoll_bench {
namespace {

struct Counter {
  unsigned long ops = 0;
  char pad[64];
};

}  // namespace

Result MeasureChurn(const Backend& b, unsigned long threads, double runtime) {
  Result r;
  r.workload = "churn";
  r.backend = b.name;
  r.threads = threads;
  FdList fds(b);
  RaiseFdLimit(b, long(threads + 64));
  int epfd = fds.Add(b.epoll_create1(0));
  if (epfd < 0) return r.error = CallError(b, "epoll_create1"), r;

  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  std::vector<Counter> counters(threads);
  ThreadGroup group;
  for (unsigned long t = 0; t < threads; ++t) {
    group.Spawn([&, t] {
      PinToCpu(unsigned(t));
      gate.Arrive();
      struct epoll_event evs[16];
      const uint64_t one = 1;
      unsigned long ops = 0;
      while (!done.load(std::memory_order_relaxed)) {
        int fd = b.eventfd(0, EFD_NONBLOCK);
        if (fd < 0) return failure.Set(CallError(b, "eventfd"));
        struct epoll_event ev = {};
        ev.events = EPOLLIN;
        ev.data.u64 = uint64_t(fd);
        const char* failed = nullptr;
        if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
          failed = "epoll_ctl(ADD)";
        else if (b.write(fd, &one, sizeof(one)) < 0)
          failed = "write";
        else if (b.epoll_wait(epfd, evs, 16, 0) < 0)
          failed = "epoll_wait";
        if (failed) {
          failure.Set(CallError(b, failed));
          b.close(fd);
          return;
        }
        if (b.close(fd) < 0) return failure.Set(CallError(b, "close"));
        ops++;
      }
      counters[t].ops = ops;
    });
  }
  gate.WaitArrivals(unsigned(threads));
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  failure.SleepFor(PassRuntime(runtime));
  done.store(true);
  sys.Stop();
  group.JoinAll(10, "churn threads");
  double secs = double(NowNs() - t0) / 1e9;
  if (failure.failed()) return r.error = failure.message(), r;
  unsigned long ops = 0;
  for (const Counter& c : counters) ops += c.ops;
  r.ops_per_sec = double(ops) / secs;
  sys.Finish(&r, r.ops_per_sec * secs);
  return r;
}

int CmdChurn(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> threads = {1, 2, 4, 16, 64};
  std::vector<Option> opts = {
      {'t', "threads", Option::kList, &threads,
       "thread counts (default 1,2,4,16,64)"},
  };
  if (int rc =
          ParseCommand("uepoll-bench churn [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  for (unsigned long t : threads)
    if (t > 4096) return BadUsage("-t/--threads: at most 4096");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  Progress progress(int(c.For(false).size() * threads.size()));
  for (unsigned long t : threads)
    for (const Backend* b : c.For(false))
      RunMeasurement(progress, report, "churn", *b, "t=" + std::to_string(t),
                     [&] { return MeasureChurn(*b, t, runtime); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
