// pingpong: two threads on two CPUs hand a token back and forth through two
// eventfds, each in its own instance, with blocking waits:
//
//   tA --waits--> eA <- sA        tA signals sB, tB signals sA
//   tB --waits--> eB <- sB
//
// The sender stamps the time just before its write; the receiver reads the
// clock once its read of the eventfd returned, so each sample is one one-way
// hop: signal, wakeup, wait return, consume. With --spin-ns N a waiter first
// polls (timeout 0) for up to N ns before it blocks. pingpong_msg (--msg):
// the same over two SOCK_SEQPACKET pairs, the token an 8-byte writev in two
// segments, consumed with recvmsg.
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>

#include "workloads.h"

namespace uepoll_bench {
namespace {

struct Side {
  int ep = -1, in = -1;  // this thread's instance and the eventfd it consumes
  int out = -1;          // the peer's eventfd
  std::atomic<int64_t> sent_ns{0};  // stamped by the peer before it signals
  std::vector<int64_t> lat;
};

}  // namespace

Result MeasurePingpong(const Backend& b, int64_t spin_ns, double runtime,
                       bool msg) {
  Result r;
  r.workload = msg ? "pingpong_msg" : "pingpong";
  if (msg && (!b.writev || !b.recvmsg))
    return r.error = "no writev/recvmsg on this backend", r;
  r.backend = b.name;
  r.threads = 2;
  r.ops_label = "hops/s";
  r.params = {{"spin_ns", double(spin_ns)}};
  FdList fds(b);
  StopFd stop;
  Side side[2];
  if (!stop.Create(b, fds, &r.error)) return r;
  int peer_end[2] = {-1, -1};  // msg: the end the peer writes to
  for (Side& s : side) {
    s.ep = fds.Add(b.epoll_create1(0));
    if (s.ep < 0) return r.error = CallError(b, "epoll_create1"), r;
    if (msg) {
      int sv[2];
      if (b.socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv) < 0)
        return r.error = CallError(b, "socketpair"), r;
      s.in = fds.Add(sv[0]);
      peer_end[&s - side] = fds.Add(sv[1]);
    } else {
      s.in = fds.Add(b.eventfd(0, EFD_NONBLOCK));
      if (s.in < 0) return r.error = CallError(b, "eventfd"), r;
    }
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.u64 = uint64_t(s.in);
    if (b.epoll_ctl(s.ep, EPOLL_CTL_ADD, s.in, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
    if (!stop.AddTo(b, s.ep, &r.error)) return r;
    s.lat.reserve(1 << 20);
  }
  side[0].out = msg ? peer_end[1] : side[1].in;
  side[1].out = msg ? peer_end[0] : side[0].in;

  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  ThreadGroup group;
  for (int t = 0; t < 2; ++t) {
    group.Spawn([&, t] {
      PinToCpu(unsigned(t));
      Side& me = side[t];
      Side& peer = side[1 - t];
      const uint64_t one = 1;
      uint64_t val;
      struct epoll_event ev;
      const uint32_t halves[2] = {1, 0};
      struct iovec out[2] = {{const_cast<uint32_t*>(&halves[0]), 4},
                             {const_cast<uint32_t*>(&halves[1]), 4}};
      struct iovec in = {&val, sizeof(val)};
      struct msghdr mh = {};
      mh.msg_iov = &in;
      mh.msg_iovlen = 1;
      auto signal = [&] {
        return msg ? b.writev(me.out, out, 2)
                   : b.write(me.out, &one, sizeof(one));
      };
      gate.Arrive();
      if (t == 0) {  // the first serve
        peer.sent_ns.store(NowNs(), std::memory_order_release);
        if (signal() < 0) return failure.Set(CallError(b, "write"));
      }
      while (!done.load(std::memory_order_relaxed)) {
        int n = 0;
        if (spin_ns > 0) {
          int64_t until = NowNs() + spin_ns;
          do {
            n = b.epoll_wait(me.ep, &ev, 1, 0);
          } while (n == 0 && NowNs() < until);
        }
        if (n == 0) n = b.epoll_wait(me.ep, &ev, 1, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return failure.Set(CallError(b, "epoll_wait"));
        if (ev.data.u64 == kStopTag) break;
        if ((msg ? b.recvmsg(me.in, &mh, 0)
                 : b.read(me.in, &val, sizeof(val))) < 0)
          return failure.Set(CallError(b, msg ? "recvmsg" : "read"));
        me.lat.push_back(NowNs() - me.sent_ns.load(std::memory_order_acquire));
        peer.sent_ns.store(NowNs(), std::memory_order_release);
        if (signal() < 0) return failure.Set(CallError(b, "write"));
      }
    });
  }
  gate.WaitArrivals(2);
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  failure.SleepFor(PassRuntime(runtime));
  done.store(true);
  sys.Stop();
  double secs = double(NowNs() - t0) / 1e9;
  stop.Fire(b);
  group.JoinAll(10, "pingpong threads");
  if (failure.failed()) return r.error = failure.message(), r;
  std::vector<int64_t> all = std::move(side[0].lat);
  all.insert(all.end(), side[1].lat.begin(), side[1].lat.end());
  if (all.empty()) return r.error = "no hop completed", r;
  r.ops_per_sec = double(all.size()) / secs;
  sys.Finish(&r, r.ops_per_sec * secs);
  double p50 = double(Percentile(all, 0.50)),
         p99 = double(Percentile(all, 0.99));
  r.metrics = {{"p50_ns", p50, "p50 ns", false},
               {"p99_ns", p99, "p99 ns", false},
               {"samples", double(all.size()), "", true}};
  return r;
}

int CmdPingpong(int argc, char** argv) {
  CommonOptions c;
  unsigned long spin_ns = 0;
  bool msg = false;
  std::vector<Option> opts = {
      {0, "spin-ns", Option::kUint, &spin_ns,
       "poll for up to N ns before each blocking wait (default 0)"},
      {0, "msg", Option::kFlag, &msg,
       "also pingpong_msg: seqpacket pairs, writev and recvmsg (epoll "
       "backends)"},
  };
  if (int rc = ParseCommand("uepoll-bench pingpong [<options>]", argc, argv,
                            &opts, &c);
      rc >= 0)
    return rc;
  if (spin_ns > 1000000000ul)
    return BadUsage("--spin-ns: at most 1000000000 (1 s)");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  Progress progress(int(c.For(true).size() + (msg ? c.For(false).size() : 0)));
  for (const Backend* b : c.For(true))
    RunMeasurement(
        progress, report, "pingpong", *b, "spin_ns=" + std::to_string(spin_ns),
        [&] { return MeasurePingpong(*b, int64_t(spin_ns), runtime); });
  if (msg)
    for (const Backend* b : c.For(false))
      RunMeasurement(
          progress, report, "pingpong_msg", *b,
          "spin_ns=" + std::to_string(spin_ns),
          [&] { return MeasurePingpong(*b, int64_t(spin_ns), runtime, true); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
