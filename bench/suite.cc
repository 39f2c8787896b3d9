// The default suite: a short, representative pass over every workload, both
// backends side by side, about a minute on a 2-CPU machine. Each measurement
// runs -r seconds (default 0.8; the perf ports 1).
#include <stdio.h>

#include "svg.h"
#include "workloads.h"

namespace uepoll_bench {

int CmdSuite(int argc, char** argv) {
  CommonOptions c;
  std::string svg;
  std::vector<Option> opts = {
      {0, "svg", Option::kString, &svg,
       "write a chart of nested and churn ops/s by thread count to this file"},
  };
  if (int rc =
          ParseCommand("uepoll-bench suite [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  const double base = c.runtime > 0 ? c.runtime : 0.8;
  const double perf = c.runtime > 0 ? c.runtime : 1;
  const std::vector<unsigned long> threads = {1, 2, 4, 16, 64},
                                   depths = {1, 3, 5};
  const std::vector<unsigned long> maxevents = {1, 64};
  const std::vector<int64_t> spins = {0, 50000};
  const size_t nb = c.backends.size();
  Report report;
  ScalePlan scale = PlanScale(c.backends, {10000, 100000});
  Progress progress(
      int(nb * (4 + depths.size() * threads.size() + threads.size() +
                maxevents.size() + spins.size()) +
          scale.size()));
  int64_t t0 = NowNs();

  for (bool no_sleep : {false, true}) {
    WaitParams wp;
    wp.runtime = perf;
    wp.no_sleep = no_sleep;
    wp.perf_output = false;
    for (const Backend* b : c.backends)
      RunMeasurement(progress, report, "wait", *b,
                     no_sleep ? "--no-sleep" : "perf defaults",
                     [&] { return MeasureWait(*b, wp); });
  }
  for (bool no_sleep : {false, true}) {
    CtlParams cp;
    cp.runtime = perf;
    cp.no_sleep = no_sleep;
    cp.perf_output = false;
    for (const Backend* b : c.backends)
      RunMeasurement(progress, report, "ctl", *b,
                     no_sleep ? "--no-sleep" : "perf defaults",
                     [&] { return MeasureCtl(*b, cp); });
  }
  for (unsigned long d : depths)
    for (unsigned long t : threads)
      for (const Backend* b : c.backends)
        RunMeasurement(progress, report, "nested", *b,
                       "t=" + std::to_string(t) + " depth=" + std::to_string(d),
                       [&] { return MeasureNested(*b, t, d, 64, base); });
  for (unsigned long t : threads)
    for (const Backend* b : c.backends)
      RunMeasurement(progress, report, "churn", *b, "t=" + std::to_string(t),
                     [&] { return MeasureChurn(*b, t, base); });
  for (unsigned long k : maxevents)
    for (const Backend* b : c.backends)
      RunMeasurement(progress, report, "throughput", *b,
                     "maxevents=" + std::to_string(k),
                     [&] { return MeasureThroughput(*b, k, base); });
  for (int64_t spin : spins)
    for (const Backend* b : c.backends)
      RunMeasurement(progress, report, "pingpong", *b,
                     "spin_ns=" + std::to_string(spin),
                     [&] { return MeasurePingpong(*b, spin, base); });
  RunScale(scale, base, progress, report);
  for (const Backend* b : c.backends)
    for (const MinWaitParams& m : MinWaitModes(*b, 20000, 200, base))
      RunMeasurement(progress, report, "minwait", *b, MinWaitLabel(m),
                     [&] { return MeasureMinWait(*b, m); });

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
