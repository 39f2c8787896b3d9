#!/usr/bin/env bash
# The mutation check: how many realistic bugs the test suite catches. Each
# mutant (tools/mutants/*.patch) is one bug in src/. For each, the script
# applies it to a scratch copy of the tree (never to your tree), rebuilds
# that copy (dev preset, its own build dir), runs the tests with a time cap,
# reverts the patch, and reports whether a test failed (killed) or every
# test passed (survived). docs/reliability.md has the current score.
#
#   tools/mutants/run.sh [options] [MUTANT...]
#
#   MUTANT          mutant names (a patch's file name without .patch);
#                   default: every mutant
#   --ci            the fast subset CI runs: only mutants with a "# ci:"
#                   header line, each building and running only the tests
#                   that line names; a mutant that no longer applies fails
#                   the run (update or replace its patch)
#   --named         every mutant (or those named) against the check its
#                   header names: its "# ci:" line, else its "# killed by:"
#                   line (same form); one with neither gets the whole
#                   suite (or --target/--tests). The full set in about
#                   half an hour instead of hours
#   --tests REGEX   run only the CTest entries matching REGEX (ctest -R)
#   --target TARGET build only TARGET (repeatable) instead of everything:
#                   with --tests naming tests of those binaries, a mutant
#                   relinks a few binaries rather than the whole suite
#   --cap SECONDS   time cap on one mutant's test run (default 900); a run
#                   that reaches it counts as killed ("timeout")
#   --work DIR      scratch directory (default: build/mutants in this tree);
#                   kept between runs so that rebuilds are incremental
#   --jobs N        parallel build jobs and ctest jobs (default 2; 1 on a
#                   machine shared with other builds)
#   --source DIR    the git tree to copy (default: this tree, with your
#                   uncommitted changes)
#   --no-baseline   skip the check that the unmutated copy passes
#   --in-place      patch this tree itself and build in its build/dev
#                   (which must be configured; src/ must match HEAD): no
#                   scratch copy to build from nothing. For a throwaway
#                   clone (CI); each patch is reverted, also on an
#                   interrupt, and the run stops if a revert fails
#   --list          list the mutants and exit
#
# Statuses: killed (the first failing test is named), timeout (killed by
# the cap), survived, does-not-apply (src/ changed under the patch: update
# or drop it), build-failed (the patch is broken). After the table, one
# line per area, "area: NAME K of N killed" (N counting that area's mutants
# that applied and built; ", S not run" when some did not), then
# "kill rate: R% (K of N)"; the last line is "mutants: K of N killed", N
# counting every mutant that applied and built. Exit status 0 when every
# such mutant was killed, 1 otherwise, 2 on usage or setup errors
# (including a baseline that fails).
#
# A patch starts with header lines that git apply ignores:
#   # mutant: what the bug is
#   # area: NAME              (optional: the part of the engine, for the
#                              per-area kill rates of docs/reliability.md;
#                              default: the patch name up to its first
#                              "-", e.g. "pipe" for pipe-poll-no-hup)
#   # ci: TARGET [-R REGEX]   (optional: the fast check CI runs for it:
#                              build TARGET, run the CTest entries labelled
#                              TARGET, or those matching REGEX)
#   # killed by: TARGET [-R REGEX]
#                             (optional, for a mutant outside the CI
#                              subset: a check that kills it, which
#                              --named runs)
set -euo pipefail

# Everything runs from main(), which bash reads whole before it starts:
# editing this file while it runs cannot break the run.
main() {

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source_dir=$repo
work=$repo/build/mutants
cap=900
jobs=2
ci=0
named=0
tests=""
baseline=1
in_place=0
list=0
names=()
only=()

usage() { sed -n '2,50s/^# \{0,1\}//p' "$0"; }

while (($#)); do
  case $1 in
    --ci) ci=1 ;;
    --named) named=1 ;;
    --tests) tests=$2; shift ;;
    --target) only+=("$2"); shift ;;
    --cap) cap=$2; shift ;;
    --work) work=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --source) source_dir=$(cd "$2" && pwd); shift ;;
    --no-baseline) baseline=0 ;;
    --in-place) in_place=1 ;;
    --list) list=1 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) names+=("$1") ;;
  esac
  shift
done

header() { sed -n "s/^# $2: //p" "$1" | head -1; }
# A patch's area: its "# area:" header, else its name up to the first "-".
area_of() {
  local a
  a=$(header "$1" area)
  [[ -n $a ]] || { a=$(basename "$1" .patch); a=${a%%-*}; }
  printf '%s' "$a"
}

