// mixed: one instance holding K kernel eventfds and U uepoll eventfds, all
// signalled, harvested with one wait (maxevents K + U) and consumed. On the
// kernel backend all K + U are kernel eventfds in a kernel instance. On
// uepoll the K kernel eventfds sit in the uepoll instance (its kernel half)
// and are written and read through uepoll_write/uepoll_read, which pass
// them to libc: the program that renamed its calls. U = 0 prices an instance
// that holds only kernel descriptors against the kernel's own instance.
// One op is one event.
#include <sys/eventfd.h>

#include "workloads.h"

namespace uepoll_bench {

Result MeasureMixed(const Backend& b, unsigned long kernel_fds,
                    unsigned long uepoll_fds, double runtime) {
  Result r;
  r.workload = "mixed";
  r.backend = b.name;
  r.threads = 1;
  r.params = {{"K", double(kernel_fds)}, {"U", double(uepoll_fds)}};
  const unsigned long total = kernel_fds + uepoll_fds;
  if (total == 0) return r.error = "K + U must be at least 1", r;
  FdList fds(b);
  RaiseFdLimit(b, long(total + 64));
  int epfd = fds.Add(b.epoll_create1(0));
  if (epfd < 0) return r.error = CallError(b, "epoll_create1"), r;
  const Backend& k = KernelBackend();
  FdList kfds(k);  // the kernel eventfds, closed with libc
  std::vector<int> srcs;
  for (unsigned long i = 0; i < total; ++i) {
    bool kernel = i < kernel_fds || b.is_kernel;
    int fd = kernel ? kfds.Add(k.eventfd(0, EFD_NONBLOCK))
                    : fds.Add(b.eventfd(0, EFD_NONBLOCK));
    if (fd < 0) return r.error = CallError(kernel ? k : b, "eventfd"), r;
    srcs.push_back(fd);
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = uint64_t(fd);
    if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
  }
  SignalHarvestLoop(b, epfd, srcs, /*msg=*/false, runtime, r);
  return r;
}

int CmdMixed(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> kernel = {8, 8, 64};
  std::vector<unsigned long> user = {0, 8, 0};
  std::vector<Option> opts = {
      {'K', "kernel", Option::kList0, &kernel,
       "kernel eventfds per instance, one per configuration (default "
       "8,8,64)"},
      {'U', "uepoll", Option::kList0, &user,
       "uepoll eventfds per instance, paired with -K (default 0,8,0)"},
  };
  if (int rc =
          ParseCommand("uepoll-bench mixed [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  if (kernel.size() != user.size())
    return BadUsage("-K and -U: lists of the same length");
  for (size_t i = 0; i < kernel.size(); ++i)
    if (kernel[i] + user[i] == 0 || kernel[i] + user[i] > 4096)
      return BadUsage("-K + -U: 1 to 4096 sources per configuration");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  const auto backends = c.For(false);
  Progress progress(int(backends.size() * kernel.size()));
  for (size_t i = 0; i < kernel.size(); ++i)
    for (const Backend* b : backends)
      RunMeasurement(
          progress, report, "mixed", *b,
          "K=" + std::to_string(kernel[i]) + " U=" + std::to_string(user[i]),
          [&] { return MeasureMixed(*b, kernel[i], user[i], runtime); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
