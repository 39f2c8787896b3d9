// A small table-driven option parser in the style perf uses: short options
// ("-t 4", "-t4", bundled flags "-nR"), long options ("--threads 4",
// "--threads=4"). Bad input is reported, never fatal: the caller exits 2.
#ifndef UEPOLL_BENCH_OPTIONS_H_
#define UEPOLL_BENCH_OPTIONS_H_

#include <stdio.h>

#include <string>
#include <vector>

#include "backend.h"

namespace uepoll_bench {

struct Option {
  // kList: positive integers; kList0: zero allowed too.
  enum Kind { kFlag, kUint, kDouble, kString, kList, kList0 };
  char short_name;        // 0: long form only
  const char* long_name;  // nullptr: short form only
  Kind kind;
  void* target;  // bool*, unsigned long*, double*, std::string*,
                 // std::vector<unsigned long>* (comma-separated list, kList and
                 // kList0)
  const char* help;
};

enum class ParseResult { kOk, kHelp, kError };

// Parses argv[0..argc) (the subcommand's own arguments). On kError the
// message is already printed with the usage; on kHelp the usage is printed
// to stdout.
ParseResult ParseOptions(const char* synopsis, int argc, char** argv,
                         const std::vector<Option>& opts);

void PrintUsage(FILE* out, const char* synopsis,
                const std::vector<Option>& opts);

// What every subcommand accepts besides its own options.
struct CommonOptions {
  std::string backend = "all";
  std::string json;
  double runtime = -1;                   // < 0: the workload's default
  std::vector<const Backend*> backends;  // filled by Finish()
  bool no_syscalls = false;              // skip the counted passes

  // The chosen backends that a workload runs on: io_uring only where the
  // workload has an io_uring form.
  std::vector<const Backend*> For(bool has_uring_form) const;
};

void AddCommonOptions(CommonOptions* c, std::vector<Option>* opts);

// Checks the common options after parsing; prints a message and returns
// false on a bad value.
bool FinishCommonOptions(CommonOptions* c);

// A subcommand's whole parse: its own options plus the common ones. Returns
// -1 to go on, or the exit status to return (0 after --help, 2 after a bad
// option, its message printed).
int ParseCommand(const char* synopsis, int argc, char** argv,
                 std::vector<Option>* opts, CommonOptions* c);

// Prints "uepoll-bench: <msg>" to stderr and returns 2, the status for bad
// options.
int BadUsage(const std::string& msg);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_OPTIONS_H_
