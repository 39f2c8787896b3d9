#!/usr/bin/env bash
# Driver for the tests in tests/consumer/CMakeLists.txt, and for
# deb_test.sh: builds programs against an installed uepoll the way a user
# outside this tree would.
#
#   consumer_test.sh install      BUILD_DIR PREFIX [PROGRAM...]
#       `cmake --install` BUILD_DIR into PREFIX (emptied first) and check
#       that the tree holds the headers, both libraries, the CMake package,
#       both pkg-config files, the manual pages and each PROGRAM in bin/.
#   consumer_test.sh find_package PREFIX WORK_DIR
#       configure project/c (a C-only project: both libraries) and
#       project/cxx (C++ with no standard asked for: both libraries) with
#       -DCMAKE_PREFIX_PATH=PREFIX, build them, run their programs.
#   consumer_test.sh pkg_config   PREFIX WORK_DIR
#       build project/consumer.c and consumer_cxx.cc with the flags
#       pkg-config gives: shared (with an rpath, and run through
#       LD_LIBRARY_PATH), static (uepoll-static, and a fully static link
#       with --static), C++20; and check that C++17 stops at the headers'
#       #error. Run them all.
#   consumer_test.sh exports      LIBUEPOLL_SO
#       check that the shared library exports exactly the public API: every
#       function the C headers declare, and only uepoll_* / namespace uepoll
#       (src/uepoll.map).
#   consumer_test.sh man_pages    MAN_DIR INCLUDE_DIR
#       check the pages in MAN_DIR against the calls the public C headers in
#       INCLUDE_DIR declare, debug.h aside (every call has a page or an
#       entry in uepoll.3, every page a call), and render each with groff,
#       warnings being failures.
#
# Environment (set by CTest; defaults for a system install): CMAKE,
# CMAKE_GENERATOR, CC, CXX, and SANITIZE_CFLAGS / SANITIZE_LDFLAGS, the
# sanitizer flags the library was built with: an instrumented library
# needs its runtime in the program.
#
# Each step builds everything before running anything, so a packaging
# failure is told apart from the program reporting a failed call.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
project=$here/project
: "${CMAKE:=cmake}" "${CMAKE_GENERATOR:=Unix Makefiles}" "${CC:=cc}" "${CXX:=c++}"
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
       ! grep -qv '`__[a-z]*san_' <<<"$(grep 'undefined reference' "$log")"; then
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
  pc=$(find "$1" -maxdepth 4 -path '*/pkgconfig/uepoll.pc' | head -n 1)
  [[ -n $pc ]] || fail "no uepoll.pc under $1"
  dirname "$(dirname "$pc")"
}

# The calls listed in uepoll.3: under RENAMED CALLS, each entry's
# ".B uepoll_name" line; under UEPOLL'S OWN CALLS, each ".BR uepoll_name (3)"
# line (man/CMakeLists.txt reads the first list the same way).
renamed_calls() {
  awk '/^\.SH /{sec=$0} sec==".SH RENAMED CALLS" && /^\.B uepoll_[a-z0-9_]+$/ {print $2}' "$1"
}
own_calls() {
  awk '/^\.SH /{sec=$0} sec==".SH UEPOLL'"'"'S OWN CALLS" && /^\.BR uepoll_[a-z0-9_]+ \(3\)$/ {print $2}' "$1"
}

