// Tests of the C++ API (include/uepoll/*.hpp): ownership (moves, release,
// RAII close), both error forms of each fallible call, and waits into a
// span. Each test ends with the fixture's leak check, after the test body
// has destroyed its handles.
#include <pthread.h>
#include <signal.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include <gtest/gtest.h>

#include <uepoll/debug.h>
#include <uepoll/uepoll.hpp>

#include "support/fixture.h"
#include "threads/waiter.h"

namespace uepoll_test {
namespace {

using namespace std::chrono_literals;
using uepoll::EventFd;
using uepoll::Fd;
using uepoll::Instance;
using uepoll::Pipe;
using uepoll::PipeReader;
using uepoll::PipeWriter;
using uepoll::Socket;
using uepoll::SocketPair;

// --- Compile-time properties ------------------------------------------------

template <class T>
constexpr bool kMoveOnly =
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
    std::is_nothrow_move_constructible_v<T> &&
    std::is_nothrow_move_assignable_v<T> &&
    std::is_nothrow_default_constructible_v<T>;
static_assert(kMoveOnly<Fd>);
static_assert(kMoveOnly<Instance>);
static_assert(kMoveOnly<EventFd>);
static_assert(kMoveOnly<Pipe>);
static_assert(kMoveOnly<PipeReader>);
static_assert(kMoveOnly<PipeWriter>);
static_assert(kMoveOnly<Socket>);
static_assert(kMoveOnly<SocketPair>);

static_assert(uepoll::FdHandle<Fd>);
static_assert(uepoll::FdHandle<Instance>);
static_assert(uepoll::FdHandle<EventFd>);
static_assert(uepoll::FdHandle<Socket>);
static_assert(uepoll::FdHandle<PipeReader>);
static_assert(uepoll::FdHandle<PipeWriter>);
static_assert(!uepoll::FdHandle<int>);

// The error_code forms are noexcept, except those of calls that may block
// (cancellation points: pthread_cancel unwinds through them, see
// cxx_cancel_test.cc); the throwing forms are not. (kZero, not 0ms: the
// chrono literal operator is not noexcept itself.)
std::error_code g_ec;
constexpr std::chrono::milliseconds kZero{0};
static_assert(noexcept(Instance::create(0, g_ec)));
static_assert(!noexcept(Instance::create(0)));
static_assert(noexcept(std::declval<Instance&>().add(0, 0, 0, g_ec)));
static_assert(noexcept(std::declval<Instance&>().add(std::declval<const Fd&>(),
                                                     0, 0, g_ec)));
static_assert(noexcept(std::declval<Instance&>().modify(0, 0, 0, g_ec)));
static_assert(noexcept(std::declval<Instance&>().remove(0, g_ec)));
static_assert(!noexcept(std::declval<Instance&>().wait(std::span<epoll_event>{},
                                                       kZero, g_ec)));
static_assert(!noexcept(std::declval<Instance&>().pwait(
    std::span<epoll_event>{}, kZero, std::declval<const sigset_t&>(), g_ec)));
static_assert(!noexcept(std::declval<Instance&>().wait(std::span<epoll_event>{},
                                                       Instance::WaitOptions{},
                                                       g_ec)));
static_assert(noexcept(EventFd::create(0, 0, g_ec)));
static_assert(!noexcept(std::declval<EventFd&>().read(g_ec)));
static_assert(!noexcept(std::declval<EventFd&>().write(1, g_ec)));
static_assert(!noexcept(std::declval<EventFd&>().try_read()));
static_assert(noexcept(Pipe::create(0, g_ec)));
static_assert(!noexcept(std::declval<Pipe&>().read(std::span<std::byte>{},
                                                   g_ec)));
static_assert(
    !noexcept(std::declval<Socket&>().try_write(std::span<const std::byte>{})));
static_assert(noexcept(SocketPair::create(0, g_ec)));
static_assert(noexcept(std::declval<Socket&>().shutdown(SHUT_WR, g_ec)));
static_assert(noexcept(std::declval<Fd&>().close(g_ec)));
static_assert(noexcept(std::declval<const Fd&>().dup(g_ec)));

// --- Helpers ----------------------------------------------------------------

std::error_code Errno(int e) { return {e, std::generic_category()}; }

// The code of the std::system_error f throws; {} if it throws nothing.
// Any other exception fails the test.
template <class F>
std::error_code ThrownCode(F&& f) {
  try {
    f();
  } catch (const std::system_error& e) {
    return e.code();
  }
  return {};
}

// A code that a successful error_code call must clear.
std::error_code Stale() { return Errno(EXDEV); }

uepoll_live_counts Counts() {
  uepoll_live_counts c{};
  EXPECT_EQ(uepoll_debug_live_counts(&c), 0);
  return c;
}
long Descriptors() { return Counts().descriptors; }

std::span<const std::byte> Bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}
std::string_view Text(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

class CxxTest : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};
class CxxFd : public CxxTest {};
class CxxInstance : public CxxTest {};
class CxxEventFd : public CxxTest {};
class CxxPipe : public CxxTest {};
class CxxSocket : public CxxTest {};

// --- Fd ---------------------------------------------------------------------

TEST_F(CxxFd, DefaultIsEmpty) {
  Fd f;
  EXPECT_FALSE(f);
  EXPECT_EQ(f.get(), -1);
}

TEST_F(CxxFd, MoveConstructionLeavesSourceEmpty) {
  Fd a = EventFd::create(5, EFD_NONBLOCK).release();
  ASSERT_TRUE(a);
  const int n = a.get();
  Fd b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): the point of the test
  EXPECT_EQ(a.get(), -1);
  EXPECT_EQ(b.get(), n);
  { Fd dead(std::move(a)); }  // destroying the empty one closes nothing
  EXPECT_EQ(Descriptors(), 1);
  EventFd e(std::move(b));
  EXPECT_EQ(e.read(), 5u);
}

