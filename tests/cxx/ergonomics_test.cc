// The C++ API's conveniences (docs/cxx_api.md): pipe ends that read
// and write by themselves, text and byte buffers without std::as_bytes, the
// try_ forms that return "would block" as a value, timeouts of any
// std::chrono::duration, and typed event data. [[nodiscard]] is checked by
// nodiscard_check.cc (tests/cxx/CMakeLists.txt). Each test ends with the
// fixture's leak check.
#include <fcntl.h>
#include <signal.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <uepoll/uepoll.hpp>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using uepoll::EventData;
using uepoll::EventFd;
using uepoll::Instance;
using uepoll::Pipe;
using uepoll::PipeReader;
using uepoll::PipeWriter;
using uepoll::Result;
using uepoll::Socket;
using uepoll::SocketPair;

std::error_code Errno(int e) { return {e, std::generic_category()}; }

class CxxErgonomics : public ::testing::Test {
 protected:
  void TearDown() override { ExpectNoUepollLeaks(); }
};
class CxxPipeEnds : public CxxErgonomics {};
class CxxBuffers : public CxxErgonomics {};
class CxxTryForms : public CxxErgonomics {};
class CxxTimeouts : public CxxErgonomics {};
class CxxEventData : public CxxErgonomics {};

// --- Pipe ends ---------------------------------------------------------------

template <class T>
constexpr bool kCanRead = requires(T& t, std::span<std::byte> b) {
  t.read(b);
};
template <class T>
constexpr bool kCanWrite = requires(T& t, std::span<const std::byte> b) {
  t.write(b);
};
static_assert(kCanRead<PipeReader> && !kCanWrite<PipeReader>);
static_assert(kCanWrite<PipeWriter> && !kCanRead<PipeWriter>);
static_assert(kCanRead<Socket> && kCanWrite<Socket>);
static_assert(
    std::is_same_v<decltype(std::declval<Pipe&>().read_end), PipeReader>);
static_assert(
    std::is_same_v<decltype(std::declval<Pipe&>().write_end), PipeWriter>);

TEST_F(CxxPipeEnds, StructuredBindingGivesEndsThatReadAndWrite) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  EXPECT_EQ(w.write("hello"), 5u);
  std::array<char, 16> buf{};
  std::size_t n = r.read(buf);
  EXPECT_EQ(std::string_view(buf.data(), n), "hello");
}

TEST_F(CxxPipeEnds, TheWriteEndMovesToAnotherThreadAlone) {
  auto [r, w] = Pipe::create();  // blocking
  std::thread writer([w = std::move(w)]() mutable {
    EXPECT_EQ(w.write("ping"), 4u);
    w.close();  // then the reader sees end of file
  });
  std::string got;
  std::array<char, 8> buf{};
  // Blocking reads: data, then 0 once the writer has closed its end.
  for (std::size_t n; (n = r.read(buf)) != 0;) got.append(buf.data(), n);
  writer.join();
  EXPECT_EQ(got, "ping");
}

TEST_F(CxxPipeEnds, EndsReleaseTheirDescriptorAndAdoptOne) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  uepoll::Fd raw = w.release();
  EXPECT_FALSE(w);
  PipeWriter again(std::move(raw));
  EXPECT_EQ(again.write("x"), 1u);
  std::array<char, 2> buf{};
  EXPECT_EQ(r.read(buf), 1u);
}

// --- Buffers -----------------------------------------------------------------

static_assert(uepoll::ConstByteBuffer<std::string>);
static_assert(uepoll::ConstByteBuffer<std::vector<unsigned char>>);
static_assert(uepoll::ConstByteBuffer<std::span<const std::byte>>);
static_assert(uepoll::ConstByteBuffer<char[4]>);
static_assert(!uepoll::ConstByteBuffer<std::vector<int>>);
static_assert(uepoll::MutableByteBuffer<char (&)[4]>);
static_assert(uepoll::MutableByteBuffer<std::string&>);
static_assert(uepoll::MutableByteBuffer<std::span<unsigned char>>);
static_assert(!uepoll::MutableByteBuffer<const std::array<char, 4>&>);
static_assert(!uepoll::MutableByteBuffer<std::string_view>);
static_assert(!uepoll::MutableByteBuffer<std::vector<int>&>);

