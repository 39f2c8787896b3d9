// uepoll-bench timers --rounds: each backend's rounds are pooled into one
// result (bench/wl_timers.cc), so a pooled result counts the expiries of
// every round, not of the last one; --floor adds the floor's rounds beside
// them; and a count of rounds the command cannot run is refused as bad
// usage, before anything is measured.
#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/fixture.h"
#include "uring.h"
#include "workloads.h"

namespace uepoll_bench {
namespace {

// The command's own arguments, as main() hands them on (no name first).
int RunTimers(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return CmdTimers(static_cast<int>(args.size()), argv.data());
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value of `key` in each JSON object of the array, in order.
std::vector<double> Values(const std::string& json, const std::string& key) {
  std::vector<double> out;
  std::regex re("\"" + key + "\": ([0-9.e+]+)");
  for (std::sregex_iterator i(json.begin(), json.end(), re), end; i != end; ++i)
    out.push_back(std::stod((*i)[1].str()));
  return out;
}

TEST(BenchTimersRounds, PooledResultCountsEveryRound) {
  char path[] = "/tmp/uepoll-bench-rounds-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  // 16 timers at 2,000 expiries/s for 0.2 s: about 400 expiries a round,
  // each timer's period 8 ms. Overruns are counted as expiries too, so a
  // stalled round still counts its window's worth.
  ASSERT_EQ(RunTimers({"-n", "16", "--rate", "2000", "-r", "0.2", "--rounds",
                       "3", "--backend", "both", "--json", path}),
            0);
  std::string json = ReadFile(path);
  unlink(path);
  std::vector<double> expiries = Values(json, "expiries");
  ASSERT_EQ(expiries.size(), 2u) << json;  // kernel and uepoll
  for (double e : expiries) {
    // One round's window holds at most 0.2 s * 2,000 = 400 (plus the one
    // at each end); three pooled hold about 1,200.
    EXPECT_GT(e, 2 * 402) << json;
    EXPECT_LE(e, 3 * 402) << json;
  }
  EXPECT_NE(json.find("\"rounds\": \"3\""), std::string::npos) << json;
  uepoll_test::ExpectNoUepollLeaks();
}

// --floor: a third participant in the rounds, reported in the JSON as
// backend "floor" with its own expiries (one per instant of the schedule,
// as many as the backends count), and each backend but the kernel gets the
// median of its per-round CPU ratios to the kernel's.
TEST(BenchTimersRounds, FloorIsMeasuredBesideTheBackends) {
  std::string why;
  if (!IoUringAvailable(&why)) GTEST_SKIP() << "no floor here: " << why;
  char path[] = "/tmp/uepoll-bench-floor-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(RunTimers({"-n", "16", "--rate", "2000", "-r", "0.2", "--rounds",
                       "2", "--backend", "both", "--floor", "--json", path}),
            0);
  std::string json = ReadFile(path);
  unlink(path);
  ASSERT_NE(json.find("\"backend\": \"floor\""), std::string::npos) << json;
  std::vector<double> expiries = Values(json, "expiries");
  ASSERT_EQ(expiries.size(), 3u) << json;  // kernel, uepoll, floor
  for (double e : expiries) {
    EXPECT_GT(e, 1 * 402) << json;
    EXPECT_LE(e, 2 * 402) << json;
  }
  // uepoll's and the floor's, not the kernel's own.
  std::vector<double> medians = Values(json, "cpu_ratio_median_of_rounds");
  ASSERT_EQ(medians.size(), 2u) << json;
  for (double m : medians) EXPECT_GT(m, 0) << json;
  uepoll_test::ExpectNoUepollLeaks();
}

TEST(BenchTimersRounds, RefusesCountsItCannotRun) {
  for (const char* bad : {"0", "1001", "-1", "x"})
    EXPECT_EQ(RunTimers({"--rounds", bad}), 2) << bad;
}

}  // namespace
}  // namespace uepoll_bench