do_install() {
  local build=$1 prefix=$2 program
  shift 2
  rm -rf "$prefix"
  quiet "$CMAKE" --install "$build" --prefix "$prefix"

  local libdir f h page
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
  for f in libuepoll.a libuepoll.so libuepoll-interpose.so pkgconfig/uepoll.pc \
           pkgconfig/uepoll-static.pc \
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
  # The interposer exports the libc names, and loads libuepoll from its own
  # directory at the first uepoll object. A sanitizer build's needs its
  # runtime first in the process, which a plain program does not have: not
  # run there. (The symbol list is read whole: grep -q would stop nm early,
  # and pipefail would count its SIGPIPE.)
  local exported
  exported=$(nm -D --defined-only "$libdir/libuepoll-interpose.so")
  grep -q ' T epoll_ctl$' <<<"$exported" ||
    fail "libuepoll-interpose.so does not export epoll_ctl"
  if [[ -z ${SANITIZE_LDFLAGS:-} ]]; then
    LD_PRELOAD=$libdir/libuepoll-interpose.so env true ||
      fail "a program does not run with libuepoll-interpose.so preloaded"
  fi
  # Every page of man/, and a link page for each renamed call.
  local man3=$prefix/share/man/man3
  for page in "$here"/../../man/*.3; do
    [[ -f $man3/$(basename "$page") ]] ||
      fail "manual page $(basename "$page") not installed"
  done
  for page in $(renamed_calls "$here/../../man/uepoll.3"); do
    grep -qx '\.so man3/uepoll\.3' "$man3/$page.3" 2>/dev/null ||
      fail "man3/$page.3 is not a link to uepoll.3"
  done
  for f in semantics.md contract.md cxx_api.md; do
    [[ -f $prefix/share/doc/uepoll/$f ]] || fail "share/doc/uepoll/$f missing"
  done
  echo "installed tree in $prefix:"
  (cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/  /')
}

# Configures, builds and lists the programs of one project/ subproject.
build_project() {
  local sub=$1 prefix=$2 work=$3
  rm -rf "$work"
  quiet "$CMAKE" -S "$project/$sub" -B "$work" -G "$CMAKE_GENERATOR" \
    -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_C_FLAGS="${san_cflags[*]}" -DCMAKE_CXX_FLAGS="${san_cflags[*]}" \
    -DCMAKE_EXE_LINKER_FLAGS="${san_ldflags[*]}"
  # The package must be the one just installed, not one on the system.
  grep -q "^uepoll_DIR:PATH=$prefix/" "$work/CMakeCache.txt" ||
    fail "find_package(uepoll) in project/$sub did not pick $prefix"
  quiet "$CMAKE" --build "$work"
}

do_find_package() {
  local prefix=$1 work=$2
  build_project c "$prefix" "$work/c"
  build_project cxx "$prefix" "$work/cxx"
  echo "built with find_package(uepoll): consumer_shared, consumer_static" \
       "(C only), consumer_cxx_shared, consumer_cxx_static (no -std asked)"
  run_programs "$work/c/consumer_shared" "$work/c/consumer_static" \
               "$work/cxx/consumer_cxx_shared" "$work/cxx/consumer_cxx_static"
}

do_pkg_config() {
  local prefix=$1 work=$2 libdir
  command -v pkg-config >/dev/null || fail "pkg-config is not installed"
  libdir=$(find_libdir "$prefix")
  export PKG_CONFIG_PATH=$libdir/pkgconfig
  rm -rf "$work" && mkdir -p "$work"

  local version requires cflags libs static_libs archive_libs var
  version=$(pkg-config --modversion uepoll)
  requires=$(pkg-config --print-requires-private uepoll)
  [[ -z $requires ]] || fail "uepoll.pc has Requires.private: $requires"
  cflags=$(pkg-config --cflags uepoll)
  libs=$(pkg-config --libs uepoll)
  static_libs=$(pkg-config --static --libs uepoll)
  archive_libs=$(pkg-config --libs uepoll-static)
  echo "pkg-config uepoll $version: cflags '$cflags' libs '$libs'" \
       "static libs '$static_libs'; uepoll-static libs '$archive_libs'"
  # Plain paths: no ${pcfiledir}/../.. left in them.
  for var in libdir includedir; do
    [[ $(pkg-config --variable=$var uepoll) != *..* ]] ||
      fail "uepoll.pc: $var is $(pkg-config --variable=$var uepoll)"
  done
  [[ $(pkg-config --variable=includedir uepoll) == "$prefix/include" ]] ||
    fail "uepoll.pc: includedir is not $prefix/include"
  [[ " $static_libs " == *" -lstdc++ "* && " $static_libs " == *" -pthread "* ]] ||
    fail "pkg-config --static --libs uepoll lacks -lstdc++ or -pthread"

  local c_flags=(-std=c99 -pedantic -Werror "${san_cflags[@]}")
  # shellcheck disable=SC2086  # the flags are words
  quiet "$CC" "${c_flags[@]}" $cflags "$project/consumer.c" \
    -o "$work/consumer_pc_rpath" "${san_ldflags[@]}" $libs \
    -Wl,-rpath,"$libdir"
  # shellcheck disable=SC2086
  quiet "$CC" "${c_flags[@]}" $cflags "$project/consumer.c" \
    -o "$work/consumer_pc_shared" "${san_ldflags[@]}" $libs
  # shellcheck disable=SC2046,SC2086
  quiet "$CC" "${c_flags[@]}" $(pkg-config --cflags uepoll-static) \
    "$project/consumer.c" -o "$work/consumer_pc_static" "${san_ldflags[@]}" \
    $archive_libs
  if grep -q libuepoll <<<"$(ldd "$work/consumer_pc_static")"; then
    fail "consumer_pc_static links libuepoll.so"
  fi
  local programs=("$work/consumer_pc_rpath" "$work/consumer_pc_static")
  # A fully static program: -static makes -luepoll take the archive, and
  # --static adds what the archive needs. Sanitizer runtimes do not link
  # statically.
  if [[ -z ${SANITIZE_LDFLAGS:-} ]]; then
    # shellcheck disable=SC2086
    quiet "$CC" "${c_flags[@]}" $cflags "$project/consumer.c" \
      -o "$work/consumer_pc_full_static" -static $static_libs
    programs+=("$work/consumer_pc_full_static")
  fi
  # shellcheck disable=SC2086
  quiet "$CXX" -std=c++20 -Wall -Wextra -pedantic -Werror "${san_cflags[@]}" \
    $cflags "$project/consumer_cxx.cc" -o "$work/consumer_cxx_pc" \
    "${san_ldflags[@]}" $libs -Wl,-rpath,"$libdir"
  programs+=("$work/consumer_cxx_pc")
  # C++17: the headers say what they need instead of failing deep inside.
  local log=$work/cxx17.log
  # shellcheck disable=SC2086
  if "$CXX" -std=c++17 $cflags -fsyntax-only "$project/consumer_cxx.cc" \
       >"$log" 2>&1; then
    fail "consumer_cxx.cc compiled as C++17"
  fi
  grep -q "uepoll's C++ API needs C++20" "$log" || {
    cat "$log" >&2
    fail "C++17 did not stop at the headers' #error"
  }
  echo "built with pkg-config: ${programs[*]##*/} and consumer_pc_shared;" \
       "C++17 stops at #error"
  run_programs "${programs[@]}"
  # No rpath: the loader finds the library through LD_LIBRARY_PATH.
  echo "-- running consumer_pc_shared with LD_LIBRARY_PATH=$libdir"
  LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    "$work/consumer_pc_shared"
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
    # A here-string, not a pipe: grep -q exits at the first match, and the
    # writer's SIGPIPE would fail the pipeline under pipefail.
    if ! grep -qx -- "$want" <<<"$(printf '%s\n' "${syms[@]}")"; then
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

