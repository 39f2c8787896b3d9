#!/usr/bin/env bash
# Driver for the tests in tests/consumer/CMakeLists.txt: builds a program
# against an installed uepoll the way a user outside this tree would.
#
#   consumer_test.sh install    BUILD_DIR PREFIX [PROGRAM...]
#       `cmake --install` BUILD_DIR into PREFIX (emptied first) and check
#       that the tree holds the headers, both libraries, the CMake package,
#       uepoll.pc and each PROGRAM in bin/.
#   consumer_test.sh find_package PREFIX WORK_DIR
#       configure project/ with -DCMAKE_PREFIX_PATH=PREFIX, build it, run its
#       programs (C99 against both libraries, C++20 against the shared one).
#   consumer_test.sh exports LIBUEPOLL_SO
#       check that the shared library exports exactly the public API: every
#       function the C headers declare, and only uepoll_* / namespace uepoll
#       (src/uepoll.map).
#   consumer_test.sh pkg_config PREFIX WORK_DIR
#       compile project/consumer.c with the flags `pkg-config` gives, against
#       the shared and (with --static) the static library, run both.
#
# Environment (set by CTest): CMAKE, CMAKE_GENERATOR, CC, CXX, and
# SANITIZE_CFLAGS / SANITIZE_LDFLAGS, the sanitizer flags the library was
# built with: an instrumented library needs its runtime in the program.
#
# Each step builds everything before running anything, so a packaging
# failure is told apart from the program reporting a failed call.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
project=$here/project
read -r -a san_cflags <<<"${SANITIZE_CFLAGS:-}"
read -r -a san_ldflags <<<"${SANITIZE_LDFLAGS:-}"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs "$@" quietly; on failure shows its output and fails the test. In a
# sanitizer build, a link that fails only for want of the sanitizer runtime
# is a limit of the toolchain, not of the package: exit 77 (CTest: skipped).
quiet() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    if [[ -n ${SANITIZE_LDFLAGS:-} ]] &&
       grep -q 'undefined reference to `__[a-z]*san_' "$log" &&
       ! grep 'undefined reference' "$log" | grep -qv '`__[a-z]*san_'; then
      rm -f "$log"
      echo "SKIP: the sanitizer runtime does not link into this consumer" >&2
      exit 77
    fi
    rm -f "$log"
    fail "command failed: $*"
  fi
  rm -f "$log"
}

run_programs() {
  local status=0 p
  for p in "$@"; do
    echo "-- running $(basename "$p")"
    "$p" || status=1
  done
  return "$status"
}

# The install's libdir: where uepoll.pc sits, one level up.
find_libdir() {
  local pc
  pc=$(find "$1" -name uepoll.pc -path '*/pkgconfig/*' | head -n 1)
  [[ -n $pc ]] || fail "no uepoll.pc under $1"
  dirname "$(dirname "$pc")"
}

