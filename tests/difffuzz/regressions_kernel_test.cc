// The differences uepoll-difffuzz found under uepoll's default (kernel)
// numbering, where uepoll instances hold kernel descriptors (kKernelObj), as
// shrunk op sequences run on both backends with the state check after every
// failing call. A separate binary from regressions_test.cc: a process uses
// one numbering mode.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <vector>

#include <gtest/gtest.h>

#include "difffuzz/interp.h"
#include "support/fixture.h"

namespace difffuzz {
namespace {

Options KernelNumbering() {
  Options o;
  o.numbering = NumberingMode::kKernel;
  o.check = Check::kFailures;
  return o;
}

void ExpectSame(const std::vector<Op>& ops) {
  Mismatch m;
  bool same = RunSequence(ops, &m, KernelNumbering());
  EXPECT_TRUE(same) << Report(ops, m);
  uepoll_test::ExpectNoUepollLeaks();
}

constexpr int64_t kKernelEventfd = 0, kKernelPipe = 1, kKernelEpoll = 2,
                  kKernelStream = 3;

// The interpreter works under this numbering: kernel objects on both
// sides, inside uepoll instances, a kernel instance holding them.
TEST(DiffFuzzKernelRegressions, interpreter__kernel_descriptors_in_instances) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // h0
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 1, 0},  // h1, ready
      {K::kKernelObj, {0, 0, 0, 0}, kKernelPipe, 0, 0},     // h2, h3
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEpoll, 0, 0},    // h4
      {K::kEventfd, {0, 0, 0, 0}, 1, EFD_NONBLOCK, 0},      // h5
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x11},
      {K::kCtl, {0, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 0x22},
      {K::kCtl, {0, 5, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x55},
      {K::kCtl, {4, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x41},
      {K::kWrite, {3, 0, 0, 0}, 5, 0, 7},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
      {K::kWait, {4, 0, 0, 0}, 8, 0, 0},
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x11},  // EEXIST
      {K::kPollAll, {0, 0, 0, 0}, 0, 0, 0},
      {K::kDup, {0, 0, 0, 0}, 0, 0, 0},  // h6
      {K::kClose, {0, 0, 0, 0}, 0, 0, 0},
      {K::kWait, {6, 0, 0, 0}, 8, 0, 0},
  });
}

// The state check sees a failing call that changed something: a lowered
// limit makes the next creation fail EMFILE on both, and nothing differs.
TEST(DiffFuzzKernelRegressions, interpreter__emfile_under_a_lowered_limit) {
  ExpectSame({
      {K::kEventfd, {0, 0, 0, 0}, 0, EFD_NONBLOCK, 0},
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 0, 0},
      {K::kLimit, {0, 0, 0, 0}, 2, 0, 0},
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // EMFILE
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 0, 0},  // EMFILE
      {K::kDup2, {0, -2 - 2, 0, 0}, 0, 0, 0},               // EBADF
      {K::kLimit, {0, 0, 0, 0}, kFdSpan, 0, 0},
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},
  });
}

// A failing dup2 onto an instance that holds a kernel descriptor: the
// kernel fails EBADF and changes nothing; uepoll detached the instance's
// kernel half first, so the instance no longer reports its kernel
// descriptor (the state check's poll of the instance: kernel IN, uepoll
// nothing), and the wait after it differs too.
TEST(DiffFuzzKernelRegressions,
     dup2__bad_fd_onto_an_instance_keeps_its_kernel_half) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // h0 (fd#0)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 1, 0},  // h1, readable
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x11},
      {K::kDup2, {kRawBase - 9, 0, 0, 0}, 0, 0, 0},  // fd#9: closed
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
  });
}

// Found by seed 2 (shrunk from 20 ops): the same, with the kernel half
// made by an ADD that a DEL undid, so the instance holds nothing; an ADD
// of a kernel descriptor after the failing dup2 fails EBADF on uepoll.
TEST(DiffFuzzKernelRegressions, dup2__bad_fd_onto_an_emptied_mixed_instance) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},         // h0
      {K::kKernelObj, {0, 0, 0, 0}, kKernelPipe, 0, 0},  // h1, h2
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x11},
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_DEL, 0, 0},
      {K::kDup2, {kRawBase - 9, 0, 0, 0}, 0, 0, 0},  // EBADF
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 0x11},
  });
}

