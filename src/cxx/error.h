// The C++ API's error plumbing: errno becomes a std::error_code here and
// nowhere else, and the throwing forms are built from the error_code forms.
#ifndef UEPOLL_SRC_CXX_ERROR_H_
#define UEPOLL_SRC_CXX_ERROR_H_

#include <errno.h>

#include <system_error>
#include <type_traits>
#include <utility>

namespace uepoll::detail {

// generic_category: the values are errno values chosen by uepoll (mirroring
// the kernel's), not codes the OS returned, and generic_category is the one
// the standard defines over errno, so codes compare equal to std::errc.
inline std::error_code ErrnoCode(int e) noexcept {
  return {e, std::generic_category()};
}

// Completes a C call's result r: failure (r < 0) records errno in ec,
// success clears ec (Asio's contract). Returns r.
template <class T>
T Check(T r, std::error_code& ec) noexcept {
  if (r < 0) {
    ec = ErrnoCode(errno);
  } else {
    ec.clear();
  }
  return r;
}

[[noreturn]] void ThrowError(const std::error_code& ec, const char* what);

// Runs f (an error_code form, given the code to fill) and throws
// std::system_error(ec, what) if it failed; otherwise returns f's result.
template <class F>
decltype(auto) OrThrow(const char* what, F&& f) {
  std::error_code ec;
  if constexpr (std::is_void_v<std::invoke_result_t<F&&, std::error_code&>>) {
    std::forward<F>(f)(ec);
    if (ec) ThrowError(ec, what);
  } else {
    auto r = std::forward<F>(f)(ec);
    if (ec) ThrowError(ec, what);
    return r;
  }
}

}  // namespace uepoll::detail

#endif  // UEPOLL_SRC_CXX_ERROR_H_
