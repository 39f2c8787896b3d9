// Results of measurements, and the three ways they leave the program: one
// progress line per measurement on stderr, the side-by-side table on stdout,
// and a JSON array (one object per workload, backend and parameter set).
#ifndef UEPOLL_BENCH_REPORT_H_
#define UEPOLL_BENCH_REPORT_H_

#include <stdio.h>

#include <string>
#include <utility>
#include <vector>

namespace uepoll_bench {

// One of a workload's own figures ("p50_ns", "bytes_per_registration", ...).
struct Metric {
  std::string key;  // the JSON key
  double value;
  std::string label;   // the table's name for it ("" keeps it out of the table)
  bool higher_better;  // only for reading the ratio column
};

struct Result {
  std::string workload;
  std::string backend;
  unsigned long threads = 1;
  // What distinguishes this measurement from its neighbours ("depth", ...);
  // written to JSON and shown in the table's parameter column.
  std::vector<std::pair<std::string, double>> params;
  double ops_per_sec = -1;          // < 0: not measured
  std::string ops_label = "ops/s";  // the table's name for ops_per_sec
  std::vector<Metric> metrics;
  std::vector<std::pair<std::string, std::string>> notes;  // JSON only
  std::string error;        // non-empty: skipped, with the reason
  double core_rtt_ns = -1;  // CoreRoundTripNs() just before; JSON only
  // Syscalls per operation, from the measurement's counted pass (util.h,
  // SyscallCounter); < 0: not measured, and syscalls_note says why.
  double syscalls_per_op = -1;
  std::string syscalls_note;
  // Set by a workload's SyscallWindow during a counted pass.
  double syscalls = -1, syscall_ops = -1;

  bool ok() const { return error.empty(); }
  double Param(const std::string& key, double dflt = 0) const;
  const Metric* Find(const std::string& key) const;
  std::string ParamLabel() const;  // "t=4 depth=3"
};

class Report {
 public:
  void Add(Result r) { results_.push_back(std::move(r)); }
  const std::vector<Result>& results() const { return results_; }
  std::vector<Result>& mutable_results() { return results_; }
  bool AnyMeasured() const;

  // Rows are (workload, parameters, figure); columns kernel, uepoll,
  // io_uring (when any io_uring result is present) and the uepoll/kernel
  // and uepoll/io_uring ratios where both sides were measured.
  void PrintTable(FILE* out) const;
  // Measured results only; skipped ones are in the table and on stderr.
  bool WriteJson(const std::string& path) const;

 private:
  std::vector<Result> results_;
};

// "[3/24] nested uepoll t=4 depth=3 ..." on start and the headline figure (or
// the reason it was skipped) on finish, so long runs show where they are.
class Progress {
 public:
  explicit Progress(int total = 0) : total_(total) {}
  void Start(const std::string& workload, const std::string& backend,
             const std::string& params);
  void Finish(const Result& r, double seconds);

 private:
  int total_;
  int index_ = 0;
};

// Formats 1234567 as "1.23M" for tables and progress lines.
std::string Human(double v);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_REPORT_H_
