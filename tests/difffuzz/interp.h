// The differential fuzzer's operation language and its interpreter.
//
// An Op is one call (create a source or an instance, epoll_ctl, a zero-timeout
// wait, poll, read, write, shutdown, dup/dup2/dup3, fcntl, close). Ops name
// descriptors through handles, not numbers: handle i is the i-th descriptor
// a creating op returned in this sequence (closed or not). The interpreter
// runs each op on the kernel and on uepoll and compares the return value,
// errno (also on success: it must be left untouched) and every output
// (reported events in order, revents, bytes read, descriptor numbers).
//
// Descriptor numbers are made to line up (numbering.h): a handle's number on
// either side maps to the same offset, and EMFILE, dup2 past the limit and
// reuse of closed numbers happen on both at the same op. Under uepoll's
// default (kernel) numbering, kernel objects are created on both sides too
// (kKernelObj), so that uepoll instances hold kernel descriptors.
//
// The state check (Options::check): after every failing call (or every
// call), both sides' observable state is compared: which numbers are open,
// each one's flags and kind, readiness, and which registrations exist
// (state_check.cc says how each is observed without changing anything).
// A failing call must change nothing; a difference there is reported as a
// "state" mismatch at that op.
//
// Everything is non-blocking: the interpreter forces O_NONBLOCK on every
// source it creates (and keeps it through F_SETFL), and waits and polls use
// timeout 0. Writes to sockets are kept short and are skipped (on both sides)
// once the kernel's send queue holds more than kSocketQueueCap bytes: uepoll
// accounts socket capacity by payload, the kernel by skb truesize
// (docs/semantics.md), so a full socket is not comparable.
#ifndef UEPOLL_TESTS_DIFFFUZZ_INTERP_H_
#define UEPOLL_TESTS_DIFFFUZZ_INTERP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "difffuzz/numbering.h"

