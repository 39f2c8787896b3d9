#!/usr/bin/env bash
# Requests per second of Debian's unmodified redis-server and nginx, on the
# kernel's objects and under LD_PRELOAD of libuepoll-interpose.so in its
# default mode, in interleaved rounds (kernel, uepoll, kernel, ...), so
# that a change in the machine's load falls on both sides alike. Prints
# each round, then per workload the median of each side and the ratio
# uepoll/kernel of the medians (above 1: uepoll serves more).
#
#   bench/realprog.sh PRELOAD [ROUNDS]   default 5 rounds
#
# Needs redis-server, redis-benchmark, nginx (nginx-light) and wrk; a
# workload whose programs are missing is skipped with a message. Not a
# test: the figures depend on the machine (BENCHMARKS.md says where they
# were measured).
set -euo pipefail
preload=$(realpath "${1:?usage: realprog.sh PRELOAD [ROUNDS]}")
rounds=${2:-5}
work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
unset UEPOLL_INTERPOSE

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# redis SIDE: one redis-benchmark run (SET and GET, 50 clients), prints
# the two rates.
redis_round() {
  local side=$1 port=16479 env=()
  [[ $side == uepoll ]] && env=(LD_PRELOAD="$preload")
  (cd "$work" && exec env "${env[@]}" redis-server --port $port --bind 127.0.0.1 \
      --save '' --appendonly no --logfile "$work/redis.log") &
  pid=$!
  for _ in $(seq 100); do
    [[ $(redis-cli -p $port ping 2>/dev/null) == PONG ]] && break
    sleep 0.1
  done
  redis-benchmark -p $port -q -n 100000 -c 50 -t set,get 2>/dev/null | tr '\r' '\n' |
    awk '/requests per second/ {sub(":", "", $1); print $1, $2}'
  redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  pid=
}

# nginx SIDE: a master and two workers serving a 1 KiB file, wrk with 2
# threads and 50 connections for 5 s; prints the rate.
nginx_round() {
  local side=$1 port=18480 env=()
  [[ $side == uepoll ]] && env=(LD_PRELOAD="$preload")
  mkdir -p "$work/nginx/logs" "$work/nginx/html"
  head -c 1024 /dev/zero | tr '\0' x >"$work/nginx/html/index.html"
  cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 2;
error_log $work/nginx/logs/error.log;
pid $work/nginx/nginx.pid;
events { worker_connections 1024; use epoll; }
http {
  access_log off;
  server { listen 127.0.0.1:$port; root $work/nginx/html; }
}
EOF
  env "${env[@]}" nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' \
      2>/dev/null &
  pid=$!
  for _ in $(seq 100); do
    curl -s --noproxy "*" -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
  done
  wrk -t2 -c50 -d5s "http://127.0.0.1:$port/" 2>/dev/null |
    awk '/Requests\/sec/ {print "nginx", $2}'
  kill -QUIT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
}

workloads=()
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  workloads+=(redis)
else
  echo "realprog: redis-server or redis-benchmark missing: redis skipped"
fi
if command -v nginx >/dev/null && command -v wrk >/dev/null && command -v curl >/dev/null; then
  workloads+=(nginx)
else
  echo "realprog: nginx, wrk or curl missing: nginx skipped"
fi
((${#workloads[@]})) || exit 0

results=$work/results
: >"$results"
for r in $(seq "$rounds"); do
  for w in "${workloads[@]}"; do
    for side in kernel uepoll; do
      "${w}_round" "$side" | while read -r name rate; do
        echo "$name $side $rate" >>"$results"
        printf 'round %d/%d: %-6s %-6s %12.0f req/s\n' "$r" "$rounds" "$name" "$side" "$rate"
      done
    done
  done
done
echo
printf '%-6s %14s %14s %8s\n' workload "kernel req/s" "uepoll req/s" ratio
for name in $(awk '{print $1}' "$results" | sort -u); do
  k=$(awk -v n="$name" '$1==n && $2=="kernel" {print $3}' "$results" | median)
  u=$(awk -v n="$name" '$1==n && $2=="uepoll" {print $3}' "$results" | median)
  printf '%-6s %14.0f %14.0f %8.3f\n' "$name" "$k" "$u" "$(awk -v a="$u" -v b="$k" 'BEGIN {print a/b}')"
done
