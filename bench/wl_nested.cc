// nested (nested epoll must not take a global lock on its poll path; loops
// and depth are excluded at ADD instead): the sources live in the innermost of
// D stacked instances and every thread blocks on the outermost, so each event
// has to travel up the whole chain before anyone wakes:
//
//   t t t ... (epoll_wait on e1, blocking)
//   e1 <-(lt)- e2 <-(lt)- ... <-(lt)- eD <- s s s ... (eventfds)
//
// A thread that wakes walks down the chain with non-blocking waits, consumes
// one source and signals it again, so the number of ready tokens stays
// constant (one per source) and no writer thread sets the pace. One op is one
// such cycle; a walk that finds nothing (another thread was faster) counts
// as a miss.
#include <errno.h>
#include <stdio.h>
#include <sys/eventfd.h>

#include <atomic>

#include "workloads.h"

namespace uepoll_bench {
namespace {

struct Counters {
  unsigned long ops = 0, misses = 0;
  char pad[64];  // keep neighbours' counters off this cache line
};

}  // namespace

Result MeasureNested(const Backend& b, unsigned long threads,
                     unsigned long depth, unsigned long sources,
                     double runtime) {
  Result r;
  r.workload = "nested";
  r.backend = b.name;
  r.threads = threads;
  r.params = {{"depth", double(depth)}};
  FdList fds(b);
  StopFd stop;
  RaiseFdLimit(b, long(sources + depth + 64));
  std::vector<int> chain;  // chain[0] outermost
  for (unsigned long i = 0; i < depth; ++i) {
    chain.push_back(fds.Add(b.epoll_create1(0)));
    if (chain.back() < 0) return r.error = CallError(b, "epoll_create1"), r;
  }
  for (unsigned long i = 1; i < depth; ++i) {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = kInstanceTag | i;
    if (b.epoll_ctl(chain[i - 1], EPOLL_CTL_ADD, chain[i], &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD instance)"), r;
  }
  if (!stop.Create(b, fds, &r.error) || !stop.AddTo(b, chain[0], &r.error))
    return r;
  for (unsigned long i = 0; i < sources; ++i) {
    int fd = fds.Add(b.eventfd(1, EFD_NONBLOCK));
    if (fd < 0) return r.error = CallError(b, "eventfd"), r;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = uint64_t(fd);
    if (b.epoll_ctl(chain[depth - 1], EPOLL_CTL_ADD, fd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD source)"), r;
  }

  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  std::vector<Counters> counters(threads);
  ThreadGroup group;
  for (unsigned long t = 0; t < threads; ++t) {
    group.Spawn([&, t] {
      PinToCpu(unsigned(t));
      gate.Arrive();
      Counters& c = counters[t];
      struct epoll_event ev;
      uint64_t val, one = 1;
      while (!done.load(std::memory_order_relaxed)) {
        int n = b.epoll_wait(chain[0], &ev, 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return failure.Set(CallError(b, "epoll_wait(outer)"));
        if (ev.data.u64 == kStopTag) break;
        while (n == 1 && (ev.data.u64 & kInstanceTag)) {
          n = b.epoll_wait(chain[ev.data.u64 & ~kInstanceTag], &ev, 1, 0);
          if (n < 0) return failure.Set(CallError(b, "epoll_wait(inner)"));
        }
        int fd = int(ev.data.u64);
        if (n == 0 || b.read(fd, &val, sizeof(val)) < 0) {
          if (n != 0 && errno != EAGAIN)
            return failure.Set(CallError(b, "read"));
          c.misses++;
          continue;
        }
        if (b.write(fd, &one, sizeof(one)) < 0)
          return failure.Set(CallError(b, "write"));
        c.ops++;
      }
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
  double secs = double(NowNs() - t0) / 1e9;
  stop.Fire(b);
  group.JoinAll(10, "nested threads");
  if (failure.failed()) return r.error = failure.message(), r;
  unsigned long ops = 0, misses = 0;
  for (const Counters& c : counters) {
    ops += c.ops;
    misses += c.misses;
  }
  r.ops_per_sec = double(ops) / secs;
  sys.Finish(&r, r.ops_per_sec * secs);
  r.metrics = {
      {"misses_per_op", ops ? double(misses) / double(ops) : 0, "", false},
      {"sources", double(sources), "", true}};
  return r;
}

int CmdNested(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> threads = {1, 2, 4, 16, 64}, depths = {1, 3, 5};
  unsigned long sources = 64;
  std::vector<Option> opts = {
      {'t', "threads", Option::kList, &threads,
       "thread counts (default 1,2,4,16,64)"},
      {'d', "depth", Option::kList, &depths,
       "instances in the chain, 1..5 (default 1,3,5)"},
      {'f', "sources", Option::kUint, &sources,
       "eventfds in the innermost instance (default 64)"},
  };
  if (int rc = ParseCommand("uepoll-bench nested [<options>]", argc, argv,
                            &opts, &c);
      rc >= 0)
    return rc;
  for (unsigned long d : depths)
    if (d > 5) return BadUsage("-d/--depth: each depth must be 1..5");
  for (unsigned long t : threads)
    if (t > 4096) return BadUsage("-t/--threads: at most 4096");
  if (sources == 0) return BadUsage("-f/--sources must be at least 1");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  Progress progress(int(c.For(false).size() * threads.size() * depths.size()));
  for (unsigned long d : depths)
    for (unsigned long t : threads)
      for (const Backend* b : c.For(false))
        RunMeasurement(
            progress, report, "nested", *b,
            "t=" + std::to_string(t) + " depth=" + std::to_string(d),
            [&] { return MeasureNested(*b, t, d, sources, runtime); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
