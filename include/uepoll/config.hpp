// Build configuration shared by the C++ headers.
#ifndef UEPOLL_CONFIG_HPP_
#define UEPOLL_CONFIG_HPP_

// Every C++ header includes this one first, so an older standard stops
// here with a message rather than deep inside <concepts> or <span>. The
// CMake targets ask for C++20 themselves (cxx_std_20); pkg-config users
// pass -std=c++20.
#if !defined(__cplusplus) || __cplusplus < 202002L
#error "uepoll's C++ API needs C++20 (-std=c++20); C uses <uepoll/uepoll.h>"
#endif

// The library is built with -fvisibility=hidden; the C++ classes and
// functions it exports carry this mark (the C API has its own, UEPOLL_API).
#if defined(__GNUC__)
#define UEPOLL_CXX_API __attribute__((visibility("default")))
#else
#define UEPOLL_CXX_API
#endif

#endif  // UEPOLL_CONFIG_HPP_