TEST_F(CxxFd, MoveAssignmentClosesTheTargetsDescriptor) {
  Fd a = EventFd::create().release();
  Fd b = EventFd::create().release();
  const int na = a.get();
  const int old_b = b.get();
  ASSERT_EQ(Descriptors(), 2);
  b = std::move(a);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.get(), na);
  EXPECT_EQ(Descriptors(), 1);
  // b's old descriptor is closed (and nothing took its number since).
  errno = 0;
  EXPECT_EQ(uepoll_close(old_b), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST_F(CxxFd, SelfMoveAssignmentKeepsTheDescriptor) {
  Fd a = EventFd::create().release();
  const int n = a.get();
  Fd& alias = a;
  a = std::move(alias);
  EXPECT_EQ(a.get(), n);
  EXPECT_EQ(Descriptors(), 1);
}

TEST_F(CxxFd, ReleaseGivesUpOwnership) {
  int raw;
  {
    Fd f = EventFd::create().release();
    raw = f.release();
    EXPECT_FALSE(f);
  }
  EXPECT_EQ(Descriptors(), 1) << "the destructor closed a released fd";
  EXPECT_EQ(uepoll_close(raw), 0);
}

TEST_F(CxxFd, DestructorCloses) {
  {
    EventFd e = EventFd::create();
    Instance ep = Instance::create();
    auto [r, w] = Pipe::create();
    auto [s1, s2] = SocketPair::create();
    EXPECT_EQ(Descriptors(), 6);
  }
  EXPECT_EQ(Descriptors(), 0);
}

TEST_F(CxxFd, ResetClosesAndAdopts) {
  Fd a = EventFd::create().release();
  int other = EventFd::create().release().release();
  a.reset(other);
  EXPECT_EQ(a.get(), other);
  EXPECT_EQ(Descriptors(), 1);
  a.reset();
  EXPECT_FALSE(a);
  EXPECT_EQ(Descriptors(), 0);
}

TEST_F(CxxFd, ResetToItsOwnDescriptorKeepsIt) {
  Fd a = EventFd::create(2, EFD_NONBLOCK).release();
  a.reset(a.get());
  EXPECT_EQ(Descriptors(), 1);
  EventFd e(std::move(a));
  EXPECT_EQ(e.read(), 2u);
}

TEST_F(CxxFd, DupSharesTheObjectAndOutlivesTheOriginal) {
  EventFd e = EventFd::create(0, EFD_NONBLOCK);
  EventFd d(e.fd().dup());
  ASSERT_TRUE(d);
  EXPECT_NE(d.get(), e.get());
  EXPECT_EQ(Descriptors(), 2);
  e.write(3);
  e.close();
  EXPECT_FALSE(e);
  EXPECT_EQ(Descriptors(), 1);
  EXPECT_EQ(d.read(), 3u);
}

TEST_F(CxxFd, DupOfEmptyFailsEbadf) {
  Fd empty;
  EXPECT_EQ(ThrownCode([&] { (void)empty.dup(); }), Errno(EBADF));
  std::error_code ec = Stale();
  Fd d = empty.dup(ec);
  EXPECT_EQ(ec, Errno(EBADF));
  EXPECT_FALSE(d);
}

TEST_F(CxxFd, CloseEmptiesAndReportsEbadfWhenAlreadyEmpty) {
  Fd f = EventFd::create().release();
  std::error_code ec = Stale();
  f.close(ec);
  EXPECT_FALSE(ec);
  EXPECT_FALSE(f);
  EXPECT_EQ(Descriptors(), 0);
  f.close(ec);
  EXPECT_EQ(ec, Errno(EBADF));
  EXPECT_EQ(ThrownCode([&] { f.close(); }), Errno(EBADF));
}

// --- Errors in general ------------------------------------------------------

TEST_F(CxxInstance, ErrorsAreGenericErrnoCodes) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();
  ep.add(e, EPOLLIN);
  try {
    ep.add(e, EPOLLIN);
    FAIL() << "second add did not throw";
  } catch (const std::system_error& ex) {
    EXPECT_EQ(&ex.code().category(), &std::generic_category());
    EXPECT_EQ(ex.code().value(), EEXIST);
    EXPECT_EQ(ex.code(), std::errc::file_exists);
    EXPECT_NE(std::strstr(ex.what(), "EPOLL_CTL_ADD"), nullptr) << ex.what();
  }
}

