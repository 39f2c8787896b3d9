#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace uepoll_bench {

int64_t NowNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

static std::vector<int> CpuList() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

unsigned AllowedCpus() { return static_cast<unsigned>(CpuList().size()); }

double CoreRoundTripNs() {
  // Under valgrind (callgrind instruction counts) two spinning threads take
  // turns by timeslice and the probe would run for minutes: let it be off.
  if (AllowedCpus() < 2 || getenv("UEPOLL_BENCH_NO_RTT")) return -1;
  constexpr long kRounds = 10000;
  // At most 5 ms, so that a loaded machine (round trips of 100 us and more
  // were seen) does not turn the probe into most of a suite's run time.
  constexpr int64_t kBudgetNs = 5000000;
  constexpr long kStop = -1;
  alignas(64) std::atomic<long> ball{0};
  std::thread echo([&] {
    PinToCpu(1);
    for (long i = 0;; ++i) {
      long v;
      while ((v = ball.load(std::memory_order_acquire)) != 2 * i + 1 &&
             v != kStop) {
      }
      if (v == kStop) return;
      ball.store(2 * i + 2, std::memory_order_release);
    }
  });
  // The caller's affinity is restored afterwards: workloads pin their own
  // threads, but the main thread must stay free to run anywhere.
  cpu_set_t saved;
  bool have_saved =
      pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved) == 0;
  PinToCpu(0);
  int64_t t0 = NowNs(), t1 = t0;
  long done = 0;
  while (done < kRounds) {
    ball.store(2 * done + 1, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != 2 * done + 2) {
    }
    ++done;
    if ((done & 7) == 0 && (t1 = NowNs()) - t0 > kBudgetNs) break;
  }
  t1 = NowNs();
  ball.store(kStop, std::memory_order_release);
  echo.join();
  if (have_saved) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
  return double(t1 - t0) / double(done);
}

void PinToCpu(unsigned index) {
  static const std::vector<int> cpus = CpuList();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[index % cpus.size()], &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

void Failure::Set(const std::string& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load(std::memory_order_relaxed)) msg_ = msg;
  failed_.store(true, std::memory_order_release);
  cv_.notify_all();
}

std::string Failure::message() const {
  std::lock_guard<std::mutex> lock(mu_);
  return msg_;
}

void Failure::SleepFor(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(seconds),
               [this] { return failed_.load(std::memory_order_relaxed); });
}

void Gate::Arrive() {
  std::unique_lock<std::mutex> lock(mu_);
  ++arrived_;
  cv_.notify_all();
  cv_.wait(lock, [this] { return open_; });
}

void Gate::WaitArrivals(unsigned n) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return arrived_ >= n; });
}

void Gate::Open() {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  cv_.notify_all();
}

ThreadGroup::~ThreadGroup() { JoinAll(30, "threads"); }

void ThreadGroup::Spawn(std::function<void()> fn) {
  threads_.emplace_back([this, fn = std::move(fn)] {
    fn();
    std::lock_guard<std::mutex> lock(mu_);
    ++finished_;
    cv_.notify_all();
  });
}

void ThreadGroup::JoinAll(double timeout_s, const char* what) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                      [this] { return finished_ == threads_.size(); })) {
      fprintf(stderr,
              "uepoll-bench: %s did not finish %.0f s after the stop signal "
              "(a lost wakeup?); giving up\n",
              what, timeout_s);
      fflush(stdout);
      _Exit(3);
    }
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  finished_ = 0;
}

