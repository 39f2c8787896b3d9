// userq: one bounded queue (a mutex, a deque, 64 slots), one producer and
// one consumer thread on two CPUs, each blocking in epoll_wait when it
// cannot go on. The queue is the same on both backends; only how it is
// watched differs:
//
//   kernel  the queue signalled through two kernel eventfds: the producer
//           writes "items" after every push, the consumer writes "room"
//           after every pop; each side waits on its eventfd in a kernel
//           instance and reads it before retrying;
//   uepoll  the queue is a user-defined object (uepoll_obj_create): poll()
//           answers IN while non-empty and OUT while not full, push and
//           pop call uepoll_obj_notify; each side waits on it (ET) in a
//           uepoll instance.
//
// Two runs per backend: throughput (the producer pushes as fast as it
// can; items/s and CPU per item over the process), and latency (the
// producer pushes --rate items per second stamped with the time, pacing
// itself by spinning; the consumer's pop time minus the stamp, p50/p99,
// and the consumer thread's CPU per item).
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include <deque>
#include <mutex>

#include <uepoll/uepoll.h>

#include "workloads.h"

namespace uepoll_bench {
namespace {

constexpr size_t kCapacity = 64;
constexpr uint64_t kStopItem = ~uint64_t{0};

double CpuNs(int who = RUSAGE_SELF) {
  struct rusage ru;
  getrusage(who, &ru);
  auto ns = [](const timeval& tv) {
    return double(tv.tv_sec) * 1e9 + double(tv.tv_usec) * 1e3;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// The queue and its two ways of telling the other side.
class Queue {
 public:
  // Kernel mode: efd_items/efd_room are kernel eventfds. uepoll mode: the
  // queue is a user object whose handle is obj_.
  bool Push(uint64_t v) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (items_.size() >= kCapacity) return false;
      items_.push_back(v);
    }
    Signal(true);
    return true;
  }
  bool Pop(uint64_t* v) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (items_.empty()) return false;
      *v = items_.front();
      items_.pop_front();
    }
    Signal(false);
    return true;
  }
  uint32_t Readiness() {
    std::lock_guard<std::mutex> l(mu_);
    uint32_t mask = 0;
    if (!items_.empty()) mask |= EPOLLIN;
    if (items_.size() < kCapacity) mask |= EPOLLOUT;
    return mask;
  }

  const Backend* b = nullptr;
  int efd_items = -1, efd_room = -1;  // kernel mode
  uepoll_obj* obj = nullptr;          // uepoll mode

 private:
  void Signal(bool pushed) {
    if (obj) {
      uepoll_obj_notify(obj, pushed ? EPOLLIN : EPOLLOUT);
    } else {
      uint64_t one = 1;
      (void)b->write(pushed ? efd_items : efd_room, &one, sizeof one);
    }
  }
  std::mutex mu_;
  std::deque<uint64_t> items_;
};

uint32_t QueuePoll(void* ctx) { return static_cast<Queue*>(ctx)->Readiness(); }

// One side's instance: what it waits for, and how it waits.
struct Side {
  int ep = -1;
  int efd = -1;  // kernel mode: the eventfd to read after a wakeup
  // Blocks until the other side signalled. False on error (r->error set
  // by the caller from errno).
  bool Wait(const Backend& b) {
    struct epoll_event ev;
    for (;;) {
      int n = b.epoll_wait(ep, &ev, 1, 10000);
      if (n < 0 && errno == EINTR) continue;
      if (n != 1) return false;
      if (efd >= 0) {
        uint64_t v;
        (void)b.read(efd, &v, sizeof v);
      }
      return true;
    }
  }
};

}  // namespace