TEST_F(CxxInstance, HandlesCloseWhenAnExceptionUnwinds) {
  EXPECT_THROW(
      {
        Instance ep = Instance::create();
        EventFd e = EventFd::create();
        ep.add(e, EPOLLIN);
        ep.add(e, EPOLLIN);
      },
      std::system_error);
  EXPECT_EQ(Descriptors(), 0);
}

// --- Instance ---------------------------------------------------------------

TEST_F(CxxInstance, CreateWithBadFlagsFailsEinval) {
  EXPECT_EQ(ThrownCode([] { (void)Instance::create(EPOLL_CLOEXEC << 1); }),
            Errno(EINVAL));
  std::error_code ec = Stale();
  Instance ep = Instance::create(EPOLL_CLOEXEC << 1, ec);
  EXPECT_EQ(ec, Errno(EINVAL));
  EXPECT_FALSE(ep);
}

TEST_F(CxxInstance, CreateWithCloexecSucceedsAndClearsTheCode) {
  std::error_code ec = Stale();
  Instance ep = Instance::create(EPOLL_CLOEXEC, ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(ep);
}

TEST_F(CxxInstance, AddTwiceFailsEexist) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();
  std::error_code ec = Stale();
  ep.add(e, EPOLLIN, 1, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(ThrownCode([&] { ep.add(e, EPOLLIN); }), Errno(EEXIST));
  ep.add(e.get(), EPOLLIN, 1, ec);
  EXPECT_EQ(ec, Errno(EEXIST));
}

TEST_F(CxxInstance, ModifyOrRemoveUnregisteredFailsEnoent) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();
  EXPECT_EQ(ThrownCode([&] { ep.modify(e, EPOLLIN); }), Errno(ENOENT));
  EXPECT_EQ(ThrownCode([&] { ep.remove(e); }), Errno(ENOENT));
  std::error_code ec = Stale();
  ep.modify(e.fd(), EPOLLIN, 0, ec);
  EXPECT_EQ(ec, Errno(ENOENT));
  ec = Stale();
  ep.remove(e.get(), ec);
  EXPECT_EQ(ec, Errno(ENOENT));
}

