#!/usr/bin/env bash
# realprog.node: node (Debian's nodejs, its libuv) runs node_child.js on the
# kernel's objects, then under LD_PRELOAD of libuepoll-interpose.so in the
# default mode; both outputs must be the expected three lines.
#
#   node.sh PRELOAD SCRIPT   exit 77 (skipped) when node is not installed
set -u
preload=$1 script=$2
node=$(command -v node || command -v nodejs) ||
  { echo "SKIP: node is not installed"; exit 77; }
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
expected=$'execFile: hello\nspawn cat: piped 0\nhttp: ok'
status=0
for side in kernel uepoll; do
  env=()
  [[ $side == uepoll ]] && env=(LD_PRELOAD="$preload")
  out=$(env "${env[@]}" timeout 60 "$node" "$script" 2>&1)
  if [[ $out == "$expected" ]]; then
    echo "$side: ok"
  else
    echo "$side: expected"; echo "$expected"; echo "$side: got"; echo "$out"
    status=1
  fi
done
exit $status
