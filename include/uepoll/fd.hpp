// uepoll::Fd: the owner of one uepoll descriptor.
//
// Errors: every fallible call comes in two forms (Asio's convention). The
// first throws std::system_error; the second takes a std::error_code&,
// clears the code on success and sets it on failure, and throws nothing.
// The second form is noexcept except in the calls that may block (waits,
// reads and writes, and their try_ forms): those are cancellation points,
// and pthread_cancel of a thread blocked in one unwinds its stack, which a
// noexcept frame would turn into std::terminate. Codes are
// errno values in std::generic_category(), so they compare equal to
// std::errc constants. Reads and writes have a third form, try_read and
// try_write, that returns the count or the error as a Result (result.hpp),
// for nonblocking loops where EAGAIN is the normal end.
//
// Thread safety: like std::unique_ptr. Calls that only use the descriptor
// (get, dup, and the operations of the types built on Fd) may run
// concurrently on one handle; moves, reset, release and close change the
// handle and must not overlap any other call on it.
#ifndef UEPOLL_FD_HPP_
#define UEPOLL_FD_HPP_

#include <concepts>
#include <system_error>

#include <uepoll/config.hpp>

namespace uepoll {

// Anything that exposes a descriptor number: Fd and the handles built on it
// (Instance, EventFd, PipeReader, PipeWriter, Socket). Instance::add and
// friends accept these.
template <class T>
concept FdHandle = requires(const T& t) {
  { t.get() }
  noexcept->std::same_as<int>;
};

// Move-only; an empty Fd holds -1. Only for uepoll descriptors: closing goes
// through uepoll_close.
class UEPOLL_CXX_API Fd {
 public:
  Fd() noexcept = default;
  // Adopts fd (which may be -1).
  explicit Fd(int fd) noexcept : fd_(fd) {}

  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }

  // Closes the descriptor and ignores the result. A destructor cannot
  // throw, and there is nothing to retry: close releases the descriptor
  // even when it fails (as Linux does), so a second close could hit a
  // number someone else has been given meanwhile. Call close() to see the
  // error.
  ~Fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  // Gives up ownership: returns the descriptor, leaves this empty.
  [[nodiscard]] int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

  // Closes the current descriptor (ignoring errors, as the destructor does)
  // and adopts fd. reset(get()) changes nothing.
  void reset(int fd = -1) noexcept;

  // Closes the descriptor and reports close's error. The handle is empty
  // afterwards either way. Closing an empty Fd fails EBADF.
  void close();
  void close(std::error_code& ec) noexcept;

  // A new descriptor for the same open object (uepoll_dup).
  [[nodiscard]] Fd dup() const;
  [[nodiscard]] Fd dup(std::error_code& ec) const noexcept;

 private:
  int fd_ = -1;
};

}  // namespace uepoll

#endif  // UEPOLL_FD_HPP_
