#!/usr/bin/env bash
# The Debian package, end to end, as .ci/run runs it (root, Debian):
#   1. configure a fresh build directory with the install prefix /usr (no
#      tests, no examples), build it, and make the package with
#      `cpack -G DEB`;
#   2. install the package with apt-get (which resolves its Depends);
#   3. check what it put on the machine: its file list, uepoll-bench, the
#      manual pages through man(1), and build and run the consumers of
#      consumer_test.sh against /usr, through find_package and pkg-config;
#   4. remove the package (also when a step fails) and check it is gone.
#
#   tests/consumer/deb_test.sh [BUILD_DIR]    (default: build/deb)
#
# It changes the machine's package set while it runs, so it is not a CTest
# test. It refuses to touch a uepoll package that it did not install
# itself.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build/deb}
readonly maintainer_of_ours="uepoll developers <uepoll@localhost>"

fail() {
  echo "deb_test: FAIL: $*" >&2
  exit 1
}
step() { printf -- '-- %s\n' "$*"; }

((EUID == 0)) || fail "run as root: the test installs a package"
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  fail "not a Debian system"
fi

installed() {
  [[ $(dpkg-query -W -f='${Status}' uepoll 2>/dev/null) == *"ok installed" ]]
}
if installed; then
  # A run that was killed before its cleanup leaves our package behind.
  [[ $(dpkg-query -W -f='${Maintainer}' uepoll) == "$maintainer_of_ours" ]] ||
    fail "a uepoll package from elsewhere is installed; remove it first"
  step "removing a uepoll package left by an earlier run"
  dpkg --purge uepoll >/dev/null
fi

step "building the package in $build (fresh)"
rm -rf "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX=/usr -DUEPOLL_BUILD_TESTS=OFF \
  -DUEPOLL_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" -j2 >/dev/null
(cd "$build" && cpack -G DEB >/dev/null)
debs=("$build"/uepoll_*.deb)
[[ -f ${debs[0]} && ${#debs[@]} -eq 1 ]] || fail "cpack made no single .deb"
deb=${debs[0]}
dpkg-deb --info "$deb" | sed -n '/Package:/,$p'

cleanup() {
  if installed; then
    step "removing the package"
    dpkg --purge uepoll >/dev/null
  fi
}
trap cleanup EXIT

step "installing $(basename "$deb")"
apt-get install -y --no-install-recommends "$deb" >/dev/null 2>&1 ||
  fail "apt-get install $deb failed"
installed || fail "the package is not installed"

step "checking the installed files"
files=$(dpkg-query -L uepoll)
for f in /usr/include/uepoll/uepoll.h /usr/include/uepoll/uepoll.hpp \
         /usr/bin/uepoll-bench '/libuepoll\.so\.[0-9.]*$' '/libuepoll\.a$' \
         '/libuepoll-interpose\.so$' /usr/include/uepoll/rename.h \
         /cmake/uepoll/uepollConfig.cmake /pkgconfig/uepoll.pc \
         /pkgconfig/uepoll-static.pc /usr/share/man/man3/uepoll.3 \
         /usr/share/man/man3/uepoll_epoll_pwait3.3 \
         /usr/share/doc/uepoll/semantics.md; do
  grep -q -- "$f" <<<"$files" || fail "the package has no $f"
done
uepoll-bench --help >/dev/null || fail "uepoll-bench --help failed"
interpose=$(grep '/libuepoll-interpose\.so$' <<<"$files")
LD_PRELOAD=$interpose env true ||
  fail "a program does not run with $interpose preloaded"

# man(1) finds each page by the name of its call, and a renamed call's link
# page shows the list of differences. Docker-style images drop man pages at
# install time (a dpkg path-exclude); then there is nothing to look up.
if [[ -f /usr/share/man/man3/uepoll.3 ]]; then
  command -v man >/dev/null || fail "man is not installed (man-db)"
  # NAME:FILE, FILE being where man -w resolves a link page to.
  for pair in uepoll:uepoll uepoll_epoll_pwait3:uepoll_epoll_pwait3 \
              uepoll_epoll_get_params:uepoll_epoll_set_params \
              uepoll_epoll_wait:uepoll; do
    page=${pair%%:*}
    [[ $(man -w "$page" 2>/dev/null) == /usr/share/man/man3/${pair#*:}.3* ]] ||
      fail "man -w $page does not find the installed page"
  done
  text=$(MANWIDTH=80 man uepoll_epoll_wait 2>/dev/null)
  grep -q "RENAMED CALLS" <<<"$text" ||
    fail "man uepoll_epoll_wait does not show uepoll(3)"
  text=$(MANWIDTH=80 man uepoll_epoll_get_params 2>/dev/null)
  grep -Eq "uepoll_epoll_set_params, +uepoll_epoll_get_params" <<<"$text" ||
    fail "man uepoll_epoll_get_params does not show its page"
else
  step "dpkg did not install the manual pages here (path-exclude): skipped"
fi

step "building consumers against /usr"
work=$(mktemp -d)
trap 'rm -rf "$work"; cleanup' EXIT
export CMAKE_GENERATOR=Ninja
"$here/consumer_test.sh" find_package /usr "$work/find_package"
"$here/consumer_test.sh" pkg_config /usr "$work/pkg_config"

cleanup
installed && fail "the package is still installed after dpkg --purge"
[[ ! -e /usr/include/uepoll/uepoll.h ]] || fail "headers left after removal"
echo "deb_test: $(basename "$deb") built, installed, consumed and removed"