// Everything left in a nonblocking reader, as text.
std::string Drain(PipeReader& r) {
  std::string out;
  std::array<char, 256> buf{};
  for (;;) {
    Result<std::size_t> n = r.try_read(buf);
    if (!n || *n == 0) break;
    out.append(buf.data(), *n);
  }
  return out;
}

TEST_F(CxxBuffers, TextIsWrittenWithoutItsTerminator) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  const char* c_string = "ab";
  char array[8] = "cd";  // a char array is text: up to its NUL
  EXPECT_EQ(w.write("hello"), 5u);
  EXPECT_EQ(w.write(std::string("+")), 1u);
  EXPECT_EQ(w.write(std::string_view("xyz").substr(1)), 2u);
  EXPECT_EQ(w.write(c_string), 2u);
  EXPECT_EQ(w.write(array), 2u);
  EXPECT_EQ(Drain(r), std::string("hello+yzabcd"));
}

TEST_F(CxxBuffers, ByteRangesAreWrittenWhole) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  const std::vector<unsigned char> v = {'a', 0, 'b'};
  const std::array<char, 2> a = {'c', 0};
  const std::array<std::byte, 1> b = {std::byte{'d'}};
  char buf[4] = {'e', 0, 'f', 'g'};
  EXPECT_EQ(w.write(v), 3u);
  EXPECT_EQ(w.write(a), 2u);
  EXPECT_EQ(w.write(std::span<const std::byte>(b)), 1u);
  EXPECT_EQ(w.write(std::span(buf, 3)), 3u);  // bytes of a char buffer
  EXPECT_EQ(Drain(r), std::string("a\0bc\0de\0f", 9));
}

TEST_F(CxxBuffers, ReadsFillAnyWritableByteRange) {
  auto [a, b] = SocketPair::create(SOCK_NONBLOCK);
  ASSERT_EQ(a.write("0123456789"), 10u);
  char c_array[2];
  std::array<std::byte, 2> bytes{};
  std::vector<char> vec(2);
  std::string str(2, '.');
  std::array<unsigned char, 2> backing{};
  EXPECT_EQ(b.read(c_array), 2u);
  EXPECT_EQ(b.read(bytes), 2u);
  EXPECT_EQ(b.read(vec), 2u);
  EXPECT_EQ(b.read(str), 2u);
  EXPECT_EQ(b.read(std::span(backing)), 2u);  // a temporary view
  EXPECT_EQ(std::string_view(c_array, 2), "01");
  EXPECT_EQ(bytes[1], std::byte{'3'});
  EXPECT_EQ(std::string(vec.begin(), vec.end()), "45");
  EXPECT_EQ(str, "67");
  EXPECT_EQ(backing[0], '8');
}

TEST_F(CxxBuffers, ErrorCodeFormsTakeTheSameBuffers) {
  auto [a, b] = SocketPair::create(SOCK_NONBLOCK);
  std::error_code ec = Errno(EXDEV);
  EXPECT_EQ(a.write("abc", ec), 3u);
  EXPECT_FALSE(ec);
  std::array<char, 8> buf{};
  EXPECT_EQ(b.read(buf, ec), 3u);
  EXPECT_FALSE(ec);
  EXPECT_EQ(b.read(buf, ec), 0u);
  EXPECT_EQ(ec, Errno(EAGAIN));
}

// --- try_ forms --------------------------------------------------------------

// The try_ forms throw nothing, yet are not noexcept: a blocking read or
// write is a cancellation point (cxx_cancel_test.cc).
std::error_code g_ec;
static_assert(!noexcept(std::declval<PipeReader&>().try_read(
    std::declval<std::array<char, 4>&>())));
static_assert(!noexcept(std::declval<PipeWriter&>().try_write("x")));
static_assert(
    !noexcept(std::declval<Socket&>().try_read(std::span<std::byte>{})));
