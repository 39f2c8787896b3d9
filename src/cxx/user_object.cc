#include <uepoll/uepoll.h>
#include <uepoll/user_object.hpp>

#include "cxx/error.h"

namespace uepoll {
namespace detail {

// The C callbacks, over the virtual functions. ctx is the UserObject.
struct UserObjectAccess {
  static uint32_t Poll(void* ctx) {
    return static_cast<UserObject*>(ctx)->poll();
  }
  static ssize_t Read(void* ctx, void* buf, size_t count) {
    return static_cast<UserObject*>(ctx)->read(buf, count);
  }
  static ssize_t Write(void* ctx, const void* buf, size_t count) {
    return static_cast<UserObject*>(ctx)->write(buf, count);
  }
  static void Release(void* ctx) {
    auto* o = static_cast<UserObject*>(ctx);
    o->on_release();
    // The descriptors' share goes last: this may destroy the object (and
    // put its handle), which is why nothing touches it afterwards.
    std::shared_ptr<UserObject> share = std::move(o->self_);
  }
  static Fd Attach(const std::shared_ptr<UserObject>& obj, int flags,
                   std::error_code& ec) noexcept {
    static const uepoll_obj_ops kOps = {&Poll, &Read, &Write, &Release};
    if (!obj) {
      ec = ErrnoCode(EINVAL);
      return Fd();
    }
    if (obj->handle_.load(std::memory_order_acquire) != nullptr) {
      ec = ErrnoCode(EBUSY);
      return Fd();
    }
    // The share must exist before the descriptor does: another thread may
    // close it (running Release) as soon as it is installed.
    obj->self_ = obj;
    uepoll_obj* handle = nullptr;
    int fd = Check(uepoll_obj_create(&kOps, obj.get(), flags, &handle), ec);
    if (fd < 0) {
      obj->self_.reset();
      return Fd();
    }
    // release: pairs with the acquire in notify() on other threads.
    obj->handle_.store(handle, std::memory_order_release);
    return Fd(fd);
  }
};

Fd AttachUserObject(const std::shared_ptr<UserObject>& obj, int flags,
                    std::error_code& ec) noexcept {
  return UserObjectAccess::Attach(obj, flags, ec);
}

}  // namespace detail

UserObject::~UserObject() {
  if (uepoll_obj* h = handle_.load(std::memory_order_acquire)) {
    uepoll_obj_put(h);
  }
}

ssize_t UserObject::read(void*, std::size_t) noexcept { return -EINVAL; }
ssize_t UserObject::write(const void*, std::size_t) noexcept { return -EINVAL; }

void UserObject::notify(std::uint32_t events) const noexcept {
  if (uepoll_obj* h = handle_.load(std::memory_order_acquire)) {
    uepoll_obj_notify(h, events);
  }
}

}  // namespace uepoll
