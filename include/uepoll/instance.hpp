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
#include <ratio>
#include <span>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/event_data.hpp>
#include <uepoll/fd.hpp>
#include <uepoll/uepoll.h>

namespace uepoll {
namespace detail {

// A wait's timeout as whole nanoseconds (epoll_pwait2's resolution),
// rounded up so that a wait never ends before the time asked for: 1.5 ns
// waits 2 ns, one picosecond waits 1 ns. Negative (or NaN) means no limit
// and gives -1 ns; a timeout beyond nanoseconds::max() (292 years) is cut
// to it. The kernel keeps the nanoseconds of a timespec as they are, so
// rounding at the conversion is all there is to do.
template <class Rep, class Period>
constexpr std::chrono::nanoseconds CeilToNanoseconds(
    std::chrono::duration<Rep, Period> d) noexcept {
  using std::chrono::nanoseconds;
  if (!(d >= d.zero())) return nanoseconds(-1);  // negative, or NaN
  // Compared in long double, which cannot overflow: a coarse duration
  // (hours::max()) would overflow nanoseconds' int64 on the way.
  const std::chrono::duration<long double, std::nano> as_ns = d;
  if (as_ns >= std::chrono::duration<long double, std::nano>(
                   static_cast<long double>(nanoseconds::max().count()))) {
    return nanoseconds::max();
  }
  return std::chrono::ceil<nanoseconds>(d);
}

}  // namespace detail

class UEPOLL_CXX_API Instance {
 public:
  // Any negative timeout waits without limit, as epoll_wait's -1 does.
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

  // EPOLL_CTL_ADD / _MOD / _DEL. data comes back in epoll_event::data: an
  // integer (data.u64), an epoll_data_t, or a pointer to an object that
  // uepoll::event_ptr<T> reads back (event_data.hpp).
  void add(int fd, std::uint32_t events, EventData data = {});
  void add(int fd, std::uint32_t events, EventData data,
           std::error_code& ec) noexcept;
  void modify(int fd, std::uint32_t events, EventData data = {});
  void modify(int fd, std::uint32_t events, EventData data,
              std::error_code& ec) noexcept;
  void remove(int fd);
  void remove(int fd, std::error_code& ec) noexcept;

  template <FdHandle H>
  void add(const H& h, std::uint32_t events, EventData data = {}) {
    add(h.get(), events, data);
  }
  template <FdHandle H>
  void add(const H& h, std::uint32_t events, EventData data,
           std::error_code& ec) noexcept {
    add(h.get(), events, data, ec);
  }
  template <FdHandle H>
  void modify(const H& h, std::uint32_t events, EventData data = {}) {
    modify(h.get(), events, data);
  }
  template <FdHandle H>
  void modify(const H& h, std::uint32_t events, EventData data,
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
  //
  // The timeout is any std::chrono::duration (500us, 1.5s as
  // duration<double>, ...), rounded up to whole nanoseconds
  // (detail::CeilToNanoseconds) and waited with epoll_pwait2's resolution.
  // Any negative value, such as kForever (the default), waits without
  // limit.
  //
  // Not [[nodiscard]]: a thread that waits only to be woken (the events
  // are handled elsewhere, or it just drains a wakeup eventfd) has no use
  // for the span.
  template <class Rep = std::chrono::milliseconds::rep,
            class Period = std::chrono::milliseconds::period>
  std::span<epoll_event> wait(
      std::span<epoll_event> events,
      std::chrono::duration<Rep, Period> timeout = kForever) {
    return wait_for(events, detail::CeilToNanoseconds(timeout), nullptr);
  }
  template <class Rep, class Period>
  std::span<epoll_event> wait(std::span<epoll_event> events,
                              std::chrono::duration<Rep, Period> timeout,
                              std::error_code& ec) {
    return wait_for(events, detail::CeilToNanoseconds(timeout), nullptr, ec);
  }

  // wait with the thread's signal mask replaced by sigmask for its duration
  // (epoll_pwait).
  template <class Rep, class Period>
  std::span<epoll_event> pwait(std::span<epoll_event> events,
                               std::chrono::duration<Rep, Period> timeout,
                               const sigset_t& sigmask) {
    return wait_for(events, detail::CeilToNanoseconds(timeout), &sigmask);
  }
  template <class Rep, class Period>
  std::span<epoll_event> pwait(std::span<epoll_event> events,
                               std::chrono::duration<Rep, Period> timeout,
                               const sigset_t& sigmask, std::error_code& ec) {
    return wait_for(events, detail::CeilToNanoseconds(timeout), &sigmask, ec);
  }

  // min_wait batching (uepoll_epoll_pwait3): wait up to min_wait for
  // events.size() events; at min_wait return what is ready, if anything;
  // otherwise wait on to the timeout and return at the first event. A zero
  // timeout ignores min_wait; a signal ends the wait at once.
  struct WaitOptions {
    std::chrono::nanoseconds timeout{-1};  // negative: forever
    std::chrono::nanoseconds min_wait{0};  // 0: none
    const sigset_t* sigmask = nullptr;     // null: keep the thread's mask
  };
  std::span<epoll_event> wait(std::span<epoll_event> events,
                              const WaitOptions& options);
  std::span<epoll_event> wait(std::span<epoll_event> events,
                              const WaitOptions& options, std::error_code& ec);

  // Per-instance parameters (uepoll_epoll_set_params / get_params, the
  // kernel's EPIOCSPARAMS / EPIOCGPARAMS plus a default min_wait).
  // params() only reads, so dropping its result is always a mistake.
  void set_params(const uepoll_params& params);
  void set_params(const uepoll_params& params, std::error_code& ec) noexcept;
  [[nodiscard]] uepoll_params params() const;
  [[nodiscard]] uepoll_params params(std::error_code& ec) const noexcept;

 private:
  // uepoll_epoll_pwait2 with timeout (negative: NULL, no limit) and
  // sigmask (null: keep the thread's).
  std::span<epoll_event> wait_for(std::span<epoll_event> events,
                                  std::chrono::nanoseconds timeout,
                                  const sigset_t* sigmask);
  std::span<epoll_event> wait_for(std::span<epoll_event> events,
                                  std::chrono::nanoseconds timeout,
                                  const sigset_t* sigmask, std::error_code& ec);

  Fd fd_;
};

}  // namespace uepoll

#endif  // UEPOLL_INSTANCE_HPP_
