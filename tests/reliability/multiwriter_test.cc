// Several writers, one reader, on a pipe or a socket pair: a lost wakeup
// that no other test reached (a pipe write that dropped its lock to
// allocate decided from a stale "was empty" whether to wake the reader:
// docs/reliability.md, section 7, #1), and the never-polled path that let
// it through. Each writer writes records of
// random sizes, from 1 byte to three pages and more, blocking or not; one
// reader reads them blocking, or non-blocking after poll() or epoll_wait();
// the objects are never polled (the path with no "every write is an edge"
// wakeup), or watched by an instance. On both backends.
//
// The oracle cannot heal itself: byte k of writer w's stream has a value
// that depends on w (top 3 bits) and on k (low 5 bits), and the reader,
// which regenerates every writer's record sizes from the same seed, checks
// every byte as it arrives: a lost, duplicated, reordered or foreign byte
// fails at once, naming the writer, its record (a per-writer sequence
// number) and the offset. At EOF each writer's count must equal what it
// wrote, ending on a record boundary. On pipes, a record of up to PIPE_BUF
// bytes must arrive contiguous (POSIX atomicity). Stream sockets promise no
// atomicity (POSIX gives PIPE_BUF to pipes and FIFOs only, and af_unix
// splits a write into skbs that other writers' skbs may separate), so on
// them only per-writer order and exactly-once delivery are asserted.
//
// A lost wakeup shows as no progress: a watchdog fails the test, with every
// thread's position, once no byte has moved for kStall, and ends the
// process (the blocked threads cannot be joined), so a hang is a failure
// with a message, never a pass or a CTest timeout.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "stress/stress.h"
#include "support/fixture.h"

namespace uepoll_test {
namespace {

constexpr size_t kPipeBuf = 4096;
constexpr size_t kPage = 4096;
constexpr size_t kMaxRecord = 3 * kPage + 100;
constexpr int kWriters = 3;  // writer ids fit in a byte's top 3 bits
constexpr long kMaxRecordsPerWriter = 1000000;
constexpr double kSeconds = 1.5;  // per test; UEPOLL_STRESS_SECONDS overrides
constexpr auto kStall = std::chrono::seconds(30);

enum class Kind { kPipe, kSocketPair };
enum class WriterMode {
  kBlocking,
  kNonblockYield,  // EAGAIN: sched_yield and retry; never polls
  kNonblockPoll,   // EAGAIN: poll(POLLOUT) without timeout
};
enum class ReaderMode {
  kBlocking,
  kPoll,   // non-blocking read; EAGAIN: poll(POLLIN) without timeout
  kEpoll,  // non-blocking read; EAGAIN: epoll_wait (ET) without timeout
};

struct Config {
  Kind kind;
  WriterMode writers;
  ReaderMode reader;
  bool watched;  // an instance nobody waits on watches both ends
};

// Byte k of writer w's stream: w in the top 3 bits, 5 bits that depend on
// k mod kPeriod. Streams() holds each stream unrolled far enough that any
// record is one contiguous slice: writers write straight from it and the
// reader compares whole runs with memcmp, so neither side is slowed by the
// check (a slow reader would keep the pipe full and never sleep, hiding the
// lost wakeups this test hunts).
constexpr size_t kPeriod = 8191;  // prime: never a multiple of a record size
uint8_t StreamByte(int w, uint64_t k) {
  uint64_t h = (k % kPeriod + 1 + (uint64_t{static_cast<unsigned>(w)} << 40)) *
               0x9E3779B97F4A7C15ULL;
  return static_cast<uint8_t>((w << 5) | (h >> 59));
}
const std::vector<uint8_t>& Stream(int w) {
  static const std::vector<std::vector<uint8_t>> streams = [] {
    std::vector<std::vector<uint8_t>> v(kWriters);
    for (int x = 0; x < kWriters; ++x) {
      v[x].resize(kPeriod + 4 * kMaxRecord);
      for (size_t k = 0; k < v[x].size(); ++k) v[x][k] = StreamByte(x, k);
    }
    return v;
  }();
  return streams[w];
}
// The stream of writer w from byte k on (at least 4 * kMaxRecord bytes).
const uint8_t* StreamAt(int w, uint64_t k) {
  return Stream(w).data() + k % kPeriod;
}

// Record sizes: mostly sub-page, with the PIPE_BUF and page edges and
// multi-page records.
size_t NextRecordSize(std::mt19937_64& rng) {
  uint64_t r = rng();
  uint64_t v = r >> 8;
  switch (r % 20) {
    case 0:
      return 1;
    case 1:
      return kPipeBuf - 1;
    case 2:
      return kPipeBuf;
    case 3:
      return kPipeBuf + 1;
    case 4:
      return 2 * kPage;
    case 5:
    case 6:
    case 7:
    case 8:
    case 9:
    case 10:
      return 1 + v % 512;
    case 11:
    case 12:
    case 13:
    case 14:
      return 1 + v % kPipeBuf;
    default:
      return 1 + v % kMaxRecord;
  }
}

// How many leading bytes of a and b agree (of n).
size_t MatchingPrefix(const uint8_t* a, const uint8_t* b, size_t n) {
  if (std::memcmp(a, b, n) == 0) return n;
  size_t i = 0;
  while (a[i] == b[i]) ++i;
  return i;
}

uint64_t WriterSeed(uint64_t seed, int w) {
  return seed * 1000003 + static_cast<uint64_t>(w);
}

// What each thread is doing, for the watchdog's report.
enum Phase : int { kIdle, kInWrite, kInRead, kInPoll, kInEpollWait, kDone };
const char* PhaseName(int p) {
  switch (p) {
    case kIdle:
      return "between calls";
    case kInWrite:
      return "in write()";
    case kInRead:
      return "in read()";
    case kInPoll:
      return "in poll()";
    case kInEpollWait:
      return "in epoll_wait()";
    default:
      return "done";
  }
}

class MultiWriter : public BackendTest {
 protected:
  void Run(const Config& c, const char* name);

