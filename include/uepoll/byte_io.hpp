// Byte I/O shared by the handles that read and write bytes (PipeReader,
// PipeWriter, Socket): what buffers they take, and the three forms of each
// call.
//
// Buffers. write() takes text or bytes:
//  - anything that converts to std::string_view is text: a string literal
//    or any const char* (up to its NUL), std::string, std::string_view. A
//    char array converts too, so it is text: write std::span(buf, n) for
//    the first n bytes of a char buffer;
//  - any other contiguous range of byte-sized elements is bytes:
//    std::span<const std::byte>, std::vector<unsigned char>,
//    std::array<char, N>, std::span<const char>, ...
// read() fills any contiguous range of byte-sized, writable elements:
// char buf[64], std::array<std::byte, N>, std::vector<char>, std::string,
// std::span<unsigned char>, ...
//
// Forms (Asio's two, and one for nonblocking loops):
//  - read(buf) / write(buf) throw std::system_error on failure;
//  - read(buf, ec) / write(buf, ec) set ec on failure and clear it on
//    success, and return 0 on failure;
//  - try_read(buf) / try_write(buf) return a Result<std::size_t>: the
//    count, or the error, would_block() for EAGAIN (see result.hpp).
// The last two throw nothing, yet are not noexcept: a blocking read or
// write is a cancellation point, and pthread_cancel unwinds through it
// (a noexcept frame would turn that unwind into std::terminate).
// read returns 0 at end of file (every write end closed, or the peer shut
// down or closed). write may write fewer bytes than asked when nonblocking.
//
// [[nodiscard]] on read: the count is the only way to know how much of buf
// holds data. Not on write: a blocking write writes all of buf unless a
// signal interrupts it, and a caller that treats that as an error may
// ignore the count. try_write's Result is nodiscard (a nonblocking write
// must look at what was written).
#ifndef UEPOLL_BYTE_IO_HPP_
#define UEPOLL_BYTE_IO_HPP_

#include <cstddef>
#include <ranges>
#include <span>
#include <string_view>
#include <system_error>
#include <type_traits>

#include <uepoll/config.hpp>
#include <uepoll/result.hpp>

namespace uepoll {

// char, signed char, unsigned char, char8_t, std::byte, (u)int8_t.
template <class T>
concept ByteLike = sizeof(T) == 1 && std::is_trivially_copyable_v<T>;

template <class B>
concept ConstByteBuffer = std::convertible_to<const B&, std::string_view> ||(
    std::ranges::contiguous_range<const B>&& std::ranges::sized_range<const B>&&
        ByteLike<std::ranges::range_value_t<const B>>);

template <class B>
concept MutableByteBuffer =
    std::ranges::contiguous_range<B> && std::ranges::sized_range<B> &&
    ByteLike<std::ranges::range_value_t<B>> && !std::is_const_v<
        std::remove_reference_t<std::ranges::range_reference_t<B>>>;

namespace detail {

template <ConstByteBuffer B>
std::span<const std::byte> AsBytes(const B& b) noexcept {
  if constexpr (std::convertible_to<const B&, std::string_view>) {
    const std::string_view s = b;
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
  } else {
    return {reinterpret_cast<const std::byte*>(std::ranges::data(b)),
            static_cast<std::size_t>(std::ranges::size(b))};
  }
}

template <MutableByteBuffer B>
std::span<std::byte> AsWritableBytes(B&& b) noexcept {
  return {reinterpret_cast<std::byte*>(std::ranges::data(b)),
          static_cast<std::size_t>(std::ranges::size(b))};
}

// One uepoll_read / uepoll_write: the count, or 0 with ec set.
UEPOLL_CXX_API std::size_t ReadSome(int fd, std::span<std::byte> buf,
                                    std::error_code& ec);
UEPOLL_CXX_API std::size_t WriteSome(int fd, std::span<const std::byte> buf,
                                     std::error_code& ec);
[[noreturn]] UEPOLL_CXX_API void ThrowIoError(const std::error_code& ec,
                                              const char* what);

// The read calls of a handle H (CRTP: H has get()).
template <class H>
class UEPOLL_CXX_API ReadOps {
 public:
  [[nodiscard]] std::size_t read(std::span<std::byte> buf) {
    std::error_code ec;
    std::size_t n = read(buf, ec);
    if (ec) ThrowIoError(ec, "uepoll_read");
    return n;
  }
  [[nodiscard]] std::size_t read(std::span<std::byte> buf,
                                 std::error_code& ec) {
    return ReadSome(static_cast<const H&>(*this).get(), buf, ec);
  }
  Result<std::size_t> try_read(std::span<std::byte> buf) {
    std::error_code ec;
    std::size_t n = read(buf, ec);
    if (ec) return ec;
    return n;
  }

  template <MutableByteBuffer B>
  [[nodiscard]] std::size_t read(B&& buf) {
    return read(AsWritableBytes(buf));
  }
  template <MutableByteBuffer B>
  [[nodiscard]] std::size_t read(B&& buf, std::error_code& ec) {
    return read(AsWritableBytes(buf), ec);
  }
  template <MutableByteBuffer B>
  Result<std::size_t> try_read(B&& buf) {
    return try_read(AsWritableBytes(buf));
  }
};

// The write calls of a handle H (CRTP: H has get()).
template <class H>
class UEPOLL_CXX_API WriteOps {
 public:
  std::size_t write(std::span<const std::byte> buf) {
    std::error_code ec;
    std::size_t n = write(buf, ec);
    if (ec) ThrowIoError(ec, "uepoll_write");
    return n;
  }
  std::size_t write(std::span<const std::byte> buf, std::error_code& ec) {
    return WriteSome(static_cast<const H&>(*this).get(), buf, ec);
  }
  Result<std::size_t> try_write(std::span<const std::byte> buf) {
    std::error_code ec;
    std::size_t n = write(buf, ec);
    if (ec) return ec;
    return n;
  }

  template <ConstByteBuffer B>
  std::size_t write(const B& buf) {
    return write(AsBytes(buf));
  }
  template <ConstByteBuffer B>
  std::size_t write(const B& buf, std::error_code& ec) {
    return write(AsBytes(buf), ec);
  }
  template <ConstByteBuffer B>
  Result<std::size_t> try_write(const B& buf) {
    return try_write(AsBytes(buf));
  }
};

}  // namespace detail
}  // namespace uepoll

#endif  // UEPOLL_BYTE_IO_HPP_
