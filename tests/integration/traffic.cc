#include "integration/traffic.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

// Free-running sources: 2 per kind and producer; the lock-step producer
// has one of each kind of its own, so every source has one writer and its
// messages one order.
constexpr int kFreeProducers = 2;
constexpr int kFreePerKind = 2;
constexpr uint64_t kFreeMessages = 400;    // per source
constexpr uint64_t kLockStepRounds = 100;  // per source, 3 sources
constexpr uint64_t kStopTag = ~uint64_t{0};
constexpr int kMaxEvents = 16;  // below the source count: partial harvests
constexpr auto kDeadline = std::chrono::seconds(40);  // CTest's is 120
// The idle period and the loop thread's CPU budget over it: a blocked
// thread uses none; a loop that spins uses all of it.
constexpr auto kIdle = std::chrono::milliseconds(300);
constexpr int64_t kIdleCpuBudgetNs = 30'000'000;

int CountOpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the directory's own descriptor
}

std::string Errno(const char* call) {
  return std::string(call) + ": " + std::strerror(errno);
}

}  // namespace

struct Traffic::Source {
  enum Kind { kPipe, kEventfd, kSocket } kind;
  uint32_t id;
  int rd = -1, wr = -1;   // an eventfd's rd == wr
  uint64_t messages = 0;  // what its producer writes
  // Loop thread only.
  uint64_t next_seq = 0;
  unsigned char partial[8];
  size_t partial_len = 0;
  // Guarded by Traffic::mu_: messages read back.
  uint64_t read_back = 0;

  uint64_t Message(uint64_t seq) const { return (uint64_t{id} << 32) | seq; }
};

Traffic::Traffic(Harvest mode) : mode_(mode) {
  ep_ = uepoll_epoll_create1(EPOLL_CLOEXEC);
  EXPECT_GE(ep_, 0) << Errno("uepoll_epoll_create1");
  EXPECT_EQ(uepoll_epoll_make_watchable(ep_), 0)
      << Errno("uepoll_epoll_make_watchable");
  auto add = [&](Source* s) {
    s->id = uint32_t(sources_.size());
    sources_.push_back(s);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = s->id;
    EXPECT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, s->rd, &ev), 0)
        << Errno("uepoll_epoll_ctl");
  };
  int groups = kFreeProducers * kFreePerKind + 1;  // the last: lock-step
  for (int g = 0; g < groups; ++g) {
    uint64_t messages = g + 1 < groups ? kFreeMessages : kLockStepRounds;
    // Readers never block (the loop must not); writers do, so a fast
    // producer waits for room instead of failing.
    int p[2];
    EXPECT_EQ(uepoll_pipe2(p, O_CLOEXEC), 0) << Errno("uepoll_pipe2");
    EXPECT_EQ(uepoll_fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    add(new Source{Source::kPipe, 0, p[0], p[1], messages});
    int e = uepoll_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    EXPECT_GE(e, 0) << Errno("uepoll_eventfd");
    add(new Source{Source::kEventfd, 0, e, e, messages});
    int sv[2];
    EXPECT_EQ(uepoll_socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0)
        << Errno("uepoll_socketpair");
    EXPECT_EQ(uepoll_fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    add(new Source{Source::kSocket, 0, sv[0], sv[1], messages});
  }
  stop_fd_ = uepoll_eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kStopTag;
  EXPECT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, stop_fd_, &ev), 0);
}

Traffic::~Traffic() {
  JoinProducers();
  for (Source* s : sources_) {
    uepoll_close(s->rd);
    if (s->wr != s->rd) uepoll_close(s->wr);
    delete s;
  }
  uepoll_close(stop_fd_);
  uepoll_close(ep_);
}

void Traffic::Fail(const std::string& why) {
  std::lock_guard<std::mutex> l(mu_);
  if (failure_.empty()) failure_ = why;
  cv_.notify_all();
}

bool Traffic::AllDelivered() const {
  for (const Source* s : sources_) {
    if (s->read_back != s->messages) return false;
  }
  return true;
}

void Traffic::LoopReady() {
  EXPECT_EQ(pthread_getcpuclockid(pthread_self(), &loop_clock_), 0);
  std::lock_guard<std::mutex> l(mu_);
  loop_ready_ = true;
  cv_.notify_all();
}

int64_t Traffic::LoopCpuNs() const {
  timespec ts{};
  EXPECT_EQ(clock_gettime(loop_clock_, &ts), 0);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool Traffic::OnReadable() {
  callbacks_.fetch_add(1, std::memory_order_relaxed);
  epoll_event evs[kMaxEvents];
  for (;;) {
    int n = uepoll_epoll_wait(ep_, evs, kMaxEvents, 0);
    if (n < 0) {
      Fail(Errno("uepoll_epoll_wait"));
      return false;
    }
    if (n == 0) {
      std::lock_guard<std::mutex> l(mu_);
      if (AllDelivered()) {
        settled_ = true;
        cv_.notify_all();
      }
      return true;
    }
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u64 == kStopTag) return false;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = evs[i].data.u64;
      if (id >= sources_.size() || evs[i].events != EPOLLIN) {
        Fail("harvested data " + std::to_string(id) + " events " +
             std::to_string(evs[i].events));
        return false;
      }
      Consume(*sources_[id]);
    }
    if (mode_ == Harvest::kOnce) return true;
  }
}

