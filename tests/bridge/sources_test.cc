// Kernel sources inside the backend's instance: every
// kind of kernel descriptor (eventfd, pipe, AF_UNIX socket pair, timerfd,
// loopback TCP) in a uepoll instance gives what it gives in a kernel epoll,
// trigger mode for trigger mode, with one set of expectations.
#include <sys/socket.h>
#include <sys/timerfd.h>

#include <vector>

#include "bridge/bridge.h"

namespace uepoll_test {
namespace {

using Evs = std::vector<Ev>;

class BridgeSources : public BridgeTest {};

TEST_P(BridgeSources, LtReportsOnEveryWaitWhileReady) {
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, 1), 0);
    EXPECT_TRUE(Wait(ep).empty()) << "idle at ADD";
    Fire(s);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}})) << i;
    Drain(s);
    EXPECT_TRUE(Wait(ep).empty()) << "drained";
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  }
}

TEST_P(BridgeSources, EtReportsOncePerEdgeEvenWithUnreadData) {
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLET, 1), 0);
    for (int edge = 0; edge < 3; ++edge) {
      Fire(s);  // nothing is read between edges
      EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}})) << edge;
      EXPECT_TRUE(Wait(ep).empty()) << "still readable, no new edge";
    }
    // MOD re-polls: a readable ET item is reported once more.
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLIN | EPOLLET, 2), 0);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
    EXPECT_TRUE(Wait(ep).empty());
  }
}

TEST_P(BridgeSources, EtReadyAtAddReportedOnce) {
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    Fire(s);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLET, 1), 0);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    EXPECT_TRUE(Wait(ep).empty());
  }
}

TEST_P(BridgeSources, OneshotReportsOnceThenRearmsWithMod) {
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLONESHOT, 1), 0);
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    EXPECT_TRUE(Wait(ep).empty()) << "disabled after one report";
    Fire(s);
    EXPECT_TRUE(Wait(ep).empty()) << "a new event does not re-enable it";
    // Still registered: ADD is EEXIST, MOD re-arms with the current state.
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, 9), EEXIST);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLIN | EPOLLONESHOT, 2), 0);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
    EXPECT_TRUE(Wait(ep).empty());
    // Re-armed while idle: waits for the next event.
    Drain(s);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLIN | EPOLLONESHOT, 3), 0);
    EXPECT_TRUE(Wait(ep).empty());
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 3}}));
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_DEL, s.fd, 0, 0), 0);
  }
}

TEST_P(BridgeSources, ExclusiveReportsAndFollowsItsEinvalRules) {
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    for (uint32_t bit : {uint32_t(EPOLLPRI), uint32_t(EPOLLRDHUP),
                         uint32_t(EPOLLONESHOT), uint32_t(EPOLLRDNORM)}) {
      EXPECT_ERRNO(
          Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLEXCLUSIVE | EPOLLIN | bit, 0),
          EINVAL);
    }
    // None of the refusals registered anything; MOD with EXCLUSIVE is
    // EINVAL before the item lookup.
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLEXCLUSIVE | EPOLLIN, 0),
                 EINVAL);
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, s.fd, 0, 0), ENOENT);
    ASSERT_EQ(
        Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLEXCLUSIVE | EPOLLIN | EPOLLET, 1), 0);
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    // An exclusive item cannot be modified at all, and stays as it was.
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLIN, 2), EINVAL);
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    EXPECT_EQ(Ctl(ep, EPOLL_CTL_DEL, s.fd, 0, 0), 0);
  }
}

// A kernel epoll instance as the target: EXCLUSIVE is refused for it.
TEST_P(BridgeSources, ExclusiveOnAKernelEpollTargetFailsEinval) {
  int ep = Epoll();
  int kep = KEpoll();
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, kep, EPOLLEXCLUSIVE | EPOLLIN, 0),
               EINVAL);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, kep, 0, 0), ENOENT);
}