static_assert(!noexcept(std::declval<EventFd&>().try_read()));
static_assert(!noexcept(std::declval<EventFd&>().try_write(1)));
static_assert(!std::is_convertible_v<Result<std::size_t>, bool>);

TEST_F(CxxTryForms, EdgeTriggeredDrainEndsOnWouldBlockWithoutThrowing) {
  auto [a, b] = SocketPair::create(SOCK_NONBLOCK);
  Instance ep = Instance::create();
  ep.add(b, EPOLLIN | EPOLLET, 1);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(a.write("0123456789"), 10u);

  std::array<epoll_event, 4> events{};
  ASSERT_EQ(ep.wait(events, 0ms).size(), 1u);
  std::size_t total = 0;
  int reads = 0;
  std::array<char, 4> buf{};  // small: the drain takes several reads
  Result<std::size_t> n = 0;
  for (;;) {
    n = b.try_read(buf);
    if (n.would_block()) break;
    ASSERT_TRUE(n) << n.error().message();
    ASSERT_NE(*n, 0u) << "end of file on an open pair";
    total += *n;
    ++reads;
  }
  EXPECT_EQ(total, 30u);
  EXPECT_EQ(reads, 8);  // 7 full reads of 4, one of 2
  EXPECT_FALSE(n.has_value());
  EXPECT_EQ(n.error(), Errno(EAGAIN));
  EXPECT_EQ(n.value_or(99), 99u);
  try {
    (void)n.value();
    ADD_FAILURE() << "value() of an error did not throw";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), Errno(EAGAIN));
  }
  // Drained: the edge was consumed, and no new one came.
  EXPECT_TRUE(ep.wait(events, 0ms).empty());
}

TEST_F(CxxTryForms, EndOfFileIsAValueOfZero) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  w.close();
  std::array<char, 4> buf{};
  Result<std::size_t> n = r.try_read(buf);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  EXPECT_FALSE(n.would_block());
}

TEST_F(CxxTryForms, TryWriteFillsAPipeToItsCapacityThenWouldBlock) {
  auto [r, w] = Pipe::create(O_NONBLOCK);
  const std::vector<char> chunk(4096, 'x');
  std::size_t total = 0;
  for (;;) {
    Result<std::size_t> n = w.try_write(chunk);
    if (n.would_block()) break;
    ASSERT_TRUE(n) << n.error().message();
    total += *n;
  }
  EXPECT_EQ(total, 65536u);  // a pipe's capacity (docs/contract.md)
}

TEST_F(CxxTryForms, OtherErrorsAreNotWouldBlock) {
  PipeReader none;
  std::array<char, 4> buf{};
  Result<std::size_t> n = none.try_read(buf);
  EXPECT_FALSE(n);
  EXPECT_FALSE(n.would_block());
  EXPECT_EQ(n.error(), Errno(EBADF));
  PipeWriter nowhere;
  EXPECT_EQ(nowhere.try_write("x").error(), Errno(EBADF));
}

TEST_F(CxxTryForms, EventFdTryFormsReportTheCounterAndWouldBlock) {
  EventFd e = EventFd::create(0, EFD_NONBLOCK);
  Result<std::uint64_t> v = e.try_read();
  EXPECT_TRUE(v.would_block());
  Result<void> written = e.try_write(5);
  EXPECT_TRUE(written);
  v = e.try_read();
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 5u);
  Result<void> bad = e.try_write(UINT64_MAX);  // EINVAL, not "would block"
  EXPECT_EQ(bad.error(), Errno(EINVAL));
  EXPECT_FALSE(bad.would_block());
  ASSERT_TRUE(e.try_write(UINT64_MAX - 1));   // the largest count
  EXPECT_TRUE(e.try_write(1).would_block());  // would overflow
  EXPECT_EQ(e.read(), UINT64_MAX - 1);
}

// --- Timeouts of any duration ------------------------------------------------

