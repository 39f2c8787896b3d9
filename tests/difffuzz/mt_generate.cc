// The multi-thread mode's generator and printer (mt.h).
//
// Why the generated steps cannot deadlock on a correct engine: every step
// that waits for another thread waits only for steps that come earlier in
// the global order (or for the other half of its own rendezvous, which
// sits at the same place in the order). Take the earliest step that is
// blocked: every earlier step of every thread has finished (a thread runs
// its steps in the global order), so what it waits for has happened and it
// must return. Hence a step that never returns is a lost wakeup (or another
// engine bug), never an artefact of the interleaving. The models below keep
// that property:
//  * streams: one writer and one reader thread each. A write must fit in
//    the capacity left once every earlier read is done (pipes: 16 slots,
//    counting each unread write as ceil(n/4096) slots; sockets: at most 4
//    writes of at most 4096 bytes in flight, far below the send buffer);
//    a bigger write is a rendezvous with a read of everything in flight.
//    A read asks for no more bytes than earlier writes wrote.
//  * semaphore eventfds: one reader; a read of k units comes after writes
//    of at least k unread units.
//  * the big eventfd: each write of kBig is a rendezvous with a read.
//  * channels: a producer and a fixed set of consumers; each rendezvous
//    passes one token to each consumer, one at a time (write, then wait for
//    the acknowledgement). Every consumer of a channel takes part in every
//    rendezvous of it and starts its part by waiting for the producer's go
//    signal, which comes after the previous round was acknowledged in
//    full, so no consumer can take a token meant for another round.
#include <poll.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <string>

#include "difffuzz/mt.h"