TEST_P(BridgeSources, ModChangesInterestAndData) {
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLPRI, 1), 0);
    Fire(s);
    EXPECT_TRUE(Wait(ep).empty()) << "readable, but IN not asked for";
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLIN, 2), 0);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_DEL, s.fd, 0, 0), 0);
    EXPECT_TRUE(Wait(ep).empty()) << "deleted";
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, s.fd, EPOLLIN, 3), ENOENT);
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, s.fd, 0, 0), ENOENT);
  }
}

// Each source's full mask at rest, as the kernel computes it.
TEST_P(BridgeSources, IdleMasksAreTheKernels) {
  struct Want {
    Kind kind;
    uint32_t idle;
  };
  // eventfd and sockets are writable; a pipe's read end and a timerfd are
  // not.
  const Want wants[] = {
      {Kind::kEventfd, EPOLLOUT},    {Kind::kPipe, 0},
      {Kind::kSocketPair, EPOLLOUT}, {Kind::kTimerfd, 0},
      {Kind::kTcp, EPOLLOUT},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(KindName(w.kind));
    int ep = Epoll();
    Src s = MakeSrc(w.kind);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLOUT, 1), 0);
    if (w.idle) {
      EXPECT_EQ(Wait(ep), (Evs{{w.idle, 1}}));
    } else {
      EXPECT_TRUE(Wait(ep).empty());
    }
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{w.idle | EPOLLIN, 1}}));
  }
}

TEST_P(BridgeSources, PeerShutdownIsRdhupOnlyIfAsked) {
  for (Kind k : {Kind::kSocketPair, Kind::kTcp}) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLRDHUP, 1), 0);
    int plain = Epoll();
    ASSERT_EQ(Ctl(plain, EPOLL_CTL_ADD, s.fd, EPOLLIN, 2), 0);
    EXPECT_TRUE(Wait(ep).empty());
    ASSERT_EQ(::shutdown(s.peer, SHUT_WR), 0);
    ASSERT_TRUE(KernelReaches(s.fd, POLLRDHUP));
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN | EPOLLRDHUP, 1}}));
    EXPECT_EQ(Wait(plain), (Evs{{EPOLLIN, 2}}));
  }
}

TEST_P(BridgeSources, PeerShutdownIsAnEdgeForEtRdhup) {
  for (Kind k : {Kind::kSocketPair, Kind::kTcp}) {
    SCOPED_TRACE(KindName(k));
    int ep = Epoll();
    Src s = MakeSrc(k);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLRDHUP | EPOLLET, 1),
              0);
    Fire(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    EXPECT_TRUE(Wait(ep).empty());
    ASSERT_EQ(::shutdown(s.peer, SHUT_WR), 0);
    ASSERT_TRUE(KernelReaches(s.fd, POLLRDHUP));
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN | EPOLLRDHUP, 1}}));
    EXPECT_TRUE(Wait(ep).empty());
  }
}

// TCP urgent data (send MSG_OOB) is EPOLLPRI; only items that ask for it
// see it, and an ET item sees it once.
TEST_P(BridgeSources, TcpUrgentDataIsPri) {
  int ep = Epoll();
  Src s = MakeSrc(Kind::kTcp);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLPRI, 1), 0);
  int et = Epoll();
  ASSERT_EQ(Ctl(et, EPOLL_CTL_ADD, s.fd, EPOLLPRI | EPOLLET, 2), 0);
  int in_only = Epoll();
  ASSERT_EQ(Ctl(in_only, EPOLL_CTL_ADD, s.fd, EPOLLIN, 3), 0);
  EXPECT_TRUE(Wait(ep).empty());
  ASSERT_EQ(::send(s.peer, "ab", 2, MSG_OOB), 2);
  ASSERT_TRUE(KernelReaches(s.fd, POLLPRI));
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLPRI, 1}}));
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLPRI, 1}})) << "level-triggered";
  EXPECT_EQ(Wait(et), (Evs{{EPOLLPRI, 2}}));
  EXPECT_TRUE(Wait(et).empty());
  // The in-band byte is readable; the urgent one is read apart.
  EXPECT_EQ(Wait(in_only), (Evs{{EPOLLIN, 3}}));
  char c = 0;
  ASSERT_EQ(::recv(s.fd, &c, 1, MSG_OOB), 1);
  EXPECT_EQ(c, 'b');
  EXPECT_TRUE(Wait(ep).empty()) << "urgent byte consumed";
}

