// uepoll::VpollFd: a mask-mode user object (uepoll_vpoll_create): its
// watchers see exactly the readiness bits its owner sets.
//
// Both error forms and the thread-safety rules are as described in fd.hpp.
#ifndef UEPOLL_VPOLL_FD_HPP_
#define UEPOLL_VPOLL_FD_HPP_

#include <cstdint>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

namespace uepoll {

class UEPOLL_CXX_API VpollFd {
 public:
  VpollFd() noexcept = default;
  // Adopts a descriptor that refers to a mask-mode object.
  explicit VpollFd(Fd fd) noexcept : fd_(std::move(fd)) {}

  // events: the initial mask (EPOLL* readiness bits); flags: O_NONBLOCK,
  // O_CLOEXEC.
  [[nodiscard]] static VpollFd create(std::uint32_t events = 0, int flags = 0);
  [[nodiscard]] static VpollFd create(std::uint32_t events, int flags,
                                      std::error_code& ec) noexcept;

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

  // Sets bits and wakes the watchers of those bits.
  void add(std::uint32_t events);
  void add(std::uint32_t events, std::error_code& ec) noexcept;
  // Clears bits; wakes nobody.
  void del(std::uint32_t events);
  void del(std::uint32_t events, std::error_code& ec) noexcept;
  // Replaces the mask and wakes the watchers of the new bits.
  void set(std::uint32_t events);
  void set(std::uint32_t events, std::error_code& ec) noexcept;

 private:
  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_VPOLL_FD_HPP_
