#!/usr/bin/env bash
# Measure the issue-4 targets (BENCHMARKS.md): every workload side by side
# (kernel epoll and uepoll in one run), ROUNDS times, then the median of the
# per-round uepoll/kernel ratios. Each round writes one JSON file per
# measurement into OUT/round-N/ and its load average into OUT/round-N/load.
#
#   bench/run_targets.sh [BENCH_BINARY] [OUT_DIR]
#   ROUNDS=3 R=1 bench/run_targets.sh build-perf/bench/uepoll-bench /tmp/targets
#   bench/run_targets.sh --summary OUT_DIR     # only re-print the medians
#
# R is seconds per measurement (default 1; the wait matrix alone is 24
# measurements a round). ONLY=wait,ctl,... restricts the workloads.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
summary_only=0
if [[ ${1:-} == --summary ]]; then summary_only=1; shift; OUT=${1:?out dir}
else
  B=${1:-$top/build-perf/bench/uepoll-bench}
  OUT=${2:-$top/build-perf/targets}
fi
ROUNDS=${ROUNDS:-3}
R=${R:-1}
ONLY=${ONLY:-throughput,wait,ctl,churn,nested,pingpong,scale,minwait}
RATES=${RATES:-20000 50000 100000 200000 400000}

want() { [[ ",$ONLY," == *",$1,"* ]]; }
run() { # name, then the bench arguments
  local name=$1; shift
  echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)] $name: $*" >&2
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >>"$dir/load"
  "$B" "$@" --json "$dir/$name.json" >"$dir/$name.txt" 2>"$dir/$name.err" ||
    echo "  failed: see $dir/$name.err" >&2
}

if ((!summary_only)); then
  for ((i = 1; i <= ROUNDS; i++)); do
    dir=$OUT/round-$i
    mkdir -p "$dir"
    want throughput && run throughput throughput -r "$R"
    if want wait; then
      for t in 1 2; do
        for mode in lt et oneshot; do
          flag=(); [[ $mode == et ]] && flag=(-E); [[ $mode == oneshot ]] && flag=(-S)
          run "wait-t$t-$mode-shared" wait --no-sleep -t "$t" "${flag[@]}" -r "$R"
          run "wait-t$t-$mode-multiq" wait --no-sleep -t "$t" -m "${flag[@]}" -r "$R"
        done
      done
    fi
    if want ctl; then
      run ctl-t1 ctl --no-sleep -t 1 -r "$R"
      run ctl-t2 ctl --no-sleep -t 2 -r "$R"
    fi
    want churn && run churn churn -t 1,2,16,64 -r "$R"
    want nested && run nested nested -t 1,2,16,64 -d 1,2,4 -r "$R"
    if want pingpong; then
      run pingpong-block pingpong -r "$R"
      run pingpong-spin pingpong --spin-ns 50000 -r "$R"
    fi
    want scale && run scale scale -N 10,10000,100000,1000000 -r "$R"
    if want minwait; then
      for rate in $RATES; do run "minwait-$rate" minwait --rate "$rate" -r "$R"; done
    fi
  done
fi

# Medians over rounds: one line per (file, measurement, figure): the kernel's
# and uepoll's medians, the median of the per-round uepoll/kernel ratios, and
# those ratios round by round.
python3 - "$OUT" <<'EOF'
import json, glob, os, sys, statistics as st
out = sys.argv[1]
figs = ["ops_per_sec", "p50_ns", "p99_ns", "bytes_per_registration", "wait_ns",
        "events_per_wakeup", "ctx_switches_per_event", "cpu_ns_per_event",
        "p50_us", "p99_us"]
ident = ["threads", "maxevents", "nfds", "no_sleep", "multiq", "edge",
         "oneshot", "depth", "spin_ns", "registrations", "rate", "min_wait_us",
         "sleep_us"]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "round-*", "*.json"))):
    name = os.path.basename(f)[:-5]
    try:
        data = json.load(open(f))
    except Exception:
        continue
    rnd = {}
    for m in data:
        key = " ".join("%s=%g" % (k, m[k]) for k in ident if k in m)
        rnd.setdefault((name, key), {})[m["backend"]] = m
    for k, b in rnd.items():
        rows.setdefault(k, []).append(b)
med = lambda v: ("%.4g" % st.median(v)) if v else "-"
print("%-20s %-60s %-22s %10s %10s %7s  %s" % ("file", "measurement", "figure",
      "kernel", "uepoll", "ratio", "per-round ratios [uepoll's core rtt, ns]"))
for (name, key), rs in sorted(rows.items()):
    for fig in figs:
        ks = [r["kernel"][fig] for r in rs if fig in r.get("kernel", {})]
        us = [r["uepoll"][fig] for r in rs if fig in r.get("uepoll", {})]
        if not ks and not us:
            continue
        rat = [r["uepoll"][fig] / r["kernel"][fig] for r in rs
               if fig in r.get("kernel", {}) and fig in r.get("uepoll", {})
               and r["kernel"][fig]]
        # The core-to-core round trip measured just before each uepoll run:
        # multi-threaded figures follow it (bench/util.h, CoreRoundTripNs).
        rtt = [r["uepoll"]["core_rtt_ns"] for r in rs
               if "core_rtt_ns" in r.get("uepoll", {})]
        print("%-20s %-60s %-22s %10s %10s %7s  %s%s" % (name, key[:60], fig,
              med(ks), med(us), med(rat), ",".join("%.2f" % x for x in rat),
              (" [" + ",".join("%.0f" % x for x in rtt) + "]") if rtt else ""))
EOF
