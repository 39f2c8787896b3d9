// Shared scaffolding of the scenario tests: whole-program
// situations that the unit-level suites do not reach (pthread_cancel of a
// blocked call, fork and closefrom, exec, descriptor-table races), on both
// backends with one set of expectations wherever the kernel has the
// behaviour.
//
// Several of them failed on uepoll before a fix, and say which
// (docs/reliability.md, section 8, lists them).
#ifndef UEPOLL_TESTS_SCENARIOS_SCENARIO_H_
#define UEPOLL_TESTS_SCENARIOS_SCENARIO_H_

#include "support/fixture.h"
#include "threads/blocked.h"
#include "threads/waiter.h"

namespace uepoll_test {

// A pthread running one blocking call, which the test cancels once the
// thread sleeps in it (threads/blocked.h).
using CancellableCall = Blocked;

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SCENARIOS_SCENARIO_H_
