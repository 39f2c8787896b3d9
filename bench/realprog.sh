#!/usr/bin/env bash
# Requests per second of Debian's unmodified redis-server and nginx, on the
# kernel's objects and under LD_PRELOAD of libuepoll-interpose.so in its
# default mode, in interleaved rounds (kernel, uepoll, uepoll, kernel, ...), so
# that a change in the machine's load falls on both sides alike. Prints
# each round, then per workload the median of each side and the ratio
# uepoll/kernel of the medians (above 1: uepoll serves more), and the
# server's CPU time per request (its processes' and threads' time on a
# CPU, from /proc/PID/task/*/schedstat, over the client's run), which the
# sharing of the cores moves less than the rate.
#
#   bench/realprog.sh [--pin] PRELOAD [ROUNDS]   default 5 rounds
#
# --pin: the server (and its workers) on CPU 0, the client on CPU 1, so
# that neither migrates nor takes the other's core; needs taskset and 2
# CPUs.
#
# Needs redis-server, redis-benchmark, nginx (nginx-light) and wrk; a
# workload whose programs are missing is skipped with a message. Not a
# test: the figures depend on the machine (BENCHMARKS.md says where they
# were measured).
set -euo pipefail
server_cpu=() client_cpu=()
if [[ ${1:-} == --pin ]]; then
  shift
  command -v taskset >/dev/null || { echo "realprog: --pin needs taskset" >&2; exit 2; }
  (($(nproc) >= 2)) || { echo "realprog: --pin needs 2 CPUs" >&2; exit 2; }
  server_cpu=(taskset -c 0) client_cpu=(taskset -c 1)
fi
preload=$(realpath "${1:?usage: realprog.sh [--pin] PRELOAD [ROUNDS]}")
rounds=${2:-5}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "realprog: ROUNDS must be a positive count" >&2; exit 2; }
work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
unset UEPOLL_INTERPOSE

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# The CPU time, in ns, of the processes given and all their threads.
cpu_ns() {
  local p t sum=0 v
  for p in "$@"; do
    for t in /proc/"$p"/task/*/schedstat; do
      read -r v _ <"$t" 2>/dev/null || continue
      sum=$((sum + v))
    done
  done
  echo "$sum"
}

# redis SIDE: one redis-benchmark run (SET and GET, 50 clients), prints
# the two rates.
redis_round() {
  local side=$1 port=16479 env=()
  [[ $side == uepoll ]] && env=(LD_PRELOAD="$preload")
  (cd "$work" && exec env "${env[@]}" "${server_cpu[@]}" redis-server --port $port \
      --bind 127.0.0.1 --save '' --appendonly no --logfile "$work/redis.log") &
  pid=$!
  for _ in $(seq 100); do
    [[ $(redis-cli -p $port ping 2>/dev/null) == PONG ]] && break
    sleep 0.1
  done
  local t c0 rate
  for t in set get; do
    c0=$(cpu_ns "$pid")
    rate=$("${client_cpu[@]}" redis-benchmark -p $port -q -n 100000 -c 50 -t $t 2>/dev/null |
      tr '\r' '\n' | awk '/requests per second/ {print $2}' | tail -1)
    echo "${t^^} $rate $(awk -v a="$(cpu_ns "$pid")" -v b="$c0" 'BEGIN {print (a-b)/1e5}')"
  done
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
  env "${env[@]}" "${server_cpu[@]}" nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" \
      -g 'daemon off;' 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do
    curl -s --noproxy "*" -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
  done
  local procs c0 out
  # shellcheck disable=SC2207
  procs=("$pid" $(pgrep -P "$pid"))
  c0=$(cpu_ns "${procs[@]}")
  out=$("${client_cpu[@]}" wrk -t2 -c50 -d5s "http://127.0.0.1:$port/" 2>/dev/null)
  awk -v c="$(cpu_ns "${procs[@]}")" -v c0="$c0" '
    /requests in/ {n = $1}
    /Requests\/sec/ {r = $2}
    END {if (n && r) print "nginx", r, (c - c0) / n}' <<<"$out"
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
    # Odd rounds run the kernel's side first, even rounds uepoll's, so that
    # whatever the first run of a pair leaves behind (a warm page cache,
    # TIME_WAIT sockets) falls on both sides alike.
    sides=(kernel uepoll)
    ((r % 2)) || sides=(uepoll kernel)
    for side in "${sides[@]}"; do
      "${w}_round" "$side" | while read -r name rate cpu; do
        echo "$name $side $rate $cpu" >>"$results"
        printf 'round %d/%d: %-6s %-6s %12.0f req/s %9.0f ns CPU/request\n' \
          "$r" "$rounds" "$name" "$side" "$rate" "$cpu"
      done
    done
  done
done
echo
printf '%-6s %14s %14s %8s %12s %12s %8s\n' workload "kernel req/s" "uepoll req/s" ratio \
  "kernel ns/r" "uepoll ns/r" "CPU ratio"
col() { awk -v n="$1" -v s="$2" -v c="$3" '$1==n && $2==s {print $c}' "$results" | median; }
for name in $(awk '{print $1}' "$results" | sort -u); do
  k=$(col "$name" kernel 3) u=$(col "$name" uepoll 3)
  kc=$(col "$name" kernel 4) uc=$(col "$name" uepoll 4)
  printf '%-6s %14.0f %14.0f %8.3f %12.0f %12.0f %8.3f\n' "$name" "$k" "$u" \
    "$(awk -v a="$u" -v b="$k" 'BEGIN {print a/b}')" "$kc" "$uc" \
    "$(awk -v a="$uc" -v b="$kc" 'BEGIN {print b ? a/b : 0}')"
done
