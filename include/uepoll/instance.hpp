// uepoll::Instance: an epoll instance (uepoll_epoll_create1 and friends).
//
// Both error forms and the thread-safety rules are as described in fd.hpp.
// One Instance may be waited on in one thread while another adds, modifies
// or removes registrations, as with epoll.
#ifndef UEPOLL_INSTANCE_HPP_
#define UEPOLL_INSTANCE_HPP_

#include <signal.h>
#include <sys/epoll.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>
#include <uepoll/uepoll.h>

namespace uepoll {

class UEPOLL_CXX_API Instance {
 public:
  // Any negative timeout waits without limit, as epoll_wait's -1 does.
  // Timeouts above INT_MAX milliseconds (24.8 days) are cut to INT_MAX.
  static constexpr std::chrono::milliseconds kForever{-1};

  Instance() noexcept = default;
  // Adopts a descriptor that refers to an epoll instance.
  explicit Instance(Fd fd) noexcept : fd_(std::move(fd)) {}

  // flags: 0 or EPOLL_CLOEXEC.
  [[nodiscard]] static Instance create(int flags = 0);
  [[nodiscard]] static Instance create(int flags, std::error_code& ec) noexcept;

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

  // EPOLL_CTL_ADD / _MOD / _DEL. data is returned in epoll_event::data.u64
  // (store a pointer with reinterpret_cast<std::uintptr_t>).
  void add(int fd, std::uint32_t events, std::uint64_t data = 0);
  void add(int fd, std::uint32_t events, std::uint64_t data,
           std::error_code& ec) noexcept;
  void modify(int fd, std::uint32_t events, std::uint64_t data = 0);
  void modify(int fd, std::uint32_t events, std::uint64_t data,
              std::error_code& ec) noexcept;
  void remove(int fd);
  void remove(int fd, std::error_code& ec) noexcept;

  template <FdHandle H>
  void add(const H& h, std::uint32_t events, std::uint64_t data = 0) {
    add(h.get(), events, data);
  }
  template <FdHandle H>
  void add(const H& h, std::uint32_t events, std::uint64_t data,
           std::error_code& ec) noexcept {
    add(h.get(), events, data, ec);
  }
  template <FdHandle H>
  void modify(const H& h, std::uint32_t events, std::uint64_t data = 0) {
    modify(h.get(), events, data);
  }
  template <FdHandle H>
  void modify(const H& h, std::uint32_t events, std::uint64_t data,
              std::error_code& ec) noexcept {
    modify(h.get(), events, data, ec);
  }
  template <FdHandle H>
  void remove(const H& h) {
    remove(h.get());
  }
  template <FdHandle H>
  void remove(const H& h, std::error_code& ec) noexcept {
    remove(h.get(), ec);
  }

  // Waits for events and returns the filled front of `events` (empty on
  // timeout, and in the error_code form on error). An empty span fails
  // EINVAL, as maxevents 0 does. A signal that interrupts the wait is an
  // error (EINTR) like any other: the caller decides whether to retry.
  [[nodiscard]] std::span<epoll_event> wait(
      std::span<epoll_event> events,
      std::chrono::milliseconds timeout = kForever);
  [[nodiscard]] std::span<epoll_event> wait(std::span<epoll_event> events,
                                            std::chrono::milliseconds timeout,
                                            std::error_code& ec) noexcept;

  // wait with the thread's signal mask replaced by sigmask for its duration
  // (epoll_pwait).
  [[nodiscard]] std::span<epoll_event> pwait(std::span<epoll_event> events,
                                             std::chrono::milliseconds timeout,
                                             const sigset_t& sigmask);
  [[nodiscard]] std::span<epoll_event> pwait(std::span<epoll_event> events,
                                             std::chrono::milliseconds timeout,
                                             const sigset_t& sigmask,
                                             std::error_code& ec) noexcept;

  // min_wait batching (uepoll_epoll_pwait3): wait up to min_wait for
  // events.size() events; at min_wait return what is ready, if anything;
  // otherwise wait on to the timeout and return at the first event. A zero
  // timeout ignores min_wait; a signal ends the wait at once.
  struct WaitOptions {
    std::chrono::nanoseconds timeout{-1};  // negative: forever
    std::chrono::nanoseconds min_wait{0};  // 0: none
    const sigset_t* sigmask = nullptr;     // null: keep the thread's mask
  };
  [[nodiscard]] std::span<epoll_event> wait(std::span<epoll_event> events,
                                            const WaitOptions& options);
  [[nodiscard]] std::span<epoll_event> wait(std::span<epoll_event> events,
                                            const WaitOptions& options,
                                            std::error_code& ec) noexcept;

  // Per-instance parameters (uepoll_epoll_set_params / get_params, the
  // kernel's EPIOCSPARAMS / EPIOCGPARAMS plus a default min_wait).
  void set_params(const uepoll_params& params);
  void set_params(const uepoll_params& params, std::error_code& ec) noexcept;
  [[nodiscard]] uepoll_params params() const;
  [[nodiscard]] uepoll_params params(std::error_code& ec) const noexcept;

 private:
  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_INSTANCE_HPP_
