// The suite's chart, a self-contained SVG file (no dependencies): ops/s by
// thread count for nested and churn, both epoll backends, and below them
// every workload's ratio to the kernel and to io_uring at a glance.
#ifndef UEPOLL_BENCH_SVG_H_
#define UEPOLL_BENCH_SVG_H_

#include <string>

#include "report.h"

namespace uepoll_bench {

bool WriteScalingChart(const std::string& path, const Report& report);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_SVG_H_
