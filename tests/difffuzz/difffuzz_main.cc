// uepoll-difffuzz: seeded random operation sequences run on the kernel and on
// uepoll side by side (interp.h), every result compared.
//
//   uepoll-difffuzz [--seed N|random] [--ops N] [--keep-going]
//                   [--skip-known] [--stats] [--numbering disjoint|kernel]
//                   [--check off|failures|all] [--check-every N]
//                   [--full-probe] [--replay FILE]
//   uepoll-difffuzz --threads [--seed N|random] [--scenarios N]
//                   [--first N] [--max-steps N] [--stats]
//
// --seed random picks a seed and prints it first (a rotating seed for CI:
// the log says how to repeat a failure).
//
// The ops are cut into sequences of 50 to 3000 ops; each sequence starts
// from nothing and ends by closing every descriptor and checking that uepoll
// freed every object (a leak is a difference too). On a difference it prints
// the seed, the op index, both results and a shrunk reproducing sequence
// (readable, and as code for regressions_test.cc), and exits 1 (with
// --keep-going: goes on with the next sequence, at most 20 reports).
// --skip-known skips the ops of known engine differences (each pinned by a
// failing regression test; interp.cc KnownDifference) so that a long run
// reports new ones only; --stats prints how each op kind ended.
// --numbering picks uepoll's numbering mode for the run (default disjoint;
// kernel: uepoll's default, where instances hold kernel descriptors and the
// generator makes kernel objects on both sides; numbering.h). --check
// runs the state check (interp.h, state_check.cc) after every failing call
// (failures, the default), after every call (all: to find the op that
// first made a difference), or never; --full-probe makes its registration
// probe cover every pair at every check; --check-every N checks after
// every N-th failing call of a sequence only.
// Progress goes to stderr every 100K ops; the last line of stdout is the
// summary. Exit status 0 when nothing differed.
//
// --threads runs the multi-thread mode (mt.h): scenarios of blocking calls
// from several threads, each on the kernel and then on uepoll. Scenario i of
// a seed depends on the seed and i alone, so --first i --scenarios 1
// repeats it. A difference prints the scenario and exits 1; a fatal check or
// a hang (the watchdog) prints it and aborts.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "difffuzz/interp.h"
#include "difffuzz/mt.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: uepoll-difffuzz [--seed N|random] [--ops N] "
               "[--keep-going] [--skip-known] [--stats]\n"
               "                       [--numbering disjoint|kernel] "
               "[--check off|failures|all] [--check-every N] [--full-probe]\n"
               "                       [--replay FILE]\n"
               "       uepoll-difffuzz --threads [--seed N|random] "
               "[--scenarios N] [--first N] [--max-steps N] [--stats]\n");
}

// The multi-thread mode.
int RunThreaded(uint64_t seed, uint64_t first, uint64_t count, int max_steps,
                bool stats) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  uint64_t failures = 0;
  for (uint64_t i = first; i < first + count; ++i) {
    // Each scenario from (seed, i) alone, so that one can be repeated.
    difffuzz::SplitMix rng(seed ^ (i * 0xd1b54a32d192ed03ULL));
    difffuzz::mt::Scenario s = difffuzz::mt::Generate(rng, max_steps);
    char ctx[160];
    std::snprintf(ctx, sizeof ctx,
                  "repeat: uepoll-difffuzz --threads --seed %" PRIu64
                  " --first %" PRIu64 " --scenarios 1 --max-steps %d",
                  seed, i, max_steps);
    difffuzz::mt::SetContext(ctx);
    std::string report;
    if (!difffuzz::mt::Run(s, &report)) {
      ++failures;
      std::printf("MISMATCH: seed %" PRIu64 ", scenario %" PRIu64 "\n%s\n%s",
                  seed, i, ctx, report.c_str());
      std::fflush(stdout);
      break;
    }
  }
  double t = std::chrono::duration<double>(Clock::now() - start).count();
  if (stats) std::printf("%s", difffuzz::mt::Stats().c_str());
  std::printf("uepoll-difffuzz --threads: seed %" PRIu64 ": scenarios %" PRIu64
              "..%" PRIu64 " in %.2f s, %" PRIu64 " %s\n",
              seed, first, first + count - 1, t, failures,
              failures == 1 ? "mismatch" : "mismatches");
  return failures ? 1 : 0;
}

