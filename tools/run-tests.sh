#!/usr/bin/env bash
# Checks that the docs cite only paths and tests that exist
# (tools/check-refs.py, under a second), then builds and runs every test,
# under the dev preset (Debug) and then the asan preset (AddressSanitizer +
# UndefinedBehaviorSanitizer). The README's test command; .ci/run calls it
# too.
#
#   tools/run-tests.sh                 dev, then asan
#   tools/run-tests.sh --quick         dev only
#   tools/run-tests.sh --install-deps  only install the missing packages
#
# On Debian, packages it needs that are missing are installed first with
# apt-get (as root). Both presets run even if the first fails, so one run
# shows everything that is broken; the exit status is non-zero if any step
# failed, and the last line is a one-line summary.
set -euo pipefail

# Debian 12 package names. libbenchmark-dev: Google Benchmark, for bench/;
# liburing-dev: uepoll-bench's io_uring backend (optional: without it the
# bench builds and skips io_uring); libclang-rt-14-dev: clang's fuzzer
# runtime, for the libFuzzer target in CI; dpkg-dev and file: CPack's Debian
# package (dpkg-shlibdeps); groff-base: the manual pages' render check;
# man-db: the installed package's check; python3: tools/check-refs.py;
# libuv1-dev, libboost-dev, libevent-dev, libev-dev: the event loops of
# tests/integration (each test is left out where its library is missing)
# and the ones tests/interpose runs unmodified on uepoll; python3.11,
# libpython3.11-testsuite, redis-server, redis-tools, nginx-light, wrk,
# curl, nodejs: the unmodified programs of tests/realprog (each test skips
# when its program is missing).
readonly PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev libgtest-dev
                   libbenchmark-dev liburing-dev
                   pkg-config dpkg-dev file groff-base man-db python3
                   libuv1-dev libboost-dev libevent-dev libev-dev
                   python3.11 libpython3.11-testsuite redis-server redis-tools
                   nginx-light wrk curl nodejs postgresql memcached
                   libmemcached-tools openjdk-17-jdk-headless)

usage() { sed -n '2,16s/^# \{0,1\}//p' "$0"; }

install_missing_packages() {
  if ! command -v dpkg >/dev/null; then
    echo "run-tests: not a Debian system; install the equivalents of" \
         "${PACKAGES[*]} yourself" >&2
    return 0
  fi
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    # dpkg -s also knows removed-but-not-purged packages: check the status.
    dpkg -s "$p" 2>/dev/null | grep -qx 'Status: install ok installed' ||
      missing+=("$p")
  done
  ((${#missing[@]} == 0)) && return 0
  if ((EUID != 0)); then
    echo "run-tests: missing packages: ${missing[*]}; run as root to have" \
         "them installed, or install them yourself" >&2
    return 1
  fi
  echo "run-tests: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
}

# run_preset NAME: configure, build, test. Records the result in $summary
# and the names of its failed tests in $failures.
summary=()
failures=()
failed=0
run_preset() {
  local preset=$1 start=$SECONDS status=passed
  echo "run-tests: === preset $preset"
  rm -f "build/$preset/Testing/Temporary/LastTestsFailed.log"
  if ! { cmake --preset "$preset" &&
         cmake --build --preset "$preset" -j"$(nproc)" &&
         ctest --preset "$preset" -j"$(nproc)"; }; then
    status=FAILED
    failed=1
    failures+=("$preset")
  fi
  summary+=("$preset $status ($((SECONDS - start)) s)")
}


presets=(dev asan)
case ${1:-} in
  "") ;;
  --quick) presets=(dev) ;;
  --install-deps) install_missing_packages; exit ;;
  -h | --help) usage; exit 0 ;;
  *) usage >&2; exit 2 ;;
esac
(($# <= 1)) || { usage >&2; exit 2; }

cd "$(dirname "$0")/.."
install_missing_packages
# The drift check first: it takes a second, and a stale citation is worth
# knowing about even when a build fails.
start=$SECONDS
if python3 tools/check-refs.py; then
  summary+=("check-refs passed ($((SECONDS - start)) s)")
else
  summary+=("check-refs FAILED")
  failed=1
fi
for preset in "${presets[@]}"; do
  run_preset "$preset"
done

for preset in "${failures[@]}"; do
  tools/ctest-digest.sh "build/$preset"
done
line=$(printf '%s, ' "${summary[@]}")
if ((failed)); then verdict=FAILED; else verdict="all passed"; fi
echo "run-tests: ${line%, }: $verdict"
exit "$failed"