// Found by seed 2 through the state check's registration probe (an ADD of
// an instance into an instance, undone by a DEL), shrunk from 126 ops:
// once instance U (holding kernel instance A) has been nested in another
// instance, even if the nesting was removed again, U's kernel half stays
// registered in uepoll's bridge, one more kernel epoll above A: a chain of
// kernel instances below A that the kernel accepts (A -> B -> C -> D, with
// U above A: depth 4) fails ELOOP on uepoll.
TEST(DiffFuzzKernelRegressions, nesting__undone_nesting_keeps_no_depth_above) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},           // U (fd#0)
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},           // P (fd#1)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEpoll, 0, 0},   // A (fd#2)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEpoll, 0, 0},   // B (fd#3)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEpoll, 0, 0},   // C (fd#4)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEpoll, 0, 0},   // D (fd#5)
      {K::kCtl, {0, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 1},  // U holds A
      {K::kCtl, {1, 0, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 2},  // P holds U
      {K::kCtl, {1, 0, 0, 0}, EPOLL_CTL_DEL, 0, 0},        // ... no more
      {K::kCtl, {2, 3, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 3},  // A holds B
      {K::kCtl, {4, 5, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 4},  // C holds D
      {K::kCtl, {3, 4, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 5},  // B holds C
  });
}

// Found by seed 2 (shrunk from 22 ops): a dup of an instance that holds a
// kernel descriptor, taking the last number below the limit, succeeds but
// leaves errno EMFILE (the kernel half's private copy failed); a
// successful call leaves errno alone.
TEST(DiffFuzzKernelRegressions,
     dup__of_a_mixed_instance_at_the_limit_keeps_errno) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // fd#0
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 1, 0},  // fd#1
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 1},
      {K::kLimit, {0, 0, 0, 0}, 3, 0, 0},
      {K::kDup, {0, 0, 0, 0}, 0, 0, 0},  // fd#2, the last number
      {K::kWait, {2, 0, 0, 0}, 8, 0, 0},
  });
}

// Found by seeds 3 and 4 (as an instance readable on uepoll only, and an
// RDNORM event the kernel does not report): the first ADD of a kernel
// descriptor into an instance wakes the instance's watchers with an empty
// key, where the kernel wakes them (EPOLLIN) only if an item became ready.
// An edge-triggered parent then reports the instance again, and a parent
// registered with RDNORM but not IN is queued.
TEST(DiffFuzzKernelRegressions,
     mixed__first_kernel_add_gives_no_edge_to_parents) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // P
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // U
      {K::kEventfd, {0, 0, 0, 0}, 1, EFD_NONBLOCK, 0},      // ready
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 0, 0},  // not ready
      {K::kCtl, {1, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 2},
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 1},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // U's edge
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // nothing
      {K::kCtl, {1, 3, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 3},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // still nothing
  });
}
TEST(DiffFuzzKernelRegressions,
     mixed__first_kernel_add_wakes_no_rdnorm_parent) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // P
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},            // U
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 1, 0},  // ready
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLRDNORM, 1},
      {K::kCtl, {1, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 2},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // the kernel's wakeup key is IN
  });
}

// Found by seed 5 (shrunk from 41 ops): a failing ADD of a closed number
// (EBADF) into an instance E2 makes E2's kernel half all the same; nesting
// E2 in E1 then marks E1 and wakes its watchers with an empty key, so an
// edge-triggered E3 above E1 reports E1 again.
TEST(DiffFuzzKernelRegressions,
     ctl__failing_add_of_a_closed_number_changes_nothing) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},        // E3 (fd#0)
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},        // E1 (fd#1)
      {K::kEventfd, {0, 0, 0, 0}, 1, EFD_NONBLOCK, 0},  // ready
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},        // E2 (fd#3)
      {K::kCtl, {1, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 2},
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 1},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
      {K::kCtl, {3, kRawBase - 9, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 3},  // EBADF
      {K::kCtl, {1, 3, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 4},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
  });
}

// Found by seed 1 (shrunk from 1896 ops): one instance added to another
// under two numbers (a dup2 of its number, then a second ADD) is two items
// on the kernel, whose registrations are keyed by file and number; the
// second ADD failed EEXIST on uepoll, whose kernel halves registered the
// child under one number only. Both items then report it.
TEST(DiffFuzzKernelRegressions, nesting__one_instance_under_two_numbers) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},           // P (fd#0)
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},           // C (fd#1)
      {K::kEventfd, {0, 0, 0, 0}, 1, EFD_NONBLOCK, 0},     // ready (fd#2)
      {K::kCtl, {1, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 1},  // C holds it
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 2},
      {K::kDup2, {1, kRawBase - 6, 0, 0}, 0, 0, 0},  // C at fd#6 too
      {K::kCtl, {0, kRawBase - 6, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 3},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // both items
      {K::kCtl, {0, kRawBase - 6, 0, 0}, EPOLL_CTL_MOD, EPOLLIN | EPOLLET, 4},
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_DEL, 0, 0},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // the second
      {K::kClose, {kRawBase - 6, 0, 0, 0}, 0, 0, 0},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // still there
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 5},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},
  });
}

