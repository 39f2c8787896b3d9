// uepoll-bench's option parser: the list kinds. `mixed -K 8 -U 0`, the
// documented way to price an instance of kernel descriptors only, needs a
// list that takes 0; thread counts and sizes must not.
#include "options.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace uepoll_bench {
namespace {

ParseResult Parse(Option::Kind kind, const char* value,
                  std::vector<unsigned long>* out) {
  std::vector<Option> opts = {{'U', "uepoll", kind, out, "a list"}};
  std::string v = value;
  char name[] = "-U";
  char* argv[] = {name, v.data()};
  return ParseOptions("test", 2, argv, opts);
}

TEST(BenchOptions, ZeroListTakesZero) {
  std::vector<unsigned long> out;
  ASSERT_EQ(Parse(Option::kList0, "0,8,0", &out), ParseResult::kOk);
  EXPECT_EQ(out, (std::vector<unsigned long>{0, 8, 0}));
}

TEST(BenchOptions, PositiveListRefusesZero) {
  std::vector<unsigned long> out = {4};
  EXPECT_EQ(Parse(Option::kList, "1,0", &out), ParseResult::kError);
  ASSERT_EQ(Parse(Option::kList, "1,16", &out), ParseResult::kOk);
  EXPECT_EQ(out, (std::vector<unsigned long>{1, 16}));
}

TEST(BenchOptions, EitherListRefusesJunk) {
  std::vector<unsigned long> out;
  for (Option::Kind k : {Option::kList, Option::kList0}) {
    EXPECT_EQ(Parse(k, "", &out), ParseResult::kError);
    EXPECT_EQ(Parse(k, "1,,2", &out), ParseResult::kError);
    EXPECT_EQ(Parse(k, "-1", &out), ParseResult::kError);
    EXPECT_EQ(Parse(k, "2x", &out), ParseResult::kError);
  }
}

}  // namespace
}  // namespace uepoll_bench