namespace difffuzz::mt {
namespace {

constexpr int kPipeSlotBudget = 14;  // a margin below the pipe's 16 slots
constexpr int kSocketWritesInFlight = 4;
constexpr int64_t kMaxBigBytes = 2 << 20;  // per scenario: bounds the time

struct StreamModel {
  int64_t written = 0;
  int64_t read = 0;
  std::deque<std::pair<int64_t, int>> inflight;  // (end offset, slots)
  void Drop() {
    while (!inflight.empty() && inflight.front().first <= read) {
      inflight.pop_front();
    }
  }
};

int Slots(int64_t n) { return static_cast<int>((n + 4095) / 4096); }

}  // namespace

Scenario Generate(Chooser& ch, int max_steps) {
  Scenario s;
  const int T = 2 + static_cast<int>(ch.Below(3));
  s.threads = T;
  auto add = [&](ObjKind k) {
    s.objects.push_back(k);
    return static_cast<int>(s.objects.size()) - 1;
  };
  auto thread = [&] { return static_cast<int>(ch.Below(T)); };
  auto other = [&](int t) {
    int u = static_cast<int>(ch.Below(T - 1));
    return u >= t ? u + 1 : u;
  };

  // Streams.
  for (int i = static_cast<int>(ch.Below(3)); i > 0; --i) {
    int w = thread();
    s.streams.push_back({add(ObjKind::kPipe), 1, 0, w, other(w)});
  }
  for (int i = static_cast<int>(ch.Below(2)); i > 0; --i) {
    int obj = add(ObjKind::kSocketpair);
    int dirs = ch.OneIn(2) ? 2 : 1;
    for (int d = 0; d < dirs; ++d) {
      int w = thread();
      s.streams.push_back({obj, d, 1 - d, w, other(w)});
    }
  }
  for (int i = static_cast<int>(ch.Below(3)); i > 0; --i) {
    s.sems.push_back({add(ObjKind::kSemEventfd), thread()});
  }
  if (ch.OneIn(3)) {
    int w = thread();
    s.bigs.push_back({add(ObjKind::kBigEventfd), w, other(w)});
  }

  // Channels.
  for (int c = 1 + static_cast<int>(ch.Below(3)); c > 0; --c) {
    Channel k;
    static const ObjKind kSrc[] = {ObjKind::kTokenEventfd, ObjKind::kTokenPipe,
                                   ObjKind::kTokenSocket};
    k.src = add(kSrc[ch.Below(3)]);
    k.ep = add(ObjKind::kEpoll);
    k.ack = add(ObjKind::kAckEventfd);
    static const uint32_t kModes[] = {0, EPOLLET, EPOLLONESHOT,
                                      EPOLLET | EPOLLONESHOT};
    k.mode = kModes[ch.Below(4)];
    k.producer = thread();
    std::vector<int> pool;
    for (int t = 0; t < T; ++t) {
      if (t != k.producer) pool.push_back(t);
    }
    int m = 1 + static_cast<int>(ch.Below(
                    static_cast<uint32_t>(std::min<size_t>(3, pool.size()))));
    for (int i = 0; i < m; ++i) {
      size_t j = i + ch.Below(static_cast<uint32_t>(pool.size() - i));
      std::swap(pool[i], pool[j]);
      k.consumers.push_back(pool[i]);
      k.go.push_back(add(ObjKind::kAckEventfd));
    }
    k.outer = ch.OneIn(4) ? add(ObjKind::kEpoll) : -1;
    k.tag = 0xC0DE000000000000ULL | (uint64_t(s.channels.size()) << 32) |
            (ch.Next() & 0xffffffffu);
    s.regs.push_back({k.ep, k.src, 0, EPOLLIN | k.mode, k.tag, false});
    if (k.outer >= 0) {
      s.regs.push_back({k.outer, k.ep, 0, EPOLLIN, k.tag ^ 1, false});
    }
    s.channels.push_back(k);
  }
  if (ch.OneIn(2)) s.sentinel = add(ObjKind::kSentinel);

  // Noise instances and their registrations.
  struct Cand {
    int obj, side;
    uint32_t events;
    bool excl_ok;
  };
  std::vector<Cand> cands;
  for (int o = 0; o < static_cast<int>(s.objects.size()); ++o) {
    switch (s.objects[o]) {
      case ObjKind::kPipe:
        cands.push_back({o, 0, EPOLLIN, false});
        cands.push_back({o, 1, EPOLLOUT, false});
        break;
      case ObjKind::kSocketpair:
        cands.push_back({o, 0, EPOLLIN | EPOLLOUT | EPOLLRDHUP, false});
        cands.push_back({o, 1, EPOLLIN | EPOLLOUT | EPOLLRDHUP, false});
        break;
      case ObjKind::kSemEventfd:
      case ObjKind::kBigEventfd:
        cands.push_back({o, 0, EPOLLIN | EPOLLOUT, false});
        break;
      case ObjKind::kTokenEventfd:
      case ObjKind::kTokenPipe:
      case ObjKind::kTokenSocket:
      case ObjKind::kSentinel:
        // Nobody blocks in a read of these, so an exclusive item cannot
        // take a wakeup a blocked reader needed.
        cands.push_back({o, 0, EPOLLIN, true});
        break;
      case ObjKind::kEpoll:
        cands.push_back({o, 0, EPOLLIN, false});
        break;
      case ObjKind::kAckEventfd:
        break;
    }
  }
  for (int e = static_cast<int>(ch.Below(3)); e > 0; --e) {
    int ep = add(ObjKind::kEpoll);
    for (int i = 1 + static_cast<int>(ch.Below(5)); i > 0 && !cands.empty();
         --i) {
      const Cand c = cands[ch.Below(static_cast<uint32_t>(cands.size()))];
      bool dup = false;
      for (const Reg& r : s.regs) {
        dup |= r.ep == ep && r.obj == c.obj && r.side == c.side;
      }
      if (dup) continue;
      uint32_t ev = c.events;
      if (ch.OneIn(3)) ev |= EPOLLET;
      if (c.excl_ok && ch.OneIn(4)) {
        ev |= EPOLLEXCLUSIVE;
      } else if (s.objects[c.obj] != ObjKind::kEpoll && ch.OneIn(8)) {
        ev |= EPOLLONESHOT;
      }
      uint64_t data = (ch.Next() << 32) | static_cast<uint64_t>(s.regs.size());
      s.regs.push_back({ep, c.obj, c.side, ev, data, true});
    }
    cands.push_back({ep, 0, EPOLLIN, false});  // later ones may nest it
  }

  // The steps.
  std::vector<StreamModel> sm(s.streams.size());
  std::vector<int64_t> sem_avail(s.sems.size(), 0);
  std::vector<int64_t> seq(s.channels.size(), 1);
  std::vector<int> noise_eps, noise_regs;
  for (int o = 0; o < static_cast<int>(s.objects.size()); ++o) {
    bool noise = s.objects[o] == ObjKind::kEpoll;
    for (const Channel& k : s.channels) noise &= o != k.ep && o != k.outer;
    if (noise) noise_eps.push_back(o);
  }
  for (int r = 0; r < static_cast<int>(s.regs.size()); ++r) {
    // Not the sentinel's: an instance holding it as a level-triggered item
    // is always ready, which makes its waits deterministic.
    if (s.regs[r].noise && !(s.regs[r].events & EPOLLEXCLUSIVE) &&
        s.regs[r].obj != s.sentinel) {
      noise_regs.push_back(r);
    }
  }
  int64_t big_bytes = 0;
  int groups = 0;
  const int target = 10 + static_cast<int>(ch.Below(max_steps - 9));
  auto step = [&](StepKind k, int t, int a) {
    Step st{};
    st.kind = k;
    st.thread = t;
    st.group = -1;
    st.a = a;
    s.steps.push_back(st);
    return &s.steps.back();
  };
  // Bounded: with libFuzzer's input used up every choice is 0, and some
  // branches add nothing.
  for (int guard = 0;
       static_cast<int>(s.steps.size()) < target && guard < 20 * target;
       ++guard) {
    uint32_t r = ch.Below(100);
    if (r < 22 && !s.streams.empty()) {  // a write, or a big rendezvous
      int i =
          static_cast<int>(ch.Below(static_cast<uint32_t>(s.streams.size())));
      const Stream& st = s.streams[i];
      StreamModel& m = sm[i];
      bool pipe = s.objects[st.obj] == ObjKind::kPipe;
      int64_t n = 1 + ch.Below(ch.OneIn(4) && pipe ? 16384 : 4096);
      bool fits;
      if (pipe) {
        int slots = Slots(n);
        for (auto& w : m.inflight) slots += w.second;
        fits = slots <= kPipeSlotBudget;
      } else {
        fits = m.inflight.size() < kSocketWritesInFlight;
      }
      if (fits && !ch.OneIn(12)) {
        Step* w = step(StepKind::kStreamWrite, st.writer, i);
        w->n = n;
        w->off = m.written;
        w->variant = ch.OneIn(3) ? 1 : 0;
        m.inflight.push_back({m.written + n, Slots(n)});
        m.written += n;
      } else if (big_bytes < kMaxBigBytes) {
        n = pipe ? 65536 + ch.Below(140000) : 100000 + ch.Below(200000);
        big_bytes += n;
        Step* w = step(StepKind::kStreamWrite, st.writer, i);
        w->n = n;
        w->off = m.written;
        w->variant = ch.OneIn(3) ? 1 : 0;
        w->group = groups;
        Step* rd = step(StepKind::kStreamRead, st.reader, i);
        rd->off = m.read;
        m.written += n;
        rd->n = m.written - m.read;
        rd->variant = static_cast<int>(ch.Below(3));
        rd->group = groups++;
        m.read = m.written;
        m.Drop();
      }
    } else if (r < 40 && !s.streams.empty()) {  // a read
      int i =
          static_cast<int>(ch.Below(static_cast<uint32_t>(s.streams.size())));
      StreamModel& m = sm[i];
      int64_t avail = m.written - m.read;
      if (avail == 0) continue;
      Step* rd = step(StepKind::kStreamRead, s.streams[i].reader, i);
      rd->n = 1 + static_cast<int64_t>(ch.Below(static_cast<uint32_t>(
                      ch.OneIn(2) ? avail : std::min<int64_t>(avail, 512))));
      rd->off = m.read;
      rd->variant = static_cast<int>(ch.Below(3));
      m.read += rd->n;
      m.Drop();
    } else if (r < 50 && !s.sems.empty()) {
      int i = static_cast<int>(ch.Below(static_cast<uint32_t>(s.sems.size())));
      if (ch.OneIn(2) || sem_avail[i] == 0) {
        if (sem_avail[i] > 600) continue;
        Step* w = step(StepKind::kSemWrite, thread(), i);
        w->n = 1 + ch.Below(3);
        sem_avail[i] += w->n;
      } else {
        Step* rd = step(StepKind::kSemRead, s.sems[i].reader, i);
        rd->n = 1 + static_cast<int64_t>(ch.Below(static_cast<uint32_t>(
                        std::min<int64_t>(sem_avail[i], 4))));
        rd->variant = ch.OneIn(3) ? 1 : 0;
        sem_avail[i] -= rd->n;
      }
    } else if (r < 54 && !s.bigs.empty()) {
      const Big& b = s.bigs[0];
      step(StepKind::kBigWrite, b.writer, 0)->group = groups;
      step(StepKind::kBigRead, b.reader, 0)->group = groups++;
    } else if (r < 72) {
      int i =
          static_cast<int>(ch.Below(static_cast<uint32_t>(s.channels.size())));
      const Channel& k = s.channels[i];
      Step* p = step(StepKind::kProduce, k.producer, i);
      p->n = static_cast<int64_t>(k.consumers.size());
      p->off = seq[i];
      p->group = groups;
      seq[i] += p->n;
      for (int c : k.consumers) {
        int v;
        if (k.outer >= 0 && ch.OneIn(2)) {
          v = kOuterThenInner;
        } else if (k.consumers.size() == 1 && k.outer < 0 && ch.OneIn(3)) {
          v = kShortLoop;
        } else {
          static const int kPlain[] = {kWaitForever, kPwaitForever, kPwait2Null,
                                       kPwait2Long, kPollThenHarvest};
          v = kPlain[ch.Below(5)];
        }
        Step* cs = step(StepKind::kConsume, c, i);
        cs->variant = v;
        cs->group = groups;
      }
      ++groups;
    } else if (r < 86) {
      int a;
      if (!noise_eps.empty() && !ch.OneIn(20)) {
        a = noise_eps[ch.Below(static_cast<uint32_t>(noise_eps.size()))];
      } else {
        a = s.channels[0].ack;  // not an instance: EINVAL
      }
      Step* w = step(StepKind::kNoiseWait, thread(), a);
      static const int64_t kMax[] = {1, 2, 4, 16};
      w->n = ch.OneIn(25) ? 0 : kMax[ch.Below(4)];
      w->variant = static_cast<int>(ch.Below(3));
      if (ch.OneIn(25)) w->variant = 3;  // pwait2 with a bad timespec
      static const int kTimeouts[] = {0, 1, 2, 5};
      w->timeout_ms = kTimeouts[ch.Below(4)];
    } else if (r < 96) {
      Step* p = step(StepKind::kNoisePoll, thread(), 0);
      p->npoll = 1 + static_cast<int>(ch.Below(4));
      for (int j = 0; j < p->npoll; ++j) {
        int o =
            static_cast<int>(ch.Below(static_cast<uint32_t>(s.objects.size())));
        ObjKind k = s.objects[o];
        bool two = k == ObjKind::kPipe || k == ObjKind::kSocketpair ||
                   k == ObjKind::kTokenPipe || k == ObjKind::kTokenSocket;
        p->poll_obj[j] = o;
        p->poll_side[j] = two ? static_cast<int>(ch.Below(2)) : 0;
        static const uint16_t kBits[] = {POLLIN,    POLLOUT,    POLLPRI,
                                         POLLRDHUP, POLLRDNORM, POLLWRNORM};
        uint16_t ev = 0;
        for (int b = 1 + static_cast<int>(ch.Below(3)); b > 0; --b) {
          ev |= kBits[ch.Below(6)];
        }
        p->poll_events[j] = ev;
      }
      static const int kTimeouts[] = {0, 1, 3};
      p->timeout_ms = kTimeouts[ch.Below(3)];
    } else if (!noise_regs.empty()) {
      Step* m =
          step(StepKind::kNoiseMod, thread(),
               noise_regs[ch.Below(static_cast<uint32_t>(noise_regs.size()))]);
      m->variant = static_cast<int>(ch.Below(2));  // 1: ET on, 0: off
    }
  }
  return s;
}

// ---------------------------------------------------------------- printing

namespace {

const char* KindName(ObjKind k) {
  switch (k) {
    case ObjKind::kPipe:
      return "pipe";
    case ObjKind::kSocketpair:
      return "socketpair";
    case ObjKind::kSemEventfd:
      return "eventfd(SEMAPHORE)";
    case ObjKind::kBigEventfd:
      return "eventfd(big)";
    case ObjKind::kTokenEventfd:
      return "token eventfd";
    case ObjKind::kTokenPipe:
      return "token pipe";
    case ObjKind::kTokenSocket:
      return "token socketpair";
    case ObjKind::kAckEventfd:
      return "ack/go eventfd";
    case ObjKind::kSentinel:
      return "sentinel eventfd";
    case ObjKind::kEpoll:
      return "epoll";
  }
  return "?";
}

std::string Mode(uint32_t ev) {
  std::string m;
  if (ev & EPOLLIN) m += "IN|";
  if (ev & EPOLLOUT) m += "OUT|";
  if (ev & EPOLLRDHUP) m += "RDHUP|";
  if (ev & EPOLLET) m += "ET|";
  if (ev & EPOLLONESHOT) m += "ONESHOT|";
  if (ev & EPOLLEXCLUSIVE) m += "EXCLUSIVE|";
  if (m.empty()) return "0";
  m.pop_back();
  return m;
}

const char* kVariantNames[] = {"epoll_wait(-1)",
                               "epoll_pwait(-1, mask)",
                               "epoll_pwait2(NULL)",
                               "epoll_pwait2(watchdog period)",
                               "epoll_wait(1-4 ms) loop",
                               "poll(ep, -1) + epoll_wait(0)",
                               "epoll_wait(outer, -1) + epoll_wait(ep, 0)"};

}  // namespace

std::string Describe(const Scenario& s, const Step& st) {
  char b[256];
  switch (st.kind) {
    case StepKind::kStreamWrite:
      snprintf(b, sizeof b,
               "write(stream %d, %" PRId64 " bytes at %" PRId64 ")%s", st.a,
               st.n, st.off, st.variant ? " after poll(OUT, -1)" : "");
      break;
    case StepKind::kStreamRead:
      snprintf(b, sizeof b,
               "read(stream %d) until %" PRId64 " bytes (at %" PRId64 ")%s",
               st.a, st.n, st.off,
               st.variant == 1   ? ", poll(IN, -1) before each read"
               : st.variant == 2 ? ", poll(IN, watchdog period) before each"
                                 : "");
      break;
    case StepKind::kSemWrite:
      snprintf(b, sizeof b, "write(sem %d, %" PRId64 ")", st.a, st.n);
      break;
    case StepKind::kSemRead:
      snprintf(b, sizeof b, "%" PRId64 " x read(sem %d)%s", st.n, st.a,
               st.variant ? " after poll(IN, -1)" : "");
      break;
    case StepKind::kBigWrite:
      snprintf(b, sizeof b, "write(big eventfd, kBig) (blocks until the read)");
      break;
    case StepKind::kBigRead:
      snprintf(b, sizeof b, "read(big eventfd)");
      break;
    case StepKind::kProduce:
      snprintf(b, sizeof b,
               "produce(channel %d): go to each consumer, tokens %" PRId64
               "..%" PRId64 ", each acknowledged",
               st.a, st.off, st.off + st.n - 1);
      break;
    case StepKind::kConsume:
      snprintf(b, sizeof b, "consume(channel %d): wait for go, one token by %s",
               st.a, kVariantNames[st.variant]);
      break;
    case StepKind::kNoiseWait:
      snprintf(b, sizeof b, "%s(obj %d, maxevents %" PRId64 ", %d ms)",
               st.variant == 0   ? "epoll_wait"
               : st.variant == 1 ? "epoll_pwait"
               : st.variant == 2 ? "epoll_pwait2"
                                 : "epoll_pwait2(bad timespec)",
               st.a, st.n, st.timeout_ms);
      break;
    case StepKind::kNoisePoll: {
      std::string p = "poll(";
      for (int j = 0; j < st.npoll; ++j) {
        char e[64];
        snprintf(e, sizeof e, "%sobj %d.%d 0x%x", j ? ", " : "", st.poll_obj[j],
                 st.poll_side[j], st.poll_events[j]);
        p += e;
      }
      snprintf(b, sizeof b, "%s; %d ms)", p.c_str(), st.timeout_ms);
      break;
    }
    case StepKind::kNoiseMod:
      snprintf(b, sizeof b, "epoll_ctl(MOD reg %d, ET %s)", st.a,
               st.variant ? "on" : "off");
      break;
  }
  (void)s;
  return b;
}

std::string Describe(const Scenario& s) {
  std::string out;
  char b[256];
  snprintf(b, sizeof b, "scenario: %d threads, %zu objects, %zu steps\n",
           s.threads, s.objects.size(), s.steps.size());
  out += b;
  for (size_t o = 0; o < s.objects.size(); ++o) {
    snprintf(b, sizeof b, "  obj %zu: %s\n", o, KindName(s.objects[o]));
    out += b;
  }
  for (size_t r = 0; r < s.regs.size(); ++r) {
    const Reg& g = s.regs[r];
    snprintf(b, sizeof b,
             "  reg %zu: epoll obj %d <- obj %d.%d %s data 0x%" PRIx64 "%s\n",
             r, g.ep, g.obj, g.side, Mode(g.events).c_str(), g.data,
             g.noise ? " (noise)" : "");
    out += b;
  }
  for (size_t i = 0; i < s.streams.size(); ++i) {
    const Stream& st = s.streams[i];
    snprintf(b, sizeof b,
             "  stream %zu: obj %d.%d -> .%d, writer t%d, reader t%d\n", i,
             st.obj, st.wside, st.rside, st.writer, st.reader);
    out += b;
  }
  for (size_t i = 0; i < s.channels.size(); ++i) {
    const Channel& k = s.channels[i];
    std::string cons;
    for (int c : k.consumers) cons += " t" + std::to_string(c);
    snprintf(b, sizeof b,
             "  channel %zu: source obj %d in epoll obj %d (%s)%s, ack obj %d, "
             "producer t%d, consumers%s\n",
             i, k.src, k.ep, Mode(EPOLLIN | k.mode).c_str(),
             k.outer >= 0
                 ? (" inside epoll obj " + std::to_string(k.outer)).c_str()
                 : "",
             k.ack, k.producer, cons.c_str());
    out += b;
  }
  for (size_t i = 0; i < s.sems.size(); ++i) {
    snprintf(b, sizeof b, "  sem %zu: obj %d, reader t%d\n", i, s.sems[i].obj,
             s.sems[i].reader);
    out += b;
  }
  for (const Big& g : s.bigs) {
    snprintf(b, sizeof b, "  big eventfd: obj %d, writer t%d, reader t%d\n",
             g.obj, g.writer, g.reader);
    out += b;
  }
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    snprintf(b, sizeof b, "  #%zu t%d%s: ", i, st.thread,
             st.group >= 0 ? (" g" + std::to_string(st.group)).c_str() : "");
    out += b + Describe(s, st) + "\n";
  }
  return out;
}

}  // namespace difffuzz::mt
