#!/bin/sh
# A shell and its commands under the interposer (docs/design.md, "The
# interposer loads the engine on first use"): a command that makes no
# uepoll object does not load the engine; a shell that makes a pipe does,
# the commands it starts do not, and the pipeline's data goes through.
#   lazy_shell.sh PRELOAD
set -eu
preload=$1
fail() { echo "FAIL: $*"; exit 1; }

# grep alone: no uepoll object, no engine.
n=$(LD_PRELOAD=$preload grep -c 'libuepoll\.so' /proc/self/maps || true)
[ "$n" = 0 ] || fail "grep alone has the engine mapped ($n mappings)"

# sh with a pipeline: its pipe is uepoll's (the default mode), converted
# at the fork; the shell has the engine, cat (exec'd) does not.
out=$(LD_PRELOAD=$preload sh -c '
  printf "a\nb\nc\n" | cat | wc -l
  grep -c "libuepoll\.so" /proc/$$/maps || true
  cat /proc/self/maps | grep -c "libuepoll\.so" || true')
set -- $out
[ $# = 3 ] || fail "expected three lines, got: $out"
[ "$1" = 3 ] || fail "the pipeline passed $1 lines of 3"
[ "$2" -gt 0 ] || fail "the shell that made a pipe has no engine mapped"
[ "$3" = 0 ] || fail "cat, started by that shell, has the engine mapped ($3)"
echo "PASS"