// Found by seed 1 (shrunk from 1927 ops to 39, then by hand): an instance
// A holding a kernel socket end, added ONESHOT to instance E; the harvest
// that reports A disables E's item, but A's kernel half stayed registered
// in E's with EPOLLIN, so a later kernel event below A queued A's cookie
// in E's kernel half, and poll() of E (and E's parents) reported E
// readable where the kernel's disabled item is never queued.
TEST(DiffFuzzKernelRegressions,
     nesting__oneshot_child_disabled_by_a_harvest_wakes_nothing) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},           // A (fd#0)
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},           // E (fd#1)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelStream, 0, 0},  // h2, h3
      {K::kShutdown, {3, 0, 0, 0}, SHUT_WR, 0, 0},         // h2: RDHUP
      {K::kCtl,
       {0, 2, 0, 0},
       EPOLL_CTL_ADD,
       EPOLLPRI | EPOLLRDHUP | EPOLLET,
       1},
      {K::kCtl,
       {1, 0, 0, 0},
       EPOLL_CTL_ADD,
       EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
       2},
      {K::kWait, {1, 0, 0, 0}, 1, 0, 0},            // A; disabled
      {K::kShutdown, {2, 0, 0, 0}, SHUT_WR, 0, 0},  // a new edge in A
      {K::kPollAll, {0, 0, 0, 0}, 0, 0, 0},         // E: nothing
      {K::kWait, {1, 0, 0, 0}, 8, 0, 0},
  });
}

// Found by seed 2 (shrunk from 775 ops to 34, then by hand): a kernel
// descriptor's first ADD into instance U1, which is in U0, reaches U0 only
// through U1's cookie in U0's kernel half. A harvest of U0 that served its
// uepoll half first (the OUT item) took the cookie after it, and left the
// item it woke for the next harvest; on the kernel, U1's wakeup queued the
// item at once, and the same epoll_wait reports both.
TEST(DiffFuzzKernelRegressions,
     nesting__child_woken_by_its_cookie_is_in_the_same_batch) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},         // U0 (fd#0)
      {K::kEventfd, {0, 0, 0, 0}, 0, EFD_NONBLOCK, 0},   // h1: OUT
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},         // U1 (fd#2)
      {K::kKernelObj, {0, 0, 0, 0}, kKernelPipe, 0, 0},  // h3, h4
      {K::kClose, {4, 0, 0, 0}, 0, 0, 0},                // h3: HUP
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLOUT | EPOLLET, 1},
      {K::kCtl, {0, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLIN, 2},
      {K::kCtl, {2, 3, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 3},
      {K::kWait, {0, 0, 0, 0}, 4, 0, 0},  // both
      {K::kWait, {0, 0, 0, 0}, 4, 0, 0},  // U1 (LT)
      {K::kWait, {0, 0, 0, 0}, 4, 0, 0},
  });
}

// Found by seeds 3 and 1 (shrunk from 29798 and 1951 ops to 45 and 46,
// then by hand): a kernel descriptor's ADD into instance C, which is in P
// edge-triggered, queues C's kernel half in P's (the kernel's nesting).
// A harvest of C then took the kernel event (ONESHOT), so C's kernel half
// was no longer readable, and P's harvest dropped the queued cookie
// unseen: the wakeup was lost. On the kernel the ADD's wakeup queued P's
// item, and P's harvest reports C, which still has its eventfd ready.
TEST(DiffFuzzKernelRegressions,
     nesting__child_harvest_keeps_the_parents_wakeup) {
  ExpectSame({
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},        // P (fd#0)
      {K::kEpollCreate1, {0, 0, 0, 0}, 0, 0, 0},        // C (fd#1)
      {K::kEventfd, {0, 0, 0, 0}, 0, EFD_NONBLOCK, 0},  // h2: OUT
      {K::kCtl, {0, 1, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLET, 1},
      {K::kCtl, {1, 2, 0, 0}, EPOLL_CTL_ADD, EPOLLOUT, 2},
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},                    // C's edge
      {K::kKernelObj, {0, 0, 0, 0}, kKernelEventfd, 1, 0},  // h3, ready
      {K::kCtl, {1, 3, 0, 0}, EPOLL_CTL_ADD, EPOLLIN | EPOLLONESHOT, 3},
      {K::kWait, {1, 0, 0, 0}, 8, 0, 0},  // both
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // C again
      {K::kWait, {0, 0, 0, 0}, 8, 0, 0},  // nothing
      {K::kPollAll, {0, 0, 0, 0}, 0, 0, 0},
  });
}

}  // namespace
}  // namespace difffuzz