do_install() {
  local build=$1 prefix=$2 program
  shift 2
  rm -rf "$prefix"
  quiet "$CMAKE" --install "$build" --prefix "$prefix"

  local libdir f h
  libdir=$(find_libdir "$prefix")
  for f in include/uepoll/uepoll.h include/uepoll/debug.h; do
    [[ -f $prefix/$f ]] || fail "missing $f"
  done
  # Every public header of the source tree, C and C++.
  for h in "$here"/../../include/uepoll/*.h "$here"/../../include/uepoll/*.hpp; do
    [[ -e $h ]] || continue
    [[ -f $prefix/include/uepoll/$(basename "$h") ]] ||
      fail "header $(basename "$h") not installed"
  done
  for f in libuepoll.a libuepoll.so pkgconfig/uepoll.pc \
           cmake/uepoll/uepollConfig.cmake \
           cmake/uepoll/uepollConfigVersion.cmake \
           cmake/uepoll/uepollTargets.cmake; do
    [[ -e $libdir/$f ]] || fail "missing ${libdir#"$prefix"/}/$f"
  done
  for program in "$@"; do
    [[ -z $program || -x $prefix/bin/$program ]] ||
      fail "program bin/$program not installed"
  done
  # libuepoll.so is the development symlink to the soname file.
  [[ -L $libdir/libuepoll.so ]] || fail "libuepoll.so is not a symlink"
  [[ -f $(readlink -f "$libdir/libuepoll.so") ]] || fail "dangling libuepoll.so"
  echo "installed tree in $prefix:"
  (cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/  /')
}

do_find_package() {
  local prefix=$1 work=$2
  rm -rf "$work"
  quiet "$CMAKE" -S "$project" -B "$work" -G "$CMAKE_GENERATOR" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_C_FLAGS="${san_cflags[*]}" -DCMAKE_CXX_FLAGS="${san_cflags[*]}" \
    -DCMAKE_EXE_LINKER_FLAGS="${san_ldflags[*]}"
  # The package must be the one just installed, not one on the system.
  grep -q "^uepoll_DIR:PATH=$prefix/" "$work/CMakeCache.txt" ||
    fail "find_package(uepoll) did not pick $prefix"
  quiet "$CMAKE" --build "$work"
  echo "built consumer_shared, consumer_static and consumer_cxx with" \
       "find_package(uepoll)"
  run_programs "$work/consumer_shared" "$work/consumer_static" \
               "$work/consumer_cxx"
}

do_pkg_config() {
  local prefix=$1 work=$2 libdir
  command -v pkg-config >/dev/null || fail "pkg-config is not installed"
  libdir=$(find_libdir "$prefix")
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  rm -rf "$work" && mkdir -p "$work"

  local version requires cflags libs static_libs
  version=$(pkg-config --modversion uepoll)
  requires=$(pkg-config --print-requires-private uepoll)
  [[ -z $requires ]] || fail "uepoll.pc has Requires.private: $requires"
  cflags=$(pkg-config --cflags uepoll)
  libs=$(pkg-config --libs uepoll)
  static_libs=$(pkg-config --static --libs uepoll)
  echo "pkg-config uepoll $version: cflags '$cflags' libs '$libs'" \
       "static libs '$static_libs'"
  # shellcheck disable=SC2086  # the flags are words
  quiet "$CC" -std=c99 -pedantic -Werror "${san_cflags[@]}" \
    $cflags "$project/consumer.c" -o "$work/consumer_pc_shared" \
    "${san_ldflags[@]}" $libs -Wl,-rpath,"$libdir"
  # Both libraries sit in libdir and -luepoll prefers the shared one; -l: names
  # the archive, the rest of the --static flags are what it needs.
  # shellcheck disable=SC2086
  quiet "$CC" -std=c99 -pedantic -Werror "${san_cflags[@]}" \
    $cflags "$project/consumer.c" -o "$work/consumer_pc_static" \
    "${san_ldflags[@]}" ${static_libs/-luepoll/-l:libuepoll.a}
  if ldd "$work/consumer_pc_static" | grep -q libuepoll; then
    fail "consumer_pc_static links libuepoll.so"
  fi
  echo "built consumer_pc_shared and consumer_pc_static with pkg-config"
  run_programs "$work/consumer_pc_shared" "$work/consumer_pc_static"
}

do_exports() {
  local lib=$1 sym demangled bad=0 missing=0 want
  local -a syms
  mapfile -t syms < <(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
  ((${#syms[@]} > 0)) || fail "no dynamic symbols in $lib"
  for sym in "${syms[@]}"; do
    [[ $sym == uepoll_* ]] && continue
    demangled=$(c++filt "$sym")
    case $demangled in
      uepoll::* | "typeinfo for uepoll::"* | "typeinfo name for uepoll::"* | \
        "vtable for uepoll::"* | "VTT for uepoll::"*) ;;
      *) echo "unexpected export: $sym ($demangled)" >&2; bad=1 ;;
    esac
  done
  # Every function the public C headers declare is defined and exported.
  while read -r want; do
    if ! printf '%s\n' "${syms[@]}" | grep -qx "$want"; then
      echo "not exported: $want" >&2
      missing=1
    fi
  done < <(grep -ho 'UEPOLL_API[^(]*\buepoll_[a-z0-9_]*(' \
             "$here"/../../include/uepoll/*.h |
           grep -o 'uepoll_[a-z0-9_]*' | sort -u)
  ((bad == 0)) || fail "$lib exports symbols outside the public API"
  ((missing == 0)) || fail "$lib lacks functions the headers declare"
  echo "$lib exports ${#syms[@]} symbols, all public API"
}

mode=${1:-}
shift || true
case $mode in
  install) do_install "$@" ;;
  find_package) do_find_package "$@" ;;
  pkg_config) do_pkg_config "$@" ;;
  exports) do_exports "$@" ;;
  *) fail "usage: $0 install|find_package|pkg_config|exports ARGS..." ;;
esac
