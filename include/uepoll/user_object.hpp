// uepoll::UserObject: make an object of your own pollable (the C API's
// uepoll_obj_create, include/uepoll/uepoll.h has the full rules).
//
// Derive from UserObject, implement poll() (the readiness now, EPOLL*
// bits), and call notify() after each change of the state poll() reads.
// make_user_object<T>(flags, args...) constructs a T and a descriptor for
// it; the descriptor then works with every uepoll call (epoll, poll, dup,
// close, read/write if T overrides them).
//
//   class Queue : public uepoll::UserObject {
//    public:
//     std::uint32_t poll() noexcept override {
//       std::lock_guard l(mu_);
//       return items_.empty() ? 0 : EPOLLIN;
//     }
//     void push(int v) {
//       { std::lock_guard l(mu_); items_.push_back(v); }
//       notify(EPOLLIN);
//     }
//     ...
//   };
//   auto [fd, queue] = uepoll::make_user_object<Queue>(O_NONBLOCK);
//   instance.add(fd, EPOLLIN);
//
// Lifetime: the object is shared by the application (the returned
// shared_ptr) and the descriptors (until their last close, which calls
// on_release()); it is destroyed when both are done with it. So poll()
// never runs on a destroyed object, and notify() may be called for as long
// as the application holds the object (after the last close it does
// nothing).
//
// The callbacks run inside uepoll: poll() with uepoll locks held (it must
// not block and must not call uepoll, notify() included; debug builds
// abort with a message when it does); read(), write() and on_release()
// with none. None may throw: they are noexcept, an exception terminates.
#ifndef UEPOLL_USER_OBJECT_HPP_
#define UEPOLL_USER_OBJECT_HPP_

#include <sys/types.h>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>
#include <utility>

#include <uepoll/config.hpp>
#include <uepoll/fd.hpp>

struct uepoll_obj;  // the C API's handle (uepoll.h)

namespace uepoll {

class UserObject;

namespace detail {
struct UserObjectAccess;
UEPOLL_CXX_API Fd AttachUserObject(const std::shared_ptr<UserObject>& obj,
                                   int flags, std::error_code& ec) noexcept;
}  // namespace detail

class UEPOLL_CXX_API UserObject {
 public:
  UserObject(const UserObject&) = delete;
  UserObject& operator=(const UserObject&) = delete;
  virtual ~UserObject();

  // The readiness now: EPOLLIN, EPOLLOUT, EPOLLPRI, EPOLLERR, EPOLLHUP,
  // EPOLLRDHUP, EPOLLRDNORM, ... Must not block, must not call uepoll.
  virtual std::uint32_t poll() noexcept = 0;
  // uepoll_read / uepoll_write on the descriptor: a byte count (at most
  // count) or -errno. Return -EAGAIN rather than block: on a descriptor
  // without O_NONBLOCK the caller then sleeps in uepoll until the next
  // notify() and asks again. Default: -EINVAL, as for a file without that
  // operation.
  virtual ssize_t read(void* buf, std::size_t count) noexcept;
  virtual ssize_t write(const void* buf, std::size_t count) noexcept;
  // The last close of the descriptors: no callback runs after it.
  virtual void on_release() noexcept {}

  // Wakes the watchers (wake_up_poll): events is the hint, the bits that
  // changed (0: anything may have). Any thread, any time; make the change
  // first, under a lock poll() also takes or with seq_cst atomics. Costs
  // one atomic load when nobody watches. Not from poll().
  void notify(std::uint32_t events = 0) const noexcept;

 protected:
  UserObject() noexcept = default;

 private:
  friend struct detail::UserObjectAccess;
  std::atomic<uepoll_obj*> handle_{nullptr};
  std::shared_ptr<UserObject> self_;  // the descriptors' share
};

// A descriptor for a user object and the application's share of it.
template <class T>
struct UserObjectFd {
  Fd fd;
  std::shared_ptr<T> object;
};

// Gives obj (which must not have a descriptor yet: EBUSY) a descriptor.
// flags: O_NONBLOCK, O_CLOEXEC.
template <std::derived_from<UserObject> T>
[[nodiscard]] UserObjectFd<T> attach_user_object(std::shared_ptr<T> obj,
                                                 int flags,
                                                 std::error_code& ec) noexcept {
  Fd fd = detail::AttachUserObject(obj, flags, ec);
  if (ec) return {};
  return {std::move(fd), std::move(obj)};
}
template <std::derived_from<UserObject> T>
[[nodiscard]] UserObjectFd<T> attach_user_object(std::shared_ptr<T> obj,
                                                 int flags = 0) {
  std::error_code ec;
  UserObjectFd<T> r = attach_user_object(std::move(obj), flags, ec);
  if (ec) throw std::system_error(ec, "uepoll_obj_create");
  return r;
}

// Constructs a T from args and gives it a descriptor.
template <std::derived_from<UserObject> T, class... Args>
[[nodiscard]] UserObjectFd<T> make_user_object(int flags, Args&&... args) {
  return attach_user_object(std::make_shared<T>(std::forward<Args>(args)...),
                            flags);
}

}  // namespace uepoll

#endif  // UEPOLL_USER_OBJECT_HPP_
