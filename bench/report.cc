#include "report.h"

#include <math.h>

#include <algorithm>
#include <map>

namespace uepoll_bench {
namespace {

std::string Num(double v) {
  char buf[64];
  if (v == floor(v) && fabs(v) < 1e15)
    snprintf(buf, sizeof(buf), "%.0f", v);
  else
    snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

struct Row {
  std::string workload, params, figure;
  bool higher_better = true;
  double value[3] = {-1, -1, -1};  // kernel, uepoll, io_uring
  std::string note[3];
};

}  // namespace

double Result::Param(const std::string& key, double dflt) const {
  for (const auto& p : params)
    if (p.first == key) return p.second;
  return dflt;
}

const Metric* Result::Find(const std::string& key) const {
  for (const auto& m : metrics)
    if (m.key == key) return &m;
  return nullptr;
}

std::string Result::ParamLabel() const {
  std::string s = "t=" + Num(static_cast<double>(threads));
  for (const auto& p : params) s += " " + p.first + "=" + Num(p.second);
  return s;
}

bool Report::AnyMeasured() const {
  return std::any_of(results_.begin(), results_.end(),
                     [](const Result& r) { return r.ok(); });
}

std::string Human(double v) {
  char buf[32];
  double a = fabs(v);
  if (a >= 1e9)
    snprintf(buf, sizeof(buf), "%.2fG", v / 1e9);
  else if (a >= 1e6)
    snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  else if (a >= 1e4)
    snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  else if (a >= 100 || v == floor(v))
    snprintf(buf, sizeof(buf), "%.0f", v);
  else if (a < 0.1)
    snprintf(buf, sizeof(buf), "%.2g", v);
  else
    snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

void Report::PrintTable(FILE* out) const {
  std::vector<Row> rows;
  std::map<std::string, size_t> index;
  auto row_for = [&](const Result& r, const std::string& figure,
                     bool hb) -> Row& {
    std::string key = r.workload + "\x1f" + r.ParamLabel() + "\x1f" + figure;
    auto it = index.find(key);
    if (it != index.end()) return rows[it->second];
    index[key] = rows.size();
    rows.push_back(
        Row{r.workload, r.ParamLabel(), figure, hb, {-1, -1, -1}, {}});
    return rows.back();
  };
  bool uring = false;
  for (const Result& r : results_) {
    int col = r.backend == "kernel"     ? 0
              : r.backend == "uepoll"   ? 1
              : r.backend == "io_uring" ? 2
                                        : -1;
    if (col < 0) continue;  // JSON only (timers --floor)
    uring |= col == 2;
    if (!r.ok()) {
      row_for(r, r.ops_label, true).note[col] = "skipped";
      continue;
    }
    if (r.ops_per_sec >= 0)
      row_for(r, r.ops_label, true).value[col] = r.ops_per_sec;
    for (const Metric& m : r.metrics)
      if (!m.label.empty())
        row_for(r, m.label, m.higher_better).value[col] = m.value;
    if (r.syscalls_per_op >= 0)
      row_for(r, "syscalls/op", false).value[col] = r.syscalls_per_op;
  }
  if (rows.empty()) return;
  size_t wl = 8, pl = 10, fl = 6;
  for (const Row& row : rows) {
    wl = std::max(wl, row.workload.size());
    pl = std::max(pl, row.params.size());
    fl = std::max(fl, row.figure.size());
  }
  auto ratio = [](const Row& row, int c) -> std::string {
    if (!(row.value[c] > 0) || row.value[1] < 0) return "-";
    char buf[48];
    snprintf(buf, sizeof(buf), "%.2fx %s", row.value[1] / row.value[c],
             row.higher_better ? "(hi)" : "(lo)");
    return buf;
  };
  fprintf(out, "\n%-*s  %-*s  %-*s  %10s  %10s", int(wl), "workload", int(pl),
          "parameters", int(fl), "figure", "kernel", "uepoll");
  if (uring) fprintf(out, "  %10s", "io_uring");
  fprintf(out, "  %13s", "uepoll/kernel");
  if (uring) fprintf(out, "  %15s", "uepoll/io_uring");
  fprintf(out, "\n%s\n",
          std::string(wl + pl + fl + 53 + (uring ? 29 : 0), '-').c_str());
  for (const Row& row : rows) {
    std::string cell[3];
    for (int c = 0; c < 3; ++c)
      cell[c] = row.value[c] >= 0     ? Human(row.value[c])
                : row.note[c].empty() ? "-"
                                      : row.note[c];
    fprintf(out, "%-*s  %-*s  %-*s  %10s  %10s", int(wl), row.workload.c_str(),
            int(pl), row.params.c_str(), int(fl), row.figure.c_str(),
            cell[0].c_str(), cell[1].c_str());
    if (uring) fprintf(out, "  %10s", cell[2].c_str());
    fprintf(out, "  %13s", ratio(row, 0).c_str());
    if (uring) fprintf(out, "  %15s", ratio(row, 2).c_str());
    fprintf(out, "\n");
  }
  fprintf(
      out,
      "\n(hi)/(lo): whether a higher or a lower figure is better. One run on a "
      "shared machine: read ratios, not absolutes.\n");
  double lo = -1, hi = -1;
  for (const Result& r : results_) {
    if (r.core_rtt_ns < 0) continue;
    if (lo < 0 || r.core_rtt_ns < lo) lo = r.core_rtt_ns;
    if (r.core_rtt_ns > hi) hi = r.core_rtt_ns;
  }
  if (lo >= 0)
    fprintf(out,
            "Core-to-core round trip before each measurement: %.0f to %.0f ns "
            "(multi-threaded figures follow it; BENCHMARKS.md).\n",
            lo, hi);
}

bool Report::WriteJson(const std::string& path) const {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    perror(("uepoll-bench: " + path).c_str());
    return false;
  }
  fprintf(f, "[");
  bool first = true;
  for (const Result& r : results_) {
    if (!r.ok()) continue;
    fprintf(f, "%s\n  {\"workload\": %s, \"backend\": %s, \"threads\": %lu",
            first ? "" : ",", JsonString(r.workload).c_str(),
            JsonString(r.backend).c_str(), r.threads);
    first = false;
    fprintf(f, ", \"ops_per_sec\": %s",
            r.ops_per_sec >= 0 ? Num(r.ops_per_sec).c_str() : "null");
    for (const auto& p : r.params)
      fprintf(f, ", %s: %s", JsonString(p.first).c_str(),
              Num(p.second).c_str());
    for (const Metric& m : r.metrics)
      fprintf(f, ", %s: %s", JsonString(m.key).c_str(), Num(m.value).c_str());
    if (r.core_rtt_ns >= 0)
      fprintf(f, ", \"core_rtt_ns\": %s", Num(r.core_rtt_ns).c_str());
    // null, never a guess, when the counted pass could not count.
    fprintf(f, ", \"syscalls_per_op\": %s",
            r.syscalls_per_op >= 0 ? Num(r.syscalls_per_op).c_str() : "null");
    if (!r.syscalls_note.empty())
      fprintf(f, ", \"syscalls_note\": %s",
              JsonString(r.syscalls_note).c_str());
    for (const auto& n : r.notes)
      fprintf(f, ", %s: %s", JsonString(n.first).c_str(),
              JsonString(n.second).c_str());
    fprintf(f, "}");
  }
  fprintf(f, "%s]\n", first ? "" : "\n");
  bool ok = fclose(f) == 0;
  if (!ok) perror(("uepoll-bench: " + path).c_str());
  return ok;
}

void Progress::Start(const std::string& workload, const std::string& backend,
                     const std::string& params) {
  ++index_;
  if (total_ > 0)
    fprintf(stderr, "[%d/%d] ", index_, total_);
  else
    fprintf(stderr, "[%d] ", index_);
  fprintf(stderr, "%s %s%s%s ...\n", workload.c_str(), backend.c_str(),
          params.empty() ? "" : " ", params.c_str());
}

void Progress::Finish(const Result& r, double seconds) {
  if (total_ > 0)
    fprintf(stderr, "[%d/%d] ", index_, total_);
  else
    fprintf(stderr, "[%d] ", index_);
  fprintf(stderr, "%s %s %s: ", r.workload.c_str(), r.backend.c_str(),
          r.ParamLabel().c_str());
  if (!r.ok()) {
    fprintf(stderr, "skipped: %s\n", r.error.c_str());
    return;
  }
  if (r.ops_per_sec >= 0)
    fprintf(stderr, "%s %s", Human(r.ops_per_sec).c_str(), r.ops_label.c_str());
  for (const Metric& m : r.metrics)
    if (!m.label.empty())
      fprintf(stderr, ", %s %s", m.label.c_str(), Human(m.value).c_str());
  if (r.syscalls_per_op >= 0)
    fprintf(stderr, ", syscalls/op %s", Human(r.syscalls_per_op).c_str());
  if (r.core_rtt_ns >= 0)
    fprintf(stderr, " (%.1f s; core-to-core %.0f ns)\n", seconds,
            r.core_rtt_ns);
  else
    fprintf(stderr, " (%.1f s)\n", seconds);
}

}  // namespace uepoll_bench
