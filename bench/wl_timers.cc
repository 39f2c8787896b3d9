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
// --floor adds a third participant to the interleaving: the least any
// timer design in user space can do at this schedule, measured the same
// way. It has no timers, no epoll and no read: one thread sleeps to each
// instant of the schedule in an io_uring, where every sleep arms an
// absolute timeout at the instant after the one it waits for (the
// lookahead uepoll's keeper uses, docs/design.md, "The keeper's ring"), so
// one io_uring_enter per wake is all it pays. What uepoll costs beyond it
// is its own work per expiry (the heap, the fire, the harvest, the read).
// After the table, each participant's CPU per expiry is set against the
// kernel's of the same round, and the median and quartiles of those
// per-round ratios are printed: a host stall that inflates one round
// moves them by one place, where it moves a pooled ratio by its size.
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
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#ifdef UEPOLL_BENCH_HAVE_LIBURING
#include <liburing.h>
#endif

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

// The floor (--floor, the header comment): the schedule's instants, slept
// to in an io_uring with no timer objects. Returns the error, or "".
std::string FloorRound(unsigned long n, double rate, double runtime,
                       TimersTotals* out) {
#ifndef UEPOLL_BENCH_HAVE_LIBURING
  (void)n, (void)rate, (void)runtime, (void)out;
  return "built without liburing";
#else
  io_uring ring;
  io_uring_params p;
  int ret = -EINVAL;
  for (unsigned setup :
       {unsigned(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN),
        0u}) {
    memset(&p, 0, sizeof p);
    p.flags = setup;
    ret = io_uring_queue_init_params(8, &ring, &p);
    if (ret != -EINVAL) break;
  }
  if (ret < 0) return std::string("io_uring_queue_init: ") + strerror(-ret);
  out->armed = n;
  const int64_t step = int64_t(1e9 / rate);
  const int64_t start = NowNs() + 100000000,
                end = start + int64_t(runtime * 1e9);
  // Instants with a timeout pending (at most two: the bound and the one
  // after it), each request's user_data its instant.
  std::vector<int64_t> pending;
  __kernel_timespec ts[2];
  int slot = 0;
  auto arm = [&](int64_t at) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    ts[slot] = {at / 1000000000, at % 1000000000};
    io_uring_prep_timeout(sqe, &ts[slot], 0, IORING_TIMEOUT_ABS);
    sqe->user_data = uint64_t(at);
    slot ^= 1;
    pending.push_back(at);
  };
  std::vector<int64_t> late;
  late.reserve(size_t(rate * runtime * 1.2) + 16);
  uint64_t expiries = 0;
  double cpu0 = -1;
  int64_t first_ret = 0, last_ret = 0, bound = start;
  std::string err;
  while (bound < end && err.empty()) {
    if (std::find(pending.begin(), pending.end(), bound) == pending.end())
      arm(bound);  // the first sleep, or one after a stall
    if (bound + step < end && std::find(pending.begin(), pending.end(),
                                        bound + step) == pending.end())
      arm(bound + step);
    ret = io_uring_submit_and_wait(&ring, 1);
    if (ret < 0 && ret != -EINTR && ret != -ETIME) {
      err = std::string("io_uring_submit_and_wait: ") + strerror(-ret);
      break;
    }
    io_uring_cqe* cqe;
    bool woke = false;
    while (io_uring_peek_cqe(&ring, &cqe) == 0) {
      int64_t at = int64_t(cqe->user_data);
      pending.erase(std::remove(pending.begin(), pending.end(), at),
                    pending.end());
      woke |= at >= bound;
      io_uring_cqe_seen(&ring, cqe);
    }
    if (!woke) continue;
    int64_t now = NowNs();
    if (cpu0 < 0) {
      cpu0 = CpuNs();
      first_ret = now;
    }
    for (; bound <= now && bound < end; bound += step, ++expiries)
      late.push_back(now - bound);
    last_ret = now;
  }
  double cpu = cpu0 < 0 ? 0 : CpuNs() - cpu0;
  io_uring_queue_exit(&ring);
  if (!err.empty()) return err;
  if (late.empty()) return "no instant passed";
  out->late.insert(out->late.end(), late.begin(), late.end());
  out->cpu_ns += cpu;
  out->secs += double(last_ret - first_ret) / 1e9;
  out->expiries += expiries;
  ++out->rounds;
  return "";
#endif
}

// The result of a backend's rounds, pooled.
Result TimersResult(const char* name, unsigned long want, double rate,
                    TimersTotals& t) {
  Result r;
  r.workload = "timers";
  r.backend = name;
  r.threads = 1;
  r.ops_label = "expiries/s";
  r.params = {{"timers", double(want)}, {"rate", rate}};
  if (t.armed < want) {
    // Kept out of params so that the two backends stay on one table row.
    r.notes.push_back({"armed", std::to_string(t.armed)});
    fprintf(stderr,
            "uepoll-bench: timers: %s capped at %lu timers by "
            "RLIMIT_NOFILE\n",
            name, t.armed);
  }
  if (t.rounds > 1) r.notes.push_back({"rounds", std::to_string(t.rounds)});
  if (t.rounds == 0 || t.late.empty()) return r.error = "no timer fired", r;
  r.metrics.push_back(
      {"settime_ns", t.settime_ns / t.rounds, "settime ns", false});
  r.ops_per_sec = t.secs > 0 ? double(t.expiries) / t.secs : -1;
  r.metrics.push_back(
      {"late_p50_ns", double(Percentile(t.late, 0.50)), "late p50 ns", false});
  r.metrics.push_back(
      {"late_p99_ns", double(Percentile(t.late, 0.99)), "late p99 ns", false});
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
  Result r = TimersResult(b.name, want, rate, t);
  if (!err.empty()) r.error = err;
  return r;
}

