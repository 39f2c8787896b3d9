// scale: N sources registered in one instance. Three figures:
//  - memory per registration, taken around the ADD loop only (the sources
//    already exist): for uepoll the growth of the malloc heap's in-use bytes
//    (and of this process's RSS); for the kernel, whose epitems live in kernel
//    slabs, the growth of /proc/slabinfo's eventpoll_epi and eventpoll_pwq
//    caches (those present: a cache merged into another one is not visible),
//    with the RSS growth alongside;
//  - the ADD rate;
//  - the cost of a non-blocking wait that finds the one ready source among N.
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "workloads.h"

namespace uepoll_bench {
namespace {

double RssBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long size = 0, resident = 0;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
  fclose(f);
  return double(resident) * double(sysconf(_SC_PAGESIZE));
}

double HeapBytes() {
  struct mallinfo2 mi = mallinfo2();
  return double(mi.uordblks) + double(mi.hblkhd);
}

// Bytes in use in the epoll slab caches, or -1 if /proc/slabinfo is not
// readable (it needs root).
double EpollSlabBytes(std::string* caches) {
  FILE* f = fopen("/proc/slabinfo", "r");
  if (!f) return -1;
  char line[512];
  double total = 0;
  bool any = false;
  caches->clear();
  while (fgets(line, sizeof(line), f)) {
    char name[64];
    long active = 0, num = 0, objsize = 0;
    if (sscanf(line, "%63s %ld %ld %ld", name, &active, &num, &objsize) != 4)
      continue;
    if (strcmp(name, "eventpoll_epi") != 0 &&
        strcmp(name, "eventpoll_pwq") != 0)
      continue;
    total += double(active) * double(objsize);
    if (!caches->empty()) caches->push_back('+');
    caches->append(name);
    any = true;
  }
  fclose(f);
  return any ? total : -1;
}

}  // namespace

unsigned long ScaleCapacity(const Backend& b, unsigned long want) {
  const long margin =
      64;  // the instance, stdio, the other workloads' leftovers
  long limit = RaiseFdLimit(b, long(want) + margin);
  if (limit < 0 || limit >= long(want) + margin) return want;
  return limit > margin ? (unsigned long)(limit - margin) : 0;
}

