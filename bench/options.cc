#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>

#include "report.h"
#include "uring.h"
#include "util.h"
#include "workloads.h"

namespace uepoll_bench {
namespace {

bool Assign(const Option& o, const char* value, std::string* err) {
  switch (o.kind) {
    case Option::kFlag:
      *static_cast<bool*>(o.target) = true;
      return true;
    case Option::kUint: {
      char* end = nullptr;
      errno = 0;
      if (value[0] == '-' || value[0] == '\0') break;
      unsigned long v = strtoul(value, &end, 10);
      if (errno != 0 || *end != '\0') break;
      *static_cast<unsigned long*>(o.target) = v;
      return true;
    }
    case Option::kDouble: {
      char* end = nullptr;
      errno = 0;
      double v = strtod(value, &end);
      if (errno != 0 || *end != '\0' || value[0] == '\0' || !std::isfinite(v) ||
          v < 0)
        break;
      *static_cast<double*>(o.target) = v;
      return true;
    }
    case Option::kString:
      *static_cast<std::string*>(o.target) = value;
      return true;
    case Option::kList:
    case Option::kList0:
      if (ParseUintList(value,
                        static_cast<std::vector<unsigned long>*>(o.target),
                        o.kind == Option::kList0))
        return true;
      *err = std::string("bad list '") + value + "' (expected " +
             (o.kind == Option::kList0 ? "non-negative" : "positive") +
             " integers separated by commas)";
      return false;
  }
  *err = std::string("bad value '") + value + "'";
  return false;
}

std::string Name(const Option& o) {
  if (o.long_name) return std::string("--") + o.long_name;
  return std::string("-") + o.short_name;
}

}  // namespace

void PrintUsage(FILE* out, const char* synopsis,
                const std::vector<Option>& opts) {
  fprintf(out, "usage: %s\n\n", synopsis);
  for (const Option& o : opts) {
    std::string names;
    if (o.short_name) names += std::string("-") + o.short_name;
    if (o.short_name && o.long_name) names += ", ";
    if (o.long_name) names += std::string("--") + o.long_name;
    const char* arg = o.kind == Option::kFlag ? ""
                      : o.kind == Option::kList || o.kind == Option::kList0
                          ? " <n,n,...>"
                      : o.kind == Option::kString ? " <str>"
                                                  : " <n>";
    fprintf(out, "    %-28s %s\n", (names + arg).c_str(), o.help);
  }
}

ParseResult ParseOptions(const char* synopsis, int argc, char** argv,
                         const std::vector<Option>& opts) {
  std::string err;
  for (int i = 0; i < argc && err.empty(); ++i) {
    const char* a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      PrintUsage(stdout, synopsis, opts);
      return ParseResult::kHelp;
    }
    if (a[0] != '-' || a[1] == '\0') {
      err = std::string("unexpected argument '") + a + "'";
      break;
    }
    if (a[1] == '-') {  // --name or --name=value
      std::string name(a + 2), value;
      bool has_value = false;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      const Option* found = nullptr;
      for (const Option& o : opts)
        if (o.long_name && name == o.long_name) found = &o;
      if (!found) {
        err = "unknown option '--" + name + "'";
      } else if (found->kind == Option::kFlag) {
        if (has_value)
          err = "option '--" + name + "' takes no value";
        else
          Assign(*found, "", &err);
      } else if (!has_value && i + 1 >= argc) {
        err = "option '--" + name + "' needs a value";
      } else {
        const char* v = has_value ? value.c_str() : argv[++i];
        if (!Assign(*found, v, &err)) err = "--" + name + ": " + err;
      }
      continue;
    }
    for (const char* p = a + 1; *p && err.empty(); ++p) {  // -abc, -t4, -t 4
      const Option* found = nullptr;
      for (const Option& o : opts)
        if (o.short_name == *p) found = &o;
      if (!found) {
        err = std::string("unknown option '-") + *p + "'";
      } else if (found->kind == Option::kFlag) {
        Assign(*found, "", &err);
      } else {
        const char* v = p[1] ? p + 1 : (i + 1 < argc ? argv[++i] : nullptr);
        if (!v)
          err = std::string("option '-") + *p + "' needs a value";
        else if (!Assign(*found, v, &err))
          err = Name(*found) + ": " + err;
        break;
      }
    }
  }
  if (err.empty()) return ParseResult::kOk;
  fprintf(stderr, "uepoll-bench: %s\n\n", err.c_str());
  PrintUsage(stderr, synopsis, opts);
  return ParseResult::kError;
}

