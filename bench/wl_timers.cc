// timers: N armed periodic timerfds in one instance, one thread harvesting
// them. Figures:
//  - expiry-to-delivery lateness, p50/p99: for each timer reported, the
//    time epoll_wait returned minus the latest expiry the read counted
//    (the schedule is exact: absolute CLOCK_MONOTONIC expiries, so the
//    expected instant of every expiry is known);
//  - CPU per expiry: the process's user+system time over the measured
//    window (for uepoll this includes the timer thread), divided by the
//    expirations read;
//  - arm/disarm cost with N armed: a settime that arms one timer far away
//    and one that disarms it again, on timers picked at random;
//  - overruns (reads that returned more than one expiration: a period was
//    missed entirely).
//
// --rounds R (default 1) measures each backend R times, interleaved in
// the order A B B A A B ... so that a drift of the machine weighs on both
// alike, and reports the rounds pooled: lateness percentiles over every
// expiry of every round, CPU per expiry as all rounds' CPU over all their
// expirations. On a VM whose host stalls the guest for milliseconds now and
// then, a p99 of one short run says more about the stalls that hit it than
// about the backend; pooled rounds let both backends meet the same stalls.
//
// The N timers fire at --rate expirations per second in total: timer i
// has period N/rate seconds and its first expiry at i/rate seconds after
// the start, so expiries are evenly spaced and at 100,000 timers most of
// them stay armed for the whole run. The kernel side is capped by
// RLIMIT_NOFILE (a timerfd is a descriptor); the cap is reported.
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include <uepoll/uepoll.h>

#include "workloads.h"