TEST_F(CxxInstance, EmptyHandlesFailEbadf) {
  Instance ep = Instance::create();
  Fd empty;
  EXPECT_EQ(ThrownCode([&] { ep.add(empty, EPOLLIN); }), Errno(EBADF));
  Instance none;
  EventFd e = EventFd::create();
  std::error_code ec;
  none.add(e, EPOLLIN, 0, ec);
  EXPECT_EQ(ec, Errno(EBADF));
  std::array<epoll_event, 1> buf{};
  EXPECT_EQ(ThrownCode([&] { (void)none.wait(buf, 0ms); }), Errno(EBADF));
}

TEST_F(CxxInstance, AddingItselfFailsEinval) {
  Instance ep = Instance::create();
  EXPECT_EQ(ThrownCode([&] { ep.add(ep, EPOLLIN); }), Errno(EINVAL));
}

TEST_F(CxxInstance, WaitReturnsTheFilledFrontOfTheSpan) {
  Instance ep = Instance::create();
  EventFd a = EventFd::create(1);
  EventFd b = EventFd::create(1);
  ep.add(a, EPOLLIN, 10);
  ep.add(b, EPOLLIN, 20);

  std::array<epoll_event, 8> buf{};
  std::span<epoll_event> got = ep.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got.data(), buf.data());
  std::set<std::uint64_t> data;
  for (const epoll_event& ev : got) {
    EXPECT_EQ(ev.events, static_cast<std::uint32_t>(EPOLLIN));
    data.insert(ev.data.u64);
  }
  EXPECT_EQ(data, (std::set<std::uint64_t>{10, 20}));

  // A span shorter than the ready list is filled, no more.
  std::array<epoll_event, 1> one{};
  EXPECT_EQ(ep.wait(one, 0ms).size(), 1u);
}

TEST_F(CxxInstance, WaitTimesOutEmptyAndClearsTheCode) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();
  ep.add(e, EPOLLIN);
  std::array<epoll_event, 4> buf{};
  std::error_code ec = Stale();
  EXPECT_TRUE(ep.wait(buf, 0ms, ec).empty());
  EXPECT_FALSE(ec);
  EXPECT_TRUE(ep.wait(buf, 0ms).empty());
}

TEST_F(CxxInstance, WaitIntoAnEmptySpanFailsEinval) {
  Instance ep = Instance::create();
  EXPECT_EQ(ThrownCode([&] { (void)ep.wait({}, 0ms); }), Errno(EINVAL));
  std::error_code ec;
  EXPECT_TRUE(ep.wait({}, 0ms, ec).empty());
  EXPECT_EQ(ec, Errno(EINVAL));
}

TEST_F(CxxInstance, WaitWithoutTimeoutWakesOnAnotherThreadsWrite) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();
  ep.add(e, EPOLLIN, 7);
  std::error_code write_ec = Stale();
  // The writer writes only once this thread sleeps in the wait, so the
  // event has to wake it (a write before the wait would be found at once).
  const pid_t waiter_tid = Gettid();
  bool waiter_parked = false;
  std::thread writer([&] {
    waiter_parked = WaitUntilParked(waiter_tid);
    e.write(1, write_ec);  // even if not parked: the wait must end
  });
  std::array<epoll_event, 2> buf{};
  std::span<epoll_event> got = ep.wait(buf);  // kForever
  writer.join();
  EXPECT_TRUE(waiter_parked) << "the wait returned before the write";
  EXPECT_FALSE(write_ec);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data.u64, 7u);
}