// The source was reported readable and only this thread reads it: the read
// must succeed, and what it returns must be the next messages in order.
void Traffic::Consume(Source& s) {
  uint64_t got = 0;
  if (s.kind == Source::kEventfd) {
    ssize_t r = uepoll_read(s.rd, &got, sizeof got);
    if (r != sizeof got) return Fail(Errno("eventfd reported but read"));
    s.next_seq += got;
    if (s.next_seq > s.messages) return Fail("eventfd: more than written");
  } else {
    unsigned char buf[512];
    std::memcpy(buf, s.partial, s.partial_len);
    ssize_t r =
        uepoll_read(s.rd, buf + s.partial_len, sizeof buf - s.partial_len);
    if (r <= 0) return Fail(Errno("stream reported but read"));
    size_t len = s.partial_len + size_t(r), off = 0;
    for (; len - off >= 8; off += 8, ++got) {
      uint64_t m;
      std::memcpy(&m, buf + off, 8);
      if (m != s.Message(s.next_seq)) {
        return Fail("source " + std::to_string(s.id) + ": message " +
                    std::to_string(m) + ", want " +
                    std::to_string(s.Message(s.next_seq)));
      }
      ++s.next_seq;
    }
    s.partial_len = len - off;
    std::memcpy(s.partial, buf + off, s.partial_len);
  }
  std::lock_guard<std::mutex> l(mu_);
  s.read_back += got;
  cv_.notify_all();
}

void Traffic::Produce(const std::vector<Source*>& mine, uint64_t count,
                      bool lock_step) {
  for (uint64_t k = 0; k < count; ++k) {
    for (Source* s : mine) {
      uint64_t m = s->kind == Source::kEventfd ? 1 : s->Message(k);
      if (uepoll_write(s->wr, &m, sizeof m) != sizeof m) {
        return Fail(Errno("producer write"));
      }
      if (!lock_step) continue;
      // Wait until the loop read it: the instance goes back to empty, and
      // the next write is a new transition to ready that must wake the loop.
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, kDeadline, [&] {
            return s->read_back > k || !failure_.empty();
          })) {
        failure_ = "lock-step message " + std::to_string(k) + " of source " +
                   std::to_string(s->id) + " never read: lost wakeup";
        cv_.notify_all();
      }
      if (!failure_.empty()) return;
    }
  }
}

void Traffic::StartProducers() {
  for (int p = 0; p < kFreeProducers; ++p) {
    std::vector<Source*> mine;
    for (int i = 0; i < kFreePerKind * 3; ++i) {
      mine.push_back(sources_[size_t((p * kFreePerKind * 3) + i)]);
    }
    producers_.emplace_back(
        [this, mine] { Produce(mine, kFreeMessages, false); });
  }
  std::vector<Source*> last(sources_.end() - 3, sources_.end());
  producers_.emplace_back(
      [this, last] { Produce(last, kLockStepRounds, true); });
}

void Traffic::JoinProducers() {
  for (std::thread& t : producers_) t.join();
  producers_.clear();
}

void Traffic::Run(Harvest mode, const std::function<void(Traffic&)>& loop) {
  const int fds_before = CountOpenFds();
  {
    Traffic t(mode);
    if (::testing::Test::HasFailure()) return;
    std::mutex done_mu;
    std::condition_variable done_cv;
    bool loop_done = false;
    std::thread loop_thread([&] {
      loop(t);
      std::lock_guard<std::mutex> l(done_mu);
      loop_done = true;
      done_cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> l(t.mu_);
      EXPECT_TRUE(t.cv_.wait_for(l, kDeadline, [&] {
        return t.loop_ready_ || !t.failure_.empty();
      })) << "the loop never started";
    }
    t.StartProducers();
    bool settled;
    {
      std::unique_lock<std::mutex> l(t.mu_);
      settled = t.cv_.wait_for(
          l, kDeadline, [&] { return t.settled_ || !t.failure_.empty(); });
      EXPECT_TRUE(settled) << "not everything was delivered in time";
    }
    t.JoinProducers();

    if (settled && t.failure_.empty()) {
      // Idle: nothing fires. The period is a measurement window, not a
      // synchronization: whatever the loop does in it is counted.
      uint64_t cb0 = t.callbacks_.load();
      int64_t cpu0 = t.LoopCpuNs();
      std::this_thread::sleep_for(kIdle);
      uint64_t cb1 = t.callbacks_.load();
      int64_t cpu1 = t.LoopCpuNs();
      EXPECT_EQ(cb1 - cb0, 0u) << "the loop called back while idle";
      EXPECT_LT(cpu1 - cpu0, kIdleCpuBudgetNs)
          << "the loop thread ran while idle (ns of CPU)";
    }

    uint64_t one = 1;
    EXPECT_EQ(uepoll_write(t.stop_fd_, &one, sizeof one), 8);
    {
      std::unique_lock<std::mutex> l(done_mu);
      if (!done_cv.wait_for(l, kDeadline, [&] { return loop_done; })) {
        ADD_FAILURE() << "the loop did not stop";
        std::abort();  // cannot tear down under a running loop
      }
    }
    loop_thread.join();

    std::lock_guard<std::mutex> l(t.mu_);
    EXPECT_EQ(t.failure_, "");
    uint64_t total = 0;
    for (const Source* s : t.sources_) {
      EXPECT_EQ(s->read_back, s->messages) << "source " << s->id;
      EXPECT_EQ(s->next_seq, s->messages) << "source " << s->id;
      EXPECT_EQ(s->partial_len, 0u) << "source " << s->id;
      total += s->messages;
    }
    EXPECT_GE(total, 5000u);
  }
  ExpectNoUepollLeaks();
  EXPECT_EQ(CountOpenFds(), fds_before) << "kernel descriptors left open";
}

}  // namespace uepoll_test
