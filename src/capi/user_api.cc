// uepoll_obj_* and uepoll_vpoll_*: user-defined pollable objects
// (sources/user_object.h). The opaque struct uepoll_obj is the engine's
// UserObject itself: notify is a call and an atomic load, no lookup.
#include <errno.h>
#include <fcntl.h>

#include <uepoll/uepoll.h>

#include "base/sys.h"
#include "capi/errors.h"
#include "sources/user_object.h"

using uepoll::impl::ToErrno;
using uepoll::impl::UserObject;

namespace {

UserObject *Impl(struct uepoll_obj *obj) {
  return reinterpret_cast<UserObject *>(obj);
}

}  // namespace

extern "C" {

int uepoll_obj_create(const struct uepoll_obj_ops *ops, void *ctx, int flags,
                      struct uepoll_obj **objp) {
  // *objp is written before the descriptor is installed (and restored if
  // the call fails): see CreateUserObject.
  return ToErrno(uepoll::impl::CreateUserObject(
      ops, ctx, flags, reinterpret_cast<UserObject **>(objp)));
}

void uepoll_obj_notify(struct uepoll_obj *obj, uint32_t events) {
  // A library never aborts on bad input: a NULL handle is ignored.
  if (obj) Impl(obj)->Notify(events);
}

void uepoll_obj_put(struct uepoll_obj *obj) {
  if (obj) Impl(obj)->PutHandle();
}

int uepoll_vpoll_create(uint32_t events, int flags) {
  return ToErrno(uepoll::impl::CreateVpoll(events, flags));
}

int uepoll_vpoll_ctl(int fd, int op, uint32_t events) {
  int r = uepoll::impl::VpollCtl(fd, op, events);
  // A kernel descriptor is open but no mask-mode object: EINVAL, as for a
  // uepoll descriptor of another kind; EBADF only for a closed number.
  if (r == -EBADF && uepoll::impl::sys::Fcntl(fd, F_GETFD, 0) >= 0) {
    r = -EINVAL;
  }
  return ToErrno(r);
}

}  // extern "C"