TEST_F(CxxInstance, ModifyChangesEventsAndData) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();  // counter 0: writable, not readable
  ep.add(e, EPOLLIN, 1);
  std::array<epoll_event, 2> buf{};
  EXPECT_TRUE(ep.wait(buf, 0ms).empty());
  ep.modify(e, EPOLLIN | EPOLLOUT, 2);
  std::span<epoll_event> got = ep.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].events, static_cast<std::uint32_t>(EPOLLOUT));
  EXPECT_EQ(got[0].data.u64, 2u);
}

TEST_F(CxxInstance, RemoveStopsReports) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create(1);
  ep.add(e, EPOLLIN);
  std::array<epoll_event, 2> buf{};
  EXPECT_EQ(ep.wait(buf, 0ms).size(), 1u);
  std::error_code ec = Stale();
  ep.remove(e, ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(ep.wait(buf, 0ms).empty());
  EXPECT_EQ(Counts().items, 0);
}

TEST_F(CxxInstance, DestroyingARegisteredSourceDropsItsItem) {
  Instance ep = Instance::create();
  {
    EventFd e = EventFd::create(1);
    ep.add(e, EPOLLIN);
    EXPECT_EQ(Counts().items, 1);
  }
  EXPECT_EQ(Counts().items, 0);
  std::array<epoll_event, 2> buf{};
  EXPECT_TRUE(ep.wait(buf, 0ms).empty());
}

TEST_F(CxxInstance, NestedInstanceReportsReadiness) {
  // e_outer <- e_inner (lt) <- s (lt)
  Instance outer = Instance::create();
  Instance inner = Instance::create();
  EventFd s = EventFd::create();
  inner.add(s, EPOLLIN, 1);
  outer.add(inner, EPOLLIN, 2);
  std::array<epoll_event, 2> buf{};
  EXPECT_TRUE(outer.wait(buf, 0ms).empty());
  s.write(1);
  std::span<epoll_event> got = outer.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data.u64, 2u);
}

TEST_F(CxxInstance, PwaitReturnsEventsAndRestoresTheSignalMask) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create(1);
  ep.add(e, EPOLLIN, 3);
  sigset_t before, during, after;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  sigfillset(&during);
  std::array<epoll_event, 2> buf{};
  std::error_code ec = Stale();
  std::span<epoll_event> got = ep.pwait(buf, 0ms, during, ec);
  EXPECT_FALSE(ec);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data.u64, 3u);
  EXPECT_EQ(ep.pwait(buf, 0ms, during).size(), 1u);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  for (int sig = 1; sig < SIGRTMIN; ++sig) {
    EXPECT_EQ(sigismember(&before, sig), sigismember(&after, sig)) << sig;
  }
}

// Installs a counting handler for sig and blocks it; restores the handler
// and the mask, and drops a still-pending sig, on destruction.
volatile sig_atomic_t g_signals = 0;
class BlockedSignal {
 public:
  explicit BlockedSignal(int sig) : sig_(sig) {
    struct sigaction sa {};
    sa.sa_handler = [](int) { g_signals = g_signals + 1; };
    sigemptyset(&sa.sa_mask);
    sigaction(sig_, &sa, &old_action_);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig_);
    pthread_sigmask(SIG_BLOCK, &only, &old_mask_);
    g_signals = 0;
  }
  ~BlockedSignal() {
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig_);
    struct timespec zero {};
    while (sigtimedwait(&only, nullptr, &zero) == sig_) {
    }
    sigaction(sig_, &old_action_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  BlockedSignal(const BlockedSignal&) = delete;
  BlockedSignal& operator=(const BlockedSignal&) = delete;

 private:
  int sig_;
  struct sigaction old_action_ {};
  sigset_t old_mask_;
};

