#!/usr/bin/env bash
# realprog.nginx: Debian's unmodified nginx (nginx-light) with a master and
# two workers, under LD_PRELOAD of libuepoll-interpose.so in the default
# mode, given a bounded load by wrk: every request must be answered 200,
# by the workers (the master hands each its channel, a socket pair, across
# fork). The same run on the kernel first.
#
#   nginx.sh PRELOAD      exit 77 (skipped) when nginx, wrk or curl is missing
set -u
preload=$1
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx ]] || { echo "SKIP: nginx is not installed"; exit 77; }
for p in wrk curl; do
  command -v $p >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
work=$(mktemp -d /tmp/uepoll-nginx.XXXXXX)
master=
cleanup() {
  [[ -n $master ]] && kill -9 "$master" 2>/dev/null
  pkill -9 -P "${master:-0}" 2>/dev/null
  rm -rf -- "$work"
}
trap cleanup EXIT
chmod 755 "$work"  # the workers run as an unprivileged user
head -c 3072 /dev/urandom | base64 -w 0 >"$work/index.html"
chmod 644 "$work/index.html"
want=$(cat "$work/index.html")

run() {  # run NAME PORT [env...]
  local name=$1 port=$2 ok=0
  shift 2
  cat >"$work/$name.conf" <<CONF
worker_processes 2;
daemon off;
master_process on;
pid $work/$name.pid;
error_log $work/$name.error.log notice;
events { worker_connections 256; }
http {
  access_log off;
  server { listen 127.0.0.1:$port; root $work; }
}
CONF
  env "$@" "$nginx" -c "$work/$name.conf" -p "$work" -e "$work/$name.error.log" &
  master=$!
  # About 5 s for the workers to answer; none means none was started.
  # (--noproxy: an http_proxy in the environment must not take 127.0.0.1.)
  local answered=0
  for _ in $(seq 25); do
    if [[ $(curl -s -m 1 --noproxy "*" "http://127.0.0.1:$port/index.html") == "$want" ]]; then
      answered=1
      break
    fi
    sleep 0.1
  done
  ((answered)) || { echo "$name: no answer"; ok=1; }
  local workers
  workers=$(pgrep -P "$master" | wc -l)
  [[ $workers == 2 ]] || { echo "$name: $workers workers, expected 2"; ok=1; }
  local out= reqs=
  ((answered)) && out=$(timeout 30 wrk -t 2 -c 20 -d 3s "http://127.0.0.1:$port/index.html" 2>&1)
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  echo "$name: workers=$workers requests=${reqs:-none}" \
       "$(grep 'Requests/sec' <<<"$out")"
  if [[ -z $reqs ]] || ((reqs == 0)) || grep -qE 'Socket errors|Non-2xx' <<<"$out"; then
    echo "$out"; ok=1
  fi
  kill -QUIT "$master" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$master" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$master" 2>/dev/null && { echo "$name: master did not exit"; ok=1; }
  [[ $ok == 0 ]] || { echo "--- $name error log"; grep -v '\[info\]' "$work/$name.error.log" | tail -20; }
  kill -9 "$master" 2>/dev/null
  wait "$master" 2>/dev/null
  master=
  return $ok
}

run kernel 18080 || { echo "FAIL: the kernel's run"; exit 1; }
run uepoll 18081 LD_PRELOAD="$preload" || { echo "FAIL: under the interposer"; exit 1; }
echo "PASS: nginx under the interposer: two workers serve every request"
