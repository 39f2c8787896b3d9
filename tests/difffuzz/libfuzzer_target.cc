// libFuzzer entry over the differential fuzzer's operation language: the
// input bytes drive every choice of the generator (interp.h), the ops run on
// the kernel and on uepoll, and any difference traps after printing the
// (unshrunk) sequence, so that libFuzzer saves and minimizes the input.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "difffuzz/interp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  difffuzz::ByteChooser ch(data, size);
  std::vector<difffuzz::Op> ops;
  difffuzz::Mismatch m;
  bool same = true;
  {
    // Known engine differences are skipped: they are pinned (and fail) in
    // regressions_test.cc, and a crash on them would hide new finds.
    difffuzz::Options opt;
    opt.skip_known = true;
    opt.check = difffuzz::Check::kFailures;
    difffuzz::Session s(opt);
    if (!s.ok()) return 0;
    while (!ch.Done() && ops.size() < 4096 && same) {
      ops.push_back(s.Generate(ch));
      same = s.Run(ops.back(), ops.size() - 1, &m);
    }
    if (same) same = s.Teardown(ops.size(), &m);
  }
  if (!same) {
    std::fprintf(stderr, "uepoll difffuzz mismatch:\n%s",
                 difffuzz::Report(ops, m).c_str());
    __builtin_trap();
  }
  return 0;
}