void AddCommonOptions(CommonOptions* c, std::vector<Option>* opts) {
  opts->push_back({'r', "runtime", Option::kDouble, &c->runtime,
                   "seconds each measurement runs"});
  opts->push_back({0, "backend", Option::kString, &c->backend,
                   "kernel, uepoll, io_uring, both (kernel and uepoll) or "
                   "all (default all; io_uring only where a workload has an "
                   "io_uring form)"});
  opts->push_back({0, "no-syscalls", Option::kFlag, &c->no_syscalls,
                   "skip the short counted pass that measures syscalls/op"});
  opts->push_back({0, "json", Option::kString, &c->json,
                   "also write the results as a JSON array to this file"});
}

bool FinishCommonOptions(CommonOptions* c) {
  c->backends.clear();
  const std::string& w = c->backend;
  bool all = w == "all", both = w == "both";
  if (w == "kernel" || both || all) c->backends.push_back(&KernelBackend());
  if (w == "uepoll" || both || all) c->backends.push_back(&UepollBackend());
  if (w == "io_uring" || all) {
    static std::string why;
    static bool ok = IoUringAvailable(&why);
    if (ok) {
      c->backends.push_back(&IoUringBackend());
    } else {
      static bool said = false;
      if (!said)
        fprintf(stderr, "uepoll-bench: io_uring backend skipped: %s\n",
                why.c_str());
      said = true;
    }
  }
  if (c->backends.empty() && w != "io_uring") {
    BadUsage("--backend must be kernel, uepoll, io_uring, both or all, not '" +
             w + "'");
    return false;
  }
  if (c->no_syscalls) SyscallCounter::Disable("--no-syscalls");
  if (c->runtime == 0) {
    BadUsage("-r/--runtime must be more than 0 seconds");
    return false;
  }
  return true;
}

std::vector<const Backend*> CommonOptions::For(bool has_uring_form) const {
  std::vector<const Backend*> out;
  for (const Backend* b : backends)
    if (has_uring_form || !b->is_uring) out.push_back(b);
  return out;
}

int ParseCommand(const char* synopsis, int argc, char** argv,
                 std::vector<Option>* opts, CommonOptions* c) {
  AddCommonOptions(c, opts);
  switch (ParseOptions(synopsis, argc, argv, *opts)) {
    case ParseResult::kHelp:
      return 0;
    case ParseResult::kError:
      return 2;
    case ParseResult::kOk:
      break;
  }
  return FinishCommonOptions(c) ? -1 : 2;
}

int FinishCommand(const CommonOptions& c, const Report& report) {
  report.PrintTable(stdout);
  fflush(stdout);
  bool ok = true;
  if (!c.json.empty()) {
    ok = report.WriteJson(c.json);
    if (ok) fprintf(stderr, "uepoll-bench: wrote %s\n", c.json.c_str());
  }
  if (!report.AnyMeasured()) {
    fprintf(stderr,
            "uepoll-bench: nothing was measured (every run was skipped)\n");
    return 1;
  }
  return ok ? 0 : 1;
}

int BadUsage(const std::string& msg) {
  fprintf(stderr, "uepoll-bench: %s\n", msg.c_str());
  return 2;
}

}  // namespace uepoll_bench
