// minwait (min_wait batching, one wakeup per batch): a producer signals events
// at a fixed rate; a consumer harvests them three ways:
//   plain     epoll_wait(timeout -1): wakes for (nearly) every event;
//   sleep     the production hack: sleep sleep_us, then epoll_wait, so
//             events pile up between wakeups;
//   min_wait  the wait itself holds the wakeup back: uepoll_epoll_pwait3
//             with min_wait_ns, or io_uring's min_wait_usec (Linux 6.12,
//             uring.cc); the kernel's epoll never merged it.
// Figures: events per wakeup, the consumer's voluntary and involuntary
// context switches and CPU time per event (getrusage(RUSAGE_THREAD)), and
// the delivery latency from the producer's write to the consumer's read.
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <memory>

#include "workloads.h"

namespace uepoll_bench {
namespace {

constexpr int kSources = 64;

double Micros(const struct timeval& tv) {
  return double(tv.tv_sec) * 1e6 + double(tv.tv_usec);
}

}  // namespace

Result MeasureMinWait(const Backend& b, const MinWaitParams& p) {
  Result r;
  r.workload = "minwait";
  r.backend = b.name;
  r.threads = 2;
  r.params = {{"rate", double(p.rate)},
              {"min_wait_us", double(p.min_wait_us)},
              {"sleep_us", double(p.sleep_us)}};
  // The JSON names: mode plain / min_wait / sleep_hack.
  r.notes = {{"mode", p.min_wait_us ? "min_wait"
                      : p.sleep_us  ? "sleep_hack"
                                    : "plain"}};
  if (p.min_wait_us && !b.wait_min)
    return r.error = std::string(b.name) + " has no min_wait", r;
  FdList fds(b);
  StopFd stop;
  int epfd = fds.Add(b.epoll_create1(0));
  if (epfd < 0) return r.error = CallError(b, "epoll_create1"), r;
  if (!stop.Create(b, fds, &r.error) || !stop.AddTo(b, epfd, &r.error))
    return r;
  int src[kSources];
  // The first unread write's time per source; 0: nothing pending.
  std::unique_ptr<std::atomic<int64_t>[]> sent(
      new std::atomic<int64_t>[kSources]);
  for (int i = 0; i < kSources; ++i) {
    sent[i].store(0);
    src[i] = fds.Add(b.eventfd(0, EFD_NONBLOCK));
    if (src[i] < 0) return r.error = CallError(b, "eventfd"), r;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = uint64_t(i);
    if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, src[i], &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
  }

  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  ThreadGroup group;
  std::vector<int64_t> lat;
  lat.reserve(size_t(double(p.rate) * p.runtime * 1.2) + 1024);
  unsigned long events = 0, wakeups = 0;
  struct rusage ru0 = {}, ru1 = {};
  // Neither thread is pinned: the producer spins a CPU, and a consumer pinned
  // to a busy CPU would measure that CPU's queue rather than the wait.
  group.Spawn([&] {  // the producer
    gate.Arrive();
    const uint64_t one = 1;
    const int64_t start = NowNs();
    unsigned long produced = 0;
    while (!done.load(std::memory_order_relaxed)) {
      // Spin on the clock: any sleep would add ~50 us of timer slack per
      // event and turn the fixed rate into bursts, which is what min_wait is
      // meant to create, not what it should be given.
      unsigned long due =
          (unsigned long)(double(NowNs() - start) * 1e-9 * double(p.rate));
      for (; produced < due; ++produced) {
        int i = int(produced % kSources);
        int64_t expected = 0;
        sent[i].compare_exchange_strong(expected, NowNs(),
                                        std::memory_order_release,
                                        std::memory_order_relaxed);
        if (b.write(src[i], &one, sizeof(one)) < 0)
          return failure.Set(CallError(b, "write"));
      }
    }
  });
  group.Spawn([&] {  // the consumer
    gate.Arrive();
    getrusage(RUSAGE_THREAD, &ru0);
    struct epoll_event evs[64];
    uint64_t val;
    const struct timespec hack = {0, long(p.sleep_us) * 1000};
    while (!done.load(std::memory_order_relaxed)) {
      if (p.sleep_us) nanosleep(&hack, nullptr);
      int n = p.min_wait_us
                  ? b.wait_min(epfd, evs, 64, -1, p.min_wait_us * 1000)
                  : b.epoll_wait(epfd, evs, 64, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && p.min_wait_us && b.is_uring && errno == EOPNOTSUPP)
        return failure.Set(
            "io_uring has no min_wait here: IORING_FEAT_MIN_TIMEOUT is not "
            "set (it needs Linux 6.12)");
      if (n < 0) return failure.Set(CallError(b, "epoll_wait"));
      wakeups++;
      for (int j = 0; j < n; ++j) {
        if (evs[j].data.u64 == kStopTag) continue;
        int i = int(evs[j].data.u64);
        if (b.read(src[i], &val, sizeof(val)) < 0) {
          if (errno == EAGAIN) continue;
          return failure.Set(CallError(b, "read"));
        }
        int64_t t = sent[i].exchange(0, std::memory_order_acquire);
        if (t) lat.push_back(NowNs() - t);
        events += val;
      }
    }
    getrusage(RUSAGE_THREAD, &ru1);
  });
  gate.WaitArrivals(2);
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  failure.SleepFor(PassRuntime(p.runtime));
  done.store(true);
  sys.Stop();
  double secs = double(NowNs() - t0) / 1e9;
  stop.Fire(b);
  group.JoinAll(10, "minwait threads");
  if (failure.failed()) return r.error = failure.message(), r;
  if (!events || !wakeups) return r.error = "no event was delivered", r;
  double cpu_us = Micros(ru1.ru_utime) + Micros(ru1.ru_stime) -
                  Micros(ru0.ru_utime) - Micros(ru0.ru_stime);
  r.ops_per_sec = double(events) / secs;
  sys.Finish(&r, r.ops_per_sec * secs);
  r.ops_label = "events/s";
  r.metrics = {
      {"events_per_wakeup", double(events) / double(wakeups), "events/wakeup",
       true},
      {"voluntary_csw", double(ru1.ru_nvcsw - ru0.ru_nvcsw), "", false},
      {"involuntary_csw", double(ru1.ru_nivcsw - ru0.ru_nivcsw), "", false},
      {"ctx_switches_per_event",
       double(ru1.ru_nvcsw - ru0.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nivcsw) /
           double(events),
       "csw/event", false},
      {"cpu_ns_per_event", cpu_us * 1e3 / double(events), "CPU ns/event",
       false},
      {"p50_us", double(Percentile(lat, 0.50)) / 1e3, "p50 us", false},
      {"p99_us", double(Percentile(lat, 0.99)) / 1e3, "p99 us", false}};
  return r;
}

const char* MinWaitLabel(const MinWaitParams& m) {
  return m.min_wait_us ? "min_wait" : m.sleep_us ? "sleep, then wait" : "plain";
}

std::vector<MinWaitParams> MinWaitModes(const Backend& b, unsigned long rate,
                                        unsigned long us, double runtime) {
  std::vector<MinWaitParams> modes = {{rate, 0, 0, runtime},
                                      {rate, 0, us, runtime}};
  if (b.wait_min) modes.push_back({rate, us, 0, runtime});
  return modes;
}

int CmdMinWait(int argc, char** argv) {
  CommonOptions c;
  unsigned long rate = 20000, us = 200;
  std::vector<Option> opts = {
      {0, "rate", Option::kUint, &rate, "events per second (default 20000)"},
      {0, "us", Option::kUint, &us,
       "min_wait and the hack's sleep, microseconds (default 200)"},
  };
  if (int rc = ParseCommand("uepoll-bench minwait [<options>]", argc, argv,
                            &opts, &c);
      rc >= 0)
    return rc;
  if (rate == 0 || rate > 10000000)
    return BadUsage("--rate: 1..10000000 events/s");
  if (us == 0 || us > 1000000) return BadUsage("--us: 1..1000000");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  size_t total = 0;
  for (const Backend* b : c.For(true))
    total += MinWaitModes(*b, rate, us, runtime).size();
  Progress progress(static_cast<int>(total));
  for (const Backend* b : c.For(true))
    for (const MinWaitParams& m : MinWaitModes(*b, rate, us, runtime))
      RunMeasurement(progress, report, "minwait", *b, MinWaitLabel(m),
                     [&] { return MeasureMinWait(*b, m); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