using uepoll::detail::CeilToNanoseconds;
static_assert(CeilToNanoseconds(500us) == nanoseconds(500000));
static_assert(CeilToNanoseconds(0ms) == nanoseconds(0));
static_assert(CeilToNanoseconds(Instance::kForever) == nanoseconds(-1));
static_assert(CeilToNanoseconds(-5s) == nanoseconds(-1));
// Finer than a nanosecond rounds up: never wake before the time asked for.
static_assert(CeilToNanoseconds(std::chrono::duration<double, std::nano>(
                  1.5)) == nanoseconds(2));
static_assert(CeilToNanoseconds(std::chrono::duration<std::int64_t, std::pico>(
                  1)) == nanoseconds(1));
static_assert(CeilToNanoseconds(std::chrono::duration<std::int64_t, std::pico>(
                  1000)) == nanoseconds(1));
static_assert(CeilToNanoseconds(std::chrono::duration<std::int64_t, std::pico>(
                  1001)) == nanoseconds(2));
static_assert(CeilToNanoseconds(std::chrono::duration<double>(0.25)) ==
              nanoseconds(250000000));
// Beyond what nanoseconds hold: cut to the largest, not wrapped negative
// (which would mean "forever" by accident, or worse).
static_assert(CeilToNanoseconds(std::chrono::hours::max()) ==
              nanoseconds::max());
static_assert(CeilToNanoseconds(std::chrono::duration<double>(1e300)) ==
              nanoseconds::max());
static_assert(CeilToNanoseconds(std::chrono::duration<double>(
                  std::numeric_limits<double>::quiet_NaN())) ==
              nanoseconds(-1));

// The wait ran at least `at_least`: a wait never returns before its
// timeout (checked from below only, so machine speed cannot fail it).
template <class F>
void ExpectTimesOutNoEarlierThan(nanoseconds at_least, F wait) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait().empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, at_least);
}

TEST_F(CxxTimeouts, WaitTakesMicrosecondsAndFractionalDurations) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create();
  ep.add(e, EPOLLIN);
  std::array<epoll_event, 2> buf{};
  ExpectTimesOutNoEarlierThan(500us, [&] { return ep.wait(buf, 500us); });
  ExpectTimesOutNoEarlierThan(1500us, [&] {
    return ep.wait(buf, std::chrono::duration<double, std::milli>(1.5));
  });
  std::error_code ec = Errno(EXDEV);
  ExpectTimesOutNoEarlierThan(300us,
                              [&] { return ep.wait(buf, 300'000ns, ec); });
  EXPECT_FALSE(ec);
  sigset_t mask;
  sigemptyset(&mask);
  ExpectTimesOutNoEarlierThan(200us,
                              [&] { return ep.pwait(buf, 200us, mask); });
}

TEST_F(CxxTimeouts, ReadyEventsReturnAtOnceWhateverTheTimeout) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create(1);
  ep.add(e, EPOLLIN, 3);
  std::array<epoll_event, 2> buf{};
  // A timeout that saturates is still a valid timespec: no EINVAL.
  std::error_code ec;
  auto got = ep.wait(buf, std::chrono::hours::max(), ec);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data.u64, 3u);
  EXPECT_EQ(ep.wait(buf, std::chrono::duration<float>(30.0f)).size(), 1u);
}

TEST_F(CxxTimeouts, InstanceDefaultMinWaitStillAppliesToTimedWaits) {
  // wait() is epoll_pwait2 underneath, which uses the instance's default
  // min_wait (uepoll_epoll_set_params) as epoll_wait did: with maxevents 2
  // and one event ready, the call waits out the minimum.
  Instance ep = Instance::create();
  uepoll_params p{};
  p.min_wait_ns = 2'000'000;
  ep.set_params(p);
  EventFd e = EventFd::create(1);
  ep.add(e, EPOLLIN);
  std::array<epoll_event, 2> buf{};
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ep.wait(buf, 10s).size(), 1u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2ms);
}

// --- Typed event data --------------------------------------------------------

