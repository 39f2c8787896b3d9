// The io_uring backend: epoll's calls mapped onto io_uring, so that the
// workloads with a natural io_uring form (throughput, pingpong, minwait,
// echo) run unchanged on it. An "instance" is a ring; ADD arms a multishot
// IORING_OP_POLL_ADD on the descriptor with the registration's data as
// user_data; a wait reaps completions as events (each completion's res is
// the poll mask). The sources and the consuming read(2)/write(2) are the
// kernel's, as in the kernel backend, so the two differ only in how
// readiness is delivered. bench/README.md says why polls and not reads.
//
// The polls are submitted by the first wait on the ring, not by the ADD:
// io_uring runs a poll's completion work in the task that submitted it, so
// the thread that waits must be the one that submits.
#ifndef UEPOLL_BENCH_URING_H_
#define UEPOLL_BENCH_URING_H_

#include <string>

#include "backend.h"

namespace uepoll_bench {

const Backend& IoUringBackend();

// Whether this build and this kernel can run the io_uring backend; if not,
// why ("built without liburing", "io_uring_setup: ...").
bool IoUringAvailable(std::string* why);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_URING_H_
