// The scenario every event-loop integration test runs: an event loop of a
// real library (libuv, Boost.Asio, libevent, libev, a kernel epoll loop)
// watches one watchable uepoll instance through its own number, and other
// threads drive uepoll pipes, eventfds and socket pairs inside it.
//
//   producers (2 free-running, 1 lock-step)        loop thread
//     p p p --write--> pipes, eventfds,      e (watchable) <--watch-- loop
//                      socket pairs -------> (lt items)       | readable
//                                                             v
//                                                  Traffic::OnReadable()
//
// The oracles cannot heal themselves:
//  - exactly once: every pipe and socket message carries its source and a
//    sequence number, read back in order with none missing or repeated;
//    every eventfd's reads sum to the number of writes; a harvest that
//    reports a source readable is followed by a read that must succeed
//    (only the loop reads);
//  - no lost wakeup: the lock-step producer writes one message and waits
//    for it to be read before the next, hundreds of empty-to-ready
//    transitions each of which must wake the loop, under a long deadline;
//  - no busy loop: once everything was read and a harvest found the
//    instance empty, the loop must not call back at all for an idle
//    period (the count is the oracle), and the loop thread's CPU time
//    over it must stay near zero;
//  - clean shutdown: a stop eventfd inside the instance ends the loop,
//    which tears itself down; then no uepoll object and no kernel
//    descriptor is left behind.
#ifndef UEPOLL_TESTS_INTEGRATION_TRAFFIC_H_
#define UEPOLL_TESTS_INTEGRATION_TRAFFIC_H_

#include <time.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace uepoll_test {

// How the loop's callback harvests the instance.
enum class Harvest {
  // One uepoll_epoll_wait per callback (a level-triggered watcher calls
  // back again while events remain).
  kOnce,
  // Until uepoll_epoll_wait returns 0, as an edge-triggered watcher must:
  // only the harvest that finds the instance empty makes the next event a
  // new edge.
  kUntilEmpty,
};

class Traffic {
 public:
  explicit Traffic(Harvest mode);
  ~Traffic();
  Traffic(const Traffic&) = delete;
  Traffic& operator=(const Traffic&) = delete;

  // The watchable instance's number: what the loop watches for reading.
  int epfd() const { return ep_; }

  // Called by the loop thread once its loop watches epfd() and is about to
  // run: records the thread's CPU clock.
  void LoopReady();
  // The loop's callback for "epfd() is readable". False once the stop
  // eventfd was harvested: the loop should stop and tear down.
  bool OnReadable();

  // Runs the scenario with `loop` on its own thread; `loop` must set up
  // its library's loop watching epfd(), call LoopReady(), run until
  // OnReadable() returns false, and tear everything down. Uses gtest
  // assertions; on return every uepoll object is closed.
  static void Run(Harvest mode, const std::function<void(Traffic&)>& loop);

 private:
  struct Source;
  void StartProducers();
  void JoinProducers();
  void Produce(const std::vector<Source*>& mine, uint64_t count,
               bool lock_step);
  void Consume(Source& s);
  void Fail(const std::string& why);
  bool AllDelivered() const;  // REQUIRES mu_
  int64_t LoopCpuNs() const;

  const Harvest mode_;
  int ep_ = -1;
  int stop_fd_ = -1;
  std::vector<Source*> sources_;
  std::vector<std::thread> producers_;

  clockid_t loop_clock_{};
  std::atomic<uint64_t> callbacks_{0};
  std::atomic<uint64_t> deliveries_{0};

  // Guards the progress the control and lock-step threads wait for.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t consumed_ = 0;  // messages read back, all sources
  bool loop_ready_ = false;
  bool settled_ = false;  // a harvest found nothing after the last one
  std::string failure_;   // the first broken oracle
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_INTEGRATION_TRAFFIC_H_
