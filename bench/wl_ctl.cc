// A port of `perf bench epoll ctl` (tools/perf/bench/epoll-ctl.c) that runs
// on either backend: each worker loops ADD, MOD, DEL over its own eventfds on
// one shared instance (-R: a random op on a random fd, with half the fds
// pre-added), sleeping 250 ns per pass. Same options, defaults and output
// lines. Differences: RLIMIT_NOFILE is only raised; --no-sleep drops the
// nanosleep; errors other than the EEXIST/ENOENT that -R provokes end the
// measurement instead of being silently uncounted; a total ops/sec line
// follows perf's averages for the side-by-side table.
#include <errno.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>

#include "workloads.h"

namespace uepoll_bench {
namespace {

constexpr unsigned long kMaxNests = 4;
enum { kAdd, kMod, kDel, kNrOps };

struct Worker {
  int tid = 0;
  std::vector<int> fdmap;
  unsigned long ops[kNrOps] = {};
};

bool DoOp(const Backend& b, int epfd, Worker& w, int op, int fd,
          Failure& failure) {
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.u64 = uint64_t(fd);
  int error;
  switch (op) {
    case kAdd:
      error = b.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
      break;
    case kMod:
      ev.events = EPOLLOUT;
      error = b.epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
      break;
    default:
      error = b.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
      break;
  }
  if (error == 0) {
    w.ops[op]++;
    return true;
  }
  if (errno == EEXIST || errno == ENOENT) return true;  // -R picks blindly
  failure.Set(CallError(b, op == kAdd   ? "epoll_ctl(ADD)"
                           : op == kMod ? "epoll_ctl(MOD)"
                                        : "epoll_ctl(DEL)"));
  return false;
}

void WorkerLoop(const Backend& b, const CtlParams& p, int epfd, Worker& w,
                const std::atomic<bool>& done, Gate& gate, Failure& failure) {
  if (!p.noaffinity) PinToCpu(unsigned(w.tid));
  std::minstd_rand rng(unsigned(w.tid) + 1);
  const struct timespec ts = {0, 250};
  gate.Arrive();
  do {
    if (p.randomize) {
      int fd = w.fdmap[rng() % w.fdmap.size()];
      if (!DoOp(b, epfd, w, int(rng() % kNrOps), fd, failure)) return;
    } else {
      for (int fd : w.fdmap)
        for (int op = kAdd; op < kNrOps; ++op)
          if (!DoOp(b, epfd, w, op, fd, failure)) return;
    }
    if (!p.no_sleep) nanosleep(&ts, nullptr);
  } while (!done.load(std::memory_order_relaxed));
}

}  // namespace

Result MeasureCtl(const Backend& b, const CtlParams& in) {
  CtlParams p = in;
  if (p.threads == 0) p.threads = AllowedCpus();
  p.nested = std::min(p.nested, kMaxNests);
  Result r;
  r.workload = "ctl";
  r.backend = b.name;
  r.threads = p.threads;
  r.params = {{"nfds", double(p.nfds)}};
  if (p.no_sleep) r.params.push_back({"no_sleep", 1});
  if (p.randomize) r.params.push_back({"randomize", 1});
  if (p.nested) r.params.push_back({"nested", double(p.nested)});

  FdList fds(b);
  RaiseFdLimit(b, long(p.nfds * p.threads * 2 + 50));
  if (p.perf_output && !InCountedPass())
    printf("# Running 'epoll/ctl' benchmark (%s backend):\n", b.name);
  int epfd = fds.Add(b.epoll_create1(0));
  if (epfd < 0) return r.error = CallError(b, "epoll_create1"), r;
  if (p.nested && p.verbose) printf("Nesting level(s): %lu\n", p.nested);
  if (p.nested && !HangEmptyChain(b, fds, epfd, p.nested, &r.error)) return r;
  std::vector<Worker> workers(p.threads);
  for (unsigned long i = 0; i < p.threads; ++i) {
    Worker& w = workers[i];
    w.tid = int(i);
    for (unsigned long j = 0; j < p.nfds; ++j) {
      int fd = fds.Add(b.eventfd(0, EFD_NONBLOCK));
      if (fd < 0) return r.error = CallError(b, "eventfd"), r;
      w.fdmap.push_back(fd);
    }
    // perf adds half the fds up front under -R, so MOD and DEL do not start
    // out failing.
    for (unsigned long j = 0; p.randomize && j < p.nfds; j += 2) {
      struct epoll_event ev = {};
      ev.events = EPOLLIN;
      ev.data.u64 = uint64_t(w.fdmap[j]);
      if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, w.fdmap[j], &ev) < 0)
        return r.error = CallError(b, "epoll_ctl(ADD)"), r;
    }
  }
  if (p.perf_output && !InCountedPass())
    printf(
        "Run summary [PID %d]: %lu threads doing epoll_ctl ops %lu "
        "file-descriptors for %g secs.\n\n",
        getpid(), p.threads, p.nfds, p.runtime);

  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  ThreadGroup group;
  for (Worker& w : workers)
    group.Spawn(
        [&, wp = &w] { WorkerLoop(b, p, epfd, *wp, done, gate, failure); });
  gate.WaitArrivals(unsigned(p.threads));
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  failure.SleepFor(PassRuntime(p.runtime));
  done.store(true);
  sys.Stop();
  if (p.verbose) printf("main thread: toggling done\n");
  group.JoinAll(10, "ctl workers");
  double secs = double(NowNs() - t0) / 1e9;
  if (failure.failed()) return r.error = failure.message(), r;

  Stats stats[kNrOps];
  double total = 0;
  for (const Worker& w : workers) {
    for (int op = kAdd; op < kNrOps; ++op) {
      stats[op].Add(double(w.ops[op]));
      total += double(w.ops[op]);
    }
    if (!p.perf_output || InCountedPass()) continue;
    if (p.nfds == 1)
      printf(
          "[thread %2d] fdmap: %p [ add: %04ld; mod: %04ld; del: %04lds ops "
          "]\n",
          w.tid, static_cast<const void*>(&w.fdmap[0]), long(w.ops[kAdd]),
          long(w.ops[kMod]), long(w.ops[kDel]));
    else
      printf(
          "[thread %2d] fdmap: %p ... %p [ add: %04ld ops; mod: %04ld ops; "
          "del: %04ld ops ]\n",
          w.tid, static_cast<const void*>(&w.fdmap[0]),
          static_cast<const void*>(&w.fdmap[p.nfds - 1]), long(w.ops[kAdd]),
          long(w.ops[kMod]), long(w.ops[kDel]));
  }
  if (p.perf_output && !InCountedPass()) {
    static const char* const kNames[kNrOps] = {"ADD", "MOD", "DEL"};
    printf("\n");
    for (int op = kAdd; op < kNrOps; ++op)
      printf("Averaged %ld %s operations (+- %.2f%%)\n", long(stats[op].mean()),
             kNames[op], stats[op].RelStddevPct());
    printf("Total %ld epoll_ctl operations/sec, total secs = %d\n\n",
           long(total / secs), int(secs));
    fflush(stdout);
  }
  r.ops_per_sec = total / secs;
  sys.Finish(&r, r.ops_per_sec * secs);
  r.metrics = {{"add_ops_avg", stats[kAdd].mean(), "", true},
               {"mod_ops_avg", stats[kMod].mean(), "", true},
               {"del_ops_avg", stats[kDel].mean(), "", true},
               {"seconds", secs, "", true}};
  return r;
}

