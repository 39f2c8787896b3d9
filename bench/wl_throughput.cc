// throughput: one thread, no contention: signal k eventfds, harvest them with
// one wait (maxevents k), consume each. k = 1 prices the whole round trip of
// a single event; k = 64 shows what batching saves. One op is one event.
// throughput_msg: the same over k SOCK_SEQPACKET pairs, each signalled with
// an 8-byte writev in two segments and consumed with recvmsg.
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "workloads.h"

namespace uepoll_bench {

// The timed loop of throughput and mixed: write to every source in srcs
// (msg: an 8-byte writev in two segments), harvest them with one wait of
// maxevents srcs.size(), consume each (msg: recvmsg); fills r.
void SignalHarvestLoop(const Backend& b, int epfd, const std::vector<int>& srcs,
                       bool msg, double runtime, Result& r) {
  const unsigned long maxevents = srcs.size();
  std::vector<struct epoll_event> evs(maxevents);
  const int k = int(maxevents);
  // Reading the clock once per ~1000 events keeps its cost out of the figure.
  const unsigned long batch = std::max(1ul, 1024 / maxevents);
  const uint64_t one = 1;
  uint64_t val;
  // The message form: 8 bytes gathered from two segments, received whole.
  const uint32_t halves[2] = {1, 0};
  struct iovec out[2] = {{const_cast<uint32_t*>(&halves[0]), 4},
                         {const_cast<uint32_t*>(&halves[1]), 4}};
  struct iovec in = {&val, sizeof(val)};
  struct msghdr mh = {};
  mh.msg_iov = &in;
  mh.msg_iovlen = 1;
  unsigned long events = 0, short_waits = 0;
  SyscallWindow sys;
  sys.Start();
  const int64_t t0 = NowNs(), end = t0 + int64_t(PassRuntime(runtime) * 1e9);
  int64_t now = t0;
  while (now < end) {
    for (unsigned long i = 0; i < batch; ++i) {
      for (int fd : srcs) {
        if (msg ? b.writev(fd, out, 2) < 0 : b.write(fd, &one, sizeof(one)) < 0)
          return void(r.error = CallError(b, msg ? "writev" : "write"));
      }
      // Timeout 0: every source was just signalled, so an empty answer is a
      // backend's bug to count, not a reason to hang.
      int n = b.epoll_wait(epfd, evs.data(), k, 0);
      if (n < 0) return void(r.error = CallError(b, "epoll_wait"));
      if (n < k) short_waits++;
      for (int j = 0; j < n; ++j) {
        int fd = int(evs[j].data.u64);
        if (msg ? b.recvmsg(fd, &mh, 0) < 0 : b.read(fd, &val, sizeof(val)) < 0)
          return void(r.error = CallError(b, msg ? "recvmsg" : "read"));
      }
      events += unsigned(n);
    }
    now = NowNs();
  }
  sys.Stop();
  sys.Finish(&r, double(events));
  r.ops_per_sec = double(events) / (double(now - t0) / 1e9);
  r.metrics = {{"ns_per_event", 1e9 / r.ops_per_sec, "", false},
               {"events", double(events), "", true},
               {"short_waits", double(short_waits), "", false}};
}

Result MeasureThroughput(const Backend& b, unsigned long maxevents,
                         double runtime, bool msg) {
  Result r;
  r.workload = msg ? "throughput_msg" : "throughput";
  r.backend = b.name;
  r.threads = 1;
  r.params = {{"maxevents", double(maxevents)}};
  FdList fds(b);
  if (msg && (!b.writev || !b.recvmsg))
    return r.error = "no writev/recvmsg on this backend", r;
  RaiseFdLimit(b, long(2 * maxevents + 64));
  int epfd = fds.Add(b.epoll_create1(0));
  if (epfd < 0) return r.error = CallError(b, "epoll_create1"), r;
  std::vector<int> srcs;  // what is signalled (msg: the watched end's peer)
  for (unsigned long i = 0; i < maxevents; ++i) {
    int fd;
    if (msg) {
      int sv[2];
      if (b.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv) < 0)
        return r.error = CallError(b, "socketpair"), r;
      fds.Add(sv[0]);
      fds.Add(sv[1]);
      srcs.push_back(sv[0]);
      fd = sv[1];
    } else {
      fd = fds.Add(b.eventfd(0, EFD_NONBLOCK));
      if (fd < 0) return r.error = CallError(b, "eventfd"), r;
      srcs.push_back(fd);
    }
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = uint64_t(fd);
    if (b.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
  }
  SignalHarvestLoop(b, epfd, srcs, msg, runtime, r);
  return r;
}

int CmdThroughput(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> maxevents = {1, 64};
  bool msg = false;
  std::vector<Option> opts = {
      {'k', "maxevents", Option::kList, &maxevents,
       "maxevents (= ready sources) per wait (default 1,64)"},
      {0, "msg", Option::kFlag, &msg,
       "also throughput_msg: seqpacket pairs, writev and recvmsg (epoll "
       "backends)"},
  };
  if (int rc = ParseCommand("uepoll-bench throughput [<options>]", argc, argv,
                            &opts, &c);
      rc >= 0)
    return rc;
  for (unsigned long k : maxevents)
    if (k > 65536) return BadUsage("-k/--maxevents: at most 65536");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  const auto backends = c.For(true);
  const auto msg_backends = c.For(false);
  Progress progress(int(backends.size() * maxevents.size() +
                        (msg ? msg_backends.size() * maxevents.size() : 0)));
  for (unsigned long k : maxevents)
    for (const Backend* b : backends)
      RunMeasurement(progress, report, "throughput", *b,
                     "maxevents=" + std::to_string(k),
                     [&] { return MeasureThroughput(*b, k, runtime); });
  if (msg)
    for (unsigned long k : maxevents)
      for (const Backend* b : msg_backends)
        RunMeasurement(progress, report, "throughput_msg", *b,
                       "maxevents=" + std::to_string(k),
                       [&] { return MeasureThroughput(*b, k, runtime, true); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
