// epoll_ctl of kernel descriptors in the backend's instance: the kernel's
// errno order, EPERM for files the kernel
// cannot poll, the item's life tied to the kernel file (not the number),
// numbers reused for new kernel files, and an instance's kernel
// descriptors moving with it under dup, dup2 and dup3.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <memory>
#include <vector>

#include "bridge/bridge.h"

namespace uepoll_test {
namespace {

using Evs = std::vector<Ev>;
constexpr int kUnknownOp = 17;

class BridgeCtl : public BridgeTest {
 protected:
  // A regular file and a directory: the kernel cannot poll either.
  int RegularFile() {
    char path[] = "/tmp/uepoll_bridge_XXXXXX";
    int fd = mkstemp(path);
    EXPECT_GE(fd, 0) << strerror(errno);
    unlink(path);
    return KTrack(fd);
  }
  int Directory() { return KTrack(::open("/tmp", O_RDONLY | O_DIRECTORY)); }

  // A kernel number that is certainly closed (never the backend's).
  int ClosedKernelNumber() {
    int fd = ::eventfd(0, 0);
    EXPECT_GE(fd, 0);
    ::close(fd);
    return fd;
  }

  void KWrite(int efd) {
    uint64_t one = 1;
    ASSERT_EQ(::write(efd, &one, 8), 8);
  }
};

TEST_P(BridgeCtl, NullEventFailsEfaultBeforeAnyDescriptorCheck) {
  int ep = Epoll();
  int k = KEventfd();
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_ADD, k, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_MOD, k, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_DEL, k, nullptr), ENOENT);
  EXPECT_ERRNO(B().epoll_ctl(ep, kUnknownOp, k, nullptr), EFAULT);
  int c = ClosedKernelNumber();
  EXPECT_ERRNO(B().epoll_ctl(B().closed_fd, EPOLL_CTL_ADD, k, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_ADD, c, nullptr), EFAULT);
  EXPECT_ERRNO(B().epoll_ctl(ep, EPOLL_CTL_ADD, RegularFile(), nullptr),
               EFAULT);
}

TEST_P(BridgeCtl, ClosedEpfdFailsEbadfBeforeTheTarget) {
  int k = KEventfd();
  EXPECT_ERRNO(Ctl(B().closed_fd, EPOLL_CTL_ADD, k, EPOLLIN, 0), EBADF);
  EXPECT_ERRNO(
      Ctl(B().closed_fd, EPOLL_CTL_ADD, ClosedKernelNumber(), EPOLLIN, 0),
      EBADF);
  EXPECT_ERRNO(Ctl(B().closed_fd, EPOLL_CTL_ADD, RegularFile(), EPOLLIN, 0),
               EBADF);
}

TEST_P(BridgeCtl, ClosedKernelTargetFailsEbadfForEveryOp) {
  int ep = Epoll();
  // Before and after the instance holds a kernel descriptor.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    int c = ClosedKernelNumber();
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, c, EPOLLIN, 0), EBADF);
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, c, EPOLLIN, 0), EBADF);
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, c, 0, 0), EBADF);
    EXPECT_ERRNO(Ctl(ep, kUnknownOp, c, EPOLLIN, 0), EBADF);
    EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, -1, EPOLLIN, 0), EBADF);
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, KEventfd(), EPOLLIN, 1), 0);
  }
}

TEST_P(BridgeCtl, ClosedKernelTargetEbadfBeatsNotAnEpoll) {
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, ClosedKernelNumber(), EPOLLIN, 0),
               EBADF);
}

TEST_P(BridgeCtl, RegularFileAndDirectoryFailEpermForEveryOp) {
  int ep = Epoll();
  int file = RegularFile();
  int dir = Directory();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    for (int fd : {file, dir}) {
      EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLIN, 0), EPERM);
      EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, fd, EPOLLIN, 0), EPERM);
      EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, fd, 0, 0), EPERM);
      // EPERM comes before the op and flag checks.
      EXPECT_ERRNO(Ctl(ep, kUnknownOp, fd, EPOLLIN, 0), EPERM);
      EXPECT_ERRNO(
          Ctl(ep, EPOLL_CTL_ADD, fd, EPOLLEXCLUSIVE | EPOLLIN | EPOLLPRI, 0),
          EPERM);
    }
    // Nothing was registered: the instance reports only the readable
    // eventfd of round 0, once it is there.
    Evs before = round == 0 ? Evs{} : Evs{{EPOLLIN, 1}};
    EXPECT_EQ(Wait(ep), before);
    if (round == 0) {
      ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, KEventfd(1), EPOLLIN, 1), 0);
      EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
    }
  }
}

TEST_P(BridgeCtl, UnpollableTargetEpermBeatsNotAnEpoll) {
  int efd = Eventfd();
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, RegularFile(), EPOLLIN, 0), EPERM);
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, Directory(), EPOLLIN, 0), EPERM);
}

