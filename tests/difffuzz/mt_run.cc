// The multi-thread mode: runs a scenario on both sides and compares them
// (mt.h).
#include <signal.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <uepoll/debug.h>

#include "difffuzz/mt.h"
#include "difffuzz/mt_side.h"
#include "support/backend.h"

namespace difffuzz::mt {
namespace {

using internal::g_blocked_bytes;
using internal::g_context;
using internal::g_deliveries;
using internal::g_lt_empty;
using internal::g_noise_empty;
using internal::g_noise_events;
using internal::g_scenarios;
using internal::g_short_timeouts;
using internal::g_steps;
using internal::Side;
using internal::SideResult;
using uepoll_test::Backend;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::string Compare(const Scenario& s, SideResult& k, SideResult& u) {
  std::string out;
  for (const std::string& v : u.violations)
    out += "  uepoll check failed: " + v + "\n";
  for (const std::string& v : k.violations) {
    out += "  kernel check failed (a harness bug?): " + v + "\n";
  }
  for (int t = 0; t < s.threads; ++t) {
    const auto& a = k.rec[static_cast<size_t>(t)];
    const auto& b = u.rec[static_cast<size_t>(t)];
    for (size_t j = 0; j + 1 < std::max(a.size(), b.size()); j += 2) {
      bool ha = j + 1 < a.size(), hb = j + 1 < b.size();
      if (ha && hb && a[j] == b[j] && a[j + 1] == b[j + 1]) continue;
      size_t step = ha ? a[j] : b[j];
      char m[512];
      snprintf(m, sizeof m, "  t%d step #%zu (%s): kernel %s, uepoll %s\n", t,
               step, Describe(s, s.steps[step]).c_str(),
               ha ? std::to_string(a[j + 1]).c_str() : "(none)",
               hb ? std::to_string(b[j + 1]).c_str() : "(none)");
      out += m;
      break;
    }
  }
  size_t nf = std::max(k.final_state.size(), u.final_state.size());
  for (size_t j = 0; j < nf; ++j) {
    bool ha = j < k.final_state.size(), hb = j < u.final_state.size();
    if (ha && hb && k.final_state[j] == u.final_state[j] &&
        k.final_labels[j] == u.final_labels[j]) {
      continue;
    }
    auto hex = [](uint64_t v) {
      char x[32];
      snprintf(x, sizeof x, "0x%" PRIx64, v);
      return std::string(x);
    };
    std::string m = "  final state, " +
                    (ha ? k.final_labels[j] : u.final_labels[j]) + ": kernel " +
                    (ha ? hex(k.final_state[j]) : "(none)") + ", uepoll " +
                    (hb ? hex(u.final_state[j]) : "(none)") +
                    (ha && hb && k.final_labels[j] != u.final_labels[j]
                         ? " (uepoll: " + u.final_labels[j] + ")"
                         : "") +
                    "\n";
    out += m;
    break;
  }
  return out;
}

}  // namespace

long HangMillis() {
  static const long ms = [] {
    if (const char* e = std::getenv("UEPOLL_DIFFFUZZ_HANG_MS")) {
      long v = std::atol(e);
      if (v > 0) return v;
    }
    return kSanitized ? 60000L : 20000L;
  }();
  return ms;
}

void SetContext(const std::string& line) { g_context = line; }

bool Run(const Scenario& s, std::string* report) {
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old);
  uepoll_live_counts before{}, after{};
  uepoll_debug_live_counts(&before);
  SideResult kr, ur;
  std::string leak;
  for (int kernel = 1; kernel >= 0; --kernel) {
    const Backend& b =
        kernel ? uepoll_test::KernelBackend() : uepoll_test::UepollBackend();
    Side side(s, b);
    if (side.Setup()) {
      side.RunThreads();
      side.Final();
    }
    side.CloseAll();
    (kernel ? kr : ur) = std::move(side.result());
  }
  uepoll_debug_live_counts(&after);
  if (after.files != before.files || after.items != before.items ||
      after.descriptors != before.descriptors ||
      after.instances != before.instances) {
    char m[256];
    snprintf(m, sizeof m,
             "  uepoll leak: live {files, items, descriptors, instances} "
             "{%ld, %ld, %ld, %ld} before, {%ld, %ld, %ld, %ld} after\n",
             before.files, before.items, before.descriptors, before.instances,
             after.files, after.items, after.descriptors, after.instances);
    leak = m;
  }
  sigaction(SIGPIPE, &old, nullptr);
  g_scenarios.fetch_add(1);
  std::string diff = Compare(s, kr, ur) + leak;
  if (diff.empty()) return true;
  if (report) *report = diff + Describe(s);
  return false;
}

std::string Stats() {
  char b[512];
  snprintf(b, sizeof b,
           "  scenarios %ld, steps %ld (per side), token deliveries %ld,\n"
           "  short waits that timed out %ld, LT deliveries another consumer "
           "emptied %ld,\n  noise waits with events %ld / empty %ld, bytes in "
           "blocking rendezvous writes %ld\n",
           g_scenarios.load(), g_steps.load() / 2, g_deliveries.load(),
           g_short_timeouts.load(), g_lt_empty.load(), g_noise_events.load(),
           g_noise_empty.load(), g_blocked_bytes.load());
  return b;
}

}  // namespace difffuzz::mt
