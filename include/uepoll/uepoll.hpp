// The uepoll C++ API: RAII handles over the C API in <uepoll/uepoll.h>.
// See docs/cxx_api.md.
#ifndef UEPOLL_UEPOLL_HPP_
#define UEPOLL_UEPOLL_HPP_

#include <uepoll/byte_io.hpp>
#include <uepoll/config.hpp>
#include <uepoll/event_data.hpp>
#include <uepoll/event_fd.hpp>
#include <uepoll/fd.hpp>
#include <uepoll/instance.hpp>
#include <uepoll/pipe.hpp>
#include <uepoll/result.hpp>
#include <uepoll/socket.hpp>
#include <uepoll/socket_pair.hpp>
#include <uepoll/timer_fd.hpp>
#include <uepoll/user_object.hpp>
#include <uepoll/vpoll_fd.hpp>

#endif  // UEPOLL_UEPOLL_HPP_
