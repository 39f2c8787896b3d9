// uepoll-difffuzz: seeded random operation sequences run on the kernel and on
// uepoll side by side (interp.h), every result compared.
//
//   uepoll-difffuzz [--seed N|random] [--ops N] [--keep-going]
//                   [--skip-known] [--stats]
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
// Progress goes to stderr every 100K ops; the last line of stdout is the
// summary. Exit status 0 when nothing differed.
//
// --threads runs the multi-thread mode (mt.h): scenarios of blocking calls
// from several threads, each on the kernel and then on uepoll. Scenario i of
// a seed depends on the seed and i alone, so --first i --scenarios 1
// repeats it. A difference prints the scenario and exits 1; a fatal check or
// a hang (the watchdog) prints it and aborts.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "difffuzz/interp.h"
#include "difffuzz/mt.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: uepoll-difffuzz [--seed N|random] [--ops N] "
               "[--keep-going] [--skip-known] [--stats]\n"
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

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  uint64_t total = 1000000;
  bool keep_going = false;
  bool stats = false;
  bool skip_known = false;
  bool threads = false, random_seed = false;
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
      skip_known = true;
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
      difffuzz::Session s(skip_known);
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
    std::printf("  op: %s\n    kernel: %s\n    uepoll: %s\n",
                difffuzz::Describe(m.op).c_str(),
                difffuzz::Describe(m.kernel, m.op).c_str(),
                difffuzz::Describe(m.uepoll, m.op).c_str());
    std::vector<difffuzz::Op> small = difffuzz::Shrink(ops, m, skip_known);
    difffuzz::Mismatch sm;
    if (difffuzz::RunSequence(small, &sm, skip_known)) {
      std::printf("  (the shrunk sequence no longer reproduces; full one:)\n%s",
                  difffuzz::Report(ops, m).c_str());
    } else {
      std::printf("minimal reproduction:\n%s",
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
  std::printf("uepoll-difffuzz: seed %" PRIu64 ": %" PRIu64 " ops in %" PRIu64
              " sequences, %.2f s (%.0f ops/s), %d %s\n",
              seed, done, sequences, t,
              t > 0 ? static_cast<double>(done) / t : 0.0, mismatches,
              mismatches == 1 ? "mismatch" : "mismatches");
  return mismatches ? 1 : 0;
}
