#!/usr/bin/env bash
# What one timer expiry touches in uepoll: instructions, and distinct
# 64-byte lines and 4 KiB pages of data and of code, counted over a
# valgrind (lackey) trace of expiry_loop.cc in steady state (one expiry
# per wait), with a breakdown by function (lines and instructions). A
# diagnostic for BENCHMARKS.md ("Timers: what one expiry touches"), not a
# test: CI does not run it.
#
#   tools/footprint/run.sh [timers (1000)] [waits (120)] [spacing_ms (20)]
#
# Needs valgrind, and the release build's library (built here if missing).
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$top"
command -v valgrind >/dev/null || {
  echo "footprint: valgrind is not installed (apt-get install valgrind)" >&2
  exit 1
}
[[ -f build/release/build.ninja ]] || cmake --preset release >/dev/null
cmake --build build/release --target uepoll_static >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# -no-pie: fixed addresses, so that nm's symbols name the trace's.
g++ -O2 -std=c++20 -no-pie -fno-pie -Iinclude tools/footprint/expiry_loop.cc \
  build/release/src/libuepoll.a -lpthread -luring -o "$work/expiry_loop"
echo "footprint: tracing ${2:-120} waits of ${1:-1000} timers (under a minute)" >&2
valgrind --tool=lackey --trace-mem=yes --log-file="$work/trace" \
  "$work/expiry_loop" "$@"
python3 tools/footprint/lines_per_expiry.py "$work/trace" "$work/expiry_loop"
