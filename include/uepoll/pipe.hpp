// uepoll::Pipe: a pipe (uepoll_pipe2), as its two ends.
//
// Each end is a handle of its own that reads or writes by itself, so the
// ends can be taken apart and handed to different owners or threads:
//   auto [reader, writer] = uepoll::Pipe::create(O_NONBLOCK);
//   std::thread t([w = std::move(writer)]() mutable { w.write("ping"); });
//   std::array<char, 16> buf;
//   std::size_t n = reader.read(buf);
// Closing one end is `writer.close()`, or destroying or reassigning it.
//
// Buffers and the three forms of read and write: byte_io.hpp. Errors and
// thread safety: fd.hpp.
#ifndef UEPOLL_PIPE_HPP_
#define UEPOLL_PIPE_HPP_

#include <fcntl.h>

#include <cstddef>
#include <span>
#include <system_error>
#include <utility>

#include <uepoll/byte_io.hpp>
#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

namespace uepoll {

// The read end of a pipe: read, try_read (byte_io.hpp).
class UEPOLL_CXX_API PipeReader : public detail::ReadOps<PipeReader> {
 public:
  PipeReader() noexcept = default;
  // Adopts a descriptor that refers to the read end of a pipe.
  explicit PipeReader(Fd fd) noexcept : fd_(std::move(fd)) {}

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

 private:
  Fd fd_;
};

// The write end of a pipe: write, try_write (byte_io.hpp). Writing when
// every read end is closed fails EPIPE and raises SIGPIPE, as in Linux.
class UEPOLL_CXX_API PipeWriter : public detail::WriteOps<PipeWriter> {
 public:
  PipeWriter() noexcept = default;
  // Adopts a descriptor that refers to the write end of a pipe.
  explicit PipeWriter(Fd fd) noexcept : fd_(std::move(fd)) {}

  int get() const noexcept { return fd_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_); }
  const Fd& fd() const noexcept { return fd_; }
  [[nodiscard]] Fd release() noexcept { return std::move(fd_); }
  void close() { fd_.close(); }
  void close(std::error_code& ec) noexcept { fd_.close(ec); }

 private:
  Fd fd_;
};

struct UEPOLL_CXX_API Pipe {
  PipeReader read_end;
  PipeWriter write_end;

  // flags: O_NONBLOCK, O_CLOEXEC, O_DIRECT (packet mode).
  [[nodiscard]] static Pipe create(int flags = 0);
  [[nodiscard]] static Pipe create(int flags, std::error_code& ec) noexcept;

  // Kept from when the ends were plain Fds: read from read_end and write to
  // write_end. New code uses the ends.
  [[nodiscard]] std::size_t read(std::span<std::byte> buf) {
    return read_end.read(buf);
  }
  [[nodiscard]] std::size_t read(std::span<std::byte> buf,
                                 std::error_code& ec) {
    return read_end.read(buf, ec);
  }
  std::size_t write(std::span<const std::byte> buf) {
    return write_end.write(buf);
  }
  std::size_t write(std::span<const std::byte> buf, std::error_code& ec) {
    return write_end.write(buf, ec);
  }
};

}  // namespace uepoll

#endif  // UEPOLL_PIPE_HPP_
