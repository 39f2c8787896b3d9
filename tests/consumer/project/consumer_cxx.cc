// The C++ API through the installed package: the headers work outside the
// tree (with the standard the CMake targets ask for, or -std=c++20), and
// the library exports what they call (src/uepoll.map): the throwing and
// error_code forms, a pipe's ends, the try_ forms, a wait in microseconds
// and a typed registration.
#include <sys/eventfd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <system_error>

#include <uepoll/uepoll.hpp>

int main() {
  using namespace std::chrono_literals;
  try {
    uepoll::EventFd efd = uepoll::EventFd::create(0, EFD_NONBLOCK);
    efd.write(2);
    const std::uint64_t value = efd.read();
    std::error_code ec;
    (void)efd.read(ec);  // the counter is 0 now: EAGAIN
    if (value != 2 || ec != std::errc::resource_unavailable_try_again) {
      std::fprintf(stderr, "consumer_cxx: read %llu, then '%s'\n",
                   static_cast<unsigned long long>(value),
                   ec.message().c_str());
      return 1;
    }

    auto [reader, writer] = uepoll::Pipe::create(O_NONBLOCK);
    uepoll::Instance ep = uepoll::Instance::create();
    std::string_view tag = "pipe";
    ep.add(reader, EPOLLIN | EPOLLET, &tag);
    writer.write("hello");
    std::array<epoll_event, 2> events{};
    auto ready = ep.wait(events, 500us);
    if (ready.size() != 1 ||
        *uepoll::event_ptr<std::string_view>(ready[0]) != "pipe") {
      std::fprintf(stderr, "consumer_cxx: %zu events, not the pipe's\n",
                   ready.size());
      return 1;
    }
    std::array<char, 16> buf{};
    std::size_t total = 0;
    uepoll::Result<std::size_t> n = 0;
    while ((n = reader.try_read(buf)) && *n > 0) total += *n;
    if (total != 5 || !n.would_block()) {
      std::fprintf(stderr, "consumer_cxx: drained %zu bytes, then '%s'\n",
                   total, n.error().message().c_str());
      return 1;
    }
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
    return 1;
  }
  std::printf(
      "consumer_cxx: EventFd and pipe ends, try_read to EAGAIN, typed data\n");
  return 0;
}
