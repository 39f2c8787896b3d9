#include "userobj/user_eventfd.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include <uepoll/uepoll.h>

namespace uepoll_test {
namespace {

constexpr uint64_t kMax = ~uint64_t{0};
std::atomic<long> g_released{0};
std::atomic<long> g_live{0};

struct Counter {
  std::mutex mu;
  uint64_t count;
  bool semaphore;
  uepoll_obj* obj = nullptr;
};

uint32_t Poll(void* ctx) {
  auto* c = static_cast<Counter*>(ctx);
  std::lock_guard<std::mutex> l(c->mu);
  uint32_t mask = 0;
  if (c->count > 0) mask |= EPOLLIN;
  if (c->count == kMax) mask |= EPOLLERR;
  if (kMax - 1 > c->count) mask |= EPOLLOUT;
  return mask;
}

ssize_t Read(void* ctx, void* buf, size_t n) {
  auto* c = static_cast<Counter*>(ctx);
  if (n < sizeof(uint64_t)) return -EINVAL;
  if (!buf) return -EFAULT;
  uint64_t v;
  {
    std::lock_guard<std::mutex> l(c->mu);
    if (c->count == 0) return -EAGAIN;
    v = c->semaphore ? 1 : c->count;
    c->count -= v;
  }
  std::memcpy(buf, &v, sizeof v);
  uepoll_obj_notify(c->obj, EPOLLOUT);
  return sizeof v;
}

ssize_t Write(void* ctx, const void* buf, size_t n) {
  auto* c = static_cast<Counter*>(ctx);
  if (n != sizeof(uint64_t)) return -EINVAL;
  if (!buf) return -EFAULT;
  uint64_t v;
  std::memcpy(&v, buf, sizeof v);
  if (v == kMax) return -EINVAL;
  {
    std::lock_guard<std::mutex> l(c->mu);
    if (kMax - c->count <= v) return -EAGAIN;
    c->count += v;
  }
  uepoll_obj_notify(c->obj, EPOLLIN);
  return sizeof v;
}

void Release(void* ctx) {
  auto* c = static_cast<Counter*>(ctx);
  uepoll_obj_put(c->obj);
  delete c;
  g_released.fetch_add(1);
  g_live.fetch_sub(1);
}

const uepoll_obj_ops kOps = {&Poll, &Read, &Write, &Release};

int UClose(int fd) { return uepoll_close(fd); }

Backend MakeBackend() {
  Backend b = UepollBackend();
  b.name = "userobj";
  b.eventfd = &UserEventfd;
  b.close = &UClose;
  return b;
}

}  // namespace

int UserEventfd(unsigned int initval, int flags) {
  if (flags & ~(EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC)) {
    errno = EINVAL;
    return -1;
  }
  auto* c = new Counter;
  c->count = initval;
  c->semaphore = flags & EFD_SEMAPHORE;
  int fd = uepoll_obj_create(&kOps, c, flags & (EFD_NONBLOCK | EFD_CLOEXEC),
                             &c->obj);
  if (fd < 0) {
    delete c;
    return -1;
  }
  g_live.fetch_add(1);
  return fd;
}

const Backend& UserObjectBackend() {
  static const Backend b = MakeBackend();
  return b;
}

long UserEventfdsReleased() { return g_released.load(); }
long UserEventfdsLive() { return g_live.load(); }

}  // namespace uepoll_test