TEST_P(BridgeSources, PipeHangupsAreHupAndErr) {
  // Writer closed: the read end is HUP (with IN while data is left).
  {
    int ep = Epoll();
    Src s = MakeSrc(Kind::kPipe);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN, 1), 0);
    Fire(s);
    KClose(s.peer);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN | EPOLLHUP, 1}}));
    Drain(s);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLHUP, 1}}));
  }
  // Reader closed: the write end is OUT|ERR, even with no interest.
  {
    int ep = Epoll();
    int p[2];
    KPipe(p);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], 0, 2), 0);
    EXPECT_TRUE(Wait(ep).empty());
    KClose(p[0]);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLERR, 2}}));
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_MOD, p[1], EPOLLOUT, 3), 0);
    EXPECT_EQ(Wait(ep), (Evs{{EPOLLOUT | EPOLLERR, 3}}));
  }
}

TEST_P(BridgeSources, SocketPeerCloseIsHup) {
  int ep = Epoll();
  Src s = MakeSrc(Kind::kSocketPair);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 1),
            0);
  KClose(s.peer);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN | EPOLLOUT | EPOLLHUP | EPOLLRDHUP, 1}}));
}

// A reset connection (the peer closes with unread data, or with a zero
// linger) is ERR and HUP, reported even to an item that asked for nothing.
TEST_P(BridgeSources, TcpResetIsErrAndHup) {
  int ep = Epoll();
  Src s = MakeSrc(Kind::kTcp);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, s.fd, 0, 1), 0);
  int full = Epoll();
  ASSERT_EQ(Ctl(full, EPOLL_CTL_ADD, s.fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 2),
            0);
  linger lg{1, 0};
  ASSERT_EQ(::setsockopt(s.peer, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  KClose(s.peer);
  ASSERT_TRUE(KernelReaches(s.fd, POLLERR));
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLERR | EPOLLHUP, 1}}));
  EXPECT_EQ(Wait(full),
            (Evs{{EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLRDHUP, 2}}));
  char c;
  EXPECT_ERRNO(::read(s.fd, &c, 1), ECONNRESET);
}

// Many kernel sources of every kind in one instance: each reported once
// per harvest with its own data, round robin with small maxevents.
TEST_P(BridgeSources, ManySourcesRoundRobin) {
  int ep = Epoll();
  std::vector<Src> srcs;
  for (int rep = 0; rep < 2; ++rep) {
    for (Kind k : kAllKinds) srcs.push_back(MakeSrc(k));
  }
  for (size_t i = 0; i < srcs.size(); ++i) {
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, srcs[i].fd, EPOLLIN, i), 0);
    Fire(srcs[i]);
  }
  // 10 ready LT items, maxevents 3: every item appears once in the first
  // ceil(10/3) harvests' first 10 events, in ADD order.
  std::vector<uint64_t> got;
  while (got.size() < srcs.size()) {
    for (const Ev& e : Wait(ep, 3)) {
      EXPECT_EQ(e.events, static_cast<uint32_t>(EPOLLIN));
      got.push_back(e.data);
    }
  }
  std::vector<uint64_t> want;
  for (size_t i = 0; i < srcs.size(); ++i) want.push_back(i);
  got.resize(srcs.size());
  EXPECT_EQ(got, want);
}

UEPOLL_INSTANTIATE_BACKENDS(BridgeSources);

}  // namespace
}  // namespace uepoll_test
