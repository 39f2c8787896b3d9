// The multi-thread mode's internals (mt.h): a Side runs a scenario on one
// backend, with a thread per script and a watchdog. Setup, the threads and
// the final state are in mt_side.cc, the steps in mt_steps.cc, the
// comparison of the two sides in mt_run.cc.
#ifndef UEPOLL_TESTS_DIFFFUZZ_MT_SIDE_H_
#define UEPOLL_TESTS_DIFFFUZZ_MT_SIDE_H_

#include <errno.h>
#include <poll.h>
#include <string.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "difffuzz/mt.h"
#include "support/backend.h"

namespace difffuzz::mt::internal {

using uepoll_test::Backend;
using Clock = std::chrono::steady_clock;

// The big eventfd's count: a second write of it cannot fit until a read.
constexpr uint64_t kBig = 0xfffffffffffff000ULL;
constexpr uint32_t kProbeMask =
    POLLIN | POLLOUT | POLLPRI | POLLRDHUP | POLLRDNORM | POLLWRNORM;

// The context line for reports (SetContext), and counters for Stats().
inline std::string g_context;

inline std::atomic<long> g_scenarios{0}, g_steps{0}, g_short_timeouts{0},
    g_lt_empty{0}, g_deliveries{0}, g_noise_events{0}, g_noise_empty{0},
    g_blocked_bytes{0};

inline uint8_t Pattern(int stream, int64_t off) {
  uint64_t x = (static_cast<uint64_t>(off) + 1) * 0x9e3779b97f4a7c15ULL ^
               (static_cast<uint64_t>(stream) << 56);
  return static_cast<uint8_t>(x >> 56 ^ x >> 29);
}

inline std::string Errno(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : std::to_string(e);
}

// What one side observed.
struct SideResult {
  std::vector<std::vector<uint64_t>> rec;  // per thread: (step, value) pairs
  std::vector<uint64_t> final_state;
  std::vector<std::string> final_labels;
  std::vector<std::string> violations;
};

class Side {
 public:
  Side(const Scenario& s, const Backend& b) : s_(s), b_(b) {
    res_.rec.resize(static_cast<size_t>(s.threads));
    scripts_.resize(static_cast<size_t>(s.threads));
    for (size_t i = 0; i < s.steps.size(); ++i) {
      scripts_[static_cast<size_t>(s.steps[i].thread)].push_back(i);
    }
    expect_ = std::make_unique<std::atomic<int64_t>[]>(s.channels.size());
    written_ = std::make_unique<std::atomic<int64_t>[]>(s.channels.size());
    last_.assign(s.channels.size(), 0);
    cur_ =
        std::make_unique<std::atomic<long>[]>(static_cast<size_t>(s.threads));
  }
  ~Side() { CloseAll(); }

  bool Setup();
  void RunThreads();
  void Final();
  void CloseAll();
  SideResult& result() { return res_; }

 private:
  int Fd(int obj, int side) const {
    return fds_[static_cast<size_t>(obj)][static_cast<size_t>(side)];
  }
  void Exec(int t, size_t i, const Step& st);
  void StreamWrite(int t, size_t i, const Step& st);
  void StreamRead(int t, size_t i, const Step& st);
  void Produce(int t, size_t i, const Step& st);
  void Consume(int t, size_t i, const Step& st);
  void NoiseWait(int t, size_t i, const Step& st);
  void NoisePoll(int t, size_t i, const Step& st);
  void Rec(int t, size_t i, uint64_t v) {
    auto& r = res_.rec[static_cast<size_t>(t)];
    r.push_back(i);
    r.push_back(v);
  }
  // A check failed. Fatal: the protocol cannot go on (a partner would wait
  // forever), so report now and abort.
  void Violation(int t, size_t i, const std::string& what, bool fatal);
  void Note(const std::string& label, uint64_t v) {
    res_.final_labels.push_back(label);
    res_.final_state.push_back(v);
  }
  bool AlwaysReady(int ep) const;
  [[noreturn]] void Hang(long ms);

  const Scenario& s_;
  const Backend& b_;
  std::vector<std::array<int, 2>> fds_;
  std::vector<std::vector<size_t>> scripts_;
  std::unique_ptr<std::atomic<int64_t>[]> expect_;   // token being sent
  std::unique_ptr<std::atomic<int64_t>[]> written_;  // last token written
  std::vector<int64_t> last_;  // last token taken (single-consumer channels)
  std::unique_ptr<std::atomic<long>[]> cur_;  // step each thread is in
  std::atomic<long> progress_{0};
  std::mutex mu_;  // guards res_.violations
  SideResult res_;
};

}  // namespace difffuzz::mt::internal

#endif  // UEPOLL_TESTS_DIFFFUZZ_MT_SIDE_H_