int CmdTimers(int argc, char** argv) {
  CommonOptions c;
  std::string timers = "1000,100000";
  double rate = 1000;
  unsigned long rounds = 1;
  bool floor = false;
  std::vector<Option> opts = {
      {'n', "timers", Option::kString, &timers,
       "armed timers, a list (default 1000,100000)"},
      {0, "rate", Option::kDouble, &rate,
       "expirations per second, all timers together (default 1000)"},
      {0, "rounds", Option::kUint, &rounds,
       "measure each backend this many times, interleaved, and pool the "
       "rounds (default 1)"},
      {0, "floor", Option::kFlag, &floor,
       "measure the floor too (an io_uring sleep to each instant, no timer "
       "objects), interleaved with the backends; JSON backend \"floor\""},
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
  if (rounds == 1 && !floor) {
    Progress progress(int(c.backends.size() * sizes.size()));
    for (unsigned long n : sizes)
      for (const Backend* b : c.backends)
        RunMeasurement(progress, report, "timers", *b,
                       "timers=" + std::to_string(n),
                       [&] { return MeasureTimers(*b, n, rate, runtime); });
    return FinishCommand(c, report);
  }
  // Interleaved rounds, pooled (the header comment). No counted pass: the
  // workload reports no syscall window. Participant nb is the floor.
  const size_t nb = c.backends.size(), np = nb + (floor ? 1 : 0);
  auto name_of = [&](size_t i) {
    return i < nb ? c.backends[i]->name : "floor";
  };
  const int total = int(sizes.size() * np * rounds);
  int done = 0;
  std::vector<std::string> summary;
  for (unsigned long n : sizes) {
    std::vector<TimersTotals> tot(np);
    std::vector<std::string> err(np);
    std::vector<double> rtt(np, -1);
    // CPU per expiry of each round, by participant (-1: the round failed).
    std::vector<std::vector<double>> per(np);
    for (unsigned long k = 0; k < rounds; ++k) {
      for (size_t j = 0; j < np; ++j) {
        // A B, B A, A B, ...: each backend goes first every other round.
        size_t i = k % 2 ? np - 1 - j : j;
        ++done;
        per[i].push_back(-1);
        if (!err[i].empty()) continue;
        if (rtt[i] < 0) rtt[i] = CoreRoundTripNs();
        TimersTotals one;
        err[i] = i < nb ? TimersRound(*c.backends[i], n, rate, runtime, &one)
                        : FloorRound(n, rate, runtime, &one);
        if (!err[i].empty()) {
          fprintf(stderr, "[%d/%d] timers %s timers=%lu round %lu: %s\n", done,
                  total, name_of(i), n, k + 1, err[i].c_str());
          continue;
        }
        per[i].back() = one.cpu_ns / double(one.expiries);
        fprintf(stderr,
                "[%d/%d] timers %s timers=%lu rate=%g round %lu: late p99 "
                "ns %s, CPU ns/expiry %s\n",
                done, total, name_of(i), n, rate, k + 1,
                Human(double(Percentile(one.late, 0.99))).c_str(),
                Human(per[i].back()).c_str());
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
    // Each participant's CPU per expiry over the kernel's of the same round.
    size_t kern = nb;
    for (size_t i = 0; i < nb; ++i)
      if (strcmp(c.backends[i]->name, "kernel") == 0) kern = i;
    for (size_t i = 0; i < np; ++i) {
      const char* name = name_of(i);
      Result r = TimersResult(name, n, rate, tot[i]);
      if (i == nb) {
        // Not a backend: no settime figure, no descriptors.
        r.metrics.erase(std::remove_if(r.metrics.begin(), r.metrics.end(),
                                       [](const Metric& m) {
                                         return m.key == "settime_ns" ||
                                                m.key == "overruns";
                                       }),
                        r.metrics.end());
      }
      if (!err[i].empty()) r.error = err[i];
      r.core_rtt_ns = rtt[i];
      if (i < nb) NoteFdMode(*c.backends[i], r);
      r.syscalls_note = "not counted with --rounds";
      if (kern < nb && i != kern) {
        std::vector<double> q;
        for (unsigned long k = 0; k < rounds; ++k)
          if (per[i][k] > 0 && per[kern][k] > 0)
            q.push_back(per[i][k] / per[kern][k]);
        if (!q.empty()) {
          double med = Percentile(q, 0.5);
          char line[256];
          snprintf(line, sizeof line,
                   "timers=%lu rate=%g: %s/kernel CPU per expiry, round by "
                   "round (%zu rounds): median %.2fx, quartiles %.2fx-%.2fx, "
                   "range %.2fx-%.2fx",
                   n, rate, name, q.size(), med, Percentile(q, 0.25),
                   Percentile(q, 0.75), q.front(), q.back());
          summary.push_back(line);
          r.metrics.push_back({"cpu_ratio_median_of_rounds", med, "", false});
        }
      }
      report.Add(std::move(r));
    }
  }
  int rc = FinishCommand(c, report);
  for (const std::string& line : summary) printf("%s\n", line.c_str());
  return rc;
}

}  // namespace uepoll_bench