patches=()
if ((${#names[@]})); then
  for n in "${names[@]}"; do
    [[ -f $here/$n.patch ]] || { echo "mutants: no mutant $n" >&2; exit 2; }
    patches+=("$here/$n.patch")
  done
else
  for p in "$here"/*.patch; do patches+=("$p"); done
fi
if ((ci)); then
  sel=()
  for p in "${patches[@]}"; do [[ -n $(header "$p" ci) ]] && sel+=("$p"); done
  patches=("${sel[@]}")
fi
if ((list)); then
  for p in "${patches[@]}"; do
    printf '%-36s %s\n' "$(basename "$p" .patch)" "$(header "$p" mutant)"
  done
  exit 0
fi
((${#patches[@]})) || { echo "mutants: nothing to run" >&2; exit 2; }

tree=$work/tree
((in_place)) && tree=$source_dir
build=$tree/build/dev
log=$work/logs
mkdir -p "$work" "$log"
gitq() { git -C "$tree" -c user.name=mutants -c user.email=mutants@localhost "$@"; }

# Brings $tree in line with the source's files (tracked and untracked, not
# ignored). Only files whose content differs are copied, so their fresh
# mtimes make ninja rebuild exactly what changed since the last run.
sync_tree() {
  local staging=$work/staging f
  rm -rf "$staging"
  mkdir -p "$staging" "$tree"
  (cd "$source_dir" && git ls-files -z -co --exclude-standard |
     tar --null -T - -cf -) | tar -C "$staging" -xf -
  (cd "$staging" && find . -type f -print0) |
    while IFS= read -r -d '' f; do
      if ! cmp -s "$staging/$f" "$tree/$f"; then
        mkdir -p "$(dirname "$tree/$f")"
        cp "$staging/$f" "$tree/$f"
      fi
    done
  # Files gone from the source go from the copy (its build dir stays).
  (cd "$tree" && find . -path ./build -prune -o -path ./.git -prune -o \
     -type f -print0) |
    while IFS= read -r -d '' f; do
      [[ -e $staging/$f ]] || rm -f "$tree/$f"
    done
  rm -rf "$staging"
  if [[ ! -d $tree/.git ]]; then
    gitq init -q
    printf '/build/\n' >"$tree/.git/info/exclude"
  fi
  gitq add -A
  gitq commit -qm "source as of $(date -u +%FT%TZ)" --allow-empty
}

# The check a patch's header names, in the mode of this run: its ci line
# (--ci), else its killed-by line (--named); empty when none applies.
check_line() {
  local line=""
  ((ci || named)) && line=$(header "$1" ci)
  ((named)) && [[ -z $line ]] && line=$(header "$1" "killed by")
  printf '%s' "$line"
}
# What that line names: the target to build, and the ctest selection
# (-L TARGET, or -R REGEX).
check_target() { check_line "$1" | awk '{print $1}'; }
check_select() {
  local line
  line=$(check_line "$1")
  if [[ $line == *" -R "* ]]; then
    printf -- '-R\n%s\n' "${line#* -R }"
  else
    printf -- '-L\n^%s$\n' "${line%% *}"
  fi
}

build_targets() {  # [target...]: all when none
  if (($#)); then
    cmake --build "$build" -j"$jobs" --target "$@"
  else
    cmake --build "$build" -j"$jobs"
  fi
}

# Runs the tests. Returns ctest's status, or 124 when the cap was reached.
run_tests() {  # logfile [ctest selection args...]
  local out=$1 args=()
  shift
  args=("$@")
  [[ -n $tests ]] && args+=(-R "$tests")
  local rc=0
  timeout --kill-after=10 "$cap" ctest --test-dir "$build" -j"$jobs" \
    --stop-on-failure --timeout 120 --output-on-failure "${args[@]}" \
    >"$out" 2>&1 || rc=$?
  return "$rc"
}

first_failure() {  # logfile
  local t
  # ctest's closing list names every failed test; without it (the cap cut
  # the run short), the first ***Failed/***Timeout/***Exception line.
  t=$(sed -n '/^The following tests FAILED:/{n;p;q}' "$1" |
        sed -E 's/^[[:space:]]*[0-9]+ - ([^ ]+).*/\1/') || true
  if [[ -z $t ]]; then
    t=$(grep -m1 -E '\*\*\*(Failed|Timeout|Exception)' "$1" |
          sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/\1/') || true
  fi
  printf '%s' "${t:-(see log)}"
}

applied=""
if ((in_place)); then
  if [[ ! -f $build/build.ninja ]]; then
    echo "mutants: --in-place needs $build configured (cmake --preset dev)" >&2
    exit 2
  fi
  if ! git -C "$tree" diff --quiet HEAD -- src; then
    echo "mutants: --in-place needs src/ as committed (git diff HEAD -- src)" >&2
    exit 2
  fi
  # A patch still applied when the run ends (an interrupt, a failure of
  # the script itself) is taken back out.
  revert_applied() {
    [[ -n $applied ]] && git -C "$tree" apply -R "$applied" 2>/dev/null
    applied=""
  }
  trap 'revert_applied' EXIT
  trap 'revert_applied; exit 130' INT
  trap 'revert_applied; exit 143' TERM
  echo "mutants: in place in $tree"
else
  echo "mutants: copying $source_dir to $tree"
  sync_tree
  if [[ ! -f $build/build.ninja ]]; then
    (cd "$tree" && cmake --preset dev -DUEPOLL_BUILD_BENCH=OFF >/dev/null)
  fi
fi

# The unmutated copy must pass what the mutants will be judged by (in --ci
# mode: each mutant's own selection).
if ((baseline)); then
  echo "mutants: baseline build and tests"
  targets=("${only[@]}") selections=()
  if ((ci || named)); then
    # Each mutant's own check; the whole suite (or --target/--tests) for
    # one whose header names none, and then the whole build.
    whole=0
    declare -A seen=()
    for p in "${patches[@]}"; do
      line=$(check_line "$p")
      if [[ -z $line ]]; then
        whole=1
      elif [[ -z ${seen[$line]+set} ]]; then  # each check once
        seen[$line]=1
        targets+=("$(check_target "$p")")
        selections+=("$p")
      fi
    done
    if ((whole)); then
      ((${#only[@]})) || targets=()  # everything
      selections+=("")
    fi
  else
    selections=("")
  fi
  if ! build_targets "${targets[@]}" >"$log/baseline.build" 2>&1; then
    echo "mutants: the unmutated tree does not build: $log/baseline.build" >&2
    exit 2
  fi
  for p in "${selections[@]}"; do
    sel=()
    [[ -n $p ]] && mapfile -t sel < <(check_select "$p")
    if ! run_tests "$log/baseline.test" "${sel[@]}"; then
      echo "mutants: the unmutated tree fails" \
           "$(first_failure "$log/baseline.test") ($log/baseline.test):" \
           "fix that first" >&2
      exit 2
    fi
  done
fi

printf '\n%-36s %-15s %s\n' mutant status "killed by"
printf '%-36s %-15s %s\n' ------ ------ ---------
killed=0 counted=0 survivors=() stale=()
declare -A area_killed=() area_counted=() area_stale=()
areas=()
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  area=$(area_of "$p")
  if [[ -z ${area_counted[$area]+set} ]]; then
    areas+=("$area")
    area_killed[$area]=0 area_counted[$area]=0 area_stale[$area]=0
  fi
  start=$SECONDS
  status="" by=""
  targets=("${only[@]}") sel=()
  if [[ -n $(check_line "$p") ]]; then
    targets=("$(check_target "$p")")
    mapfile -t sel < <(check_select "$p")
  fi
  if ! gitq apply --check "$p" 2>/dev/null; then
    status=does-not-apply
    stale+=("$name")
    area_stale[$area]=$((area_stale[$area] + 1))
  else
    applied=$p  # first: an interrupt right after the apply reverts it
    gitq apply "$p"
    if ! build_targets "${targets[@]}" >"$log/$name.build" 2>&1; then
      status=build-failed
      stale+=("$name")
      area_stale[$area]=$((area_stale[$area] + 1))
    else
      rc=0
      run_tests "$log/$name.test" "${sel[@]}" || rc=$?
      counted=$((counted + 1))
      area_counted[$area]=$((area_counted[$area] + 1))
      if ((rc == 0)); then
        status=survived
        survivors+=("$name")
      elif ((rc == 124 || rc == 137)); then
        status=timeout
        by="cap of ${cap} s; last: $(first_failure "$log/$name.test")"
        killed=$((killed + 1))
        area_killed[$area]=$((area_killed[$area] + 1))
      else
        status=killed
        by=$(first_failure "$log/$name.test")
        killed=$((killed + 1))
        area_killed[$area]=$((area_killed[$area] + 1))
      fi
    fi
    if ((in_place)); then
      # Only the patch's own changes go: the tree is the user's.
      if ! git -C "$tree" apply -R "$p" ||
         ! git -C "$tree" diff --quiet HEAD -- src; then
        echo "mutants: $name could not be taken back out of $tree:" \
             "restore it (git checkout -- src)" >&2
        exit 2
      fi
    else
      gitq apply -R "$p" 2>/dev/null || true
      gitq checkout -q -- .
      gitq clean -fdq
    fi
    applied=""
  fi
  printf '%-36s %-15s %s  [%d s]\n' "$name" "$status" "$by" \
         "$((SECONDS - start))"
done
echo
((${#survivors[@]})) && echo "survivors: ${survivors[*]}"
((${#stale[@]})) && echo "not run (does not apply / does not build): ${stale[*]}"
for a in "${areas[@]}"; do
  line="area: $a ${area_killed[$a]} of ${area_counted[$a]} killed"
  ((area_stale[$a])) && line+=", ${area_stale[$a]} not run"
  echo "$line"
done
if ((counted)); then
  echo "kill rate: $(awk -v k="$killed" -v n="$counted" \
                       'BEGIN { printf "%.1f", 100 * k / n }')% ($killed of $counted)"
else
  echo "kill rate: n/a (no mutant applied and built)"
fi
echo "mutants: $killed of $counted killed"
# CI must notice a subset that no longer runs, not shrink silently.
((ci && ${#stale[@]})) && return 1
((killed == counted))
}

main "$@"
