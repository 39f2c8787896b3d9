// uepoll-bench: the same workloads on the kernel's epoll and on uepoll, in
// one binary and one run, side by side (bench/README.md).
#include <stdio.h>
#include <string.h>

#include "workloads.h"

namespace uepoll_bench {

namespace {

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* help;
};

const Command kCommands[] = {
    {"wait", CmdWait, "port of 'perf bench epoll wait'"},
    {"ctl", CmdCtl, "port of 'perf bench epoll ctl'"},
    {"nested", CmdNested,
     "sources D instances deep, threads wait on the outermost"},
    {"churn", CmdChurn,
     "create, ADD, signal, harvest, close without DEL, per thread"},
    {"throughput", CmdThroughput,
     "one thread: signal + wait + consume, maxevents 1 and 64"},
    {"mixed", CmdMixed,
     "K kernel and U uepoll eventfds in one instance: the kernel bridge"},
    {"pingpong", CmdPingpong,
     "two threads hand a token back and forth: latency"},
    {"scale", CmdScale,
     "N registrations in one instance: memory, ADD rate, wait cost"},
    {"own", CmdOwn,
     "churn and throughput with one instance per thread (independent work)"},
    {"echo", CmdEcho,
     "request/response over socket pairs: C clients, S server threads"},
    {"minwait", CmdMinWait,
     "fixed-rate producer: plain wait, sleep-then-wait, uepoll min_wait"},
    {"timers", CmdTimers,
     "N armed timerfds: expiry-to-delivery lateness, CPU per expiry"},
    {"userq", CmdUserq,
     "a bounded queue: uepoll user object vs kernel eventfd signals"},
    {"bridge", CmdBridge,
     "a kernel epoll loop: N eventfds direct vs one watchable uepoll "
     "instance"},
    {"suite", CmdSuite, "a short representative run of all of the above"},
};

void Usage(FILE* out) {
  fprintf(out, "usage: uepoll-bench <command> [<options>]\n\ncommands:\n");
  for (const Command& c : kCommands)
    fprintf(out, "    %-12s %s\n", c.name, c.help);
  fprintf(out,
          "\nEvery command takes --backend kernel|uepoll|io_uring|both|all "
          "(default "
          "all), "
          "--json FILE\nand -r SECONDS; 'uepoll-bench <command> --help' lists "
          "the rest.\n");
}

}  // namespace
}  // namespace uepoll_bench

int main(int argc, char** argv) {
  using namespace uepoll_bench;
  if (argc < 2) {
    Usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
      strcmp(argv[1], "help") == 0) {
    Usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands)
    if (strcmp(argv[1], c.name) == 0) {
      // Before any thread exists: it may fork (util.h, SyscallCounter).
      SyscallCounter::Init();
      return c.run(argc - 2, argv + 2);
    }
  fprintf(stderr, "uepoll-bench: unknown command '%s'\n\n", argv[1]);
  Usage(stderr);
  return 2;
}
