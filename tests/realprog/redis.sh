#!/usr/bin/env bash
# realprog.redis: Debian's unmodified redis-server under LD_PRELOAD of
# libuepoll-interpose.so in the default mode, checked with redis-cli and
# redis-benchmark: SET/GET, a BGSAVE (a fork child that reports through
# the child-info pipe), an AOF rewrite (BGREWRITEAOF: another child and its
# pipes), and a benchmark whose requests must all complete. The same checks
# run on the server as it is first (the kernel's objects).
#
#   redis.sh PRELOAD      exit 77 (skipped) when redis is not installed
set -u
preload=$1
for p in redis-server redis-cli redis-benchmark; do
  command -v $p >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

check() {  # check NAME PORT [env...]: 0 if every step gave the expected answer
  local name=$1 port=$2
  shift 2
  local cli=(redis-cli -p "$port")
  mkdir -p "$work/$name"
  (cd "$work/$name" && exec env "$@" redis-server --port "$port" \
      --bind 127.0.0.1 --save '' --appendonly no --dir "$work/$name" \
      --logfile "$work/$name/log") &
  pid=$!
  for _ in $(seq 100); do
    [[ $("${cli[@]}" ping 2>/dev/null) == PONG ]] && break
    sleep 0.1
  done
  local ok=0
  step() {  # step WHAT EXPECTED ACTUAL
    if [[ $3 == "$2" ]]; then echo "$name: $1 ok"; else
      echo "$name: $1: expected '$2', got '$3'"; ok=1; fi
  }
  step ping PONG "$("${cli[@]}" ping 2>&1)"
  step set OK "$("${cli[@]}" set k v 2>&1)"
  step get v "$("${cli[@]}" get k 2>&1)"
  for i in $(seq 200); do echo "SET key:$i value:$i"; done | "${cli[@]}" >/dev/null
  persist() { "${cli[@]}" info persistence | tr -d '\r'; }
  step bgsave "Background saving started" "$("${cli[@]}" bgsave 2>&1)"
  for _ in $(seq 100); do
    persist | grep -q '^rdb_bgsave_in_progress:0' && break
    sleep 0.1
  done
  step "bgsave status" ok "$(persist | grep -q '^rdb_last_bgsave_status:ok' && echo ok)"
  step "bgsave saved all" ok "$(persist | grep -q '^rdb_changes_since_last_save:0' && echo ok)"
  step "rdb written" ok "$([[ -s $work/$name/dump.rdb ]] && echo ok)"
  "${cli[@]}" config set appendonly yes >/dev/null
  for _ in $(seq 100); do
    "${cli[@]}" info persistence | tr -d '\r' |
      grep -q '^aof_rewrite_in_progress:0' && "${cli[@]}" info persistence |
      tr -d '\r' | grep -q '^aof_rewrite_scheduled:0' && break
    sleep 0.1
  done
  step "bgrewriteaof" ok "$("${cli[@]}" bgrewriteaof >/dev/null 2>&1;
      for _ in $(seq 100); do
        "${cli[@]}" info persistence | tr -d '\r' |
          grep -q '^aof_rewrite_in_progress:0' && break; sleep 0.1; done;
      "${cli[@]}" info persistence | tr -d '\r' |
        grep -q '^aof_last_bgrewrite_status:ok' && echo ok)"
  step "child info" ok "$("${cli[@]}" info persistence | tr -d '\r' |
      grep -q '^current_cow_size:' && echo ok)"
  step "after children" "value:200" "$("${cli[@]}" get key:200 2>&1)"
  local bench
  bench=$(redis-benchmark -p "$port" -q -n 20000 -c 20 -t set,get,lpush,incr 2>&1 | tr '\r' '\n')
  step "benchmark" 4 "$(grep -c 'requests per second' <<<"$bench")"
  echo "$name: $(grep 'requests per second' <<<"$bench" | tr '\n' ' ')"
  "${cli[@]}" shutdown nosave >/dev/null 2>&1
  wait "$pid" 2>/dev/null
  pid=
  [[ $ok == 0 ]] || { echo "--- $name server log"; tail -30 "$work/$name/log"; }
  return $ok
}

check kernel 16379 || { echo "FAIL: the kernel's run"; exit 1; }
check uepoll 16380 LD_PRELOAD="$preload" || { echo "FAIL: under the interposer"; exit 1; }
echo "PASS: redis under the interposer: every check as on the kernel"