Result MeasureScale(const Backend& b, unsigned long want, double runtime) {
  Result r;
  r.workload = "scale";
  r.backend = b.name;
  r.threads = 1;
  r.ops_label = "ADD/s";
  unsigned long n = ScaleCapacity(b, want);
  if (n == 0) return r.error = "descriptor limit too low", r;
  if (n < want) {
    fprintf(stderr,
            "uepoll-bench: scale: the %s descriptor limit%s is too low for "
            "N=%lu; measuring N=%lu instead\n",
            b.name, b.is_kernel ? " (RLIMIT_NOFILE's hard limit)" : "", want,
            n);
    r.notes.push_back({"capped_from", std::to_string(want)});
  }
  r.params = {{"registrations", double(n)}};
  FdList fds(b);
  fds.Reserve(n + 1);
  std::vector<int> srcs;
  srcs.reserve(n);
  int epfd = b.epoll_create1(0);
  if (epfd < 0) return r.error = CallError(b, "epoll_create1"), r;
  for (unsigned long i = 0; i < n; ++i) {
    int fd = fds.Add(b.eventfd(0, EFD_NONBLOCK));
    if (fd < 0) {
      b.close(epfd);
      return r.error = CallError(b, "eventfd") + " after " + std::to_string(i),
             r;
    }
    srcs.push_back(fd);
  }
  std::string caches;
  double rss0 = RssBytes(), heap0 = HeapBytes(),
         slab0 = EpollSlabBytes(&caches);
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  for (unsigned long i = 0; i < n; ++i) {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, srcs[i], &ev) < 0) {
      r.error = CallError(b, "epoll_ctl(ADD)") + " after " + std::to_string(i);
      b.close(epfd);
      return r;
    }
  }
  int64_t t1 = NowNs();
  sys.Stop();
  sys.Finish(&r, double(n));
  double rss1 = RssBytes(), heap1 = HeapBytes(),
         slab1 = EpollSlabBytes(&caches);
  r.ops_per_sec = double(n) / (double(t1 - t0) / 1e9);
  double rss_per = (rss1 - rss0) / double(n),
         heap_per = (heap1 - heap0) / double(n);
  if (b.is_kernel && slab0 >= 0 && slab1 >= 0) {
    r.metrics.push_back({"bytes_per_registration", (slab1 - slab0) / double(n),
                         "B/reg", false});
    r.metrics.push_back({"rss_bytes_per_registration", rss_per, "", false});
    r.notes.push_back({"memory_source", "slabinfo:" + caches});
  } else {
    // The malloc heap's in-use bytes (chunk headers included), not RSS:
    // RSS growth counts pages first touched, and registrations that fill
    // holes left by earlier allocations (the 64-byte-aligned eventfds leave
    // some) touch none, which made RSS read 9 B/registration for items of
    // 104 bytes.
    r.metrics.push_back({"bytes_per_registration", heap_per, "B/reg", false});
    r.metrics.push_back({"rss_bytes_per_registration", rss_per, "", false});
    r.notes.push_back({"memory_source", "heap"});
  }

  // One ready source in the middle; level-triggered, so it stays ready.
  const uint64_t one = 1;
  if (b.write(srcs[n / 2], &one, sizeof(one)) < 0) {
    b.close(epfd);
    return r.error = CallError(b, "write"), r;
  }
  struct epoll_event evs[64];
  unsigned long waits = 0, empty = 0;
  const int64_t w0 = NowNs(), end = w0 + int64_t(PassRuntime(runtime) * 1e9);
  int64_t now = w0;
  while (now < end) {
    for (int i = 0; i < 256; ++i) {
      int got = b.epoll_wait(epfd, evs, 64, 0);
      if (got < 0) {
        b.close(epfd);
        return r.error = CallError(b, "epoll_wait"), r;
      }
      if (got == 0) empty++;
    }
    waits += 256;
    now = NowNs();
  }
  r.metrics.push_back({"wait_ns", double(now - w0) / double(waits),
                       "wait ns (1 ready)", false});
  r.metrics.push_back({"empty_waits", double(empty), "", false});
  // The instance goes first: one teardown instead of N unhookings on close.
  b.close(epfd);
  return r;
}

ScalePlan PlanScale(const std::vector<const Backend*>& backends,
                    const std::vector<unsigned long>& sizes) {
  ScalePlan plan;
  for (unsigned long want : sizes)
    for (const Backend* b : backends) {
      std::pair<const Backend*, unsigned long> item{b, ScaleCapacity(*b, want)};
      if (item.second < want)
        fprintf(stderr,
                "uepoll-bench: scale: the %s descriptor limit%s is too low for "
                "N=%lu; capping it at N=%lu\n",
                b->name, b->is_kernel ? " (RLIMIT_NOFILE's hard limit)" : "",
                want, item.second);
      // A capped size would measure the same N again for every larger size.
      if (item.second > 0 &&
          std::find(plan.begin(), plan.end(), item) == plan.end())
        plan.push_back(item);
    }
  return plan;
}

void RunScale(const ScalePlan& plan, double runtime, Progress& progress,
              Report& report) {
  for (auto [b, n] : plan)
    RunMeasurement(progress, report, "scale", *b, "N=" + std::to_string(n),
                   [&, b = b, n = n] { return MeasureScale(*b, n, runtime); });
}

int CmdScale(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> sizes = {10000, 100000, 1000000};
  std::vector<Option> opts = {
      {'N', "registrations", Option::kList, &sizes,
       "registration counts (default 10000,100000,1000000)"},
  };
  if (int rc =
          ParseCommand("uepoll-bench scale [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  for (unsigned long n : sizes)
    if (n > 100000000ul)
      return BadUsage("-N/--registrations: at most 100000000");
  double runtime = c.runtime > 0 ? c.runtime : 1;
  Report report;
  ScalePlan plan = PlanScale(c.For(false), sizes);
  Progress progress(int(plan.size()));
  RunScale(plan, runtime, progress, report);
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
