// The differential fuzzer's multi-thread mode: random scenarios of blocking
// calls made from several threads, run on the kernel and then on uepoll.
//
// A scenario is a set of objects created before the threads start (blocking
// pipes and socket pairs carrying byte streams, blocking eventfds, token
// channels watched by epoll instances, noise instances) and one global list
// of steps, each owned by a thread; a thread runs its own steps in the
// global order. Timing decides how the threads interleave, so only what is
// deterministic is compared between the backends:
//
//  * per step, the result of every protocol step (bytes moved, units read,
//    tokens passed) and the errno class of every noise step (success, or
//    the exact errno its arguments call for);
//  * after the threads join, before anything else changes state: every
//    descriptor's flags and kind, and an ADD probe (events 0) of every
//    (instance, source) pair, which fails EEXIST exactly where a
//    registration exists (the single-thread state check, state_check.cc):
//    a failing noise call must have changed nothing;
//  * after the threads join, the readiness of every descriptor (poll), of
//    every instance after each registration was re-armed (MOD), what is left
//    in each stream, eventfd and channel;
//  * on uepoll, that closing everything freed every object (leak check).
//
// Each side also checks itself as it runs, so an engine bug cannot hide
// behind timing: stream bytes are compared with the pattern at their offset
// (nothing lost, duplicated or reordered); eventfd reads return exactly the
// units the protocol allows; every token carries its sequence number and is
// acknowledged before the next is sent, so an edge-triggered or ONESHOT
// registration must deliver it exactly once (a second harvest before the
// token is read must find nothing, a delivery must find a token); a
// single consumer that saw a token written before its short-timeout wait
// began must not time out.
//
// Lost wakeups cannot pass: every step that waits for another thread waits
// without a timeout (or with one as long as the watchdog's), and the global
// order makes the steps deadlock-free by construction (see Generate), so a
// step that never returns is an engine bug. A watchdog ends the process
// (abort) after a period in which no step finished, printing the scenario
// and where every thread is. Short timeouts (1-5 ms) are used by the noise
// steps, whose results only their class is compared for.
#ifndef UEPOLL_TESTS_DIFFFUZZ_MT_H_
#define UEPOLL_TESTS_DIFFFUZZ_MT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "difffuzz/interp.h"  // Chooser

namespace difffuzz::mt {

enum class ObjKind : uint8_t {
  kPipe,          // blocking pipe: fd[1] writes the stream fd[0] reads
  kSocketpair,    // blocking stream socket pair: a stream either way
  kSemEventfd,    // blocking EFD_SEMAPHORE eventfd: units
  kBigEventfd,    // blocking eventfd holding kBig: writing kBig blocks
  kTokenEventfd,  // non-blocking token sources: tokens go in through
  kTokenPipe,     //   fd[1] (fd[0] for the eventfd) and are read from fd[0],
  kTokenSocket,   //   which an instance watches
  kAckEventfd,    // blocking eventfd: an acknowledgement or a go signal
  kSentinel,      // non-blocking eventfd at 1, never read: always readable
  kEpoll,
};

// A registration made before the threads start.
struct Reg {
  int ep;    // object index of the instance
  int obj;   // object index of the target
  int side;  // which descriptor of the target
  uint32_t events;
  uint64_t data;
  bool noise;  // noise steps may MOD it; no protocol relies on it
};

// Bytes from one thread to another through one direction of an object.
struct Stream {
  int obj;
  int wside, rside;
  int writer, reader;
};

// Tokens from a producer to consumers through an instance, acknowledged
// through an eventfd so that one token is in flight at a time. A round
// starts with a go signal to each consumer, so that a consumer done with
// its token cannot run ahead into its next round and take a token meant
// for a consumer that is still waiting in this one.
struct Channel {
  int src;    // token source (its fd[0] is watched)
  int ep;     // the instance with the source as item (data = tag)
  int outer;  // -1, or an instance holding ep (LT) the consumers wait on
  int ack;    // consumer -> producer
  std::vector<int> go;  // producer -> each consumer: a round begins
  uint32_t mode;        // 0 (LT), EPOLLET, EPOLLONESHOT or both
  int producer;
  std::vector<int> consumers;
  uint64_t tag;
};

struct Sem {
  int obj;
  int reader;  // one reader: its reads take units in the global order
};

struct Big {
  int obj;
  int writer, reader;
};

enum class StepKind : uint8_t {
  kStreamWrite,  // a = stream, n bytes at off; variant 1: poll(OUT) first
  kStreamRead,   // a = stream, n bytes at off; variant 1/2: poll(IN) first
  kSemWrite,     // a = sem, n = value
  kSemRead,      // a = sem, n reads of one unit; variant 1: poll(IN) first
  kBigWrite,     // a = big: write kBig (blocks until the paired read)
  kBigRead,      // a = big: read kBig
  kProduce,      // a = channel, n tokens, sequence numbers from off
  kConsume,      // a = channel, one token; variant = how it waits
  kNoiseWait,    // a = instance object, n = maxevents; variant = call
  kNoisePoll,    // up to 4 descriptors
  kNoiseMod,     // a = noise registration: MOD, ET on (variant 1) or off
};

struct Step {
  StepKind kind;
  int thread;
  int group;  // steps of one rendezvous share it; -1: none
  int a;
  int64_t n;
  int64_t off;
  int variant;
  int timeout_ms;
  int npoll;
  int poll_obj[4];
  int poll_side[4];
  uint16_t poll_events[4];
};

// How a consumer waits for its token.
enum ConsumeVariant {
  kWaitForever,      // epoll_wait(-1)
  kPwaitForever,     // epoll_pwait(-1, empty mask)
  kPwait2Null,       // epoll_pwait2(NULL)
  kPwait2Long,       // epoll_pwait2(the watchdog's period)
  kShortLoop,        // epoll_wait(1-4 ms) until the token (single consumer)
  kPollThenHarvest,  // poll(instance, -1), then epoll_wait(0)
  kOuterThenInner,   // epoll_wait(outer, -1), then epoll_wait(ep, 0)
  kNumConsumeVariants
};

struct Scenario {
  int threads = 0;
  std::vector<ObjKind> objects;
  std::vector<Reg> regs;
  std::vector<Stream> streams;
  std::vector<Channel> channels;
  std::vector<Sem> sems;
  std::vector<Big> bigs;
  int sentinel = -1;
  std::vector<Step> steps;  // the global order
};

// A random scenario: 2-4 threads, up to max_steps steps.
Scenario Generate(Chooser& ch, int max_steps = 160);

// Runs s on the kernel and then on uepoll; true if both passed their own
// checks and agree. Otherwise *report says what differed (and the
// scenario). A hang does not return: the watchdog aborts the process.
bool Run(const Scenario& s, std::string* report);

// The watchdog's period: a hang is no step finishing for this long.
// Default 20 s (60 s under a sanitizer); UEPOLL_DIFFFUZZ_HANG_MS overrides.
long HangMillis();

// A line the watchdog and fatal reports print first (the seed and the
// scenario number, so that the failure can be repeated).
void SetContext(const std::string& line);

std::string Describe(const Scenario& s);
std::string Describe(const Scenario& s, const Step& st);

// Counters over every Run in this process (not compared): how often the
// timing-dependent outcomes happened, for --stats.
std::string Stats();

}  // namespace difffuzz::mt

#endif  // UEPOLL_TESTS_DIFFFUZZ_MT_H_