namespace difffuzz {

enum class K : uint8_t {
  kEventfd,       // a = initval, b = flags
  kPipe2,         // b = flags
  kSocketpair,    // a = domain, b = type, c = protocol
  kEpollCreate,   // a = size
  kEpollCreate1,  // b = flags
  kCtl,           // h0 = epfd, h1 = fd, a = op, b = events, c = data;
                  // h2 != 0: NULL event pointer
  kWait,          // h0 = epfd, a = maxevents; b = 0: epoll_wait, 1: pwait2
                  // {0,0}, 2: pwait2 with an invalid timespec
  kPoll,          // h0..h3 = fds (b = nfds), a = 4 x 16-bit event masks
  kPollAll,       // poll every handle with IN|OUT|PRI|RDHUP: a state probe
  kRead,          // h0 = fd, a = count
  kWrite,         // h0 = fd, a = count, c = eventfd value / pattern seed
  kShutdown,      // h0 = fd, a = how
  kDup,           // h0 = fd
  kDup2,          // h0 = old, h1 = new
  kDup3,          // h0 = old, h1 = new, b = flags
  kFcntl,         // h0 = fd, a = cmd, b = arg
  kClose,         // h0 = fd
  // The vectored and socket calls (appended, so that older encodings keep
  // their meaning):
  kReadv,   // h0 = fd, a = count, b = segments (0..4: the count split)
  kWritev,  // h0 = fd, a = count, b = segments, c = pattern seed
  kSend,    // h0 = fd, a = count, b = MSG_* flags, c = pattern seed
  kRecv,    // h0 = fd, a = count, b = MSG_* flags
  kIoctl,   // h0 = fd, a = request (FIONREAD, SIOCOUTQ, FIONBIO on)
  // Appended for the state check:
  kKernelObj,  // a kernel object on both sides, by libc: a = 0 eventfd
               // (b = initval), 1 pipe2, 2 epoll_create1, 3 stream
               // socketpair; kernel numbering only (skipped otherwise)
  kLimit,      // both sides' descriptor limit becomes offset a (1..span)
  kCount
};

// Handle references: h >= 0 names handle h (a handle past the end of the
// table names a number beyond the descriptor limit); kNegFd is -1;
// h <= kRawBase names the raw offset kRawBase - h (open or not).
constexpr int32_t kNegFd = -1;
constexpr int32_t kRawBase = -2;

struct Op {
  K k;
  int32_t h[4];
  int64_t a;
  int64_t b;
  uint64_t c;
};

// One side's observable result of an op.
struct Outcome {
  long ret = 0;
  int err = 0;
  std::vector<uint64_t> out;  // events+data pairs, revents, data hash...
  bool operator==(const Outcome& o) const {
    return ret == o.ret && err == o.err && out == o.out;
  }
};

struct Mismatch {
  size_t index;  // op index in the sequence; == size: the teardown
  Op op;
  Outcome kernel;
  Outcome uepoll;
  std::string what;  // which check failed
};

// The descriptor span: offsets [0, kFdSpan) are usable on both backends.
constexpr int kFdSpan = 64;
constexpr long kSocketQueueCap = 4096;
constexpr int kMaxWrite = 70000;

// A source of choices: an RNG for the command-line fuzzer, the input bytes
// for libFuzzer.
class Chooser {
 public:
  virtual ~Chooser() = default;
  virtual uint64_t Next() = 0;
  uint32_t Below(uint32_t n) {
    return n ? static_cast<uint32_t>(Next() % n) : 0;
  }
  bool OneIn(uint32_t n) { return Below(n) == 0; }
};

class SplitMix : public Chooser {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed) {}
  uint64_t Next() override {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t s_;
};

class ByteChooser : public Chooser {
 public:
  ByteChooser(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint64_t Next() override {
    uint64_t v = 0;
    for (int i = 0; i < 4 && pos_ < n_; ++i) v = (v << 8) | p_[pos_++];
    return v;
  }
  bool Done() const { return pos_ >= n_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

enum class Check {
  kOff,
  kFailures,  // the state check after every failing call
  kAll,       // after every call (to find the op that made a difference)
};

struct Options {
  // Skip (on both sides) the ops of the known, pinned engine differences
  // listed in KnownDifference() (interp.cc), so that a long run reports
  // only new ones.
  bool skip_known = false;
  // uepoll's numbering mode; a process can use one only (numbering.h).
  NumberingMode numbering = NumberingMode::kDisjoint;
  Check check = Check::kOff;
  // The registration probe of the state check covers every (instance,
  // target) pair; otherwise only the pairs with an operand of the op, and
  // every pair at every 16th check.
  bool full_probe = false;
  // Check::kFailures: check after every check_every-th failing call of a
  // sequence only (the sanitizer builds' long entry, to stay in its time).
  int check_every = 1;
};

// Runs sequences on both backends. One Session per sequence: the
// constructor lines the descriptor numbers up, the destructor closes
// everything and restores the limits.
class Session {
 public:
  explicit Session(const Options& opt = Options());
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  bool ok() const { return ok_; }
  const std::string& setup_error() const { return setup_error_; }

  // A random op suited to the current table (biased towards meaningful
  // calls; invalid ones included).
  Op Generate(Chooser& ch) const;
  // Runs op on both backends; false and *m filled on a difference.
  bool Run(const Op& op, size_t index, Mismatch* m);
  // Closes every descriptor in the span on both sides, comparing results,
  // and checks that uepoll freed everything it held when the session began.
  bool Teardown(size_t index, Mismatch* m);

  size_t handles() const { return table_.size(); }

  // op with its handle references made the raw offsets ("fd#n") they name
  // now (for the shrinker).
  Op Normalized(const Op& op) const;

 private:
  struct Handle {
    int off;
    K kind;     // kind of the creating op (kDup: copied)
    int side;   // pipe/socketpair: 0 or 1
    bool kobj;  // a kernel object on the uepoll side too (kKernelObj)
  };
  struct Fds {
    int k, u;
  };
  Fds Resolve(int32_t h) const;
  int32_t PickHandle(Chooser& ch, int want) const;
  int32_t PickClosed(Chooser& ch) const;
  int32_t PickKernelObj(Chooser& ch) const;
  void Push(long off, K kind, int side, bool kobj);
  Outcome Exec(bool kernel, const Op& op, Fds f[4]);
  bool MayAllocate(const Op& op) const;
  bool Deviation(const Op& op, const Fds f[4]) const;
  // The state check (state_check.cc).
  bool CheckState(const Op& op, const Fds f[4], size_t index, Mismatch* m);

  std::vector<Handle> table_;
  // cur_[off]: the handle last created at offset off while it is open, or
  // -1 (a hint for the generator: it prefers open descriptors).
  std::vector<int> cur_;
  // Recent successful ADDs (h0, h1), for the generator's EEXIST, ELOOP
  // and dup2-onto-a-busy-instance cases.
  std::vector<std::pair<int32_t, int32_t>> added_;
  bool torn_down_ = false;
  Options opt_;
  bool KnownDifference(const Op& op, const Fds f[4]) const;
  bool KnownAfterTheFact(const Op& op, const Fds f[4], Outcome* ko,
                         Outcome* uo);
  Numbering numbering_;
  // The state check's scratch instances (never registered anywhere): a
  // kernel one, and uepoll's own (-1 until made).
  int kscratch_ = -1, uscratch_ = -1;
  long checks_ = 0;
  long failures_ = 0;  // failing calls so far (Options::check_every)
  long live_files_ = 0, live_items_ = 0, live_descriptors_ = 0,
       live_instances_ = 0;
  bool ok_ = false;
  std::string setup_error_;
  void* old_sigpipe_ = nullptr;
};

// Runs ops in a fresh session. Returns true if nothing differed (including
// the teardown); otherwise fills *m with the first difference.
bool RunSequence(const std::vector<Op>& ops, Mismatch* m,
                 const Options& opt = Options());

// Shrinks a failing sequence: cuts it after the failing op, then deletes
// ops one at a time while a mismatch at an op of the same kind (and of the
// same check: result, state or teardown) persists. A state mismatch is
// shrunk with the state check after every call (Check::kAll, full_probe):
// towards the first call after which the state differs. *used (if not
// null): the options the shrunk sequence reproduces under.
std::vector<Op> Shrink(std::vector<Op> ops, const Mismatch& first,
                       const Options& opt = Options(), Options* used = nullptr);

// Parses the "as code" lines Report prints ("{K::kCtl, {0, 1, 0, 0}, 1, 5,
// 0x0ull},", one op per line; other lines are ignored), for --replay.
std::vector<Op> ParseOps(const std::string& text);

// How many state checks ran, over every Session in this process.
long StateChecks();

// Per op kind: how often it ran and how it ended (0: success, else errno),
// over every Session::Run in this process; for --stats.
std::string CoverageSummary();

const char* KName(K k);  // "kCtl"

// Whether op returns a descriptor (compared as an offset).
bool ReturnsFd(const Op& op);

std::string Describe(const Op& op);  // readable: "epoll_ctl(h3, ADD, h1, ...)"
std::string ToCode(const Op& op);    // a C++ initializer for regressions
std::string Describe(const Outcome& o, const Op& op);
std::string Report(const std::vector<Op>& ops, const Mismatch& m);

}  // namespace difffuzz

#endif  // UEPOLL_TESTS_DIFFFUZZ_INTERP_H_
