// uepoll::EventData: what a registration carries back in
// epoll_event::data, raw or typed.
//
// Instance::add and modify take an EventData, which converts from
//  - an integer: the raw u64 form, as epoll_data.u64 (the default, 0);
//  - an epoll_data_t: any raw form (fd, u32, u64, ptr);
//  - a pointer to an object: stored in data.ptr, read back with
//    uepoll::event_ptr<T>(event), T being the type that was stored.
// The pointer form carries a handler with its registration, as Asio and
// libuv users are used to:
//
//   struct Connection { void on_events(std::uint32_t events); ... };
//   Connection conn;
//   ep.add(socket, EPOLLIN | EPOLLET, &conn);
//   for (const epoll_event& e : ep.wait(buf))
//     uepoll::event_ptr<Connection>(e)->on_events(e.events);
//
// The instance does not own what the pointer points to: keep it alive until
// the registration is removed (remove(), or closing the watched object).
#ifndef UEPOLL_EVENT_DATA_HPP_
#define UEPOLL_EVENT_DATA_HPP_

#include <sys/epoll.h>

#include <cstdint>
#include <type_traits>

#include <uepoll/config.hpp>

namespace uepoll {

class EventData {
 public:
  constexpr EventData() noexcept = default;
  // The implicit conversions are the point: add(fd, EPOLLIN, 7) and
  // add(fd, EPOLLIN, &handler) both read as intended.
  constexpr EventData(std::uint64_t u64) noexcept  // NOLINT: implicit
      : raw_{.u64 = u64} {}
  constexpr EventData(epoll_data_t raw) noexcept : raw_(raw) {}  // NOLINT
  template <class T>
  requires std::is_object_v<T> EventData(T* ptr)
  noexcept {  // NOLINT: implicit
    raw_.ptr = const_cast<void*>(static_cast<const void*>(ptr));
  }

  constexpr epoll_data_t raw() const noexcept { return raw_; }

 private:
  epoll_data_t raw_{.u64 = 0};
};

// The pointer a registration stored with EventData(T*), as that T*.
template <class T>
requires std::is_object_v<T> T* event_ptr(const epoll_event& ev) noexcept {
  return static_cast<T*>(ev.data.ptr);
}

}  // namespace uepoll

#endif  // UEPOLL_EVENT_DATA_HPP_
