// Independent work: every thread owns its instance and its
// eventfds, shares nothing with the others by design, and is pinned to
// CPU t % nCPUs. Two variants of the shared-instance workloads:
//   churn_own       create an eventfd, ADD it to the thread's instance,
//                   signal, harvest (timeout 0), close without DEL;
//   throughput_own  signal the thread's eventfd, wait (maxevents 1,
//                   timeout 0), consume it.
// Whatever the 2-thread total loses against twice the 1-thread figure is
// process-wide state written by both threads (a counter, a lock, a cache
// line of a shared table): the figure "x of 1 thread" is ops(t) / ops(1),
// and "CPU ns/op" is what each operation cost the CPU that ran it.
#include <errno.h>
#include <sys/eventfd.h>
#include <time.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "workloads.h"

namespace uepoll_bench {
namespace {

struct alignas(64) PerThread {
  unsigned long ops = 0;
  int64_t cpu_ns = 0;  // the thread's CPU time over its loop
};

int64_t ThreadCpuNs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Hands the setup from thread to thread (--spread): thread t creates its
// descriptors only after thread t-1 has created its own and its padding.
struct Turn {
  std::mutex mu;
  std::condition_variable cv;
  unsigned long next = 0;
};

// With a turn (--spread), the thread's descriptors are followed by kPad
// unused ones, so that no two threads' descriptor numbers are neighbours: a
// table that keeps one word per number in number order then puts them on
// different cache lines.
constexpr int kPad = 15;

// One thread's loop; returns an error message, or "" on success.
std::string OwnLoop(const Backend& b, bool churn, const std::atomic<bool>& done,
                    unsigned long* ops_out, Turn* turn, unsigned long me) {
  FdList fds(b);
  std::unique_lock<std::mutex> lock;
  // Passes the turn on however this function returns, so that an error in
  // one thread's setup does not leave the next one waiting.
  struct Pass {
    Turn* t;
    std::unique_lock<std::mutex>* l;
    void Now() {
      if (!t || !l->owns_lock()) return;
      t->next++;
      t->cv.notify_all();
      l->unlock();
    }
    ~Pass() { Now(); }
  } pass{turn, &lock};
  if (turn) {
    lock = std::unique_lock<std::mutex>(turn->mu);
    turn->cv.wait(lock, [&] { return turn->next == me; });
  }
  int epfd = fds.Add(b.epoll_create1(0));
  if (epfd < 0) return CallError(b, "epoll_create1");
  int src = -1;
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  if (!churn) {
    src = fds.Add(b.eventfd(0, EFD_NONBLOCK));
    if (src < 0) return CallError(b, "eventfd");
    ev.data.u64 = uint64_t(src);
    if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, src, &ev) < 0)
      return CallError(b, "epoll_ctl(ADD)");
  }
  if (turn) {
    for (int i = 0; i < kPad; ++i)
      if (fds.Add(b.eventfd(0, EFD_NONBLOCK)) < 0)
        return CallError(b, "eventfd(padding)");
    pass.Now();
  }
  struct epoll_event evs[16];
  const uint64_t one = 1;
  uint64_t val;
  unsigned long ops = 0;
  while (!done.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 64; ++i) {
      if (churn) {
        int fd = b.eventfd(0, EFD_NONBLOCK);
        if (fd < 0) return CallError(b, "eventfd");
        ev.data.u64 = uint64_t(fd);
        const char* failed = nullptr;
        if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
          failed = "epoll_ctl(ADD)";
        else if (b.write(fd, &one, sizeof(one)) < 0)
          failed = "write";
        else if (b.epoll_wait(epfd, evs, 16, 0) < 0)
          failed = "epoll_wait";
        if (failed) {
          std::string e = CallError(b, failed);
          b.close(fd);
          return e;
        }
        if (b.close(fd) < 0) return CallError(b, "close");
      } else {
        if (b.write(src, &one, sizeof(one)) < 0) return CallError(b, "write");
        int n = b.epoll_wait(epfd, evs, 1, 0);
        if (n < 0) return CallError(b, "epoll_wait");
        if (n == 1 && b.read(src, &val, sizeof(val)) < 0)
          return CallError(b, "read");
      }
    }
    ops += 64;
  }
  *ops_out = ops;
  return "";
}

}  // namespace