static_assert(std::is_convertible_v<int, EventData>);
static_assert(std::is_convertible_v<int*, EventData>);
static_assert(std::is_convertible_v<const std::string*, EventData>);
static_assert(std::is_convertible_v<epoll_data_t, EventData>);
static_assert(!std::is_convertible_v<std::nullptr_t, EventData>);
static_assert(!std::is_convertible_v<void (*)(), EventData>);

struct Connection {
  int id = 0;
  std::uint32_t seen = 0;
  void on_events(std::uint32_t events) { seen |= events; }
};

TEST_F(CxxEventData, APointerComesBackAsItsType) {
  Instance ep = Instance::create();
  EventFd a = EventFd::create(1);
  EventFd b = EventFd::create(1);
  Connection ca{1}, cb{2};
  ep.add(a, EPOLLIN, &ca);
  ep.add(b, EPOLLIN, &cb);
  std::array<epoll_event, 4> buf{};
  auto got = ep.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 2u);
  for (const epoll_event& e : got) {
    uepoll::event_ptr<Connection>(e)->on_events(e.events);
  }
  EXPECT_EQ(ca.seen, static_cast<std::uint32_t>(EPOLLIN));
  EXPECT_EQ(cb.seen, static_cast<std::uint32_t>(EPOLLIN));
}

TEST_F(CxxEventData, AHandlerTravelsWithItsRegistration) {
  Instance ep = Instance::create();
  auto [r, w] = Pipe::create(O_NONBLOCK);
  std::string received;
  // (An init-capture: Clang 14 cannot capture a structured binding.)
  std::function<void(std::uint32_t)> on_readable =
      [&received, &reader = r](std::uint32_t) {
        std::array<char, 16> buf{};
        for (Result<std::size_t> n = 0; (n = reader.try_read(buf)) && *n > 0;) {
          received.append(buf.data(), *n);
        }
      };
  ep.add(r, EPOLLIN | EPOLLET, &on_readable);
  w.write("event");
  std::array<epoll_event, 2> buf{};
  for (const epoll_event& e : ep.wait(buf, 1s)) {
    (*uepoll::event_ptr<std::function<void(std::uint32_t)>>(e))(e.events);
  }
  EXPECT_EQ(received, "event");
}

TEST_F(CxxEventData, ConstPointersAndRawFormsWork) {
  Instance ep = Instance::create();
  EventFd a = EventFd::create(1);
  EventFd b = EventFd::create(1);
  const std::string name = "const";
  ep.add(a, EPOLLIN, &name);
  epoll_data_t raw{};
  raw.fd = 42;
  ep.add(b, EPOLLIN, raw);
  std::array<epoll_event, 4> buf{};
  auto got = ep.wait(buf, 0ms);
  ASSERT_EQ(got.size(), 2u);
  int found = 0;
  for (const epoll_event& e : got) {
    if (e.data.ptr == &name) {
      EXPECT_EQ(*uepoll::event_ptr<const std::string>(e), "const");
      ++found;
    } else {
      EXPECT_EQ(e.data.fd, 42);
      ++found;
    }
  }
  EXPECT_EQ(found, 2);
}

TEST_F(CxxEventData, ModifySwitchesBetweenPointerAndInteger) {
  Instance ep = Instance::create();
  EventFd e = EventFd::create(1);
  Connection c{7};
  ep.add(e, EPOLLIN, 5);
  std::array<epoll_event, 2> buf{};
  ASSERT_EQ(ep.wait(buf, 0ms).size(), 1u);
  EXPECT_EQ(buf[0].data.u64, 5u);
  ep.modify(e, EPOLLIN, &c);
  ASSERT_EQ(ep.wait(buf, 0ms).size(), 1u);
  EXPECT_EQ(uepoll::event_ptr<Connection>(buf[0])->id, 7);
  std::error_code ec = Errno(EXDEV);
  ep.modify(e, EPOLLIN, 6, ec);
  EXPECT_FALSE(ec);
  ASSERT_EQ(ep.wait(buf, 0ms).size(), 1u);
  EXPECT_EQ(buf[0].data.u64, 6u);
}

}  // namespace
}  // namespace uepoll_test
