// The C++ API through the installed package: the headers work outside the
// tree, and libuepoll.so exports the C++ API (src/uepoll.map), both forms of
// a call: the throwing one and the error_code one.
#include <sys/eventfd.h>

#include <cstdint>
#include <cstdio>
#include <system_error>

#include <uepoll/uepoll.hpp>

int main() {
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
    efd.close();
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
    return 1;
  }
  std::printf("consumer_cxx: EventFd write, read, EAGAIN as expected\n");
  return 0;
}