 private:
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> l(error_mu_);
    if (error_.empty()) error_ = what;
  }
  bool Failed() {
    std::lock_guard<std::mutex> l(error_mu_);
    return !error_.empty();
  }
  void WriterLoop(const Config& c, int w, int fd, uint64_t seed,
                  Budget* budget);
  void ReaderLoop(const Config& c, int fd, int ep, uint64_t seed);
  [[noreturn]] void Stalled(const Config& c, double stuck_after);

  std::mutex error_mu_;
  std::string error_;
  std::atomic<uint64_t> written_[kWriters] = {};
  std::atomic<long> records_[kWriters] = {};
  std::atomic<int> wphase_[kWriters] = {};
  std::atomic<uint64_t> read_{0};
  std::atomic<int> rphase_{kIdle};
  // What the reader saw per writer, valid once the reader is done.
  uint64_t got_[kWriters] = {};
  long got_records_[kWriters] = {};
  bool got_at_boundary_[kWriters] = {};
};

void MultiWriter::WriterLoop(const Config& c, int w, int fd, uint64_t seed,
                             Budget* budget) {
  std::mt19937_64 rng(WriterSeed(seed, w));  // the reader's copy follows it
  std::minstd_rand pace(static_cast<unsigned>(WriterSeed(seed, w)));
  uint64_t k = 0;
  while (budget->Take() && !Failed()) {
    size_t n = NextRecordSize(rng);
    const uint8_t* rec = StreamAt(w, k);
    size_t done = 0;
    while (done < n) {
      wphase_[w].store(kInWrite, std::memory_order_relaxed);
      ssize_t r = B().write(fd, rec + done, n - done);
      int e = errno;
      wphase_[w].store(kIdle, std::memory_order_relaxed);
      if (r > 0) {
        if (c.kind == Kind::kPipe && n <= kPipeBuf &&
            static_cast<size_t>(r) != n) {
          Fail("writer " + std::to_string(w) + ": a pipe write of " +
               std::to_string(n) + " <= PIPE_BUF bytes returned " +
               std::to_string(r));
        }
        done += static_cast<size_t>(r);
        written_[w].fetch_add(static_cast<uint64_t>(r),
                              std::memory_order_relaxed);
        continue;
      }
      if (r < 0 && e == EAGAIN && c.writers != WriterMode::kBlocking) {
        if (c.writers == WriterMode::kNonblockYield) {
          sched_yield();
        } else {
          pollfd p{fd, POLLOUT, 0};
          wphase_[w].store(kInPoll, std::memory_order_relaxed);
          B().poll(&p, 1, -1);
          wphase_[w].store(kIdle, std::memory_order_relaxed);
        }
        continue;
      }
      Fail("writer " + std::to_string(w) + ": write returned " +
           std::to_string(r) + ", errno " + std::to_string(e));
      // A record left half written would desynchronize the reader; stop.
      wphase_[w].store(kDone, std::memory_order_release);
      return;
    }
    k += n;
    records_[w].fetch_add(1, std::memory_order_relaxed);
    // Now and then a writer pauses, so that the reader drains the pipe and
    // sleeps, and the next writes must wake it: the path of a lost wakeup.
    if (pace() % 32 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  wphase_[w].store(kDone, std::memory_order_release);
}

void MultiWriter::ReaderLoop(const Config& c, int fd, int ep, uint64_t seed) {
  struct View {
    std::mt19937_64 rng;
    uint64_t pos = 0;
    size_t size = 0;  // the current record's size
    size_t left = 0;  // its bytes still to come
    long records = 0;
  } v[kWriters];
  for (int w = 0; w < kWriters; ++w) {
    v[w].rng.seed(WriterSeed(seed, w));
    v[w].size = v[w].left = NextRecordSize(v[w].rng);
  }
  std::mt19937_64 rng(seed ^ 0x5eed);
  std::vector<uint8_t> buf(4 * kMaxRecord);
  int atomic_owner = -1;  // a writer whose <= PIPE_BUF record is open
  bool checking = true;   // stops at the first error; reading goes on
  for (;;) {
    // Read sizes from 1 byte up, so that reads split records and slots.
    size_t want = 1 + rng() % buf.size();
    if (rng() % 16 == 0) want = 1 + rng() % 64;
    rphase_.store(kInRead, std::memory_order_relaxed);
    ssize_t r = B().read(fd, buf.data(), want);
    int e = errno;
    rphase_.store(kIdle, std::memory_order_relaxed);
    if (r == 0) break;  // EOF: every writer is gone
    if (r < 0) {
      if (e == EAGAIN && c.reader == ReaderMode::kPoll) {
        pollfd p{fd, POLLIN, 0};
        rphase_.store(kInPoll, std::memory_order_relaxed);
        B().poll(&p, 1, -1);
        rphase_.store(kIdle, std::memory_order_relaxed);
        continue;
      }
      if (e == EAGAIN && c.reader == ReaderMode::kEpoll) {
        epoll_event ev;
        rphase_.store(kInEpollWait, std::memory_order_relaxed);
        B().epoll_wait(ep, &ev, 1, -1);
        rphase_.store(kIdle, std::memory_order_relaxed);
        continue;
      }
      Fail("reader: read returned " + std::to_string(r) + ", errno " +
           std::to_string(e));
      break;
    }
    read_.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
    size_t n = static_cast<size_t>(r);
    for (size_t i = 0; i < n && checking;) {
      uint8_t b = buf[i];
      int w = b >> 5;
      if (w >= kWriters) {
        Fail("reader: byte " + std::to_string(b) + " belongs to no writer");
        checking = false;
        break;
      }
      View& x = v[w];
      if (atomic_owner >= 0 && atomic_owner != w) {
        Fail("a record of " + std::to_string(v[atomic_owner].size) +
             " <= PIPE_BUF bytes of writer " + std::to_string(atomic_owner) +
             " (record #" + std::to_string(v[atomic_owner].records) +
             ") was interleaved with writer " + std::to_string(w) + "'s bytes");
        checking = false;
        break;
      }
      // As much of w's current record as matches; a byte of another
      // writer (where records may interleave) ends the run.
      size_t step = MatchingPrefix(buf.data() + i, StreamAt(w, x.pos),
                                   std::min(x.left, n - i));
      if (step == 0) {
        Fail("writer " + std::to_string(w) + ": wrong byte at stream offset " +
             std::to_string(x.pos) + " (record #" + std::to_string(x.records) +
             " of " + std::to_string(x.size) + " bytes, offset " +
             std::to_string(x.size - x.left) +
             "): lost, duplicated or reordered data");
        checking = false;
        break;
      }
      if (c.kind == Kind::kPipe && x.left == x.size && x.size <= kPipeBuf) {
        atomic_owner = w;
      }
      i += step;
      x.pos += step;
      x.left -= step;
      if (x.left == 0) {
        ++x.records;
        if (atomic_owner == w) atomic_owner = -1;
        x.size = x.left = NextRecordSize(x.rng);
      }
    }
  }
  for (int w = 0; w < kWriters; ++w) {
    got_[w] = v[w].pos;
    got_records_[w] = v[w].records;
    got_at_boundary_[w] = v[w].left == v[w].size;
  }
  rphase_.store(kDone, std::memory_order_release);
}

void MultiWriter::Stalled(const Config& c, double stuck_after) {
  char when[64];
  std::snprintf(when, sizeof when, "%.2f", stuck_after);
  std::string s = "no byte moved for " + std::to_string(kStall.count()) +
                  " s: a lost wakeup or a deadlock (" + B().name + ", " +
                  (c.kind == Kind::kPipe ? "pipe" : "socket pair") +
                  "), stuck " + when + " s after the start.";
  for (int w = 0; w < kWriters; ++w) {
    s += "\n  writer " + std::to_string(w) + ": " +
         PhaseName(wphase_[w].load()) + ", " +
         std::to_string(written_[w].load()) + " bytes in " +
         std::to_string(records_[w].load()) + " records";
  }
  s += "\n  reader: " + std::string(PhaseName(rphase_.load())) + ", " +
       std::to_string(read_.load()) + " bytes";
  ADD_FAILURE() << s;
  std::fprintf(stderr, "%s\n", s.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  // The blocked threads cannot be joined or cancelled: end the process
  // (each test runs in its own under CTest).
  std::_Exit(1);
}

void MultiWriter::Run(const Config& c, const char* name) {
  uint64_t seed = StressSeed(name);
  int fds[2];
  if (c.kind == Kind::kPipe) {
    Pipe(fds);
  } else {
    SocketPair(fds);
  }
  // fds[0] is read, fds[1] written (a socket pair is symmetric).
  int rfd = fds[0];
  int wfd = fds[1];
  if (c.reader != ReaderMode::kBlocking) {
    ASSERT_EQ(B().fcntl(rfd, F_SETFL, O_NONBLOCK), 0);
  }
  if (c.writers != WriterMode::kBlocking) {
    ASSERT_EQ(B().fcntl(wfd, F_SETFL, O_NONBLOCK), 0);
  }
  int ep = -1;
  if (c.reader == ReaderMode::kEpoll) {
    ep = Epoll();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, rfd, EPOLLIN | EPOLLET, 0), 0);
  }
  int watcher = -1;
  if (c.watched) {
    watcher = Epoll();
    ASSERT_EQ(Ctl(watcher, EPOLL_CTL_ADD, rfd, EPOLLIN, 0), 0);
    ASSERT_EQ(Ctl(watcher, EPOLL_CTL_ADD, wfd, EPOLLOUT, 1), 0);
  }

  Budget budget(kMaxRecordsPerWriter * kWriters, kSeconds);
  std::thread reader([&] { ReaderLoop(c, rfd, ep, seed); });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] { WriterLoop(c, w, wfd, seed, &budget); });
  }

  // The watchdog: wait for `done`, failing if nothing moves for kStall.
  const auto start = std::chrono::steady_clock::now();
  auto watch = [&](auto done) {
    auto last_change = std::chrono::steady_clock::now();
    uint64_t last = ~uint64_t{0};
    while (!done()) {
      uint64_t moved = read_.load(std::memory_order_relaxed);
      for (auto& x : written_) moved += x.load(std::memory_order_relaxed);
      auto now = std::chrono::steady_clock::now();
      if (moved != last) {
        last = moved;
        last_change = now;
      } else if (now - last_change > kStall) {
        Stalled(c, std::chrono::duration<double>(last_change - start).count());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  watch([&] {
    for (auto& p : wphase_) {
      if (p.load(std::memory_order_acquire) != kDone) return false;
    }
    return true;
  });
  for (auto& t : writers) t.join();
  // The last writer is gone: the reader drains and sees EOF.
  if (watcher >= 0) {
    EXPECT_EQ(Close(watcher), 0);
  }
  EXPECT_EQ(Close(wfd), 0);
  watch([&] { return rphase_.load(std::memory_order_acquire) == kDone; });
  reader.join();

  ASSERT_EQ(error_, "");
  uint64_t total = 0;
  for (int w = 0; w < kWriters; ++w) {
    total += written_[w].load();
    EXPECT_EQ(got_[w], written_[w].load()) << "writer " << w;
    EXPECT_EQ(got_records_[w], records_[w].load()) << "writer " << w;
    EXPECT_TRUE(got_at_boundary_[w]) << "writer " << w;
  }
  EXPECT_EQ(read_.load(), total);
  EXPECT_GT(total, 0u);
  std::printf("[multiwriter] %s: %llu bytes in %ld records (%s)\n", name,
              static_cast<unsigned long long>(total), budget.used(),
              budget.capped_by_time() ? "time cap" : "record cap");
}

#define MULTIWRITER_CASE(Name, ...) \
  TEST_P(MultiWriter, Name) { Run(Config{__VA_ARGS__}, "MultiWriter." #Name); }

// Nothing ever polls the pipe, so only a write that finds it empty wakes
// the reader (the lost wakeup above: these two hung before its fix).
MULTIWRITER_CASE(PipeNeverPolledBlockingWritersBlockingReader, Kind::kPipe,
                 WriterMode::kBlocking, ReaderMode::kBlocking, false)
MULTIWRITER_CASE(PipeNeverPolledNonblockingWritersBlockingReader, Kind::kPipe,
                 WriterMode::kNonblockYield, ReaderMode::kBlocking, false)
MULTIWRITER_CASE(PipeWatchedBlockingWritersBlockingReader, Kind::kPipe,
                 WriterMode::kBlocking, ReaderMode::kBlocking, true)
MULTIWRITER_CASE(PipeBlockingWritersPollReader, Kind::kPipe,
                 WriterMode::kBlocking, ReaderMode::kPoll, false)
MULTIWRITER_CASE(PipePollWritersPollReader, Kind::kPipe,
                 WriterMode::kNonblockPoll, ReaderMode::kPoll, false)
MULTIWRITER_CASE(PipeBlockingWritersEpollReader, Kind::kPipe,
                 WriterMode::kBlocking, ReaderMode::kEpoll, false)
MULTIWRITER_CASE(PipePollWritersEpollReaderWatched, Kind::kPipe,
                 WriterMode::kNonblockPoll, ReaderMode::kEpoll, true)

MULTIWRITER_CASE(SocketNeverPolledBlockingWritersBlockingReader,
                 Kind::kSocketPair, WriterMode::kBlocking,
                 ReaderMode::kBlocking, false)
MULTIWRITER_CASE(SocketNeverPolledNonblockingWritersBlockingReader,
                 Kind::kSocketPair, WriterMode::kNonblockYield,
                 ReaderMode::kBlocking, false)
MULTIWRITER_CASE(SocketWatchedBlockingWritersBlockingReader, Kind::kSocketPair,
                 WriterMode::kBlocking, ReaderMode::kBlocking, true)
MULTIWRITER_CASE(SocketBlockingWritersPollReader, Kind::kSocketPair,
                 WriterMode::kBlocking, ReaderMode::kPoll, false)
MULTIWRITER_CASE(SocketPollWritersPollReader, Kind::kSocketPair,
                 WriterMode::kNonblockPoll, ReaderMode::kPoll, false)
MULTIWRITER_CASE(SocketBlockingWritersEpollReader, Kind::kSocketPair,
                 WriterMode::kBlocking, ReaderMode::kEpoll, false)
MULTIWRITER_CASE(SocketPollWritersEpollReaderWatched, Kind::kSocketPair,
                 WriterMode::kNonblockPoll, ReaderMode::kEpoll, true)

UEPOLL_INSTANTIATE_BACKENDS(MultiWriter);

}  // namespace
}  // namespace uepoll_test
