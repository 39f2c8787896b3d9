// Every difference uepoll-difffuzz found, as the shrunk op sequence it
// printed, run through the same interpreter on the kernel and on uepoll.
// A test fails while uepoll still differs from the kernel on its sequence.
#include <fcntl.h>
#include <sys/socket.h>

#include <vector>

#include <gtest/gtest.h>

#include "difffuzz/interp.h"
#include "support/fixture.h"

namespace difffuzz {
namespace {

void ExpectSame(const std::vector<Op>& ops) {
  Mismatch m;
  bool same = RunSequence(ops, &m);
  EXPECT_TRUE(same) << Report(ops, m);
  uepoll_test::ExpectNoUepollLeaks();
}

// A smoke sequence that must always agree: the interpreter itself works.
TEST(DiffFuzzRegressions, interpreter__basic_sequence_agrees) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},
      {K::kEventfd, {0, 0, 0, 0}, 0, EFD_NONBLOCK, 0},
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 0x1234},
      {K::kWrite, {1, 0, 0, 0}, 8, 0, 5},
      {K::kWait, {0, 0, 0, 0}, 4, 0, 0},
      {K::kWait, {0, 0, 0, 0}, 4, 0, 0},
      {K::kPollAll, {0, 0, 0, 0}, 0, 0, 0},
      {K::kClose, {1, 0, 0, 0}, 0, 0, 0},
      {K::kClose, {1, 0, 0, 0}, 0, 0, 0},
  });
}

// The harness must see a difference where one exists: fcntl's locks are
// a documented deviation (docs/semantics.md D3: the kernel reads the
// struct flock, and a NULL one fails EFAULT; uepoll answers EINVAL).
// (F_GETLEASE served here until uepoll answered it as the kernel does.)
TEST(DiffFuzzRegressions, interpreter__reports_a_known_deviation) {
  Mismatch m;
  EXPECT_FALSE(RunSequence({{K::kPipe2, {0, 0, 0, 0}, 0, O_NONBLOCK, 0},
                            {K::kFcntl, {0, 0, 0, 0}, F_GETLK, 0, 0}},
                           &m));
  EXPECT_EQ(m.index, 1u);
  EXPECT_EQ(m.kernel.ret, -1);
  EXPECT_EQ(m.kernel.err, EFAULT);
  EXPECT_EQ(m.uepoll.ret, -1);
  EXPECT_EQ(m.uepoll.err, EINVAL);
}

// 32 pipes: every one of the kFdSpan numbers is in use.
std::vector<Op> FullTable() {
  return std::vector<Op>(kFdSpan / 2,
                         Op{K::kPipe2, {0, 0, 0, 0}, 0, O_NONBLOCK, 0});
}

std::vector<Op> FullTableThen(Op op) {
  std::vector<Op> ops = FullTable();
  ops.push_back(op);
  return ops;
}

// Found by seeds 2 and 4 (shrunk to 44 ops, restated here as "fill the
// table"): the kernel's __sys_socketpair reserves both descriptors before
// sock_create looks at domain, type and protocol, so with a full table it
// fails EMFILE; uepoll checked the arguments first (EAFNOSUPPORT,
// ESOCKTNOSUPPORT, EPROTONOSUPPORT, EOPNOTSUPP).
TEST(DiffFuzzRegressions, socketpair__full_table_emfile_beats_bad_type) {
  ExpectSame(FullTableThen({K::kSocketpair, {0, 0, 0, 0}, AF_UNIX, 7, 0}));
}
TEST(DiffFuzzRegressions, socketpair__full_table_emfile_beats_bad_domain) {
  ExpectSame(
      FullTableThen({K::kSocketpair, {0, 0, 0, 0}, 12345, SOCK_STREAM, 0}));
}
TEST(DiffFuzzRegressions, socketpair__full_table_emfile_beats_bad_protocol) {
  ExpectSame(
      FullTableThen({K::kSocketpair, {0, 0, 0, 0}, AF_UNIX, SOCK_STREAM, 5}));
}
TEST(DiffFuzzRegressions, socketpair__full_table_emfile_beats_af_inet) {
  ExpectSame(
      FullTableThen({K::kSocketpair, {0, 0, 0, 0}, AF_INET, SOCK_STREAM, 0}));
}
// With one number left the kernel reserves it, fails the second: EMFILE too.
TEST(DiffFuzzRegressions, socketpair__one_free_number_emfile_beats_bad_type) {
  std::vector<Op> ops = FullTable();
  ops.push_back({K::kClose, {0, 0, 0, 0}, 0, 0, 0});
  ops.push_back({K::kSocketpair, {0, 0, 0, 0}, AF_UNIX, 7, 0});
  ExpectSame(ops);
}

}  // namespace
}  // namespace difffuzz
