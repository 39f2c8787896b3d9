// ThreadSanitizer's suppressions for the test binaries whose tests race on
// purpose: the one list, linked into each such binary by
// uepoll_tsan_suppressions() (tests/CMakeLists.txt).
//
// Why any are needed: TSan models a descriptor as memory, so close() or
// dup2() of a kernel descriptor that another thread is using in a call, or
// the creation of a descriptor at a number another thread still uses, is
// reported as a data race. Where that race is the behaviour under test, the
// test makes the contested call through a wrapper of its own
// ([[gnu::noinline]], in the test's source), and only frames of those
// wrappers are suppressed here: every other call, and every race inside
// uepoll's memory, is still reported.
//
// uepoll's own libc calls on a contested number (base/sys.h: a
// placeholder's close or dup3, an instance's kernel half, the pass-through
// of a call on a number that held no uepoll object when it was looked up)
// race the same way in TSan's model; they are suppressed by their
// uepoll::impl::sys frame. Those frames make no memory access of their own,
// so uepoll's synchronization stays fully checked.
//
// A new entry names the wrapper and the test file that defines it. TSan
// matches a suppression against every frame of both stacks, so a wrapper's
// name must not be a prefix of anything else's (hence the Racing*,
// KernelRacy*, KernelFdRace* families).

extern "C" const char* __tsan_default_suppressions() {
  return
      // uepoll's libc gateway (tests/stress/stress_close_test.cc,
      // tests/scenarios/fd_table_test.cc): see above.
      "race:uepoll::impl::sys::\n"
      // tests/threads/wakeup_test.cc: CloseOfEpollFdDoesNotDisturbWaiter
      // closes the instance a waiter sits in.
      "race:CloseUnderBlockedWaiter\n"
      // tests/stress/stress_close_test.cc and tests/stress/regressions_test.cc:
      // a descriptor closed while threads wait, poll or read on it.
      "race:CloseUnderWaiters\n"
      // tests/stress/stress_close_test.cc: the kernel backend's closes, dup2s
      // and creates at contested numbers.
      "race:KernelRacy\n"
      // tests/scenarios/fd_table_test.cc: the kernel backend's calls on the
      // contested number of the dup2 and number-reuse scenarios.
      "race:KernelFdRace\n"
      // tests/bridge/fd_race_test.cc: DupOntoANumberBeingClosedNeverFailsEbusy
      // (a close racing a dup2 onto the same number, on both backends),
      // TwoClosesOfOneNumberSucceedOnce and
      // KernelAndUepollDupsOntoOneNumberLeaveTheTablesAgreeing.
      "race:RacingClose\n"
      "race:RacingDup\n";
}