do_man_pages() {
  local dir=$1 index=$1/uepoll.3 call page target bad=0 header
  local -a calls renamed own pages headers
  # Every public C header but debug.h (test hooks, documented in place).
  mapfile -t headers < <(find "$2" -maxdepth 1 -name '*.h' ! -name debug.h |
                         sort)
  header="the headers (${headers[*]##*/})"
  mapfile -t calls < <(grep -ho 'UEPOLL_API[^(]*\buepoll_[a-z0-9_]*(' \
                         "${headers[@]}" | grep -o 'uepoll_[a-z0-9_]*' | sort -u)
  ((${#calls[@]} > 0)) || fail "no calls found in $header"
  mapfile -t renamed < <(renamed_calls "$index")
  mapfile -t own < <(own_calls "$index")
  mapfile -t pages < <(find "$dir" -maxdepth 1 -name '*.3' -printf '%f\n' |
                       sed 's/\.3$//' | grep -vx uepoll | sort)
  in_list() {  # a here-string for the reason given in do_exports
    local x=$1
    shift
    grep -qx -- "$x" <<<"$(printf '%s\n' "$@")"
  }
  for call in "${calls[@]}"; do
    if in_list "$call" "${renamed[@]}"; then
      ! in_list "$call" "${own[@]}" ||
        { echo "$call is both renamed and uepoll's own in uepoll.3" >&2; bad=1; }
    elif in_list "$call" "${own[@]}"; then
      [[ -f $dir/$call.3 ]] ||
        { echo "$call is listed in uepoll.3 but has no page $call.3" >&2; bad=1; }
    else
      echo "$call is in neither list of uepoll.3:" \
           "add a RENAMED CALLS entry, or a page and an OWN CALLS line" >&2
      bad=1
    fi
  done
  for call in "${renamed[@]}" "${own[@]}"; do
    in_list "$call" "${calls[@]}" ||
      { echo "uepoll.3 lists $call, which $header do not declare" >&2; bad=1; }
  done
  for page in "${pages[@]}"; do
    in_list "$page" "${own[@]}" ||
      { echo "page $page.3 is not listed under UEPOLL'S OWN CALLS" >&2; bad=1; }
  done
  # Render every page (a link page through its target), warnings included.
  command -v groff >/dev/null || fail "groff is not installed (groff-base)"
  local log
  log=$(mktemp)
  for page in "$dir"/*.3; do
    target=$(sed -n 's|^\.so man3/||p' "$page")
    if [[ -n $target ]]; then
      [[ -f $dir/$target ]] ||
        { echo "$(basename "$page") links to missing $target" >&2; bad=1; }
      continue
    fi
    if ! groff -t -man -Tutf8 -ww -z "$page" >"$log" 2>&1 || [[ -s $log ]]; then
      echo "groff on $(basename "$page"):" >&2
      cat "$log" >&2
      bad=1
    fi
  done
  rm -f "$log"
  ((bad == 0)) || fail "manual pages: see above"
  echo "man pages: ${#calls[@]} calls, ${#renamed[@]} renamed (uepoll.3)," \
       "${#own[@]} uepoll's own, ${#pages[@]} pages; all render cleanly"
}

mode=${1:-}
shift || true
case $mode in
  install) do_install "$@" ;;
  find_package) do_find_package "$@" ;;
  pkg_config) do_pkg_config "$@" ;;
  exports) do_exports "$@" ;;
  man_pages) do_man_pages "$@" ;;
  *) fail "usage: $0 install|find_package|pkg_config|exports|man_pages ARGS..." ;;
esac
