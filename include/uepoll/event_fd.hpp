// uepoll::EventFd: an eventfd counter (uepoll_eventfd).
//
// Both error forms and the thread-safety rules are as described in fd.hpp;
// the try_ forms return a Result (result.hpp).
#ifndef UEPOLL_EVENT_FD_HPP_
#define UEPOLL_EVENT_FD_HPP_

#include <sys/eventfd.h>

#include <cstdint>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>
#include <uepoll/result.hpp>

namespace uepoll {

class UEPOLL_CXX_API EventFd {
 public:
  EventFd() noexcept = default;
  // Adopts a descriptor that refers to an eventfd.
  explicit EventFd(Fd fd) noexcept : fd_(std::move(fd)) {}

  // flags: EFD_NONBLOCK, EFD_CLOEXEC, EFD_SEMAPHORE.
  [[nodiscard]] static EventFd create(unsigned int initval = 0, int flags = 0);
  [[nodiscard]] static EventFd create(unsigned int initval, int flags,
                                      std::error_code& ec) noexcept;

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

  // Takes the counter (or 1 of it with EFD_SEMAPHORE). A zero counter
  // blocks, or fails EAGAIN with EFD_NONBLOCK. The error_code form returns
  // 0 on error. Not [[nodiscard]]: reading only to reset the counter (a
  // wakeup eventfd) is a normal use.
  std::uint64_t read();
  std::uint64_t read(std::error_code& ec);
  // The counter, or the error: would_block() when it is 0 and the eventfd
  // is nonblocking (result.hpp).
  Result<std::uint64_t> try_read() {
    std::error_code ec;
    std::uint64_t v = read(ec);
    if (ec) return ec;
    return v;
  }

  // Adds value to the counter. Overflow past 2^64 - 2 blocks, or fails
  // EAGAIN with EFD_NONBLOCK; value 2^64 - 1 fails EINVAL.
  void write(std::uint64_t value);
  void write(std::uint64_t value, std::error_code& ec);
  // would_block() when the counter would overflow and the eventfd is
  // nonblocking.
  Result<void> try_write(std::uint64_t value) {
    std::error_code ec;
    write(value, ec);
    return ec;
  }

 private:
  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_EVENT_FD_HPP_