int CmdCtl(int argc, char** argv) {
  CtlParams p;
  CommonOptions c;
  std::vector<Option> opts = {
      {'t', "threads", Option::kUint, &p.threads, "Specify amount of threads"},
      {'f', "nfds", Option::kUint, &p.nfds,
       "Specify amount of file descriptors to monitor for each thread"},
      {'n', "noaffinity", Option::kFlag, &p.noaffinity,
       "Disables CPU affinity"},
      {'N', "nested", Option::kUint, &p.nested,
       "Nesting level epoll hierarchy (default is 0, no nesting; at most 4)"},
      {'R', "randomize", Option::kFlag, &p.randomize,
       "Perform random operations on random fds"},
      {'v', "verbose", Option::kFlag, &p.verbose, "Verbose mode"},
      {0, "no-sleep", Option::kFlag, &p.no_sleep,
       "Drop the workers' 250 ns nanosleep between passes"},
  };
  if (int rc =
          ParseCommand("uepoll-bench ctl [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  if (p.nfds == 0) return BadUsage("-f/--nfds must be at least 1");
  if (p.threads > 4096) return BadUsage("-t/--threads: at most 4096");
  if (c.runtime > 0) p.runtime = c.runtime;
  Report report;
  Progress progress(int(c.For(false).size()));
  for (const Backend* b : c.For(false))
    RunMeasurement(progress, report, "ctl", *b, "",
                   [&] { return MeasureCtl(*b, p); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
