// A port of `perf bench epoll wait` (tools/perf/bench/epoll-wait.c) that runs
// on either backend. Same options, defaults and output lines; differences:
//  - a workload stops through a stop eventfd registered (level-triggered) in
//    every instance workers wait on, instead of perf's extra second of
//    writes, so blocked workers always leave;
//  - RLIMIT_NOFILE is only ever raised, never lowered as perf does;
//  - --no-sleep drops the writer's nanosleep so the backend, not the timer
//    slack, bounds the rate;
//  - with -B an empty wait counts as an op, as in perf, but no stale
//    descriptor is then read.
#include <errno.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>

#include "workloads.h"

namespace uepoll_bench {
namespace {

constexpr unsigned long kMaxNests = 4;  // perf's EPOLL_MAXNESTS

struct Worker {
  int tid = 0;
  int epfd = -1;
  std::vector<int> fdmap;
  unsigned long ops = 0;
};

void WorkerLoop(const Backend& b, const WaitParams& p, Worker& w,
                const std::atomic<bool>& done, Gate& gate, Failure& failure) {
  if (!p.noaffinity) PinToCpu(static_cast<unsigned>(w.tid));
  gate.Arrive();
  const int to = p.nonblocking ? 0 : -1;
  unsigned long ops = 0;
  struct epoll_event ev = {};
  do {
    int ret;
    do {
      ret = b.epoll_wait(w.epfd, &ev, 1, to);
    } while (ret < 0 && errno == EINTR);
    if (ret < 0) {
      failure.Set(CallError(b, "epoll_wait"));
      break;
    }
    if (ret > 0) {
      if (ev.data.u64 == kStopTag) break;
      int fd = static_cast<int>(ev.data.u64);
      uint64_t val;
      ssize_t r;
      do {
        r = b.read(fd, &val, sizeof(val));
      } while (!done.load(std::memory_order_relaxed) && r < 0 &&
               errno == EAGAIN);
      if (r < 0 && errno != EAGAIN) {
        failure.Set(CallError(b, "read"));
        break;
      }
      // perf re-adds under -E: it fails EEXIST and is kept for fidelity.
      if (p.edge) {
        ev.events = EPOLLIN | EPOLLET;
        b.epoll_ctl(w.epfd, EPOLL_CTL_ADD, fd, &ev);
      }
      if (p.oneshot) {
        ev.events |= EPOLLIN | EPOLLONESHOT;
        if (b.epoll_ctl(w.epfd, EPOLL_CTL_MOD, fd, &ev) < 0) {
          failure.Set(CallError(b, "epoll_ctl(MOD)"));
          break;
        }
      }
    }
    ops++;
  } while (!done.load(std::memory_order_relaxed));
  w.ops = ops;
}

void WriterLoop(const Backend& b, const WaitParams& p,
                std::vector<Worker>& workers, const std::atomic<bool>& wdone,
                Failure& failure) {
  // The writer's own view, so shuffling never races with the workers.
  std::vector<std::vector<int>> maps;
  for (const Worker& w : workers) maps.push_back(w.fdmap);
  std::minstd_rand rng(12345);
  const uint64_t val = 1;
  const struct timespec ts = {0, 500};
  size_t iter = 0;
  if (p.verbose)
    printf("starting writer-thread: doing %s writes ...\n",
           p.randomize ? "random" : "lineal");
  for (; !wdone.load(std::memory_order_relaxed); ++iter) {
    if (p.randomize) std::shuffle(maps.begin(), maps.end(), rng);
    for (auto& map : maps) {
      if (p.randomize) std::shuffle(map.begin(), map.end(), rng);
      for (int fd : map) {
        ssize_t sz;
        do {
          sz = b.write(fd, &val, sizeof(val));
        } while (!wdone.load(std::memory_order_relaxed) && sz < 0 &&
                 errno == EAGAIN);
        if (sz < 0 && errno != EAGAIN) {
          failure.Set(CallError(b, "write"));
          return;
        }
      }
    }
    if (!p.no_sleep) nanosleep(&ts, nullptr);
  }
  if (p.verbose)
    printf("exiting writer-thread (total full-loops: %zu)\n", iter);
}

}  // namespace

Result MeasureWait(const Backend& b, const WaitParams& in) {
  WaitParams p = in;
  if (p.threads == 0) p.threads = std::max(1u, AllowedCpus() - 1);
  p.nested = std::min(p.nested, kMaxNests);
  Result r;
  r.workload = "wait";
  r.backend = b.name;
  r.threads = p.threads;
  r.params = {{"nfds", double(p.nfds)}};
  for (auto [on, key] : {std::pair{p.no_sleep, "no_sleep"},
                         {p.multiq, "multiq"},
                         {p.nonblocking, "nonblocking"},
                         {p.oneshot, "oneshot"},
                         {p.edge, "edge"},
                         {p.randomize, "randomize"}})
    if (on) r.params.push_back({key, 1});
  if (p.nested) r.params.push_back({"nested", double(p.nested)});

  FdList fds(b);
  StopFd stop;
  std::vector<Worker> workers(p.threads);
  int main_ep = -1;
  uint32_t events =
      EPOLLIN | (p.oneshot ? EPOLLONESHOT : 0u) | (p.edge ? EPOLLET : 0u);
  RaiseFdLimit(b, long(p.nfds * p.threads * 2 + 50));
  if (p.perf_output && !InCountedPass())
    printf("# Running 'epoll/wait' benchmark (%s backend):\n", b.name);
  if (!stop.Create(b, fds, &r.error)) return r;
  if (!p.multiq) {
    main_ep = fds.Add(b.epoll_create1(0));
    if (main_ep < 0) return r.error = CallError(b, "epoll_create1"), r;
    if (p.nested && !HangEmptyChain(b, fds, main_ep, p.nested, &r.error))
      return r;
    if (!stop.AddTo(b, main_ep, &r.error)) return r;
  }
  if (p.verbose) {
    printf("Using %s queue model\n", p.multiq ? "multi" : "single");
    printf("Nesting level(s): %lu\n", p.nested);
  }
  for (unsigned long i = 0; i < p.threads; ++i) {
    Worker& w = workers[i];
    w.tid = int(i);
    w.epfd = main_ep;
    if (p.multiq) {
      w.epfd = fds.Add(b.epoll_create1(0));
      if (w.epfd < 0) return r.error = CallError(b, "epoll_create1"), r;
      if (p.nested && !HangEmptyChain(b, fds, w.epfd, p.nested, &r.error))
        return r;
      if (!stop.AddTo(b, w.epfd, &r.error)) return r;
    }
    for (unsigned long j = 0; j < p.nfds; ++j) {
      int fd = fds.Add(b.eventfd(0, EFD_NONBLOCK));
      if (fd < 0) return r.error = CallError(b, "eventfd"), r;
      w.fdmap.push_back(fd);
      struct epoll_event ev = {};
      ev.events = events;
      ev.data.u64 = uint64_t(fd);
      if (b.epoll_ctl(w.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return r.error = CallError(b, "epoll_ctl(ADD)"), r;
    }
  }
  if (p.perf_output && !InCountedPass())
    printf(
        "Run summary [PID %d]: %lu threads monitoring%s on %lu "
        "file-descriptors for %g secs.\n\n",
        getpid(), p.threads, p.oneshot ? " (EPOLLONESHOT semantics)" : "",
        p.nfds, p.runtime);
  if (p.verbose)
    printf("starting worker/consumer %sthreads%s\n",
           p.noaffinity ? "" : "CPU affinity ",
           p.nonblocking ? " (nonblocking)" : "");

  std::atomic<bool> done{false}, wdone{false};
  Gate gate;
  Failure failure;
  ThreadGroup group, writer;
  for (Worker& w : workers)
    group.Spawn([&, wp = &w] { WorkerLoop(b, p, *wp, done, gate, failure); });
  gate.WaitArrivals(unsigned(p.threads));
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  writer.Spawn([&] { WriterLoop(b, p, workers, wdone, failure); });
  failure.SleepFor(PassRuntime(p.runtime));
  done.store(true);
  sys.Stop();
  double secs = double(NowNs() - t0) / 1e9;
  if (p.verbose) printf("main thread: toggling done\n");
  stop.Fire(b);
  group.JoinAll(10, "wait workers");
  wdone.store(true);
  writer.JoinAll(10, "wait writer");
  if (failure.failed()) return r.error = failure.message(), r;

  Stats stats;
  double total = 0;
  for (const Worker& w : workers) {
    double t = double(w.ops) / secs;
    stats.Add(t);
    total += t;
    if (!p.perf_output || InCountedPass()) continue;
    if (p.nfds == 1)
      printf("[thread %2d] fdmap: %p [ %04ld ops/sec ]\n", w.tid,
             static_cast<const void*>(&w.fdmap[0]), long(t));
    else
      printf("[thread %2d] fdmap: %p ... %p [ %04ld ops/sec ]\n", w.tid,
             static_cast<const void*>(&w.fdmap[0]),
             static_cast<const void*>(&w.fdmap[p.nfds - 1]), long(t));
  }
  if (p.perf_output && !InCountedPass()) {
    printf("\nAveraged %ld operations/sec (+- %.2f%%), total secs = %d\n\n",
           long(stats.mean()), stats.RelStddevPct(), int(secs));
    fflush(stdout);
  }
  r.ops_per_sec = total;
  sys.Finish(&r, r.ops_per_sec * secs);
  r.metrics = {{"per_thread_ops_per_sec", stats.mean(), "", true},
               {"rel_stddev_pct", stats.RelStddevPct(), "", false},
               {"seconds", secs, "", true}};
  return r;
}

int CmdWait(int argc, char** argv) {
  WaitParams p;
  CommonOptions c;
  std::vector<Option> opts = {
      {'t', "threads", Option::kUint, &p.threads, "Specify amount of threads"},
      {'f', "nfds", Option::kUint, &p.nfds,
       "Specify amount of file descriptors to monitor for each thread"},
      {'n', "noaffinity", Option::kFlag, &p.noaffinity,
       "Disables CPU affinity"},
      {'R', "randomize", Option::kFlag, &p.randomize,
       "Enable random write behaviour (default is lineal)"},
      {'v', "verbose", Option::kFlag, &p.verbose, "Verbose mode"},
      {'m', "multiq", Option::kFlag, &p.multiq,
       "Use multiple epoll instances (one per thread)"},
      {'B', "nonblocking", Option::kFlag, &p.nonblocking,
       "Nonblocking epoll_wait(2) behaviour"},
      {'N', "nested", Option::kUint, &p.nested,
       "Nesting level epoll hierarchy (default is 0, no nesting; at most 4)"},
      {'S', "oneshot", Option::kFlag, &p.oneshot, "Use EPOLLONESHOT semantics"},
      {'E', "edge", Option::kFlag, &p.edge,
       "Use Edge-triggered interface (default is LT)"},
      {0, "no-sleep", Option::kFlag, &p.no_sleep,
       "Drop the writer's 500 ns nanosleep between passes"},
  };
  if (int rc =
          ParseCommand("uepoll-bench wait [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  if (p.nfds == 0) return BadUsage("-f/--nfds must be at least 1");
  if (p.threads > 4096) return BadUsage("-t/--threads: at most 4096");
  if (c.runtime > 0) p.runtime = c.runtime;
  Report report;
  Progress progress(int(c.For(false).size()));
  for (const Backend* b : c.For(false))
    RunMeasurement(progress, report, "wait", *b, "",
                   [&] { return MeasureWait(*b, p); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
