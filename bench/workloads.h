// The workloads (one .cc each) and the commands that drive them. Each
// Measure* runs one measurement on one backend and never aborts: a failing
// call ends that measurement early and comes back as Result::error.
#ifndef UEPOLL_BENCH_WORKLOADS_H_
#define UEPOLL_BENCH_WORKLOADS_H_

#include <stdint.h>

#include <string>
#include <utility>
#include <vector>

#include "backend.h"
#include "options.h"
#include "report.h"
#include "util.h"

namespace uepoll_bench {

// perf bench epoll wait / ctl (wl_wait.cc, wl_ctl.cc).
struct WaitParams {
  unsigned long threads = 0;  // 0: online CPUs - 1, at least 1
  unsigned long nfds = 64;
  unsigned long nested = 0;
  double runtime = 8;
  bool noaffinity = false, randomize = false, multiq = false,
       nonblocking = false, oneshot = false, edge = false, verbose = false,
       no_sleep = false;
  bool perf_output = true;  // print perf's own lines
};
Result MeasureWait(const Backend& b, const WaitParams& p);

struct CtlParams {
  unsigned long threads = 0;  // 0: online CPUs
  unsigned long nfds = 64;
  unsigned long nested = 0;
  double runtime = 8;
  bool noaffinity = false, randomize = false, verbose = false, no_sleep = false;
  bool perf_output = true;
};
Result MeasureCtl(const Backend& b, const CtlParams& p);

Result MeasureNested(const Backend& b, unsigned long threads,
                     unsigned long depth, unsigned long sources,
                     double runtime);
Result MeasureChurn(const Backend& b, unsigned long threads, double runtime);
// msg: the sources are SOCK_SEQPACKET pairs instead of eventfds, signalled
// with an 8-byte writev (two segments) and consumed with recvmsg: the
// "throughput_msg" workload (b.writev and b.recvmsg must be set).
Result MeasureThroughput(const Backend& b, unsigned long maxevents,
                         double runtime, bool msg = false);
// The timed loop of throughput and mixed (wl_throughput.cc): signal every
// source, harvest them with one wait, consume each.
void SignalHarvestLoop(const Backend& b, int epfd, const std::vector<int>& srcs,
                       bool msg, double runtime, Result& r);
// mixed (wl_mixed.cc): K kernel and U uepoll eventfds in one instance.
Result MeasureMixed(const Backend& b, unsigned long kernel_fds,
                    unsigned long uepoll_fds, double runtime);
// churn_own / throughput_own (wl_indep.cc): one instance per thread.
// spread: each thread's descriptors are followed by unused ones, so that
// different threads' numbers are never neighbours (throughput only).
Result MeasureOwn(const Backend& b, bool churn, unsigned long threads,
                  double runtime, bool spread = false);
// echo (wl_echo.cc): C connections, S server threads, per-thread instances
// or one shared instance (EPOLLEXCLUSIVE).
Result MeasureEcho(const Backend& b, unsigned long conns, unsigned long servers,
                   bool shared, unsigned long size, double runtime);
// Adds "x of 1 thread" (ops(t) / ops(1)) to every result with t > 1 whose
// 1-thread twin is in the report.
void AddScaling(Report& report);
// msg: the token travels over SOCK_SEQPACKET pairs (writev, recvmsg)
// instead of eventfds: the "pingpong_msg" workload.
Result MeasurePingpong(const Backend& b, int64_t spin_ns, double runtime,
                       bool msg = false);
// The registrations a scale run of `want` can make on b: the kernel's is
// capped by RLIMIT_NOFILE's hard limit. Raises the limit as a side effect.
unsigned long ScaleCapacity(const Backend& b, unsigned long want);
Result MeasureScale(const Backend& b, unsigned long n, double runtime);
// The (backend, N) pairs to measure for these sizes, capped, without the
// repeats capping would make; says on stderr what it capped.
using ScalePlan = std::vector<std::pair<const Backend*, unsigned long>>;
ScalePlan PlanScale(const std::vector<const Backend*>& backends,
                    const std::vector<unsigned long>& sizes);
void RunScale(const ScalePlan& plan, double runtime, Progress& progress,
              Report& report);

struct MinWaitParams {
  unsigned long rate;         // events per second
  unsigned long min_wait_us;  // > 0: uepoll's min_wait (b.wait_min)
  unsigned long sleep_us;     // > 0: the sleep-then-wait hack
  double runtime;
};
Result MeasureMinWait(const Backend& b, const MinWaitParams& p);
// plain, sleep-then-wait and (where the backend has it) min_wait, all with
// `us` microseconds.
std::vector<MinWaitParams> MinWaitModes(const Backend& b, unsigned long rate,
                                        unsigned long us, double runtime);
const char* MinWaitLabel(const MinWaitParams& m);  // "plain", "min_wait", ...

// Timerfds (wl_timers.cc) and user-defined objects (wl_userq.cc).
Result MeasureTimers(const Backend& b, unsigned long timers, double rate,
                     double runtime);
Result MeasureUserq(const Backend& b, double rate, double runtime);
int CmdTimers(int argc, char** argv);
int CmdUserq(int argc, char** argv);

// bridge (wl_bridge.cc): a kernel epoll loop serving nfds eventfds signalled
// from another thread, directly (kernel) or through one watchable uepoll
// instance (uepoll). rate 0: as fast as the loop takes them; edge: the
// eventfds are registered EPOLLET.
Result MeasureBridge(const Backend& b, unsigned long nfds,
                     unsigned long maxevents, double rate, bool edge,
                     double runtime);
int CmdBridge(int argc, char** argv);

int CmdWait(int argc, char** argv);
int CmdCtl(int argc, char** argv);
int CmdNested(int argc, char** argv);
int CmdChurn(int argc, char** argv);
int CmdThroughput(int argc, char** argv);
int CmdMixed(int argc, char** argv);
int CmdPingpong(int argc, char** argv);
int CmdScale(int argc, char** argv);
int CmdMinWait(int argc, char** argv);
int CmdOwn(int argc, char** argv);
int CmdEcho(int argc, char** argv);
int CmdSuite(int argc, char** argv);

// After a measurement, its counted pass: the same measurement again, short
// (PassRuntime), with the syscall counter open, for r.syscalls_per_op.
template <class F>
void CountSyscalls(Result& r, F measure) {
  if (!SyscallCounter::available()) {
    r.syscalls_note = "syscall counter unavailable: " + SyscallCounter::why();
    return;
  }
  SyscallCounter counter;
  if (!counter.ok()) {
    r.syscalls_note = "syscall counter unavailable: " + counter.error();
    return;
  }
  Result c = measure();
  if (!c.ok())
    r.syscalls_note = "counted pass failed: " + c.error;
  else if (c.syscall_ops > 0 && c.syscalls >= 0)
    r.syscalls_per_op = c.syscalls / c.syscall_ops;
  else
    r.syscalls_note = "counted pass completed no operation";
}

// Runs one measurement between two progress lines and files the result.
template <class F>
void RunMeasurement(Progress& progress, Report& report, const char* workload,
                    const Backend& b, const std::string& label, F measure) {
  progress.Start(workload, b.name, label);
  double rtt = CoreRoundTripNs();
  int64_t t0 = NowNs();
  Result r = measure();
  r.core_rtt_ns = rtt;
  NoteFdMode(b, r);
  double secs = static_cast<double>(NowNs() - t0) / 1e9;
  if (r.ok()) CountSyscalls(r, measure);
  progress.Finish(r, secs);
  report.Add(std::move(r));
}

// The end of every command: the table, the JSON file, the exit status (0 if
// anything was measured, 1 if everything was skipped).
int FinishCommand(const CommonOptions& c, const Report& report);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_WORKLOADS_H_
