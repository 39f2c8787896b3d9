// The default suite: a short, representative pass over every workload, every
// backend side by side (io_uring where a workload has an io_uring form),
// about a minute on a 2-CPU machine. Each measurement runs -r seconds
// (default 0.4; the perf ports, pingpong and minwait 0.5), then its short
// counted pass for syscalls per operation.
#include <stdio.h>

#include "svg.h"
#include "workloads.h"

namespace uepoll_bench {

int CmdSuite(int argc, char** argv) {
  CommonOptions c;
  std::string svg;
  std::vector<Option> opts = {
      {0, "svg", Option::kString, &svg,
       "write the charts (nested and churn by thread count, every workload's "
       "ratio to the kernel and io_uring) to this file"},
  };
  if (int rc =
          ParseCommand("uepoll-bench suite [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  // Runtimes are trimmed so that the whole pass, counted passes included,
  // stays near a minute on 2 CPUs (bench/README.md).
  const double base = c.runtime > 0 ? c.runtime : 0.4;
  const double perf = c.runtime > 0 ? c.runtime : 0.5;
  const double lat = c.runtime > 0 ? c.runtime : 0.5;
  const std::vector<unsigned long> threads = {1, 2, 16, 64}, depths = {1, 3, 5},
                                   own = {1, 2}, servers = {1, 2},
                                   bytes = {64, 4096};
  const std::vector<unsigned long> maxevents = {1, 64};
  const std::vector<int64_t> spins = {0, 50000};
  // mixed: an instance of kernel eventfds only, and one of both kinds.
  const std::vector<std::pair<unsigned long, unsigned long>> mixes = {{8, 0},
                                                                      {8, 8}};
  const auto be = c.For(false), bu = c.For(true);  // epoll only; + io_uring
  const size_t ne = be.size(), nu = bu.size();
  Report report;
  ScalePlan scale = PlanScale(be, {10000, 100000});
  size_t minwait_n = 0;
  for (const Backend* b : bu)
    minwait_n += MinWaitModes(*b, 20000, 200, lat).size();
  Progress progress(int(
      ne * (4 + depths.size() * threads.size() + threads.size() + own.size()) +
      nu * (own.size() + maxevents.size() + spins.size()) +
      ne * (maxevents.size() + spins.size() + mixes.size()) + scale.size() +
      minwait_n + bytes.size() * servers.size() * (nu + ne)));
  int64_t t0 = NowNs();

  for (bool no_sleep : {false, true}) {
    WaitParams wp;
    wp.runtime = perf;
    wp.no_sleep = no_sleep;
    wp.perf_output = false;
    for (const Backend* b : be)
      RunMeasurement(progress, report, "wait", *b,
                     no_sleep ? "--no-sleep" : "perf defaults",
                     [&] { return MeasureWait(*b, wp); });
  }
  for (bool no_sleep : {false, true}) {
    CtlParams cp;
    cp.runtime = perf;
    cp.no_sleep = no_sleep;
    cp.perf_output = false;
    for (const Backend* b : be)
      RunMeasurement(progress, report, "ctl", *b,
                     no_sleep ? "--no-sleep" : "perf defaults",
                     [&] { return MeasureCtl(*b, cp); });
  }
  for (unsigned long d : depths)
    for (unsigned long t : threads)
      for (const Backend* b : be)
        RunMeasurement(progress, report, "nested", *b,
                       "t=" + std::to_string(t) + " depth=" + std::to_string(d),
                       [&] { return MeasureNested(*b, t, d, 64, base); });
  for (unsigned long t : threads)
    for (const Backend* b : be)
      RunMeasurement(progress, report, "churn", *b, "t=" + std::to_string(t),
                     [&] { return MeasureChurn(*b, t, base); });
  for (bool churn : {true, false})
    for (unsigned long t : own)
      for (const Backend* b : churn ? be : bu)
        RunMeasurement(progress, report, churn ? "churn_own" : "throughput_own",
                       *b, "t=" + std::to_string(t),
                       [&] { return MeasureOwn(*b, churn, t, base); });
  for (unsigned long k : maxevents)
    for (const Backend* b : bu)
      RunMeasurement(progress, report, "throughput", *b,
                     "maxevents=" + std::to_string(k),
                     [&] { return MeasureThroughput(*b, k, base); });
  for (auto [k, u] : mixes)
    for (const Backend* b : be)
      RunMeasurement(progress, report, "mixed", *b,
                     "K=" + std::to_string(k) + " U=" + std::to_string(u),
                     [&] { return MeasureMixed(*b, k, u, base); });
  for (unsigned long k : maxevents)
    for (const Backend* b : be)
      RunMeasurement(progress, report, "throughput_msg", *b,
                     "maxevents=" + std::to_string(k),
                     [&] { return MeasureThroughput(*b, k, base, true); });
  for (int64_t spin : spins)
    for (const Backend* b : bu)
      RunMeasurement(progress, report, "pingpong", *b,
                     "spin_ns=" + std::to_string(spin),
                     [&] { return MeasurePingpong(*b, spin, lat); });
  for (int64_t spin : spins)
    for (const Backend* b : be)
      RunMeasurement(progress, report, "pingpong_msg", *b,
                     "spin_ns=" + std::to_string(spin),
                     [&] { return MeasurePingpong(*b, spin, lat, true); });
  RunScale(scale, base, progress, report);
  for (const Backend* b : bu)
    for (const MinWaitParams& m : MinWaitModes(*b, 20000, 200, lat))
      RunMeasurement(progress, report, "minwait", *b, MinWaitLabel(m),
                     [&] { return MeasureMinWait(*b, m); });
  for (bool shared : {false, true})
    for (unsigned long z : bytes)
      for (unsigned long s : servers)
        for (const Backend* b : shared ? be : bu)
          RunMeasurement(
              progress, report, shared ? "echo_shared" : "echo", *b,
              "servers=" + std::to_string(s) + " bytes=" + std::to_string(z),
              [&] { return MeasureEcho(*b, 16, s, shared, z, base); });
  AddScaling(report);

  fprintf(stderr, "uepoll-bench: suite took %.1f s\n",
          double(NowNs() - t0) / 1e9);
  int status = FinishCommand(c, report);
  if (!svg.empty()) {
    if (WriteScalingChart(svg, report))
      fprintf(stderr, "uepoll-bench: wrote %s\n", svg.c_str());
    else if (status == 0)
      status = 1;
  }
  return status;
}

}  // namespace uepoll_bench