TEST_F(CxxInstance, PwaitMaskLetsAPendingSignalInterruptWithEintr) {
  Instance ep = Instance::create();
  BlockedSignal blocked(SIGUSR1);
  sigset_t none;
  sigemptyset(&none);
  std::array<epoll_event, 1> buf{};

  // Pending before the call, so the wait cannot block: the mask that
  // pwait installs unblocks it.
  ASSERT_EQ(raise(SIGUSR1), 0);
  EXPECT_EQ(ThrownCode([&] { (void)ep.pwait(buf, Instance::kForever, none); }),
            Errno(EINTR));
  EXPECT_EQ(g_signals, 1);

  ASSERT_EQ(raise(SIGUSR1), 0);
  std::error_code ec = Stale();
  EXPECT_TRUE(ep.pwait(buf, Instance::kForever, none, ec).empty());
  EXPECT_EQ(ec, Errno(EINTR));
  EXPECT_EQ(g_signals, 2);
}

TEST_F(CxxInstance, PwaitOnEmptyInstanceFailsEbadf) {
  Instance none;
  sigset_t mask;
  sigemptyset(&mask);
  std::array<epoll_event, 1> buf{};
  EXPECT_EQ(ThrownCode([&] { (void)none.pwait(buf, 0ms, mask); }),
            Errno(EBADF));
  std::error_code ec;
  EXPECT_TRUE(none.pwait(buf, 0ms, mask, ec).empty());
  EXPECT_EQ(ec, Errno(EBADF));
}

// --- EventFd ----------------------------------------------------------------

TEST_F(CxxEventFd, ReadReturnsTheCounterAndResetsIt) {
  EventFd e = EventFd::create(3, EFD_NONBLOCK);
  e.write(4);
  std::error_code ec = Stale();
  e.write(1, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(e.read(), 8u);
  EXPECT_EQ(ThrownCode([&] { (void)e.read(); }), Errno(EAGAIN));
}

TEST_F(CxxEventFd, ReadOfZeroNonblockingFailsEagain) {
  EventFd e = EventFd::create(0, EFD_NONBLOCK);
  std::error_code ec;
  EXPECT_EQ(e.read(ec), 0u);
  EXPECT_EQ(ec, Errno(EAGAIN));
  EXPECT_EQ(ec, std::errc::resource_unavailable_try_again);
}

TEST_F(CxxEventFd, SemaphoreReadsOneAtATime) {
  EventFd e = EventFd::create(2, EFD_SEMAPHORE | EFD_NONBLOCK);
  EXPECT_EQ(e.read(), 1u);
  EXPECT_EQ(e.read(), 1u);
  std::error_code ec;
  EXPECT_EQ(e.read(ec), 0u);
  EXPECT_EQ(ec, Errno(EAGAIN));
}

TEST_F(CxxEventFd, WriteOfAllOnesFailsEinval) {
  EventFd e = EventFd::create(0, EFD_NONBLOCK);
  EXPECT_EQ(ThrownCode([&] { e.write(UINT64_MAX); }), Errno(EINVAL));
  std::error_code ec;
  e.write(UINT64_MAX, ec);
  EXPECT_EQ(ec, Errno(EINVAL));
}

TEST_F(CxxEventFd, OverflowingWriteNonblockingFailsEagain) {
  EventFd e = EventFd::create(1, EFD_NONBLOCK);
  std::error_code ec;
  e.write(UINT64_MAX - 1, ec);
  EXPECT_EQ(ec, Errno(EAGAIN));
  EXPECT_EQ(e.read(), 1u) << "a failed write changed the counter";
}

TEST_F(CxxEventFd, CreateWithBadFlagsFailsEinval) {
  EXPECT_EQ(ThrownCode([] { (void)EventFd::create(0, O_APPEND); }),
            Errno(EINVAL));
  std::error_code ec;
  EventFd e = EventFd::create(0, O_APPEND, ec);
  EXPECT_EQ(ec, Errno(EINVAL));
  EXPECT_FALSE(e);
}

TEST_F(CxxEventFd, EmptyHandleFailsEbadf) {
  EventFd e;
  EXPECT_EQ(ThrownCode([&] { (void)e.read(); }), Errno(EBADF));
  EXPECT_EQ(ThrownCode([&] { e.write(1); }), Errno(EBADF));
}

// --- Pipe -------------------------------------------------------------------

TEST_F(CxxPipe, BytesWrittenAreRead) {
  Pipe p = Pipe::create(O_NONBLOCK);
  EXPECT_EQ(p.write(Bytes("hello")), 5u);
  std::array<std::byte, 16> buf{};
  std::error_code ec = Stale();
  std::size_t n = p.read(buf, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(Text(std::span(buf).first(n)), "hello");
}

TEST_F(CxxPipe, EmptyNonblockingReadFailsEagain) {
  Pipe p = Pipe::create(O_NONBLOCK);
  std::array<std::byte, 4> buf{};
  EXPECT_EQ(ThrownCode([&] { (void)p.read(buf); }), Errno(EAGAIN));
  std::error_code ec;
  EXPECT_EQ(p.read(buf, ec), 0u);
  EXPECT_EQ(ec, Errno(EAGAIN));
}

TEST_F(CxxPipe, ClosingTheWriteEndGivesHangupAndEof) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  Instance ep = Instance::create();
  ep.add(r, EPOLLIN, 1);
  std::array<epoll_event, 2> buf{};
  EXPECT_TRUE(ep.wait(buf, 0ms).empty());
  w.close();
  EXPECT_FALSE(w);
  std::span<epoll_event> got = ep.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].events & EPOLLHUP, 0u);
  std::array<std::byte, 4> bytes{};
  EXPECT_EQ(r.read(bytes), 0u);
  // Pipe's own read and write (kept from when the ends were plain Fds) use
  // its ends: writing needs the write end, which rest does not have.
  Pipe rest{std::move(r), PipeWriter{}};
  EXPECT_EQ(rest.read(bytes), 0u);
  EXPECT_EQ(ThrownCode([&] { rest.write(Bytes("x")); }), Errno(EBADF));
}