Result MeasureOwn(const Backend& b, bool churn, unsigned long threads,
                  double runtime, bool spread) {
  Result r;
  r.workload = churn ? "churn_own" : "throughput_own";
  r.backend = b.name;
  r.threads = threads;
  if (spread) r.params.push_back({"spread", 1});
  RaiseFdLimit(b, long((4 + kPad) * threads + 64));
  Turn turn;
  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  std::vector<PerThread> counters(threads);
  ThreadGroup group;
  for (unsigned long t = 0; t < threads; ++t) {
    group.Spawn([&, t] {
      PinToCpu(unsigned(t));
      gate.Arrive();
      int64_t c0 = ThreadCpuNs();
      std::string err = OwnLoop(b, churn, done, &counters[t].ops,
                                spread ? &turn : nullptr, t);
      counters[t].cpu_ns = ThreadCpuNs() - c0;
      if (!err.empty()) failure.Set(err);
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
  group.JoinAll(10, "independent threads");
  if (failure.failed()) return r.error = failure.message(), r;
  unsigned long ops = 0;
  int64_t cpu = 0;
  for (const PerThread& c : counters) ops += c.ops, cpu += c.cpu_ns;
  r.ops_per_sec = double(ops) / secs;
  sys.Finish(&r, double(ops));
  // CPU time per op: unlike ops/s, it leaves out the time a thread waited
  // for a CPU, so it stays readable on a loaded machine (though a
  // neighbour that is not running at the same time costs nothing then).
  r.metrics = {
      {"per_thread_ops_per_sec", r.ops_per_sec / double(threads), "", true},
      {"cpu_ns_per_op", ops ? double(cpu) / double(ops) : -1, "CPU ns/op",
       false}};
  return r;
}

void AddScaling(Report& report) {
  for (Result& r : report.mutable_results()) {
    if (!r.ok() || r.threads <= 1) continue;
    if (r.workload.find("_own") == std::string::npos) continue;
    for (const Result& one : report.results())
      if (one.ok() && one.threads == 1 && one.workload == r.workload &&
          one.backend == r.backend && one.params == r.params &&
          one.ops_per_sec > 0)
        r.metrics.push_back({"x_of_1_thread", r.ops_per_sec / one.ops_per_sec,
                             "x of 1 thread", true});
  }
}

int CmdOwn(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> threads = {1, 2};
  std::string what = "churn,throughput";
  bool spread = false;
  std::vector<Option> opts = {
      {'t', "threads", Option::kList, &threads, "thread counts (default 1,2)"},
      {0, "what", Option::kString, &what,
       "churn, throughput or churn,throughput (default both)"},
      {0, "spread", Option::kFlag, &spread,
       "throughput: keep the threads' descriptor numbers 16 apart"},
  };
  if (int rc =
          ParseCommand("uepoll-bench own [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  for (unsigned long t : threads)
    if (t > 4096) return BadUsage("-t/--threads: at most 4096");
  bool churn = what.find("churn") != std::string::npos,
       thr = what.find("throughput") != std::string::npos;
  if (!churn && !thr) return BadUsage("--what: churn and/or throughput");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  auto bt = c.For(true), bc = c.For(false);
  Progress progress(
      int(threads.size() * ((churn ? bc.size() : 0) + (thr ? bt.size() : 0))));
  for (bool ch : {true, false}) {
    if ((ch && !churn) || (!ch && !thr)) continue;
    for (unsigned long t : threads)
      for (const Backend* b : ch ? bc : bt)
        RunMeasurement(progress, report, ch ? "churn_own" : "throughput_own",
                       *b, "t=" + std::to_string(t), [&] {
                         return MeasureOwn(*b, ch, t, runtime, spread && !ch);
                       });
  }
  AddScaling(report);
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
