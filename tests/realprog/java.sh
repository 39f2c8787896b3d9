#!/usr/bin/env bash
# realprog.java: the JDK's NIO and process spawning (JavaProbe.java) in an
# unmodified JVM under LD_PRELOAD of libuepoll-interpose.so in the default
# mode: HttpServer and HttpClient (selector threads handing work to thread
# pools), a Selector woken by a Pipe written from other threads and by
# wakeup(), and children that echo through pipes, under each of the JDK's
# launch mechanisms (posix_spawn of jspawnhelper, vfork, fork). The JVM
# installs its own signal handlers (SIGSEGV for its safepoints among them)
# through the interposer's sigaction. Each run on the kernel first.
#
#   java.sh PRELOAD       exit 77 (skipped) when java or javac is missing
set -u -o pipefail
preload=$1
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for p in java javac; do
  command -v $p >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE JAVA_TOOL_OPTIONS
work=$(mktemp -d /tmp/uepoll-java.XXXXXX)
trap 'rm -rf -- "$work"' EXIT
javac -d "$work" "$dir/JavaProbe.java" || { echo "FAIL: javac"; exit 1; }
status=0
for mech in POSIX_SPAWN VFORK FORK; do
  java=(java -Djdk.lang.Process.launchMechanism=$mech -cp "$work" JavaProbe)
  if ! timeout 120 "${java[@]}" no | sed "s/^/kernel $mech: /"; then
    echo "FAIL: the kernel's run ($mech)"; exit 1
  fi
  if ! timeout 120 env LD_PRELOAD="$preload" "${java[@]}" yes |
       sed "s/^/uepoll $mech: /"; then
    echo "FAIL: under the interposer ($mech)"; status=1
  fi
done
[[ $status == 0 ]] && echo "PASS: the JVM under the interposer: every check as on the kernel"
exit $status