TEST_F(CxxPipe, CreateWithBadFlagsFailsEinval) {
  EXPECT_EQ(ThrownCode([] { (void)Pipe::create(O_WRONLY); }), Errno(EINVAL));
  std::error_code ec;
  Pipe p = Pipe::create(O_WRONLY, ec);
  EXPECT_EQ(ec, Errno(EINVAL));
  EXPECT_FALSE(p.read_end);
  EXPECT_FALSE(p.write_end);
}

// --- Socket -----------------------------------------------------------------

TEST_F(CxxSocket, BytesTravelBothWays) {
  auto [a, b] = SocketPair::create(SOCK_NONBLOCK);
  EXPECT_EQ(a.write(Bytes("ping")), 4u);
  std::array<std::byte, 16> buf{};
  std::size_t n = b.read(buf);
  EXPECT_EQ(Text(std::span(buf).first(n)), "ping");
  std::error_code ec = Stale();
  EXPECT_EQ(b.write(Bytes("pong"), ec), 4u);
  EXPECT_FALSE(ec);
  n = a.read(buf, ec);
  EXPECT_FALSE(ec);
  EXPECT_EQ(Text(std::span(buf).first(n)), "pong");
}

TEST_F(CxxSocket, EmptyNonblockingReadFailsEagain) {
  SocketPair sp = SocketPair::create(SOCK_NONBLOCK);
  std::array<std::byte, 4> buf{};
  EXPECT_EQ(ThrownCode([&] { (void)sp.first.read(buf); }), Errno(EAGAIN));
}

