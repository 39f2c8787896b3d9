// The suite's chart: ops/s by thread count for nested and churn, both
// backends, as a self-contained SVG file (no dependencies).
#ifndef UEPOLL_BENCH_SVG_H_
#define UEPOLL_BENCH_SVG_H_

#include <string>

#include "report.h"

namespace uepoll_bench {

bool WriteScalingChart(const std::string& path, const Report& report);

}  // namespace uepoll_bench

#endif  // UEPOLL_BENCH_SVG_H_