// --replay FILE: runs the ops of a report's "as code" lines (FILE: a
// report, or the lines alone; "-": stdin) once, prints the report of the
// first difference, and shrinks it.
int Replay(const std::string& path, const difffuzz::Options& opt) {
  FILE* in = path == "-" ? stdin : std::fopen(path.c_str(), "r");
  if (!in) {
    std::fprintf(stderr, "uepoll-difffuzz: cannot open %s\n", path.c_str());
    return 2;
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) text.append(buf, n);
  if (in != stdin) std::fclose(in);
  std::vector<difffuzz::Op> ops = difffuzz::ParseOps(text);
  difffuzz::Mismatch m;
  if (difffuzz::RunSequence(ops, &m, opt)) {
    std::printf("uepoll-difffuzz --replay: %zu ops, no difference\n",
                ops.size());
    return 0;
  }
  std::printf("%s", difffuzz::Report(ops, m).c_str());
  difffuzz::Options used;
  std::vector<difffuzz::Op> small = difffuzz::Shrink(ops, m, opt, &used);
  difffuzz::Mismatch sm;
  if (!difffuzz::RunSequence(small, &sm, used)) {
    std::printf("minimal reproduction%s:\n%s",
                used.check == difffuzz::Check::kAll
                    ? " (--check all --full-probe)"
                    : "",
                difffuzz::Report(small, sm).c_str());
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  uint64_t total = 1000000;
  bool keep_going = false;
  bool stats = false;
  difffuzz::Options opt;
  opt.check = difffuzz::Check::kFailures;
  bool threads = false, random_seed = false;
  std::string replay;
  uint64_t scenarios = 200, first = 0;
  int max_steps = 160;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      if (std::string(argv[i + 1]) == "random") {
        random_seed = true;
        ++i;
      } else {
        seed = std::strtoull(argv[++i], nullptr, 0);
      }
    } else if (a == "--threads") {
      threads = true;
    } else if (a == "--scenarios" && i + 1 < argc) {
      scenarios = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--first" && i + 1 < argc) {
      first = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--max-steps" && i + 1 < argc) {
      max_steps = std::atoi(argv[++i]);
      if (max_steps < 10) max_steps = 10;
    } else if (a == "--ops" && i + 1 < argc) {
      total = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--skip-known") {
      opt.skip_known = true;
    } else if (a == "--numbering" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v != "kernel" && v != "disjoint") {
        Usage();
        return 2;
      }
      opt.numbering = v == "kernel" ? difffuzz::NumberingMode::kKernel
                                    : difffuzz::NumberingMode::kDisjoint;
    } else if (a == "--check" && i + 1 < argc) {
      std::string v = argv[++i];
      if (v == "off") {
        opt.check = difffuzz::Check::kOff;
      } else if (v == "failures") {
        opt.check = difffuzz::Check::kFailures;
      } else if (v == "all") {
        opt.check = difffuzz::Check::kAll;
      } else {
        Usage();
        return 2;
      }
    } else if (a == "--full-probe") {
      opt.full_probe = true;
    } else if (a == "--check-every" && i + 1 < argc) {
      opt.check_every = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--replay" && i + 1 < argc) {
      replay = argv[++i];
    } else if (a == "--stats") {
      stats = true;
    } else if (a == "--keep-going") {
      keep_going = true;
    } else {
      Usage();
      return 2;
    }
  }

  if (random_seed) {
    // Printed before anything runs: a crash or a hang still leaves it in
    // the log.
    seed = static_cast<uint64_t>(std::random_device{}()) << 32 ^
           static_cast<uint64_t>(
               std::chrono::system_clock::now().time_since_epoch().count());
    std::printf("uepoll-difffuzz: rotating seed %" PRIu64
                " (repeat with --seed %" PRIu64 ")\n",
                seed, seed);
    std::fflush(stdout);
  }
  if (threads) return RunThreaded(seed, first, scenarios, max_steps, stats);
  if (!replay.empty()) return Replay(replay, opt);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto secs = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  difffuzz::SplitMix rng(seed);
  uint64_t done = 0, next_progress = 100000, sequences = 0;
  int mismatches = 0;
  while (done < total) {
    const uint64_t first_op = done;
    uint64_t len = 50 + rng.Below(2951);
    if (len > total - done) len = total - done;
    std::vector<difffuzz::Op> ops;
    ops.reserve(len);
    difffuzz::Mismatch m;
    bool same = true;
    {
      difffuzz::Session s(opt);
      if (!s.ok()) {
        std::fprintf(stderr, "uepoll-difffuzz: setup failed: %s\n",
                     s.setup_error().c_str());
        return 2;
      }
      for (uint64_t i = 0; i < len && same; ++i) {
        ops.push_back(s.Generate(rng));
        same = s.Run(ops.back(), i, &m);
      }
      if (same) same = s.Teardown(ops.size(), &m);
    }
    done += ops.size();
    ++sequences;
    while (done >= next_progress) {
      std::fprintf(stderr, "uepoll-difffuzz: %" PRIu64 " ops, %.1f s\n",
                   next_progress, secs());
      next_progress += 100000;
    }
    if (same) continue;
    ++mismatches;
    std::printf("MISMATCH: seed %" PRIu64 ", op %" PRIu64 " (sequence %" PRIu64
                ", op %zu of it)\n",
                seed, first_op + m.index, sequences - 1, m.index);
    std::printf("  (%s)\n  op: %s\n    kernel: %s\n    uepoll: %s\n",
                m.what.c_str(), difffuzz::Describe(m.op).c_str(),
                difffuzz::Describe(m.kernel, m.op).c_str(),
                difffuzz::Describe(m.uepoll, m.op).c_str());
    difffuzz::Options used;
    std::vector<difffuzz::Op> small = difffuzz::Shrink(ops, m, opt, &used);
    difffuzz::Mismatch sm;
    if (difffuzz::RunSequence(small, &sm, used)) {
      std::printf("  (the shrunk sequence no longer reproduces; full one:)\n%s",
                  difffuzz::Report(ops, m).c_str());
    } else {
      std::printf("minimal reproduction%s:\n%s",
                  used.check == difffuzz::Check::kAll
                      ? " (--check all --full-probe)"
                      : "",
                  difffuzz::Report(small, sm).c_str());
    }
    std::fflush(stdout);
    if (!keep_going || mismatches >= 20) break;
  }
  double t = secs();
  if (stats) {
    std::printf("outcomes per op kind (kernel side):\n%s",
                difffuzz::CoverageSummary().c_str());
  }
  std::printf(
      "uepoll-difffuzz: seed %" PRIu64 ": %" PRIu64 " ops in %" PRIu64
      " sequences, %ld state checks, %s numbering, %.2f s (%.0f "
      "ops/s), %d %s\n",
      seed, done, sequences, difffuzz::StateChecks(),
      opt.numbering == difffuzz::NumberingMode::kKernel ? "kernel" : "disjoint",
      t, t > 0 ? static_cast<double>(done) / t : 0.0, mismatches,
      mismatches == 1 ? "mismatch" : "mismatches");
  return mismatches ? 1 : 0;
}
