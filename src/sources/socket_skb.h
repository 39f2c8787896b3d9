// Skb: one chunk of a stream socket's data, or one message of a datagram
// or seqpacket socket, in flight (the kernel's sk_buff on a unix socket's
// receive queue), and the kernel's size accounting for it.
//
// Thread safety: none of its own. An Skb and an SkbQueue belong to the
// UnixPair side they are queued on and are guarded by UnixPair::mu_; an Skb
// being filled or freed is owned by the one thread handling it, and is
// freed with no lock held (Free may drop the last reference of a file).
//
// Invariants: consumed <= len; an SkbQueue is a singly linked FIFO whose
// tail_ is the last node (nullptr when empty).
#ifndef UEPOLL_SRC_SOURCES_SOCKET_SKB_H_
#define UEPOLL_SRC_SOURCES_SOCKET_SKB_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>

#include "base/alloc.h"

namespace uepoll::impl {

// sk_sndbuf: net.core.wmem_default (212992 on this machine and by default).
constexpr long kSndBuf = 212992;

namespace skb_detail {
constexpr size_t kPage = 4096;
constexpr size_t kShinfo = 320;     // SKB_DATA_ALIGN(sizeof(skb_shared_info))
constexpr size_t kSkbStruct = 256;  // SKB_DATA_ALIGN(sizeof(struct sk_buff))
constexpr size_t kMaxHead = kPage - kShinfo;  // SKB_MAX_HEAD(0): 3776
constexpr size_t kFrags = 32768;              // UNIX_SKB_FRAGS_SZ
constexpr size_t PageAlign(size_t n) { return (n + kPage - 1) & ~(kPage - 1); }
}  // namespace skb_detail

class ScmFiles;  // sources/scm_rights.h

// The largest chunk unix_stream_sendmsg puts in one skb: min(sndbuf/2 - 64,
// SKB_MAX_HEAD(0) + UNIX_SKB_FRAGS_SZ) = 36544.
constexpr size_t kMaxSkbPayload = std::min<size_t>(
    kSndBuf / 2 - 64, skb_detail::kMaxHead + skb_detail::kFrags);

// The truesize the kernel charges to the sender's sk_wmem_alloc for a chunk
// of `size` payload bytes: a linear head rounded up to its kmalloc bucket
// (at least 512), the sk_buff itself, and whole pages for the part beyond
// SKB_MAX_HEAD(0). Matches the kernel (x86-64, 4 KiB pages, 64-byte cache
// lines) for every size measured, e.g. 1 byte -> 768, 4096 -> 4864, 36544 ->
// 37120; the model is a calibration, not a guarantee (docs/semantics.md).
constexpr long SkbTruesize(size_t size) {
  using namespace skb_detail;
  size_t data_len = 0;
  if (size > kMaxHead) data_len = std::min(size, PageAlign(size - kMaxHead));
  size_t head = ((size - data_len + 63) & ~size_t{63}) + kShinfo;
  size_t bucket = 512;
  while (bucket < head) bucket *= 2;
  return static_cast<long>(bucket + kSkbStruct + PageAlign(data_len));
}

// The truesize of one datagram or seqpacket message of `size` bytes
// (unix_dgram_sendmsg): a linear head of up to SKB_MAX_ALLOC (16064) bytes
// in its kmalloc bucket, the sk_buff, and whole pages for the rest (at most
// MAX_SKB_FRAGS, 17, of them). Measured on this machine for 0 to 212960
// bytes: 1 byte -> 768, 4096 -> 8448, 16065 -> 20736, 65536 -> 69888.
constexpr long DgramSkbTruesize(size_t size) {
  using namespace skb_detail;
  constexpr size_t kMaxAlloc = 4 * kPage - kShinfo;  // SKB_MAX_ALLOC
  constexpr size_t kMaxFrags = 17 * kPage;           // MAX_SKB_FRAGS pages
  size_t data_len = 0;
  if (size > kMaxAlloc)
    data_len = PageAlign(std::min(size - kMaxAlloc, kMaxFrags));
  size_t head = ((size - data_len + 63) & ~size_t{63}) + kShinfo;
  size_t bucket = 512;
  while (bucket < head) bucket *= 2;
  return static_cast<long>(bucket + kSkbStruct + data_len);
}

// Frees an Skb's descriptor list (sources/scm_rights.cc).
void DestroyScmFiles(ScmFiles* fp);

struct Skb {
  Skb* next;
  uint32_t len;       // payload bytes
  uint32_t consumed;  // bytes already read (UNIXCB(skb).consumed)
  long truesize;      // charged to the writer until freed
  ScmFiles* fp;       // SCM_RIGHTS descriptors in flight (UNIXCB(skb).fp)

  char* data() { return reinterpret_cast<char*>(this + 1); }

  // nullptr on allocation failure.
  static Skb* Alloc(size_t len, long truesize) {
    void* p = Allocate(sizeof(Skb) + len);
    if (!p) return nullptr;
    return new (p)
        Skb{nullptr, static_cast<uint32_t>(len), 0, truesize, nullptr};
  }
  // Drops the descriptors it still carries: called with no lock held (a
  // descriptor's last reference may close a socket, whose release takes
  // its pair's lock).
  static void Free(Skb* s) {
    if (s->fp) DestroyScmFiles(s->fp);
    s->~Skb();
    Deallocate(s);
  }
};

class SkbQueue {
 public:
  SkbQueue() = default;
  SkbQueue(const SkbQueue&) = delete;
  SkbQueue& operator=(const SkbQueue&) = delete;
  ~SkbQueue() { FreeAll(); }

  bool empty() const { return head_ == nullptr; }
  Skb* front() const { return head_; }
  void PushBack(Skb* s) {
    s->next = nullptr;
    if (tail_) {
      tail_->next = s;
    } else {
      head_ = s;
    }
    tail_ = s;
  }
  void PopFront() {
    head_ = head_->next;
    if (!head_) tail_ = nullptr;
  }
  // Moves every Skb of o to the end of this queue.
  void Splice(SkbQueue& o) {
    if (!o.head_) return;
    if (tail_) {
      tail_->next = o.head_;
    } else {
      head_ = o.head_;
    }
    tail_ = o.tail_;
    o.head_ = o.tail_ = nullptr;
  }
  void FreeAll() {
    while (Skb* s = head_) {
      head_ = s->next;
      Skb::Free(s);
    }
    tail_ = nullptr;
  }

 private:
  Skb* head_ = nullptr;
  Skb* tail_ = nullptr;
};

}  // namespace uepoll::impl

#endif  // UEPOLL_SRC_SOURCES_SOCKET_SKB_H_