namespace {

long g_tracepoint_id = -1;
bool g_counter_init = false;
std::string g_counter_why = "SyscallCounter::Init was not called";
bool g_in_counted_pass = false;
const SyscallCounter* g_current = nullptr;  // the open counter, if any

long ReadId(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[32] = {};
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  return n > 0 ? strtol(buf, nullptr, 10) : -1;
}

constexpr const char* kIdPath =
    "/sys/kernel/tracing/events/raw_syscalls/sys_enter/id";

// tracefs is not mounted: read the id in a child that mounts tracefs in a
// private mount namespace (root only), so that no mount outlives it.
long IdFromPrivateMount(std::string* why) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    *why = std::string("pipe2: ") + strerror(errno);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + strerror(errno);
    close(pfd[0]);
    close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    long id = -1;
    if (unshare(CLONE_NEWNS) == 0 &&
        mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
        mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0)
      id = ReadId(kIdPath);
    else
      id = -errno - 1;
    ssize_t ignored = write(pfd[1], &id, sizeof(id));
    (void)ignored;
    _exit(0);
  }
  close(pfd[1]);
  long id = -1;
  ssize_t n = read(pfd[0], &id, sizeof(id));
  close(pfd[0]);
  int status;
  waitpid(pid, &status, 0);
  if (n != sizeof(id) || id < 0) {
    int e = (n == sizeof(id) && id < -1) ? int(-id - 1) : 0;
    *why = std::string(
               "tracefs is not mounted and mounting it privately "
               "failed") +
           (e ? std::string(": ") + strerror(e) : std::string());
    return -1;
  }
  return id;
}

int OpenCounter(long id, std::string* err) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof(a));
  a.type = PERF_TYPE_TRACEPOINT;
  a.size = sizeof(a);
  a.config = uint64_t(id);
  a.inherit = 1;  // every thread created from now on
  int fd =
      int(syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0)
    *err = std::string("perf_event_open(raw_syscalls:sys_enter): ") +
           strerror(errno);
  return fd;
}

}  // namespace

bool SyscallCounter::Init() {
  if (g_counter_init) return g_tracepoint_id >= 0;
  g_counter_init = true;
  std::string why;
  long id = ReadId(kIdPath);
  if (id < 0)
    id = ReadId("/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id");
  if (id < 0) id = IdFromPrivateMount(&why);
  if (id < 0) {
    g_counter_why = why;
    return false;
  }
  int fd = OpenCounter(id, &why);  // a trial: permissions, kernel support
  if (fd < 0) {
    g_counter_why = why;
    return false;
  }
  close(fd);
  g_tracepoint_id = id;
  g_counter_why.clear();
  return true;
}

bool SyscallCounter::available() { return g_tracepoint_id >= 0; }
const std::string& SyscallCounter::why() { return g_counter_why; }
void SyscallCounter::Disable(const std::string& why) {
  g_counter_init = true;
  g_tracepoint_id = -1;
  g_counter_why = why;
}

SyscallCounter::SyscallCounter() {
  if (!available()) {
    error_ = g_counter_why;
    return;
  }
  fd_ = OpenCounter(g_tracepoint_id, &error_);
  if (fd_ >= 0) {
    g_in_counted_pass = true;
    g_current = this;
  }
}

SyscallCounter::~SyscallCounter() {
  if (fd_ >= 0) {
    close(fd_);
    g_in_counted_pass = false;
    g_current = nullptr;
  }
}

int64_t SyscallCounter::Read() const {
  uint64_t v = 0;
  if (fd_ < 0 || read(fd_, &v, sizeof(v)) != sizeof(v)) return -1;
  return int64_t(v);
}

bool InCountedPass() { return g_in_counted_pass; }

void SyscallWindow::Start() {
  if (g_current) c0_ = g_current->Read();
}

void SyscallWindow::Stop() {
  if (g_current) c1_ = g_current->Read();
}

double PassRuntime(double runtime) {
  return g_in_counted_pass ? std::min(runtime, 0.1) : runtime;
}

void Stats::Add(double v) {
  ++n_;
  double delta = v - mean_;
  mean_ += delta / n_;
  m2_ += delta * (v - mean_);
}

double Stats::RelStddevPct() const {
  if (n_ < 2 || mean_ == 0) return 0;
  double stderr_mean = std::sqrt(m2_ / (n_ - 1) / n_);
  return 100.0 * stderr_mean / mean_;
}

bool ParseUintList(const std::string& s, std::vector<unsigned long>* out,
                   bool allow_zero) {
  out->clear();
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(pos, comma - pos);
    if (item.empty() ||
        item.find_first_not_of("0123456789") != std::string::npos)
      return false;
    errno = 0;
    unsigned long v = strtoul(item.c_str(), nullptr, 10);
    if (errno != 0 || (v == 0 && !allow_zero)) return false;
    out->push_back(v);
    pos = comma + 1;
  }
  return !out->empty();
}

}  // namespace uepoll_bench
