#!/usr/bin/env bash
# The long differential-fuzzing run: many seeds of uepoll-difffuzz, each
# --ops ops, with --keep-going (every difference of a seed is reported and
# shrunk) and --skip-known (the known, pinned differences are not reported
# again). The CTest entry difffuzz.seed1_1M is the short form of this.
#
#   tests/difffuzz/long_run.sh [BUILD_DIR] [FIRST_SEED] [SEEDS] [OPS]
#   defaults:                   build-rel   1            10      1000000
#
# Prints each seed's summary line and every report; exits 1 if any seed
# found a difference.
set -euo pipefail
build=${1:-build-rel}
first=${2:-1}
seeds=${3:-10}
ops=${4:-1000000}
numbering=${5:-disjoint}
bin=$build/tests/difffuzz/uepoll-difffuzz
[[ -x $bin ]] || { echo "long_run: $bin not built" >&2; exit 2; }
status=0
start=$SECONDS
for ((s = first; s < first + seeds; ++s)); do
  "$bin" --seed "$s" --ops "$ops" --numbering "$numbering" --keep-going \
    --skip-known --check failures 2>/dev/null ||
    status=1
done
echo "long_run: $seeds seeds x $ops ops ($numbering numbering) in $((SECONDS - start)) s:" \
     "$([[ $status == 0 ]] && echo 'no difference' || echo 'DIFFERENCES FOUND')"
exit "$status"