TEST_P(BridgeCtl, EpfdNotAnEpollFailsEinvalForAKernelTarget) {
  int efd = Eventfd();
  int k = KEventfd();
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_ADD, k, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_MOD, k, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(Ctl(efd, EPOLL_CTL_DEL, k, 0, 0), EINVAL);
  // The target is untouched.
  EXPECT_EQ(KernelPollMask(k, POLLIN | POLLOUT), POLLOUT);
}

TEST_P(BridgeCtl, AddTwiceFailsEexistKeepingTheFirstRegistration) {
  int ep = Epoll();
  int k = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLOUT, 2), EEXIST);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
}

TEST_P(BridgeCtl, ModOrDelOfAMissingKernelItemFailsEnoent) {
  int ep = Epoll();
  int k = KEventfd();
  // The instance holds no kernel descriptor yet.
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, k, EPOLLIN, 0), ENOENT);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, k, 0, 0), ENOENT);
  // It holds another one.
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, KEventfd(), EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, k, EPOLLIN, 0), ENOENT);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, k, 0, 0), ENOENT);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 2), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_DEL, k, 0, 0), 0);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, k, 0, 0), ENOENT);
}

TEST_P(BridgeCtl, UnknownOpFailsEinvalRegisteredOrNot) {
  int ep = Epoll();
  int k = KEventfd(1);
  EXPECT_ERRNO(Ctl(ep, kUnknownOp, k, EPOLLIN, 0), EINVAL);
  EXPECT_ERRNO(Ctl(ep, 0, k, EPOLLIN, 0), EINVAL);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  EXPECT_ERRNO(Ctl(ep, kUnknownOp, k, EPOLLOUT, 2), EINVAL);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
}

// A failed ADD leaves nothing behind: the next wait, ctl and close behave
// as if it never happened.
TEST_P(BridgeCtl, FailedAddsRegisterNothing) {
  int ep = Epoll();
  int k = KEventfd(1);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLEXCLUSIVE | EPOLLRDHUP, 0),
               EINVAL);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, ClosedKernelNumber(), EPOLLIN, 0), EBADF);
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_ADD, RegularFile(), EPOLLIN, 0), EPERM);
  EXPECT_TRUE(Wait(ep).empty());
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, k, 0, 0), ENOENT);
}

// --- the item's life is the kernel file's ---

TEST_P(BridgeCtl, ItemVanishesAtTheKernelFilesLastClose) {
  int ep = Epoll();
  int k = KEventfd(1);
  int other = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, other, EPOLLIN, 2), 0);
  ASSERT_EQ(KClose(k), 0);  // already on the ready list
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, k, 0, 0), EBADF);
  ASSERT_EQ(KClose(other), 0);
  EXPECT_TRUE(Wait(ep).empty());
}

TEST_P(BridgeCtl, ADupKeepsTheItemWithItsOldKey) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 41), 0);
  int d = KTrack(::dup(k));
  ASSERT_EQ(KClose(k), 0);
  KWrite(d);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 41}}));
  // The item is keyed by (file, old number): the dup's number finds none.
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_DEL, d, 0, 0), ENOENT);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, d, EPOLLIN, 42), 0);
  EXPECT_EQ(Sorted(Wait(ep)), (Evs{{EPOLLIN, 41}, {EPOLLIN, 42}}));
  ASSERT_EQ(KClose(d), 0);
  EXPECT_TRUE(Wait(ep).empty()) << "both items died with the file";
}

TEST_P(BridgeCtl, NumberReusedForANewKernelFileIsANewItem) {
  int ep = Epoll();
  int k = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  ASSERT_EQ(KClose(k), 0);
  int k2 = KEventfd();
  ASSERT_EQ(k2, k) << "the kernel hands out the lowest free number";
  EXPECT_ERRNO(Ctl(ep, EPOLL_CTL_MOD, k2, EPOLLIN, 2), ENOENT);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k2, EPOLLIN, 2), 0);
  EXPECT_TRUE(Wait(ep).empty()) << "the old, ready item is gone";
  KWrite(k2);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
}

// The old file lives on through a dup: both (old file, n) and (new file,
// n) are items, each reporting its own file.
TEST_P(BridgeCtl, NumberReusedWhileTheOldFileLivesGivesTwoItems) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  int d = KTrack(::dup(k));
  ASSERT_EQ(KClose(k), 0);
  int k2 = KEventfd();
  ASSERT_EQ(k2, k);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k2, EPOLLIN, 2), 0);
  KWrite(d);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 1}}));
  uint64_t v;
  ASSERT_EQ(::read(d, &v, 8), 8);
  KWrite(k2);
  EXPECT_EQ(Wait(ep), (Evs{{EPOLLIN, 2}}));
  // DEL through the number reaches the new file's item only.
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_DEL, k2, 0, 0), 0);
  KWrite(d);
  EXPECT_EQ(Sorted(Wait(ep)), (Evs{{EPOLLIN, 1}}));
}

TEST_P(BridgeCtl, KernelDescriptorClosedBetweenAddAndWait) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  KWrite(k);
  ASSERT_EQ(KClose(k), 0);
  EXPECT_TRUE(Wait(ep).empty());
  // A timed wait sleeps its full timeout: the dead item wakes nobody.
  epoll_event ev[1];
  int64_t t0 = MonotonicNs();
  EXPECT_EQ(B().epoll_wait(ep, ev, 1, 30), 0);
  EXPECT_GE(MonotonicNs() - t0, 30 * 1000000LL);
}

