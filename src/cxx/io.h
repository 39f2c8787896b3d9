// Byte I/O shared by Pipe and Socket: one uepoll_read / uepoll_write.
#ifndef UEPOLL_SRC_CXX_IO_H_
#define UEPOLL_SRC_CXX_IO_H_

#include <cstddef>
#include <span>
#include <system_error>

namespace uepoll::detail {

// Both return the byte count, or 0 with ec set on error.
std::size_t ReadSome(int fd, std::span<std::byte> buf,
                     std::error_code& ec) noexcept;
std::size_t WriteSome(int fd, std::span<const std::byte> buf,
                      std::error_code& ec) noexcept;

}  // namespace uepoll::detail

#endif  // UEPOLL_SRC_CXX_IO_H_
