#!/usr/bin/env bash
# realprog.python.<module>: one module of CPython's own test suite (Debian's
# libpython3.11-testsuite), run by Debian's unmodified python3.11 twice:
# as it is (the kernel's objects), then under LD_PRELOAD of
# libuepoll-interpose.so in the default mode (uepoll's). The two runs must
# report the same: as many tests run, and the same failures, errors and
# skips (none of them expected on either).
#
#   python_suite.sh PRELOAD MODULE [KINDS]
# KINDS, if given, is UEPOLL_INTERPOSE for the second run (the default mode
# otherwise). Exit 77 (skipped) when python3.11 or the test suite is
# missing.
set -u
preload=$1 module=$2 kinds=${3:-}
py=/usr/bin/python3.11
if [[ ! -x $py ]] || [[ ! -d /usr/lib/python3.11/test/libregrtest ]]; then
  echo "SKIP: $py or libpython3.11-testsuite is not installed"
  exit 77
fi
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The closing lines of a verbose run: "Ran N tests" and "OK (skipped=K)" or
# "FAILED (failures=F, errors=E, skipped=K)".
summary() {
  local ran result
  ran=$(grep -E '^Ran [0-9]+ tests?' "$1" | tail -1 | awk '{print $2}')
  result=$(grep -E '^(OK|FAILED)( \(.*\))?$' "$1" | tail -1)
  echo "ran=${ran:-none} result=${result:-none}"
}

run() {  # run NAME [env...]
  local name=$1
  shift
  (cd "$work" && env "$@" timeout 240 "$py" -m test -v "$module" \
      >"$work/$name.log" 2>&1)
  echo "$name: exit $? $(summary "$work/$name.log")"
}

kernel=$(run kernel)
if [[ -n $kinds ]]; then
  uepoll=$(run uepoll LD_PRELOAD="$preload" UEPOLL_INTERPOSE="$kinds")
else
  uepoll=$(run uepoll LD_PRELOAD="$preload")
fi
echo "$kernel"
echo "$uepoll"
if [[ ${kernel#kernel: } != "${uepoll#uepoll: }" ]]; then
  echo "FAIL: $module under the interposer differs from the kernel's run"
  grep -E '^(ERROR|FAIL):' "$work/uepoll.log" | head -40
  tail -60 "$work/uepoll.log"
  exit 1
fi
case $kernel in
  *"result=OK"*) ;;
  *) echo "FAIL: the kernel's own run is not OK"; tail -40 "$work/kernel.log"; exit 1 ;;
esac
echo "PASS: $module: same result on both"
