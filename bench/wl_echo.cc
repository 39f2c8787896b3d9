// echo: request/response over AF_UNIX stream socket pairs. One client
// thread drives C connections, each with one request of B bytes in flight:
// it sends, waits on its own instance for the reply, reads all B bytes back,
// records the round trip and sends the next request. S server threads wait
// for requests and echo them, in one of two layouts:
//   per-thread  S instances; connection i is registered (EPOLLIN, level-
//               triggered) in instance i % S, whose thread alone serves it;
//   shared      one instance, every connection registered once with
//               EPOLLIN | EPOLLET | EPOLLEXCLUSIVE, all S threads waiting on
//               it. Edge-triggered so that one arrival is reported to one
//               thread (level-triggered, the ready list would hand the same
//               connection to a second waiter while the first still reads
//               it); a per-connection mutex covers the rare split arrival.
// One op is one request answered. The client thread is pinned to CPU 0 and
// server thread s to CPU s + 1 (modulo the CPUs).
#include <errno.h>
#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "workloads.h"

namespace uepoll_bench {
namespace {

struct alignas(64) Conn {
  int cfd = -1, sfd = -1;  // client end, server end
  // Server side: bytes of the current request received so far.
  size_t have = 0;
  std::mutex mu;  // the shared layout: one thread at a time per connection
  // Client side: reply bytes received, and when the request was sent.
  size_t got = 0;
  int64_t sent_ns = 0;
};

// Writes all n bytes of a non-blocking socket; spins on EAGAIN (the peer
// drains at most one request's worth, far below the socket's buffer).
bool WriteAll(const Backend& b, int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = b.write(fd, p, n);
    if (w < 0 && errno == EAGAIN) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

}  // namespace

Result MeasureEcho(const Backend& b, unsigned long conns, unsigned long servers,
                   bool shared, unsigned long size, double runtime) {
  Result r;
  r.workload = shared ? "echo_shared" : "echo";
  r.backend = b.name;
  r.threads = servers;
  r.ops_label = "req/s";
  r.params = {{"conns", double(conns)}, {"bytes", double(size)}};
  if (shared && b.is_uring)
    return r.error =
               "a ring belongs to one thread: the shared-instance layout has "
               "no io_uring form",
           r;
  RaiseFdLimit(b, long(2 * conns + servers + 64));
  FdList fds(b);
  StopFd stop;
  if (!stop.Create(b, fds, &r.error)) return r;
  std::unique_ptr<Conn[]> cs(new Conn[conns]);
  const unsigned long ninst = shared ? 1 : servers;
  std::vector<int> inst(ninst);
  for (int& ep : inst) {
    ep = fds.Add(b.epoll_create1(0));
    if (ep < 0) return r.error = CallError(b, "epoll_create1"), r;
    if (!stop.AddTo(b, ep, &r.error)) return r;
  }
  int cep = fds.Add(b.epoll_create1(0));
  if (cep < 0) return r.error = CallError(b, "epoll_create1"), r;
  if (!stop.AddTo(b, cep, &r.error)) return r;
  for (unsigned long i = 0; i < conns; ++i) {
    int sv[2];
    if (b.socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
      return r.error = CallError(b, "socketpair"), r;
    cs[i].cfd = fds.Add(sv[0]);
    cs[i].sfd = fds.Add(sv[1]);
    struct epoll_event ev = {};
    ev.events = shared ? (EPOLLIN | EPOLLET | EPOLLEXCLUSIVE) : EPOLLIN;
    ev.data.u64 = i;
    if (b.epoll_ctl(inst[i % ninst], EPOLL_CTL_ADD, cs[i].sfd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD server)"), r;
    ev.events = EPOLLIN;
    if (b.epoll_ctl(cep, EPOLL_CTL_ADD, cs[i].cfd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD client)"), r;
  }

  std::atomic<bool> done{false};
  Gate gate;
  Failure failure;
  ThreadGroup group;
  std::vector<int64_t> rtt;
  rtt.reserve(1 << 20);
  unsigned long answered = 0;
  for (unsigned long s = 0; s < servers; ++s) {
    group.Spawn([&, s] {
      PinToCpu(unsigned(s + 1));
      std::vector<char> buf(size);
      const int ep = inst[shared ? 0 : s];
      struct epoll_event evs[64];
      gate.Arrive();
      for (;;) {
        int n = b.epoll_wait(ep, evs, 64, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return failure.Set(CallError(b, "epoll_wait(server)"));
        for (int j = 0; j < n; ++j) {
          if (evs[j].data.u64 == kStopTag) return;
          Conn& c = cs[evs[j].data.u64];
          std::unique_lock<std::mutex> lock(c.mu, std::defer_lock);
          if (shared) lock.lock();
          for (;;) {  // read to the end of the request, or EAGAIN
            ssize_t got = b.read(c.sfd, buf.data() + c.have, size - c.have);
            if (got < 0 && errno == EAGAIN) break;
            if (got <= 0) return failure.Set(CallError(b, "read(server)"));
            c.have += size_t(got);
            if (c.have < size) continue;
            c.have = 0;
            if (!WriteAll(b, c.sfd, buf.data(), size))
              return failure.Set(CallError(b, "write(server)"));
            break;  // one request in flight per connection
          }
        }
      }
    });
  }
  group.Spawn([&] {  // the client
    PinToCpu(0);
    std::vector<char> req(size, 'x'), buf(size);
    struct epoll_event evs[64];
    gate.Arrive();
    for (unsigned long i = 0; i < conns; ++i) {
      cs[i].sent_ns = NowNs();
      if (!WriteAll(b, cs[i].cfd, req.data(), size))
        return failure.Set(CallError(b, "write(client)"));
    }
    while (!done.load(std::memory_order_relaxed)) {
      int n = b.epoll_wait(cep, evs, 64, -1);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return failure.Set(CallError(b, "epoll_wait(client)"));
      for (int j = 0; j < n; ++j) {
        if (evs[j].data.u64 == kStopTag) return;
        Conn& c = cs[evs[j].data.u64];
        for (;;) {
          ssize_t got = b.read(c.cfd, buf.data() + c.got, size - c.got);
          if (got < 0 && errno == EAGAIN) break;
          if (got <= 0) return failure.Set(CallError(b, "read(client)"));
          c.got += size_t(got);
          if (c.got < size) continue;
          int64_t now = NowNs();
          rtt.push_back(now - c.sent_ns);
          answered++;
          c.got = 0;
          c.sent_ns = now;
          if (!WriteAll(b, c.cfd, req.data(), size))
            return failure.Set(CallError(b, "write(client)"));
          break;
        }
      }
    }
  });
  gate.WaitArrivals(unsigned(servers + 1));
  SyscallWindow sys;
  sys.Start();
  int64_t t0 = NowNs();
  gate.Open();
  failure.SleepFor(PassRuntime(runtime));
  done.store(true);
  sys.Stop();
  double secs = double(NowNs() - t0) / 1e9;
  stop.Fire(b);
  group.JoinAll(10, "echo threads");
  if (failure.failed()) return r.error = failure.message(), r;
  if (rtt.empty()) return r.error = "no request was answered", r;
  r.ops_per_sec = double(answered) / secs;
  sys.Finish(&r, double(answered));
  r.metrics = {
      {"p50_us", double(Percentile(rtt, 0.50)) / 1e3, "p50 us", false},
      {"p99_us", double(Percentile(rtt, 0.99)) / 1e3, "p99 us", false}};
  return r;
}

int CmdEcho(int argc, char** argv) {
  CommonOptions c;
  std::vector<unsigned long> servers = {1, 2}, sizes = {64, 4096};
  unsigned long conns = 16;
  std::string layout = "per-thread,shared";
  std::vector<Option> opts = {
      {'c', "conns", Option::kUint, &conns, "client connections (default 16)"},
      {'s', "servers", Option::kList, &servers,
       "server thread counts (default 1,2)"},
      {'b', "bytes", Option::kList, &sizes,
       "request sizes in bytes (default 64,4096)"},
      {0, "layout", Option::kString, &layout,
       "per-thread, shared or both (default per-thread,shared)"},
  };
  if (int rc =
          ParseCommand("uepoll-bench echo [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  if (conns == 0 || conns > 100000) return BadUsage("-c/--conns: 1..100000");
  for (unsigned long s : servers)
    if (s > 256) return BadUsage("-s/--servers: at most 256");
  for (unsigned long z : sizes)
    if (z > 65536) return BadUsage("-b/--bytes: at most 65536");
  bool per = layout.find("per-thread") != std::string::npos,
       sh = layout.find("shared") != std::string::npos;
  if (!per && !sh) return BadUsage("--layout: per-thread and/or shared");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  auto bp = c.For(true), bs = c.For(false);
  Progress progress(int(servers.size() * sizes.size() *
                        ((per ? bp.size() : 0) + (sh ? bs.size() : 0))));
  for (bool shared : {false, true}) {
    if ((shared && !sh) || (!shared && !per)) continue;
    for (unsigned long z : sizes)
      for (unsigned long s : servers)
        for (const Backend* b : shared ? bs : bp)
          RunMeasurement(
              progress, report, shared ? "echo_shared" : "echo", *b,
              "servers=" + std::to_string(s) + " bytes=" + std::to_string(z),
              [&] { return MeasureEcho(*b, conns, s, shared, z, runtime); });
  }
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
