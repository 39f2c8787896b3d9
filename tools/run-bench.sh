#!/usr/bin/env bash
# The benchmark's main job: build uepoll-bench (release preset) and run the
# default suite, kernel epoll and uepoll side by side. Works on a fresh
# Debian 12 clone as root: missing build packages are installed first.
#
#   tools/run-bench.sh [extra suite options, e.g. -r 1 or --backend kernel]
#
# Results: build/release/bench.json (one object per measurement) and
# build/release/bench.svg (ops/s by thread count for nested and churn, and
# every workload's ratio to the kernel and to io_uring).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

# The project's build dependencies (Debian 12 names; the release preset also
# configures the tests, hence GoogleTest; liburing-dev for the io_uring
# backend); apt-get runs only if one is missing.
deps=(cmake ninja-build g++ libgtest-dev libbenchmark-dev liburing-dev)
missing=()
if command -v dpkg >/dev/null; then
  for p in "${deps[@]}"; do
    # dpkg -s also knows removed-but-not-purged packages: check the status.
    dpkg -s "$p" 2>/dev/null | grep -qx 'Status: install ok installed' ||
      missing+=("$p")
  done
fi
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "run-bench: missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  echo "run-bench: installing ${missing[*]}" >&2
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake --preset release
cmake --build --preset release --target uepoll-bench

out=build/release
"$out/bench/uepoll-bench" suite --json "$out/bench.json" --svg "$out/bench.svg" "$@"

echo
echo "run-bench: results in $top/$out/bench.json"
echo "run-bench: chart   in $top/$out/bench.svg"
