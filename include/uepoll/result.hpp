// uepoll::Result<T>: a value or the error that prevented it, for the
// try_ forms of read and write.
//
// In an edge-triggered loop EAGAIN is how a drain ends, not a failure, so
// the try_ forms neither throw nor take an error_code&: they return the
// outcome, and would_block() names the normal end.
//
//   std::array<std::byte, 4096> buf;
//   for (;;) {
//     auto n = reader.try_read(buf);
//     if (n.would_block()) break;          // drained: wait for the next edge
//     if (!n) throw std::system_error(n.error());
//     if (*n == 0) { /* end of file */ break; }
//     consume(std::span(buf).first(*n));
//   }
//
// [[nodiscard]]: a try_ call whose result is dropped has lost either the
// byte count or the error, which is always a bug.
#ifndef UEPOLL_RESULT_HPP_
#define UEPOLL_RESULT_HPP_

#include <system_error>
#include <type_traits>

#include <uepoll/config.hpp>

namespace uepoll {

template <class T>
class [[nodiscard]] Result {
  static_assert(std::is_trivially_copyable_v<T>,
                "Result holds counts and values, not resources");

 public:
  constexpr Result(T value) noexcept : value_(value) {}  // NOLINT: implicit
  // ec must be an error (nonzero).
  Result(std::error_code ec) noexcept : ec_(ec) {}  // NOLINT: implicit

  bool has_value() const noexcept { return !ec_; }
  explicit operator bool() const noexcept { return has_value(); }
  // The value; only meaningful when has_value().
  const T& operator*() const noexcept { return value_; }
  // The value, or std::system_error(error()) when there is none.
  T value() const {
    if (ec_) throw std::system_error(ec_);
    return value_;
  }
  T value_or(T other) const noexcept { return ec_ ? other : value_; }

  // Empty when has_value().
  const std::error_code& error() const noexcept { return ec_; }
  // EAGAIN (EWOULDBLOCK is the same value on Linux): nonblocking and not
  // ready, the normal end of a drain.
  bool would_block() const noexcept {
    return ec_ == std::errc::resource_unavailable_try_again;
  }

 private:
  T value_{};
  std::error_code ec_;
};

// For calls with nothing to return but their outcome (EventFd::try_write).
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() noexcept = default;
  Result(std::error_code ec) noexcept : ec_(ec) {}  // NOLINT: implicit

  bool has_value() const noexcept { return !ec_; }
  explicit operator bool() const noexcept { return has_value(); }
  // Throws std::system_error(error()) if the call failed.
  void value() const {
    if (ec_) throw std::system_error(ec_);
  }
  const std::error_code& error() const noexcept { return ec_; }
  bool would_block() const noexcept {
    return ec_ == std::errc::resource_unavailable_try_again;
  }

 private:
  std::error_code ec_;
};

}  // namespace uepoll

#endif  // UEPOLL_RESULT_HPP_
