// libFuzzer entry over the differential fuzzer's multi-thread mode (mt.h):
// the input bytes drive every choice of the scenario generator, the
// scenario runs on the kernel and then on uepoll with its threads, and any
// difference traps after printing the scenario, so that libFuzzer saves the
// input. A hang is caught by the mode's own watchdog, which aborts (a crash
// for libFuzzer too). Coverage is noisier than in the single-thread target,
// since the threads' interleaving varies from run to run.
#include <cstdint>
#include <cstdio>
#include <string>

#include "difffuzz/mt.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  difffuzz::ByteChooser ch(data, size);
  difffuzz::mt::Scenario s = difffuzz::mt::Generate(ch, 120);
  difffuzz::mt::SetContext(
      "uepoll-difffuzz-mt-libfuzzer: the input that "
      "libFuzzer saves repeats this scenario");
  std::string report;
  if (!difffuzz::mt::Run(s, &report)) {
    std::fprintf(stderr, "uepoll difffuzz --threads mismatch:\n%s",
                 report.c_str());
    __builtin_trap();
  }
  return 0;
}