Result MeasureUserq(const Backend& b, double rate, double runtime) {
  Result r;
  r.workload = "userq";
  r.backend = b.name;
  r.threads = 2;
  r.params = {{"rate", rate}};
  r.ops_label = "items/s";
  Queue q;  // outlives the descriptors (fds closes them first)
  q.b = &b;
  FdList fds(b);
  struct PutHandle {
    uepoll_obj** h;
    ~PutHandle() {
      if (*h) uepoll_obj_put(*h);
    }
  } put{&q.obj};
  Side prod, cons;
  prod.ep = fds.Add(b.epoll_create1(0));
  cons.ep = fds.Add(b.epoll_create1(0));
  if (prod.ep < 0 || cons.ep < 0)
    return r.error = CallError(b, "epoll_create1"), r;
  int qfd = -1;
  if (b.is_kernel) {
    q.efd_items = fds.Add(b.eventfd(0, EFD_NONBLOCK));
    q.efd_room = fds.Add(b.eventfd(0, EFD_NONBLOCK));
    if (q.efd_items < 0 || q.efd_room < 0)
      return r.error = CallError(b, "eventfd"), r;
    cons.efd = q.efd_items;
    prod.efd = q.efd_room;
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    if (b.epoll_ctl(cons.ep, EPOLL_CTL_ADD, q.efd_items, &ev) < 0 ||
        b.epoll_ctl(prod.ep, EPOLL_CTL_ADD, q.efd_room, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
  } else {
    static const uepoll_obj_ops kOps = {&QueuePoll, nullptr, nullptr, nullptr};
    qfd = fds.Add(uepoll_obj_create(&kOps, &q, O_NONBLOCK, &q.obj));
    if (qfd < 0) return r.error = CallError(b, "obj_create"), r;
    struct epoll_event ev = {};
    ev.events = EPOLLIN | EPOLLET;
    if (b.epoll_ctl(cons.ep, EPOLL_CTL_ADD, qfd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
    ev.events = EPOLLOUT | EPOLLET;
    if (b.epoll_ctl(prod.ep, EPOLL_CTL_ADD, qfd, &ev) < 0)
      return r.error = CallError(b, "epoll_ctl(ADD)"), r;
  }

  // Throughput, then latency (paced), in one pair of threads each.
  for (int mode = 0; mode < 2; ++mode) {
    bool paced = mode == 1;
    std::atomic<bool> done{false};
    Failure failure;
    Gate gate;
    ThreadGroup group;
    std::vector<int64_t> lat;
    lat.reserve(paced ? size_t(rate * runtime * 1.2) + 16 : 0);
    uint64_t consumed = 0;
    double consumer_cpu = 0;
    group.Spawn([&] {
      PinToCpu(1);
      gate.Arrive();
      double cpu_start = CpuNs(RUSAGE_THREAD);
      uint64_t v;
      for (;;) {
        while (!q.Pop(&v)) {
          if (!cons.Wait(b)) return failure.Set(CallError(b, "epoll_wait"));
        }
        if (v == kStopItem) {
          consumer_cpu = CpuNs(RUSAGE_THREAD) - cpu_start;
          return;
        }
        if (paced) lat.push_back(NowNs() - int64_t(v));
        ++consumed;
      }
    });
    group.Spawn([&] {
      PinToCpu(0);
      gate.Arrive();
      const int64_t step = paced ? int64_t(1e9 / rate) : 0;
      int64_t next = NowNs();
      uint64_t i = 0;
      while (!done.load(std::memory_order_relaxed)) {
        if (paced) {
          // Pacing by spinning on the clock: a sleep would add its own
          // wakeup latency to the figure, and this core is the producer's.
          next += step;
          while (NowNs() < next) {
          }
        }
        uint64_t v = paced ? uint64_t(NowNs()) : i++;
        while (!q.Push(v)) {
          if (!prod.Wait(b)) return failure.Set(CallError(b, "epoll_wait"));
        }
      }
      while (!q.Push(kStopItem)) {
        if (!prod.Wait(b)) return failure.Set(CallError(b, "epoll_wait"));
      }
    });
    gate.WaitArrivals(2);
    double cpu0 = CpuNs();
    int64_t t0 = NowNs();
    gate.Open();
    failure.SleepFor(runtime);
    done.store(true);
    group.JoinAll(20, "userq threads");
    double secs = double(NowNs() - t0) / 1e9;
    double cpu = CpuNs() - cpu0;
    if (failure.failed()) return r.error = failure.message(), r;
    if (!consumed) return r.error = "nothing went through the queue", r;
    if (!paced) {
      r.ops_per_sec = double(consumed) / secs;
      r.metrics.push_back(
          {"cpu_per_item_ns", cpu / double(consumed), "CPU ns/item", false});
    } else {
      r.metrics.push_back(
          {"lat_p50_ns", double(Percentile(lat, 0.50)), "p50 ns", false});
      r.metrics.push_back(
          {"lat_p99_ns", double(Percentile(lat, 0.99)), "p99 ns", false});
      // The producer spins to pace itself, so only the consumer's CPU
      // means something here: the cost of waiting for and taking an item.
      r.metrics.push_back({"paced_consumer_cpu_per_item_ns",
                           consumer_cpu / double(consumed),
                           "paced consumer CPU ns/item", false});
    }
  }
  return r;
}

int CmdUserq(int argc, char** argv) {
  CommonOptions c;
  double rate = 20000;
  std::vector<Option> opts = {
      {0, "rate", Option::kDouble, &rate,
       "items per second in the latency run (default 20000)"},
  };
  if (int rc =
          ParseCommand("uepoll-bench userq [<options>]", argc, argv, &opts, &c);
      rc >= 0)
    return rc;
  if (!(rate > 0 && rate <= 1e7)) return BadUsage("--rate: in (0, 1e7]");
  double runtime = c.runtime > 0 ? c.runtime : 2;
  Report report;
  Progress progress(int(c.backends.size()));
  for (const Backend* b : c.backends)
    RunMeasurement(progress, report, "userq", *b, "",
                   [&] { return MeasureUserq(*b, rate, runtime); });
  return FinishCommand(c, report);
}

}  // namespace uepoll_bench
