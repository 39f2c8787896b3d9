// mpmc_queue: a bounded multi-producer multi-consumer queue made pollable
// with uepoll::UserObject.
//
// The queue is readable (EPOLLIN) while it holds an item and writable
// (EPOLLOUT) while it has room, exactly as a pipe would be. Producers and
// consumers never spin: each waits in its own uepoll instance for the
// readiness it needs, and push/pop notify the other side. The same
// instances could hold sockets, pipes or timerfds next to the queue; here a
// timerfd bounds the whole run.
//
// Checked at the end: every item pushed was popped exactly once (counts and
// a checksum). Exits 0 on success.
#include <fcntl.h>
#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <uepoll/uepoll.hpp>

namespace {

template <class T>
class BoundedQueue : public uepoll::UserObject {
 public:
  explicit BoundedQueue(std::size_t capacity) : capacity_(capacity) {}

  // Readiness now: called by uepoll with its locks held, so it only looks.
  std::uint32_t poll() noexcept override {
    std::lock_guard<std::mutex> l(mu_);
    std::uint32_t mask = 0;
    if (!items_.empty()) mask |= EPOLLIN | EPOLLRDNORM;
    if (items_.size() < capacity_) mask |= EPOLLOUT | EPOLLWRNORM;
    return mask;
  }

  bool try_push(const T& v) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (items_.size() >= capacity_) return false;
      items_.push_back(v);
    }
    // After the change, outside the lock (notify may also be called under
    // it): wakes consumers waiting for EPOLLIN.
    notify(EPOLLIN | EPOLLRDNORM);
    return true;
  }

  bool try_pop(T* out) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (items_.empty()) return false;
      *out = items_.front();
      items_.pop_front();
    }
    notify(EPOLLOUT | EPOLLWRNORM);
    return true;
  }

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::deque<T> items_;
};

constexpr int kProducers = 3;
constexpr int kConsumers = 2;
constexpr std::uint64_t kPerProducer = 20000;
constexpr std::uint64_t kDone = ~std::uint64_t{0};  // one per consumer

// Waits until the instance reports the queue (data 1); false if the
// deadline timer (data 2) fired first.
bool WaitForQueue(uepoll::Instance& ep) {
  epoll_event evs[2];
  for (;;) {
    auto got = ep.wait(evs);
    for (const epoll_event& e : got) {
      if (e.data.u64 == 2) return false;
      if (e.data.u64 == 1) return true;
    }
  }
}

}  // namespace

int main() {
  auto [qfd, queue] =
      uepoll::make_user_object<BoundedQueue<std::uint64_t>>(O_NONBLOCK, 64);
  // A watchdog: if the run took more than 60 s, something lost a wakeup.
  auto deadline = uepoll::TimerFd::create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  deadline.arm(std::chrono::seconds(60));

  std::atomic<bool> timed_out{false};
  std::atomic<std::uint64_t> popped{0}, sum{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      auto ep = uepoll::Instance::create();
      ep.add(qfd, EPOLLOUT | EPOLLET, 1);
      ep.add(deadline, EPOLLIN, 2);
      for (std::uint64_t i = 0; i < kPerProducer; ++i) {
        std::uint64_t v = std::uint64_t(p) * kPerProducer + i;
        while (!queue->try_push(v)) {
          if (!WaitForQueue(ep)) return (void)(timed_out = true);
        }
      }
    });
  }
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&] {
      auto ep = uepoll::Instance::create();
      ep.add(qfd, EPOLLIN | EPOLLET, 1);
      ep.add(deadline, EPOLLIN, 2);
      std::uint64_t v;
      for (;;) {
        while (!queue->try_pop(&v)) {
          if (!WaitForQueue(ep)) return (void)(timed_out = true);
        }
        if (v == kDone) return;
        popped.fetch_add(1);
        sum.fetch_add(v);
      }
    });
  }
  for (int p = 0; p < kProducers; ++p) threads[p].join();
  // Every real item is in or through the queue: tell the consumers.
  for (int c = 0; c < kConsumers; ++c) {
    auto ep = uepoll::Instance::create();
    ep.add(qfd, EPOLLOUT, 1);
    ep.add(deadline, EPOLLIN, 2);
    while (!queue->try_push(kDone)) {
      if (!WaitForQueue(ep)) {
        timed_out = true;
        break;
      }
    }
  }
  for (int c = 0; c < kConsumers; ++c) threads[kProducers + c].join();

  const std::uint64_t n = kProducers * kPerProducer;
  const std::uint64_t want_sum = n * (n - 1) / 2;
  if (timed_out || popped != n || sum != want_sum) {
    std::fprintf(stderr,
                 "mpmc_queue: popped %llu of %llu, sum %llu (want %llu)%s\n",
                 (unsigned long long)popped.load(), (unsigned long long)n,
                 (unsigned long long)sum.load(), (unsigned long long)want_sum,
                 timed_out ? ", timed out" : "");
    return 1;
  }
  std::printf(
      "mpmc_queue: %llu items through a 64-slot queue, %d producers, "
      "%d consumers\n",
      (unsigned long long)n, kProducers, kConsumers);
  return 0;
}
