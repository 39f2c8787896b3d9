#!/usr/bin/env bash
# realprog.python.subprocess_beside_a_loop: python_threads.py run by
# Debian's unmodified python3.11, as it is (the kernel's objects), then
# under LD_PRELOAD of libuepoll-interpose.so in the default mode. Every
# check must pass in both; each run is bounded (a child that hangs before
# exec fails it).
#
#   python_threads.sh PRELOAD   exit 77 (skipped) when python3.11 is missing
set -u -o pipefail
preload=$1
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3.11
[[ -x $py ]] || { echo "SKIP: $py is not installed"; exit 77; }
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
timeout 60 "$py" -u "$dir/python_threads.py" | sed 's/^/kernel: /' ||
  { echo "FAIL: the kernel's run"; exit 1; }
timeout 60 env LD_PRELOAD="$preload" "$py" -u "$dir/python_threads.py" |
  sed 's/^/uepoll: /' || { echo "FAIL: under the interposer"; exit 1; }
echo "PASS: subprocess beside a loop thread, under the interposer as on the kernel"
