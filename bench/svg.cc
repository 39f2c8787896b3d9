#include "svg.h"

#include <math.h>
#include <stdio.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace uepoll_bench {
namespace {

constexpr double kPanelW = 470, kPanelH = 330;  // plot area of one panel
constexpr double kLeft = 80, kTop = 70, kGap = 120;

struct Series {
  std::string name, color, dash;
  std::map<unsigned long, double> points;  // threads -> ops/s
};

std::string Fmt(const char* f, double a, double b = 0, double c = 0,
                double d = 0) {
  char buf[256];
  snprintf(buf, sizeof(buf), f, a, b, c, d);
  return buf;
}

std::string Decade(int e) {
  static const char* const kNames[] = {"1",  "10",  "100",  "1k", "10k", "100k",
                                       "1M", "10M", "100M", "1G", "10G"};
  return e >= 0 && e <= 10 ? kNames[e] : "1e" + std::to_string(e);
}

// One panel: axes, decade grid, one polyline per series, legend below.
void Panel(std::string& svg, double x0, const std::string& title,
           const std::vector<Series>& series) {
  std::set<unsigned long> xs;
  double lo = 1e300, hi = 0;
  for (const Series& s : series)
    for (auto [t, v] : s.points) {
      xs.insert(t);
      if (v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  svg += "<text x='" + Fmt("%.0f", x0 + kPanelW / 2) +
         "' y='45' text-anchor='middle' font-size='16' font-weight='bold'>" +
         title + "</text>\n";
  if (xs.empty() || hi <= 0) {
    svg += "<text x='" + Fmt("%.0f", x0 + kPanelW / 2) + "' y='" +
           Fmt("%.0f", kTop + kPanelH / 2) +
           "' text-anchor='middle' fill='#888'>no measurements</text>\n";
    return;
  }
  int e_lo = int(floor(log10(lo))), e_hi = int(ceil(log10(hi)));
  if (e_hi == e_lo) e_hi++;
  double lx_lo = log2(double(*xs.begin())), lx_hi = log2(double(*xs.rbegin()));
  if (lx_hi == lx_lo) lx_hi += 1;
  auto X = [&](unsigned long t) {
    return x0 + 20 +
           (log2(double(t)) - lx_lo) / (lx_hi - lx_lo) * (kPanelW - 40);
  };
  auto Y = [&](double v) {
    return kTop + kPanelH - (log10(v) - e_lo) / (e_hi - e_lo) * kPanelH;
  };
  svg += "<rect x='" + Fmt("%.0f", x0) + "' y='" + Fmt("%.0f", kTop) +
         "' width='" + Fmt("%.0f", kPanelW) + "' height='" +
         Fmt("%.0f", kPanelH) + "' fill='none' stroke='#333'/>\n";
  for (int e = e_lo; e <= e_hi; ++e) {
    double y = Y(pow(10, e));
    svg +=
        Fmt("<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>\n",
            x0, y, x0 + kPanelW, y);
    svg += Fmt("<text x='%.1f' y='%.1f' text-anchor='end' font-size='12'>",
               x0 - 6, y + 4) +
           Decade(e) + "</text>\n";
  }
  for (unsigned long t : xs) {
    double x = X(t);
    svg +=
        Fmt("<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eee'/>\n",
            x, kTop, x, kTop + kPanelH);
    svg +=
        Fmt("<text x='%.1f' y='%.1f' text-anchor='middle' "
            "font-size='12'>%.0f</text>\n",
            x, kTop + kPanelH + 18, double(t));
  }
  svg +=
      Fmt("<text x='%.1f' y='%.1f' text-anchor='middle' "
          "font-size='13'>threads</text>\n",
          x0 + kPanelW / 2, kTop + kPanelH + 40);
  svg += Fmt(
      "<text transform='translate(%.1f,%.1f) rotate(-90)' text-anchor='middle' "
      "font-size='13'>ops/s (log scale)</text>\n",
      x0 - 55, kTop + kPanelH / 2);
  double ly = kTop + kPanelH + 62;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    std::string pts;
    for (auto [t, v] : s.points)
      if (v > 0) pts += Fmt("%.1f,%.1f ", X(t), Y(v));
    svg += "<polyline fill='none' stroke-width='2' stroke='" + s.color +
           "' stroke-dasharray='" + s.dash + "' points='" + pts + "'/>\n";
    for (auto [t, v] : s.points)
      if (v > 0)
        svg += Fmt("<circle cx='%.1f' cy='%.1f' r='3' fill='", X(t), Y(v)) +
               s.color + "'><title>" + s.name +
               Fmt(", %.0f threads: %.0f ops/s", double(t), v) +
               "</title></circle>\n";
    double lx = x0 + double(i % 2) * (kPanelW / 2), y = ly + double(i / 2) * 18;
    svg +=
        Fmt("<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke-width='2' ",
            lx, y, lx + 30, y) +
        "stroke='" + s.color + "' stroke-dasharray='" + s.dash + "'/>\n";
    svg += Fmt("<text x='%.1f' y='%.1f' font-size='12'>", lx + 36, y + 4) +
           s.name + "</text>\n";
  }
}

// The at-a-glance chart: for every measurement, uepoll's advantage on its
// headline figure over the kernel and over io_uring (x > 1: uepoll better),
// on a log axis from 0.1x to 100x.
struct RatioRow {
  std::string label;
  double vs_kernel = -1, vs_uring = -1;
};

// The figure a workload is judged by, and whether higher is better.
std::pair<std::string, bool> Headline(const std::string& workload) {
  if (workload == "pingpong" || workload == "pingpong_msg")
    return {"p50_ns", false};
  if (workload == "minwait") return {"cpu_ns_per_event", false};
  return {"ops_per_sec", true};
}

double Figure(const Result& r, const std::string& key) {
  if (key == "ops_per_sec") return r.ops_per_sec;
  const Metric* m = r.Find(key);
  return m ? m->value : -1;
}

std::vector<RatioRow> Ratios(const Report& report) {
  std::vector<RatioRow> rows;
  std::map<std::string, size_t> index;
  std::map<std::string, double> fig[3];  // kernel, uepoll, io_uring
  for (const Result& r : report.results()) {
    if (!r.ok()) continue;
    auto [key, hb] = Headline(r.workload);
    double v = Figure(r, key);
    if (v <= 0) continue;
    std::string label = r.workload + " " + r.ParamLabel();
    if (r.workload == "minwait") {
      const char* mode = r.Param("min_wait_us") > 0 ? "min_wait"
                         : r.Param("sleep_us") > 0  ? "sleep hack"
                                                    : "plain";
      label = std::string("minwait ") + mode + " (CPU/event)";
    } else if (r.workload == "pingpong" || r.workload == "pingpong_msg") {
      label += " (p50)";
    }
    int col = r.backend == "kernel" ? 0 : r.backend == "uepoll" ? 1 : 2;
    fig[col][label] = v;
    if (!index.count(label)) {
      index[label] = rows.size();
      rows.push_back({label});
    }
  }
  for (RatioRow& row : rows) {
    auto [key, hb] = Headline(row.label.substr(0, row.label.find(' ')));
    auto adv = [&, hb = hb](int c) -> double {
      if (!fig[1].count(row.label) || !fig[c].count(row.label)) return -1;
      double u = fig[1][row.label], o = fig[c][row.label];
      return hb ? u / o : o / u;
    };
    row.vs_kernel = adv(0);
    row.vs_uring = adv(2);
  }
  std::vector<RatioRow> kept;
  for (const RatioRow& row : rows)
    if (row.vs_kernel > 0 || row.vs_uring > 0) kept.push_back(row);
  return kept;
}

constexpr double kRowH = 16;

double RatioPanelHeight(const std::vector<RatioRow>& rows) {
  return rows.empty() ? 0 : 90 + double(rows.size()) * kRowH + 40;
}

void RatioPanel(std::string& svg, double y0, double width,
                const std::vector<RatioRow>& rows) {
  if (rows.empty()) return;
  const double label_w = 330, x0 = label_w + 20, x1 = width - 40;
  const double top = y0 + 60, h = double(rows.size()) * kRowH;
  auto X = [&](double ratio) {
    double l = std::clamp(log10(ratio), -1.0, 2.0);  // 0.1x .. 100x
    return x0 + (l + 1) / 3 * (x1 - x0);
  };
  svg += Fmt("<text x='%.0f' y='%.0f' text-anchor='middle' font-size='16' "
             "font-weight='bold'>",
             width / 2, y0 + 25) +
         "Every workload at a glance: uepoll's advantage on its headline "
         "figure (ops/s; pingpong p50; minwait CPU per event)</text>\n";
  svg += Fmt("<text x='%.0f' y='%.0f' text-anchor='middle' font-size='12'>",
             width / 2, y0 + 43) +
         "bars: uepoll vs kernel epoll (red) and vs io_uring (green); "
         "right of 1x: uepoll better (log scale)</text>\n";
  for (double t : {0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0}) {
    double x = X(t);
    svg += Fmt("<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='", x, top,
               x, top + h) +
           std::string(t == 1.0 ? "#000" : "#ddd") + "'/>\n";
    svg +=
        Fmt("<text x='%.1f' y='%.1f' text-anchor='middle' "
            "font-size='11'>%gx</text>\n",
            x, top + h + 14, t);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const RatioRow& row = rows[i];
    double y = top + double(i) * kRowH;
    svg += Fmt("<text x='%.1f' y='%.1f' text-anchor='end' font-size='11'>",
               label_w, y + 11) +
           row.label + "</text>\n";
    struct Bar {
      double v;
      const char* color;
      const char* name;
      double dy;
    };
    for (const Bar& b : {Bar{row.vs_kernel, "#d62728", "kernel", 1},
                         Bar{row.vs_uring, "#2ca02c", "io_uring", 8}}) {
      if (b.v <= 0) continue;
      double xa = X(1), xb = X(b.v);
      svg += Fmt("<rect x='%.1f' y='%.1f' width='%.1f' height='6' fill='",
                 std::min(xa, xb), y + b.dy, std::max(1.0, fabs(xb - xa))) +
             b.color + "'><title>" + row.label + ": " + Fmt("%.2fx", b.v) +
             " vs " + b.name + "</title></rect>\n";
    }
  }
}

}  // namespace

bool WriteScalingChart(const std::string& path, const Report& report) {
  static const char* const kDash[] = {"none", "8,4", "2,3", "12,3,2,3"};
  std::vector<Series> nested, churn;
  std::map<std::string, size_t> index;
  std::set<double> depths;
  for (const Result& r : report.results())
    if (r.ok() && r.workload == "nested") depths.insert(r.Param("depth"));
  for (const Result& r : report.results()) {
    if (!r.ok() || (r.workload != "nested" && r.workload != "churn")) continue;
    bool is_nested = r.workload == "nested";
    std::string name = r.backend;
    size_t style = 0;
    if (is_nested) {
      double d = r.Param("depth");
      name += Fmt(", depth %.0f", d);
      style = size_t(std::distance(depths.begin(), depths.find(d))) % 4;
    }
    std::string key = r.workload + "/" + name;
    auto& list = is_nested ? nested : churn;
    if (!index.count(key)) {
      index[key] = list.size();
      list.push_back({name,
                      r.backend == "kernel" ? "#1f77b4" : "#d62728",
                      kDash[style],
                      {}});
    }
    list[index[key]].points[r.threads] = r.ops_per_sec;
  }
  size_t rows = (std::max(nested.size(), churn.size()) + 1) / 2;
  double width = kLeft + 2 * kPanelW + kGap + 30;
  double top_h = kTop + kPanelH + 70 + double(rows) * 18 + 20;
  std::vector<RatioRow> ratios = Ratios(report);
  double height = top_h + RatioPanelHeight(ratios);
  std::string svg =
      Fmt("<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' "
          "height='%.0f' font-family='sans-serif'>\n",
          width, height);
  svg += "<rect width='100%' height='100%' fill='white'/>\n";
  svg += Fmt("<text x='%.0f' y='22' text-anchor='middle' font-size='18'>",
             width / 2) +
         "uepoll vs kernel epoll: ops/s by thread count (blue: kernel, red: "
         "uepoll)"
         "</text>\n";
  Panel(svg, kLeft, "nested: threads wait on the outermost of a chain", nested);
  Panel(svg, kLeft + kPanelW + kGap,
        "churn: create, ADD, signal, harvest, close", churn);
  RatioPanel(svg, top_h, width, ratios);
  svg += "</svg>\n";
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    perror(("uepoll-bench: " + path).c_str());
    return false;
  }
  fputs(svg.c_str(), f);
  bool ok = fclose(f) == 0;
  if (!ok) perror(("uepoll-bench: " + path).c_str());
  return ok;
}

}  // namespace uepoll_bench
