// Build configuration shared by the C++ headers.
#ifndef UEPOLL_CONFIG_HPP_
#define UEPOLL_CONFIG_HPP_

// The library is built with -fvisibility=hidden; the C++ classes and
// functions it exports carry this mark (the C API has its own, UEPOLL_API).
#if defined(__GNUC__)
#define UEPOLL_CXX_API __attribute__((visibility("default")))
#else
#define UEPOLL_CXX_API
#endif

#endif  // UEPOLL_CONFIG_HPP_
