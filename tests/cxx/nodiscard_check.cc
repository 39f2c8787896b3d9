// Compiled, not run (tests/cxx/CMakeLists.txt): checks where the C++ API
// says [[nodiscard]]. With -Werror, CASE 0 ignores results that may be
// ignored and must compile; every other CASE ignores one result that must
// not be, and must fail with the nodiscard warning.
#include <array>
#include <chrono>
#include <cstddef>
#include <system_error>

#include <uepoll/uepoll.hpp>

using namespace std::chrono_literals;

void Check(uepoll::Instance& ep, uepoll::EventFd& efd, uepoll::PipeReader& r,
           uepoll::PipeWriter& w, uepoll::Socket& s, uepoll::Fd& fd) {
  std::array<epoll_event, 4> events{};
  std::array<std::byte, 4> buf{};
  std::error_code ec;
  (void)events;
  (void)buf;
  (void)ec;
#if CASE == 0
  // A wait only for the wakeup; a read only to reset a wakeup eventfd; a
  // blocking write that writes everything or throws.
  ep.wait(events, 1ms);
  ep.wait(events, 1ms, ec);
  ep.pwait(events, 1ms, sigset_t{});
  ep.wait(events, uepoll::Instance::WaitOptions{});
  efd.read();
  efd.read(ec);
  w.write("x");
  s.write(buf, ec);
  ep.set_params(uepoll_params{});
  (void)r;
  (void)fd;
#elif CASE == 1
  uepoll::Instance::create();  // the new instance is closed at once
#elif CASE == 2
  fd.release();  // the descriptor leaks
#elif CASE == 3
  r.read(buf);  // how much of buf holds data is lost
#elif CASE == 4
  s.try_read(buf);  // the count or the error is lost
#elif CASE == 5
  w.try_write("x");
#elif CASE == 6
  efd.try_read();
#elif CASE == 7
  ep.params();  // only reads
#elif CASE == 8
  fd.dup();  // the new descriptor is closed at once
#else
#error "unknown CASE"
#endif
}