TEST_P(BridgeCtl, KernelDescriptorClosedUnderABlockedWaiter) {
  int ep = Epoll();
  int k = KEventfd();
  int other = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, other, EPOLLIN, 2), 0);
  const Backend* b = &B();
  Waiter w(
      [b, ep](epoll_event* ev) { return b->epoll_wait(ep, ev, 1, kWaitMs); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(KClose(k), 0);
  ASSERT_TRUE(w.Parked()) << "the close woke the waiter: " << w.result();
  KWrite(other);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(w.event(0).data.u64, 2u);
}

// --- an instance's kernel descriptors move with it ---

TEST_P(BridgeCtl, DupOfTheInstanceKeepsItsKernelDescriptors) {
  int ep = Epoll();
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  int d = Track(B().dup(ep));
  ASSERT_GE(d, 0);
  ASSERT_EQ(Close(ep), 0);
  KWrite(k);
  EXPECT_EQ(Wait(d), (Evs{{EPOLLIN, 1}}));
  EXPECT_ERRNO(Ctl(d, EPOLL_CTL_ADD, k, EPOLLIN, 2), EEXIST);
  ASSERT_EQ(Ctl(d, EPOLL_CTL_MOD, k, EPOLLIN | EPOLLET, 3), 0);
  EXPECT_EQ(Wait(d), (Evs{{EPOLLIN, 3}}));
  EXPECT_TRUE(Wait(d).empty());
  ASSERT_EQ(Ctl(d, EPOLL_CTL_DEL, k, 0, 0), 0);
  EXPECT_ERRNO(Ctl(d, EPOLL_CTL_DEL, k, 0, 0), ENOENT);
}

// The dup is made while the instance holds no kernel descriptor yet; the
// first one, ADDed through the original number, is seen through the dup.
TEST_P(BridgeCtl, DupMadeBeforeTheFirstKernelDescriptorSeesIt) {
  int ep = Epoll();
  int d = Track(B().dup(ep));
  ASSERT_GE(d, 0);
  int k = KEventfd();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  ASSERT_EQ(Close(ep), 0);
  KWrite(k);
  EXPECT_EQ(Wait(d), (Evs{{EPOLLIN, 1}}));
  const Backend* b = &B();
  Waiter w(
      [b, d](epoll_event* ev) { return b->epoll_wait(d, ev, 1, kWaitMs); });
  ASSERT_TRUE(w.WaitDone()) << "LT and still ready";
  EXPECT_EQ(w.result(), 1);
}

TEST_P(BridgeCtl, Dup2AndDup3OfTheInstanceKeepItsKernelDescriptors) {
  for (bool use_dup3 : {false, true}) {
    SCOPED_TRACE(use_dup3 ? "dup3" : "dup2");
    int ep = Epoll();
    int k = KEventfd();
    ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
    // The target number holds an object of the backend, which the dup
    // replaces (and releases).
    int target = Eventfd();
    int r = use_dup3 ? B().dup3(ep, target, O_CLOEXEC) : B().dup2(ep, target);
    ASSERT_EQ(r, target) << strerror(errno);
    ASSERT_EQ(Close(ep), 0);
    KWrite(k);
    EXPECT_EQ(Wait(target), (Evs{{EPOLLIN, 1}}));
    // A waiter on the new number is woken by the kernel descriptor.
    uint64_t v;
    ASSERT_EQ(::read(k, &v, 8), 8);
    const Backend* b = &B();
    Waiter w([b, target](epoll_event* ev) {
      return b->epoll_wait(target, ev, 1, kWaitMs);
    });
    ASSERT_TRUE(w.Parked());
    KWrite(k);
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), 1);
    EXPECT_EQ(w.event(0).data.u64, 1u);
    ASSERT_EQ(Close(target), 0);
  }
}

// Closing every number of the instance drops its kernel registrations with
// it: a later instance at the same number starts empty.
TEST_P(BridgeCtl, LastCloseOfTheInstanceDropsItsKernelItems) {
  int ep = Epoll();
  int k = KEventfd(1);
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, k, EPOLLIN, 1), 0);
  int d = Track(B().dup(ep));
  ASSERT_EQ(Close(ep), 0);
  ASSERT_EQ(Close(d), 0);
  int ep2 = Epoll();
  EXPECT_TRUE(Wait(ep2).empty());
  EXPECT_ERRNO(Ctl(ep2, EPOLL_CTL_DEL, k, 0, 0), ENOENT);
  ASSERT_EQ(Ctl(ep2, EPOLL_CTL_ADD, k, EPOLLIN, 2), 0);
  EXPECT_EQ(Wait(ep2), (Evs{{EPOLLIN, 2}}));
}

UEPOLL_INSTANTIATE_BACKENDS(BridgeCtl);

}  // namespace
}  // namespace uepoll_test