namespace uepoll_bench {
namespace {

// The timerfd calls of a backend: bench/backend.h has none (kept out of the
// shared table on purpose: only this workload needs them).
struct TimerCalls {
  int (*create)(int clockid, int flags);
  int (*settime)(int fd, int flags, const itimerspec* v, itimerspec* old);
};
TimerCalls CallsFor(const Backend& b) {
  if (b.is_kernel) return {::timerfd_create, ::timerfd_settime};
  return {uepoll_timerfd_create, uepoll_timerfd_settime};
}

timespec Ts(int64_t ns) {
  timespec t;
  t.tv_sec = ns / 1000000000;
  t.tv_nsec = ns % 1000000000;
  return t;
}

double CpuNs() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& tv) {
    return double(tv.tv_sec) * 1e9 + double(tv.tv_usec) * 1e3;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

}  // namespace

namespace {

// What the rounds of one backend add up to (--rounds).
struct TimersTotals {
  std::vector<int64_t> late;  // every expiry's lateness, ns
  double cpu_ns = 0;          // over the measured windows
  double secs = 0;            // first to last report, summed
  uint64_t expiries = 0, overruns = 0;
  double settime_ns = 0;  // summed over rounds, divided by `rounds`
  int rounds = 0;
  unsigned long armed = 0;
};

// One measurement, added to *t. Returns the error, or "" on success.
std::string TimersRound(const Backend& b, unsigned long want, double rate,
                        double runtime, TimersTotals* out) {
  unsigned long n = ScaleCapacity(b, want);
  out->armed = n;
  if (n == 0) return "no descriptor left for a timer";
  TimerCalls tc = CallsFor(b);
  FdList fds(b);
  fds.Reserve(n + 1);
  int ep = fds.Add(b.epoll_create1(0));
  if (ep < 0) return CallError(b, "epoll_create1");
  std::vector<int> t(n);
  for (unsigned long i = 0; i < n; ++i) {
    t[i] = fds.Add(tc.create(CLOCK_MONOTONIC, TFD_NONBLOCK));
    if (t[i] < 0) return CallError(b, "timerfd_create");
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (b.epoll_ctl(ep, EPOLL_CTL_ADD, t[i], &ev) < 0)
      return CallError(b, "epoll_ctl(ADD)");
  }

  // Arm/disarm cost with n timers armed far away (their own schedule is
  // set below): settime on random timers, in pairs.
  {
    itimerspec far = {};
    far.it_value.tv_sec = 1000000;
    for (unsigned long i = 0; i < n; ++i)
      if (tc.settime(t[i], 0, &far, nullptr) < 0)
        return CallError(b, "timerfd_settime");
    std::mt19937 rng(42);
    const int kOps = 20000;
    itimerspec zero = {}, near_far = far;
    near_far.it_value.tv_sec = 500000;
    int64_t t0 = NowNs();
    for (int k = 0; k < kOps; ++k) {
      int fd = t[rng() % n];
      if (tc.settime(fd, 0, &zero, nullptr) < 0 ||
          tc.settime(fd, 0, &near_far, nullptr) < 0)
        return CallError(b, "timerfd_settime");
    }
    out->settime_ns += double(NowNs() - t0) / (2.0 * kOps);
  }

  // The schedule: every timer periodic, first expiries spaced 1/rate apart.
  const int64_t period = int64_t(double(n) / rate * 1e9);
  const int64_t start = NowNs() + 100000000;  // 100 ms to settle
  std::vector<int64_t> next(n);
  for (unsigned long i = 0; i < n; ++i) {
    next[i] = start + int64_t(double(i) / rate * 1e9);
    itimerspec v;
    v.it_value = Ts(next[i]);
    v.it_interval = Ts(period);
    if (tc.settime(t[i], TFD_TIMER_ABSTIME, &v, nullptr) < 0)
      return CallError(b, "timerfd_settime(ABSTIME)");
  }

  std::vector<int64_t> late;
  late.reserve(size_t(rate * runtime * 1.2) + 16);
  uint64_t expiries = 0, overruns = 0;
  const int64_t end = start + int64_t(runtime * 1e9);
  struct epoll_event evs[64];
  // The window starts at the first expiry: CPU and counts from there.
  double cpu0 = -1;
  int64_t first_ret = 0, last_ret = 0;
  for (;;) {
    int64_t left_ms = (end - NowNs()) / 1000000;
    if (left_ms <= 0) break;
    int k = b.epoll_wait(ep, evs, 64, int(left_ms) + 1);
    int64_t ret = NowNs();
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return CallError(b, "epoll_wait");
    if (k > 0 && cpu0 < 0) {
      cpu0 = CpuNs();
      first_ret = ret;
    }
    for (int j = 0; j < k; ++j) {
      size_t i = size_t(evs[j].data.u64);
      uint64_t c = 0;
      if (b.read(t[i], &c, sizeof c) != ssize_t(sizeof c)) {
        if (errno == EAGAIN) continue;  // consumed by an earlier report
        return CallError(b, "read(timerfd)");
      }
      int64_t latest = next[i] + int64_t(c - 1) * period;
      late.push_back(ret - latest);
      next[i] += int64_t(c) * period;
      expiries += c;
      if (c > 1) overruns += c - 1;
    }
    if (k > 0) last_ret = ret;
  }
  double cpu = CpuNs() - (cpu0 < 0 ? CpuNs() : cpu0);
  if (late.empty()) return "no timer fired";
  out->late.insert(out->late.end(), late.begin(), late.end());
  out->cpu_ns += cpu;
  out->secs += double(last_ret - first_ret) / 1e9;
  out->expiries += expiries;
  out->overruns += overruns;
  ++out->rounds;
  return "";
}

// The result of a backend's rounds, pooled.
Result TimersResult(const Backend& b, unsigned long want, double rate,
                    TimersTotals& t) {
  Result r;
  r.workload = "timers";
  r.backend = b.name;
  r.threads = 1;
  r.ops_label = "expiries/s";
  r.params = {{"timers", double(want)}, {"rate", rate}};
  if (t.armed < want) {
    // Kept out of params so that the two backends stay on one table row.
    r.notes.push_back({"armed", std::to_string(t.armed)});
    fprintf(stderr,
            "uepoll-bench: timers: %s capped at %lu timers by "
            "RLIMIT_NOFILE\n",
            b.name, t.armed);
  }
  if (t.rounds > 1) r.notes.push_back({"rounds", std::to_string(t.rounds)});
  if (t.rounds == 0 || t.late.empty()) return r.error = "no timer fired", r;
  r.metrics.push_back(
      {"settime_ns", t.settime_ns / t.rounds, "settime ns", false});
  r.ops_per_sec = t.secs > 0 ? double(t.expiries) / t.secs : -1;
  r.metrics.push_back({"late_p50_ns", double(Percentile(t.late, 0.50)),
                       "late p50 ns", false});
  r.metrics.push_back({"late_p99_ns", double(Percentile(t.late, 0.99)),
                       "late p99 ns", false});
  r.metrics.push_back({"late_p999_ns", double(Percentile(t.late, 0.999)),
                       "late p99.9 ns", false});
  r.metrics.push_back({"cpu_per_expiry_ns",
                       t.expiries ? t.cpu_ns / double(t.expiries) : -1,
                       "CPU ns/expiry", false});
  r.metrics.push_back({"overruns", double(t.overruns), "overruns", false});
  r.metrics.push_back({"expiries", double(t.expiries), "", true});
  return r;
}

}  // namespace

Result MeasureTimers(const Backend& b, unsigned long want, double rate,
                     double runtime) {
  TimersTotals t;
  std::string err = TimersRound(b, want, rate, runtime, &t);
  Result r = TimersResult(b, want, rate, t);
  if (!err.empty()) r.error = err;
  return r;
}

int CmdTimers(int argc, char** argv) {
  CommonOptions c;
  std::string timers = "1000,100000";
  double rate = 1000;
  unsigned long rounds = 1;
  std::vector<Option> opts = {
      {'n', "timers", Option::kString, &timers,
       "armed timers, a list (default 1000,100000)"},
      {0, "rate", Option::kDouble, &rate,
       "expirations per second, all timers together (default 1000)"},
      {0, "rounds", Option::kUint, &rounds,
       "measure each backend this many times, interleaved, and pool the "
       "rounds (default 1)"},
  };
  if (int rc = ParseCommand("uepoll-bench timers [<options>]", argc, argv,
                            &opts, &c);
      rc >= 0)
    return rc;
  std::vector<unsigned long> sizes;
  if (!ParseUintList(timers, &sizes) || sizes.empty())
    return BadUsage("--timers: a list of counts, e.g. 1000,100000");
  if (!(rate > 0 && rate <= 1e6)) return BadUsage("--rate: in (0, 1e6]");
  if (rounds < 1 || rounds > 1000) return BadUsage("--rounds: 1 to 1000");
  double runtime = c.runtime > 0 ? c.runtime : 3;
  // In the default descriptor mode every uepoll timer is a kernel
  // placeholder, counted by RLIMIT_NOFILE like the kernel's timerfds: when
  // the largest count would not fit, uepoll runs in the disjoint mode for
  // the whole command (its timers and waits are the same code; only the
  // numbers differ), before it creates its first descriptor.
  unsigned long largest = *std::max_element(sizes.begin(), sizes.end());
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
      largest + 64 > rl.rlim_max) {
    if (uepoll_set_fd_mode(UEPOLL_FD_MODE_DISJOINT) == 0)
      fprintf(stderr,
              "uepoll-bench: timers: uepoll in UEPOLL_FD_MODE_DISJOINT "
              "(%lu timers exceed RLIMIT_NOFILE %lu)\n",
              largest, (unsigned long)rl.rlim_max);
  }
  Report report;
  if (rounds == 1) {
    Progress progress(int(c.backends.size() * sizes.size()));
    for (unsigned long n : sizes)
      for (const Backend* b : c.backends)
        RunMeasurement(progress, report, "timers", *b,
                       "timers=" + std::to_string(n),
                       [&] { return MeasureTimers(*b, n, rate, runtime); });
    return FinishCommand(c, report);
  }
  // Interleaved rounds, pooled (the header comment). No counted pass: the
  // workload reports no syscall window.
  const size_t nb = c.backends.size();
  const int total = int(sizes.size() * nb * rounds);
  int done = 0;
  for (unsigned long n : sizes) {
    std::vector<TimersTotals> tot(nb);
    std::vector<std::string> err(nb);
    std::vector<double> rtt(nb, -1);
    for (unsigned long k = 0; k < rounds; ++k) {
      for (size_t j = 0; j < nb; ++j) {
        // A B, B A, A B, ...: each backend goes first every other round.
        size_t i = k % 2 ? nb - 1 - j : j;
        const Backend& b = *c.backends[i];
        ++done;
        if (!err[i].empty()) continue;
        if (rtt[i] < 0) rtt[i] = CoreRoundTripNs();
        TimersTotals one;
        err[i] = TimersRound(b, n, rate, runtime, &one);
        if (!err[i].empty()) {
          fprintf(stderr, "[%d/%d] timers %s timers=%lu round %lu: %s\n",
                  done, total, b.name, n, k + 1, err[i].c_str());
          continue;
        }
        fprintf(stderr,
                "[%d/%d] timers %s timers=%lu rate=%g round %lu: late p99 "
                "ns %s, CPU ns/expiry %s\n",
                done, total, b.name, n, rate, k + 1,
                Human(double(Percentile(one.late, 0.99))).c_str(),
                Human(one.cpu_ns / double(one.expiries)).c_str());
        TimersTotals& t = tot[i];
        t.late.insert(t.late.end(), one.late.begin(), one.late.end());
        t.cpu_ns += one.cpu_ns;
        t.secs += one.secs;
        t.expiries += one.expiries;
        t.overruns += one.overruns;
        t.settime_ns += one.settime_ns;
        t.rounds += one.rounds;
        t.armed = one.armed;
      }
    }
    for (size_t i = 0; i < nb; ++i) {
      const Backend& b = *c.backends[i];
      Result r = TimersResult(b, n, rate, tot[i]);
      if (!err[i].empty()) r.error = err[i];
      r.core_rtt_ns = rtt[i];
      NoteFdMode(b, r);
      r.syscalls_note = "not counted with --rounds";
      report.Add(std::move(r));
    }
  }
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