TEST_F(CxxSocket, ShutdownWriteGivesThePeerRdhupAndEof) {
  auto [a, b] = SocketPair::create(SOCK_NONBLOCK);
  Instance ep = Instance::create();
  ep.add(b, EPOLLIN | EPOLLRDHUP, 1);
  std::array<epoll_event, 2> buf{};
  EXPECT_TRUE(ep.wait(buf, 0ms).empty());
  std::error_code ec = Stale();
  a.shutdown(SHUT_WR, ec);
  EXPECT_FALSE(ec);
  std::span<epoll_event> got = ep.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0].events & EPOLLRDHUP, 0u);
  EXPECT_NE(got[0].events & EPOLLIN, 0u);
  std::array<std::byte, 4> bytes{};
  EXPECT_EQ(b.read(bytes), 0u);
}

TEST_F(CxxSocket, ShutdownWithBadHowFailsEinval) {
  SocketPair sp = SocketPair::create();
  EXPECT_EQ(ThrownCode([&] { sp.first.shutdown(42); }), Errno(EINVAL));
  std::error_code ec;
  sp.second.shutdown(-1, ec);
  EXPECT_EQ(ec, Errno(EINVAL));
}

TEST_F(CxxSocket, ClosingThePeerGivesEof) {
  SocketPair sp = SocketPair::create(SOCK_NONBLOCK);
  { Socket gone = std::move(sp.first); }
  EXPECT_FALSE(sp.first);  // NOLINT(bugprone-use-after-move)
  std::array<std::byte, 4> bytes{};
  EXPECT_EQ(sp.second.read(bytes), 0u);
}

TEST_F(CxxSocket, CreateWithBadFlagsFailsEinval) {
  std::error_code ec;
  SocketPair sp = SocketPair::create(O_APPEND, ec);
  EXPECT_EQ(ec, Errno(EINVAL));
  EXPECT_FALSE(sp.first);
  EXPECT_FALSE(sp.second);
}

TEST_F(CxxSocket, TypeInTheFlagsMakesADatagramOrSeqpacketPair) {
  for (int type : {SOCK_DGRAM, SOCK_SEQPACKET}) {
    SCOPED_TRACE(type);
    auto [a, b] = SocketPair::create(type | SOCK_NONBLOCK);
    EXPECT_EQ(a.send(Bytes("ab"), 0), 2u);
    EXPECT_EQ(a.send(Bytes("cde"), 0), 3u);
    std::array<std::byte, 16> buf{};
    // MSG_PEEK leaves the message; MSG_TRUNC returns its whole length.
    std::size_t n = b.recv(std::span(buf).first(1), MSG_PEEK | MSG_TRUNC);
    EXPECT_EQ(n, 2u);
    n = b.recv(buf, 0);
    EXPECT_EQ(Text(std::span(buf).first(n)), "ab");
    n = b.recv(buf, 0);
    EXPECT_EQ(Text(std::span(buf).first(n)), "cde");
    std::error_code ec = Stale();
    EXPECT_EQ(b.recv(buf, 0, ec), 0u);
    EXPECT_EQ(ec, Errno(EAGAIN));
  }
}

TEST_F(CxxSocket, SendWithNosignalToAClosedPeerFailsEpipe) {
  SocketPair sp = SocketPair::create();
  sp.second.close();
  // No SIGPIPE: the test process would die of it.
  EXPECT_EQ(ThrownCode([&] { sp.first.send(Bytes("x"), MSG_NOSIGNAL); }),
            Errno(EPIPE));
  std::error_code ec;
  EXPECT_EQ(sp.first.send(Bytes("x"), MSG_NOSIGNAL, ec), 0u);
  EXPECT_EQ(ec, Errno(EPIPE));
}

TEST_F(CxxSocket, RecvDontwaitOnABlockingSocketFailsEagain) {
  SocketPair sp = SocketPair::create();
  std::array<std::byte, 4> buf{};
  EXPECT_EQ(ThrownCode([&] { (void)sp.first.recv(buf, MSG_DONTWAIT); }),
            Errno(EAGAIN));
}

}  // namespace
}  // namespace uepoll_test
