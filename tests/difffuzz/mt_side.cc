// The multi-thread mode: a Side's setup, threads, watchdog and final state
// (mt_side.h).
#include "difffuzz/mt_side.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace difffuzz::mt::internal {

void Side::Violation(int t, size_t i, const std::string& what, bool fatal) {
  std::string line = std::string(b_.name) + ": t" + std::to_string(t) +
                     " step #" + std::to_string(i) + " (" +
                     Describe(s_, s_.steps[i]) + "): " + what;
  if (fatal) {
    std::fprintf(stderr,
                 "%s\nuepoll-difffuzz --threads: FAILED (fatal check) on %s\n"
                 "  %s\n%s",
                 g_context.c_str(), b_.name, line.c_str(),
                 Describe(s_).c_str());
    std::fflush(stderr);
    std::abort();
  }
  std::lock_guard<std::mutex> l(mu_);
  res_.violations.push_back(line);
}

void Side::Hang(long ms) {
  std::fprintf(stderr,
               "%s\nuepoll-difffuzz --threads: HANG on %s: no step finished "
               "for %ld ms (a lost wakeup, or a blocked call that should have "
               "returned)\n",
               g_context.c_str(), b_.name, ms);
  for (int t = 0; t < s_.threads; ++t) {
    long c = cur_[static_cast<size_t>(t)].load();
    if (c < 0) {
      std::fprintf(stderr, "  t%d: %s\n", t,
                   c == -1 ? "finished its steps" : "not started");
    } else {
      std::fprintf(stderr, "  t%d: in step #%ld: %s\n", t, c,
                   Describe(s_, s_.steps[static_cast<size_t>(c)]).c_str());
    }
  }
  std::fprintf(stderr, "%s", Describe(s_).c_str());
  std::fflush(stderr);
  std::abort();
}

