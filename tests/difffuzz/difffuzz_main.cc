// uepoll-difffuzz: seeded random operation sequences run on the kernel and on
// uepoll side by side (interp.h), every result compared.
//
//   uepoll-difffuzz [--seed N] [--ops N] [--keep-going] [--skip-known]
//                   [--stats]
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
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "difffuzz/interp.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: uepoll-difffuzz [--seed N] [--ops N] [--keep-going] "
               "[--skip-known] [--stats]\n");
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  uint64_t total = 1000000;
  bool keep_going = false;
  bool stats = false;
  bool skip_known = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 0);
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
