// The multi-thread mode: what each step does on one side (mt_side.h).
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "difffuzz/mt_side.h"

namespace difffuzz::mt::internal {

void Side::Exec(int t, size_t i, const Step& st) {
  switch (st.kind) {
    case StepKind::kStreamWrite:
      StreamWrite(t, i, st);
      break;
    case StepKind::kStreamRead:
      StreamRead(t, i, st);
      break;
    case StepKind::kSemWrite: {
      uint64_t v = static_cast<uint64_t>(st.n);
      int fd = Fd(s_.sems[static_cast<size_t>(st.a)].obj, 0);
      long r = b_.write(fd, &v, 8);
      if (r != 8) Violation(t, i, "write: " + Errno(errno), true);
      Rec(t, i, static_cast<uint64_t>(r));
      break;
    }
    case StepKind::kSemRead: {
      int fd = Fd(s_.sems[static_cast<size_t>(st.a)].obj, 0);
      for (int64_t k = 0; k < st.n; ++k) {
        if (st.variant) {
          pollfd p = {fd, POLLIN, 0};
          int r = b_.poll(&p, 1, -1);
          if (r != 1 || !(p.revents & POLLIN)) {
            Violation(t, i, "poll(IN, -1) gave " + std::to_string(r), true);
          }
        }
        uint64_t v = 0;
        long r = b_.read(fd, &v, 8);
        if (r != 8 || v != 1) {
          Violation(t, i,
                    "semaphore read gave " + std::to_string(r) + " value " +
                        std::to_string(v) + " (" + Errno(errno) + ")",
                    true);
        }
      }
      Rec(t, i, static_cast<uint64_t>(st.n));
      break;
    }
    case StepKind::kBigWrite: {
      long r = b_.write(Fd(s_.bigs[0].obj, 0), &kBig, 8);
      if (r != 8) Violation(t, i, "write: " + Errno(errno), true);
      Rec(t, i, static_cast<uint64_t>(r));
      break;
    }
    case StepKind::kBigRead: {
      uint64_t v = 0;
      long r = b_.read(Fd(s_.bigs[0].obj, 0), &v, 8);
      if (r != 8 || v != kBig) {
        Violation(t, i,
                  "read gave " + std::to_string(r) + " value " +
                      std::to_string(v) + ", want kBig",
                  true);
      }
      Rec(t, i, v);
      break;
    }
    case StepKind::kProduce:
      Produce(t, i, st);
      break;
    case StepKind::kConsume:
      Consume(t, i, st);
      break;
    case StepKind::kNoiseWait:
      NoiseWait(t, i, st);
      break;
    case StepKind::kNoisePoll:
      NoisePoll(t, i, st);
      break;
    case StepKind::kNoiseMod: {
      const Reg& g = s_.regs[static_cast<size_t>(st.a)];
      epoll_event ev{};
      ev.events = st.variant ? (g.events | EPOLLET) : (g.events & ~EPOLLET);
      ev.data.u64 = g.data;
      int r = b_.epoll_ctl(Fd(g.ep, 0), EPOLL_CTL_MOD, Fd(g.obj, g.side), &ev);
      Rec(t, i, r == 0 ? 0 : 1000 + static_cast<uint64_t>(errno));
      break;
    }
  }
}

void Side::StreamWrite(int t, size_t i, const Step& st) {
  const Stream& sm = s_.streams[static_cast<size_t>(st.a)];
  const int fd = Fd(sm.obj, sm.wside);
  std::vector<uint8_t> buf(static_cast<size_t>(st.n));
  for (int64_t k = 0; k < st.n; ++k) buf[k] = Pattern(st.a, st.off + k);
  if (st.variant) {
    pollfd p = {fd, POLLOUT, 0};
    int r = b_.poll(&p, 1, -1);
    if (r != 1 || !(p.revents & POLLOUT)) {
      Violation(t, i, "poll(OUT, -1) gave " + std::to_string(r), true);
    }
  }
  long r = b_.write(fd, buf.data(), buf.size());
  if (r != st.n) {
    Violation(t, i,
              "write returned " + std::to_string(r) + " (" + Errno(errno) + ")",
              true);
  }
  if (st.group >= 0) g_blocked_bytes.fetch_add(r);
  Rec(t, i, static_cast<uint64_t>(r));
}

void Side::StreamRead(int t, size_t i, const Step& st) {
  const Stream& sm = s_.streams[static_cast<size_t>(st.a)];
  const int fd = Fd(sm.obj, sm.rside);
  std::vector<uint8_t> buf(static_cast<size_t>(st.n));
  int64_t got = 0;
  while (got < st.n) {
    if (st.variant) {
      pollfd p = {fd, POLLIN, 0};
      int r =
          b_.poll(&p, 1, st.variant == 1 ? -1 : static_cast<int>(HangMillis()));
      if (r != 1 || !(p.revents & POLLIN)) {
        Violation(t, i,
                  "poll(IN) gave " + std::to_string(r) + " with " +
                      std::to_string(got) + " bytes read",
                  true);
      }
    }
    long r = b_.read(fd, buf.data() + got, static_cast<size_t>(st.n - got));
    if (r <= 0) {
      Violation(t, i,
                "read returned " + std::to_string(r) + " (" + Errno(errno) +
                    ") with " + std::to_string(got) + " bytes read",
                true);
    }
    for (long k = 0; k < r; ++k) {
      uint8_t want = Pattern(st.a, st.off + got + k);
      if (buf[static_cast<size_t>(got + k)] != want) {
        char m[128];
        snprintf(m, sizeof m,
                 "stream byte %" PRId64 " is 0x%02x, the writer wrote 0x%02x",
                 st.off + got + k, buf[static_cast<size_t>(got + k)], want);
        Violation(t, i, m, true);
      }
    }
    got += r;
  }
  Rec(t, i, static_cast<uint64_t>(got));
}

void Side::Produce(int t, size_t i, const Step& st) {
  const Channel& k = s_.channels[static_cast<size_t>(st.a)];
  const int in = Fd(k.src, s_.objects[k.src] == ObjKind::kTokenEventfd ? 0 : 1);
  for (int go : k.go) {
    uint64_t one = 1;
    if (b_.write(Fd(go, 0), &one, 8) != 8) {
      Violation(t, i, "go write: " + Errno(errno), true);
    }
  }
  for (int64_t seq = st.off; seq < st.off + st.n; ++seq) {
    // Release: the consumer that reads the token loads it (acquire) and
    // must see this sequence number or a later one.
    expect_[st.a].store(seq, std::memory_order_release);
    uint64_t v = static_cast<uint64_t>(seq);
    if (b_.write(in, &v, 8) != 8) {
      Violation(t, i, "token write: " + Errno(errno), true);
    }
    // Release, paired with the short-timeout consumer's acquire load: it
    // then knows the token was in the source before its wait began.
    written_[st.a].store(seq, std::memory_order_release);
    uint64_t ack = 0;
    long r = b_.read(Fd(k.ack, 0), &ack, 8);
    if (r != 8 || ack != v) {
      Violation(t, i,
                "ack read gave " + std::to_string(r) + " value " +
                    std::to_string(ack) + ", want " + std::to_string(seq),
                true);
    }
  }
  Rec(t, i, static_cast<uint64_t>(st.n));
}

void Side::Consume(int t, size_t i, const Step& st) {
  const Channel& k = s_.channels[static_cast<size_t>(st.a)];
  const int ep = Fd(k.ep, 0);
  const int src = Fd(k.src, 0);
  const bool exact = k.mode & (EPOLLET | EPOLLONESHOT);
  const bool single = k.consumers.size() == 1;
  size_t me = 0;
  while (k.consumers[me] != t) ++me;
  uint64_t go = 0;
  long gr = b_.read(Fd(k.go[me], 0), &go, 8);
  if (gr != 8 || go != 1) {
    Violation(
        t, i,
        "go read gave " + std::to_string(gr) + " value " + std::to_string(go),
        true);
  }
  int rounds = 0;
  for (;; ++rounds) {
    epoll_event evs[4];
    int n = 0;
    switch (st.variant) {
      case kWaitForever:
        n = b_.epoll_wait(ep, evs, 4, -1);
        break;
      case kPwaitForever: {
        sigset_t none;
        sigemptyset(&none);
        n = b_.epoll_pwait(ep, evs, 4, -1, &none);
        break;
      }
      case kPwait2Null:
        n = b_.epoll_pwait2(ep, evs, 4, nullptr, nullptr);
        break;
      case kPwait2Long: {
        long ms = HangMillis();
        timespec ts = {ms / 1000, (ms % 1000) * 1000000};
        n = b_.epoll_pwait2(ep, evs, 4, &ts, nullptr);
        if (n == 0) Violation(t, i, "epoll_pwait2 timed out", true);
        break;
      }
      case kShortLoop: {
        // Single consumer: a token written before the wait began and not
        // taken yet is ready for the whole wait, so the wait must not end
        // empty (the kernel's ep_poll harvests before it sleeps).
        bool pending = written_[st.a].load(std::memory_order_acquire) >
                       last_[static_cast<size_t>(st.a)];
        n = b_.epoll_wait(ep, evs, 4, 1 + rounds % 4);
        if (n == 0) {
          if (pending) {
            Violation(t, i,
                      "epoll_wait timed out with a token in the source "
                      "since before it began",
                      true);
          }
          g_short_timeouts.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        break;
      }
      case kPollThenHarvest: {
        pollfd p = {ep, POLLIN, 0};
        int r = b_.poll(&p, 1, -1);
        if (r != 1 || p.revents != POLLIN) {
          Violation(t, i, "poll(instance, -1) gave " + std::to_string(r), true);
        }
        n = b_.epoll_wait(ep, evs, 4, 0);
        // Only another consumer can have taken what poll saw.
        if (n == 0 && single) {
          Violation(t, i,
                    "poll reported the instance readable, a harvest "
                    "right after found nothing",
                    false);
        }
        break;
      }
      case kOuterThenInner: {
        epoll_event o[2];
        int r = b_.epoll_wait(Fd(k.outer, 0), o, 2, -1);
        if (r != 1 || o[0].events != EPOLLIN || o[0].data.u64 != (k.tag ^ 1)) {
          Violation(t, i, "outer wait gave " + std::to_string(r), true);
        }
        n = b_.epoll_wait(ep, evs, 4, 0);
        if (n == 0 && single) {
          Violation(t, i,
                    "the outer instance reported the inner one ready, "
                    "the inner harvest found nothing",
                    false);
        }
        break;
      }
    }
    if (n < 0) Violation(t, i, "wait failed: " + Errno(errno), true);
    for (int e = 0; e < n; ++e) {
      if (evs[e].events != EPOLLIN || evs[e].data.u64 != k.tag) {
        char m[128];
        snprintf(m, sizeof m, "event 0x%x data 0x%" PRIx64, evs[e].events,
                 uint64_t{evs[e].data.u64});
        Violation(t, i, m, true);
      }
      g_deliveries.fetch_add(1, std::memory_order_relaxed);
      // Before the token is read: an ET or ONESHOT item was delivered and
      // must not be ready again; an LT one must (one consumer: nobody else
      // can take the token meanwhile).
      if (exact || single) {
        epoll_event again;
        int n2 = b_.epoll_wait(ep, &again, 1, 0);
        if (n2 != (exact ? 0 : 1)) {
          Violation(t, i,
                    "a second harvest before the token was read gave " +
                        std::to_string(n2),
                    false);
        }
      }
      uint64_t tok = 0;
      long r = b_.read(src, &tok, 8);
      if (r == 8) {
        int64_t want = expect_[st.a].load(std::memory_order_acquire);
        if (static_cast<int64_t>(tok) != want) {
          Violation(
              t, i,
              "token " + std::to_string(tok) + ", want " + std::to_string(want),
              true);
        }
        if (k.mode & EPOLLONESHOT) {
          epoll_event re{};
          re.events = EPOLLIN | k.mode;
          re.data.u64 = k.tag;
          if (b_.epoll_ctl(ep, EPOLL_CTL_MOD, src, &re) != 0) {
            Violation(t, i, "re-arm: " + Errno(errno), true);
          }
        }
        if (single)
          last_[static_cast<size_t>(st.a)] = static_cast<int64_t>(tok);
        if (b_.write(Fd(k.ack, 0), &tok, 8) != 8) {
          Violation(t, i, "ack write: " + Errno(errno), true);
        }
        Rec(t, i, 1);
        return;
      }
      if (r == -1 && errno == EAGAIN) {
        if (exact) {
          Violation(t, i,
                    "a delivery of an ET/ONESHOT item found no token "
                    "(delivered twice?)",
                    true);
        }
        g_lt_empty.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      Violation(t, i, "token read: " + Errno(errno), true);
    }
  }
}

// An instance holding the sentinel as a level-triggered item: always ready.
bool Side::AlwaysReady(int ep) const {
  for (const Reg& g : s_.regs) {
    if (g.ep == ep && g.obj == s_.sentinel &&
        !(g.events & (EPOLLONESHOT | EPOLLET)) && (g.events & EPOLLIN)) {
      return true;
    }
  }
  return false;
}

void Side::NoiseWait(int t, size_t i, const Step& st) {
  const int ep = Fd(st.a, 0);
  epoll_event evs[16];
  const int max = static_cast<int>(st.n);
  int r;
  switch (st.variant) {
    case 0:
      r = b_.epoll_wait(ep, evs, max, st.timeout_ms);
      break;
    case 1: {
      sigset_t none;
      sigemptyset(&none);
      r = b_.epoll_pwait(ep, evs, max, st.timeout_ms, &none);
      break;
    }
    default: {
      timespec ts = {0, st.timeout_ms * 1000000L};
      if (st.variant == 3) ts.tv_nsec = -1;
      r = b_.epoll_pwait2(ep, evs, max, &ts, nullptr);
      break;
    }
  }
  if (r < 0) {
    Rec(t, i, 1000 + static_cast<uint64_t>(errno));
    return;
  }
  if (r > max) Violation(t, i, "more events than maxevents", false);
  for (int e = 0; e < std::min(r, max); ++e) {
    size_t g = evs[e].data.u64 & 0xffff;
    bool ok = g < s_.regs.size() && s_.regs[g].ep == st.a &&
              s_.regs[g].data == evs[e].data.u64 &&
              !(evs[e].events & ~(s_.regs[g].events | EPOLLERR | EPOLLHUP |
                                  EPOLLRDNORM | EPOLLWRNORM));
    if (!ok) {
      char m[128];
      snprintf(m, sizeof m, "event 0x%x data 0x%" PRIx64 " matches no item",
               evs[e].events, uint64_t{evs[e].data.u64});
      Violation(t, i, m, false);
    }
  }
  (r ? g_noise_events : g_noise_empty).fetch_add(1, std::memory_order_relaxed);
  Rec(t, i, AlwaysReady(st.a) ? (r > 0 ? 1 : 0) : 2);
}

void Side::NoisePoll(int t, size_t i, const Step& st) {
  pollfd p[4];
  bool sure = false;  // the sentinel is polled for POLLIN
  for (int j = 0; j < st.npoll; ++j) {
    p[j].fd = Fd(st.poll_obj[j], st.poll_side[j]);
    p[j].events = static_cast<short>(st.poll_events[j]);
    p[j].revents = 0;
    sure |= st.poll_obj[j] == s_.sentinel && (st.poll_events[j] & POLLIN);
  }
  int r = b_.poll(p, static_cast<nfds_t>(st.npoll), st.timeout_ms);
  if (r < 0) {
    Rec(t, i, 1000 + static_cast<uint64_t>(errno));
    return;
  }
  for (int j = 0; j < st.npoll; ++j) {
    uint16_t allowed = st.poll_events[j] | POLLERR | POLLHUP;
    if (static_cast<uint16_t>(p[j].revents) & ~allowed) {
      Violation(t, i, "revents outside the requested mask", false);
    }
  }
  Rec(t, i, sure ? (r > 0 ? 1 : 0) : 2);
}

}  // namespace difffuzz::mt::internal
