// UEPOLL_FORK_PATH: marks a function that runs at every fork() (the
// pthread_atfork handlers and what they call), or that a server's fork
// child calls on its way to exec (close, dup2, sigaction, and the export
// before an exec), so that the linker places them together.
//
// A fork child gets none of a library's code mapped: each 64 KiB window
// of it that the child runs is a page fault, some 30-50 us each on a
// virtual machine that traps them (BENCHMARKS.md, "What a fork costs a
// process that holds the engine"). The handlers are spread over a dozen
// files, so the child faulted once per file; gathered in one section they
// take one or two. The section's name is a .text.hot.* one because the
// linker's default script gathers those from every object into one run
// (a name of our own would stay inside each object's .text).
#ifndef UEPOLL_SRC_BASE_FORK_PATH_H_
#define UEPOLL_SRC_BASE_FORK_PATH_H_

#define UEPOLL_FORK_PATH __attribute__((section(".text.hot.uepoll_fork")))

// UEPOLL_FORK_DATA: marks a variable that the handlers of every process
// with the engine write at every fork (the locks their prepare handlers
// take, the lists their child handlers reset; the clock-set detector's,
// made only for a cancel-on-set timer, stays on the heap). fork() makes
// every writable page copy-on-write, so each page such a write lands on
// is a fault in the parent (its handlers' unlock) and another in the
// child: spread over the .bss of a dozen files and the heap they took one
// page each. In .data, which holds little else in this library, they
// share one or two. Such a variable must be constant-initialized
// (constinit): it may be used before any dynamic initializer of its file
// has run (another library's constructor, a fork during start-up), and
// after static destructors (it is never destroyed). A GCC ASan build
// gives variables in a named section no redzones; clang's does.
#define UEPOLL_FORK_DATA __attribute__((section(".data.uepoll_fork")))

#endif  // UEPOLL_SRC_BASE_FORK_PATH_H_
