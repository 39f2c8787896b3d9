#!/usr/bin/env bash
# realprog.memcached: Debian's unmodified memcached with 4 worker threads
# under LD_PRELOAD of libuepoll-interpose.so in the default mode. Each
# worker runs a libevent loop (epoll) of its own; the listener thread hands
# every new connection to a worker through that worker's notify pipe, so
# each connection crosses threads before it is served. Checked with
# libmemcached's clients (not interposed):
#   - memccapable: every protocol test passes (ASCII and binary);
#   - memcslap, 16 client threads, a fresh connection each: every set and
#     get counted by the server, and every connection closed afterwards;
#   - a 200 KB value stored and read back whole (many reads and writes;
#     memccat adds a newline);
#   - SIGTERM ends the server.
# The same checks run on the server as it is first (the kernel's objects).
#
#   memcached.sh PRELOAD  exit 77 (skipped) when memcached or
#                         libmemcached-tools is missing
set -u
preload=$1
for p in memcached memccapable memcslap memcstat memccp memccat; do
  command -v $p >/dev/null ||
    { echo "SKIP: $p is not installed (memcached, libmemcached-tools)"; exit 77; }
done
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
work=$(mktemp -d /tmp/uepoll-memcached.XXXXXX)
pid=
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf -- "$work"; }
trap cleanup EXIT
chmod 755 "$work"
# As root memcached drops to "nobody", which may not reach the build tree.
cp "$preload" "$work/interpose.so"
chmod 755 "$work/interpose.so"
user=()
((EUID == 0)) && user=(-u nobody)
head -c 150000 /dev/urandom | base64 -w 76 >"$work/big"

check() {  # check NAME PORT [env...]: 0 if every step gave the expected answer
  local name=$1 port=$2 ok=0
  shift 2
  local srv=--servers=127.0.0.1:$port
  env "$@" memcached "${user[@]}" -l 127.0.0.1 -p "$port" -U 0 -t 4 -c 512 \
    -m 64 -I 2m >"$work/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    memcstat "$srv" >/dev/null 2>&1 && break
    sleep 0.1
  done
  step() {  # step WHAT EXPECTED ACTUAL
    if [[ $3 == "$2" ]]; then echo "$name: $1 ok"; else
      echo "$name: $1: expected '$2', got '$3'"; ok=1; fi
  }
  stat() { memcstat "$srv" 2>/dev/null | sed -n "s/^[[:space:]]*$1: //p"; }
  local loaded=no
  grep -q interpose.so "/proc/$pid/maps" 2>/dev/null && loaded=yes
  step "interposer loaded" "$([[ $name == kernel ]] && echo no || echo yes)" "$loaded"
  step "threads" 4 "$(stat threads)"
  local out
  out=$(memccapable -h 127.0.0.1 -p "$port" 2>&1)
  step memccapable ok "$(grep -q '^All tests passed' <<<"$out" && echo ok)"
  local sets=$(stat cmd_set) gets=$(stat cmd_get) conns=$(stat curr_connections)
  memcslap "$srv" --concurrency=16 --execute-number=1000 --test=set >/dev/null 2>&1
  memcslap "$srv" --concurrency=16 --execute-number=1000 --test=get >/dev/null 2>&1
  # the get test first loads as many keys as it gets by thread: 1,000
  step "sets counted" 17000 "$(( $(stat cmd_set) - sets ))"
  step "gets counted" 16000 "$(( $(stat cmd_get) - gets ))"
  local left=
  for _ in $(seq 100); do
    left=$(stat curr_connections)
    [[ $left == "$conns" ]] && break
    sleep 0.1
  done
  step "connections closed" "$conns" "$left"
  (cd "$work" && memccp "$srv" big >/dev/null 2>&1)
  step "a 200 KB value" ok \
    "$(cmp -s <(memccat "$srv" big 2>/dev/null) <(cat "$work/big"; echo) && echo ok)"
  kill -TERM "$pid"
  local ended=no
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { ended=yes; break; }
    sleep 0.1
  done
  step "SIGTERM" yes "$ended"
  [[ $ended == yes ]] && { wait "$pid" 2>/dev/null; pid=; }
  [[ $ok == 0 ]] || { echo "--- $name log"; tail -20 "$work/$name.log"; }
  return $ok
}

check kernel 21211 || { echo "FAIL: the kernel's run"; exit 1; }
check uepoll 21212 LD_PRELOAD="$work/interpose.so" ||
  { echo "FAIL: under the interposer"; exit 1; }
echo "PASS: memcached under the interposer: every check as on the kernel"