bool Side::Setup() {
  fds_.assign(s_.objects.size(), {-1, -1});
  auto fail = [&](const std::string& what) {
    res_.violations.push_back(std::string(b_.name) + ": setup: " + what + " (" +
                              Errno(errno) + ")");
    return false;
  };
  for (size_t o = 0; o < s_.objects.size(); ++o) {
    int* f = fds_[o].data();
    int r = 0;
    switch (s_.objects[o]) {
      case ObjKind::kPipe:
      case ObjKind::kTokenPipe:
        r = b_.pipe2(f, s_.objects[o] == ObjKind::kPipe ? 0 : O_NONBLOCK);
        // The stream model counts on the usual 16 slots: a user over
        // pipe-user-pages-soft gets smaller kernel pipes.
        if (r == 0 && b_.is_kernel && ::fcntl(f[0], F_GETPIPE_SZ) < 65536 &&
            ::fcntl(f[0], F_SETPIPE_SZ, 65536) < 65536) {
          return fail("kernel pipes are smaller than 64 KiB");
        }
        break;
      case ObjKind::kSocketpair:
      case ObjKind::kTokenSocket: {
        int type = SOCK_STREAM;
        if (s_.objects[o] == ObjKind::kTokenSocket) type |= SOCK_NONBLOCK;
        r = b_.socketpair(AF_UNIX, type, 0, f);
        int sndbuf = 0;
        socklen_t len = sizeof sndbuf;
        // 4 writes of 4096 bytes in flight must leave the writer writable.
        if (r == 0 && b_.is_kernel &&
            (::getsockopt(f[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) != 0 ||
             sndbuf < 160 * 1024)) {
          return fail("kernel socket send buffer below 160 KiB");
        }
        break;
      }
      case ObjKind::kSemEventfd:
        r = f[0] = b_.eventfd(0, EFD_SEMAPHORE);
        break;
      case ObjKind::kBigEventfd:
        r = f[0] = b_.eventfd(0, 0);
        if (r >= 0 && b_.write(f[0], &kBig, 8) != 8) return fail("big write");
        break;
      case ObjKind::kTokenEventfd:
        r = f[0] = b_.eventfd(0, EFD_NONBLOCK);
        break;
      case ObjKind::kAckEventfd:
        r = f[0] = b_.eventfd(0, 0);
        break;
      case ObjKind::kSentinel:
        r = f[0] = b_.eventfd(1, EFD_NONBLOCK);
        break;
      case ObjKind::kEpoll:
        r = f[0] = b_.epoll_create1(0);
        break;
    }
    if (r < 0) return fail("creating obj " + std::to_string(o));
  }
  for (size_t i = 0; i < s_.regs.size(); ++i) {
    const Reg& g = s_.regs[i];
    epoll_event ev{};
    ev.events = g.events;
    ev.data.u64 = g.data;
    if (b_.epoll_ctl(Fd(g.ep, 0), EPOLL_CTL_ADD, Fd(g.obj, g.side), &ev) != 0) {
      return fail("ADD of reg " + std::to_string(i));
    }
  }
  return true;
}

void Side::RunThreads() {
  const int n = s_.threads;
  std::atomic<int> ready{0}, done{0};
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::thread> th;
  for (int t = 0; t < n; ++t) {
    cur_[static_cast<size_t>(t)].store(-2);
    th.emplace_back([&, t] {
      // Start together, so that the steps really overlap.
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      for (size_t i : scripts_[static_cast<size_t>(t)]) {
        cur_[static_cast<size_t>(t)].store(static_cast<long>(i));
        Exec(t, i, s_.steps[i]);
        progress_.fetch_add(1);
      }
      cur_[static_cast<size_t>(t)].store(-1);
      std::lock_guard<std::mutex> l(m);
      done.fetch_add(1);
      cv.notify_all();
    });
  }
  // The watchdog: a period with no step finished is a hang.
  const long hang = HangMillis();
  long seen = progress_.load();
  auto last = Clock::now();
  {
    std::unique_lock<std::mutex> l(m);
    while (!cv.wait_for(l, std::chrono::milliseconds(50),
                        [&] { return done.load() == n; })) {
      long p = progress_.load();
      if (p != seen) {
        seen = p;
        last = Clock::now();
      } else if (Clock::now() - last > std::chrono::milliseconds(hang)) {
        l.unlock();
        Hang(hang);
      }
    }
  }
  for (auto& x : th) x.join();
  g_steps.fetch_add(static_cast<long>(s_.steps.size()));
}

void Side::Final() {
  // 0. What the failing noise calls (and everything else) must have left
  // alone: each descriptor's flags and kind, and which registrations exist
  // (the single-thread mode's state check, state_check.cc: an ADD of
  // events 0 fails EEXIST where one exists; where none does, it succeeds
  // and a DEL takes it out; targets with ERR or HUP, which would queue,
  // and instance targets, whose ADD nests, are left out).
  std::vector<std::pair<int, int>> targets;  // (object, side)
  for (size_t o = 0; o < s_.objects.size(); ++o) {
    for (int side = 0; side < 2; ++side) {
      const int fd = Fd(static_cast<int>(o), side);
      if (fd < 0) continue;
      const std::string l =
          "obj " + std::to_string(o) + "." + std::to_string(side);
      auto res = [](long r) {
        return r >= 0 ? static_cast<uint64_t>(r)
                      : 1000 + static_cast<uint64_t>(errno);
      };
      Note("F_GETFD " + l, res(b_.fcntl(fd, F_GETFD, 0)));
      Note("F_GETFL " + l, res(b_.fcntl(fd, F_GETFL, 0)));
      Note("F_GETPIPE_SZ " + l, res(b_.fcntl(fd, F_GETPIPE_SZ, 0)));
      pollfd p = {fd, 0, 0};
      b_.poll(&p, 1, 0);
      Note("poll(0) " + l, static_cast<uint16_t>(p.revents));
      if (s_.objects[o] != ObjKind::kEpoll &&
          !(p.revents & (POLLERR | POLLHUP))) {
        targets.push_back({static_cast<int>(o), side});
      }
    }
  }
  for (size_t e = 0; e < s_.objects.size(); ++e) {
    if (s_.objects[e] != ObjKind::kEpoll) continue;
    const int ep = Fd(static_cast<int>(e), 0);
    for (auto [o, side] : targets) {
      epoll_event ev{};
      int r = b_.epoll_ctl(ep, EPOLL_CTL_ADD, Fd(o, side), &ev);
      uint64_t v = r == 0 ? 0 : 1000 + static_cast<uint64_t>(errno);
      if (r == 0) b_.epoll_ctl(ep, EPOLL_CTL_DEL, Fd(o, side), nullptr);
      Note("registration probe ADD obj " + std::to_string(e) + " <- obj " +
               std::to_string(o) + "." + std::to_string(side),
           v);
    }
  }
  // 1. Every source's readiness.
  for (size_t o = 0; o < s_.objects.size(); ++o) {
    if (s_.objects[o] == ObjKind::kEpoll) continue;
    for (int side = 0; side < 2; ++side) {
      if (Fd(static_cast<int>(o), side) < 0) continue;
      pollfd p = {Fd(static_cast<int>(o), side), static_cast<short>(kProbeMask),
                  0};
      b_.poll(&p, 1, 0);
      Note("poll obj " + std::to_string(o) + "." + std::to_string(side),
           static_cast<uint16_t>(p.revents));
    }
  }
  // 2. Re-arm every registration with its first events, innermost first
  // (registrations are in creation order, children before parents): each
  // item is then queued if and only if it is ready, whatever the threads'
  // harvests left behind.
  for (size_t g = 0; g < s_.regs.size(); ++g) {
    const Reg& r = s_.regs[g];
    if (r.events & EPOLLEXCLUSIVE) continue;  // MOD refuses: EINVAL
    epoll_event ev{};
    ev.events = r.events;
    ev.data.u64 = r.data;
    int x = b_.epoll_ctl(Fd(r.ep, 0), EPOLL_CTL_MOD, Fd(r.obj, r.side), &ev);
    Note("MOD reg " + std::to_string(g), x == 0 ? 0 : 1000 + errno);
  }
  // 3. Instances: readiness, then what a harvest reports (as a set).
  for (size_t o = 0; o < s_.objects.size(); ++o) {
    if (s_.objects[o] != ObjKind::kEpoll) continue;
    pollfd p = {Fd(static_cast<int>(o), 0), static_cast<short>(kProbeMask), 0};
    b_.poll(&p, 1, 0);
    Note("poll epoll obj " + std::to_string(o),
         static_cast<uint16_t>(p.revents));
  }
  for (size_t o = 0; o < s_.objects.size(); ++o) {
    if (s_.objects[o] != ObjKind::kEpoll) continue;
    epoll_event evs[64];
    int n = b_.epoll_wait(Fd(static_cast<int>(o), 0), evs, 64, 0);
    std::vector<std::pair<uint64_t, uint32_t>> got;
    for (int e = 0; e < n; ++e) {
      got.push_back({uint64_t{evs[e].data.u64}, uint32_t{evs[e].events}});
    }
    std::sort(got.begin(), got.end());
    std::string l = "harvest epoll obj " + std::to_string(o);
    Note(l + ": count", static_cast<uint64_t>(n));
    for (auto& [d, ev] : got) {
      Note(l + ": data", d);
      Note(l + ": events", ev);
    }
  }
  // 4. What is left in each stream, eventfd and channel.
  std::vector<int64_t> written(s_.streams.size()), read(s_.streams.size());
  for (const Step& st : s_.steps) {
    if (st.kind == StepKind::kStreamWrite) written[st.a] = st.off + st.n;
    if (st.kind == StepKind::kStreamRead) read[st.a] = st.off + st.n;
  }
  for (size_t i = 0; i < s_.streams.size(); ++i) {
    const Stream& sm = s_.streams[i];
    int fd = Fd(sm.obj, sm.rside);
    b_.fcntl(fd, F_SETFL, O_NONBLOCK);
    int64_t off = read[i], left = 0;
    uint8_t buf[4096];
    long r;
    bool bad = false;
    while ((r = b_.read(fd, buf, sizeof buf)) > 0) {
      for (long k = 0; k < r; ++k)
        bad |= buf[k] != Pattern(static_cast<int>(i), off + k);
      off += r;
      left += r;
    }
    if (bad || left != written[i] - read[i]) {
      res_.violations.push_back(
          std::string(b_.name) + ": stream " + std::to_string(i) + ": " +
          std::to_string(left) + " bytes left, want " +
          std::to_string(written[i] - read[i]) +
          (bad ? " (and they differ from the pattern)" : ""));
    }
    Note("stream " + std::to_string(i) + " bytes left",
         static_cast<uint64_t>(left));
  }
  auto drain = [&](int obj, const char* what) {
    int fd = Fd(obj, 0);
    b_.fcntl(fd, F_SETFL, O_NONBLOCK);
    uint64_t v = 0, sum = 0, reads = 0;
    while (b_.read(fd, &v, 8) == 8 && reads < 100000) {
      sum += v;
      ++reads;
    }
    Note(std::string(what) + " obj " + std::to_string(obj) + ": sum", sum);
    Note(std::string(what) + " obj " + std::to_string(obj) + ": reads", reads);
  };
  for (const Sem& m : s_.sems) drain(m.obj, "sem");
  for (const Big& g : s_.bigs) drain(g.obj, "big eventfd");
  for (const Channel& k : s_.channels) {
    uint64_t tok;
    long r = b_.read(Fd(k.src, 0), &tok, 8);
    Note(
        "channel source obj " + std::to_string(k.src) + " read",
        r < 0 ? 1000 + static_cast<uint64_t>(errno) : static_cast<uint64_t>(r));
    drain(k.ack, "ack");
    for (int go : k.go) drain(go, "go");
  }
}

void Side::CloseAll() {
  for (auto& f : fds_) {
    for (int& fd : f) {
      if (fd >= 0) b_.close(fd);
      fd = -1;
    }
  }
}

}  // namespace difffuzz::mt::internal
