#!/usr/bin/env bash
# realprog.postgres: Debian's unmodified PostgreSQL server under LD_PRELOAD
# of libuepoll-interpose.so in the default mode. The postmaster forks a
# backend per connection without exec; each waits on its client socket and
# its latch (a signalfd) in an epoll set of its own, and the postmaster
# watches its children through a pipe. Checked with the server's own
# clients (not interposed):
#   - pgbench, 8 clients on 2 threads, every transaction of a fixed count
#     committed (row locks on 2 branches: backends wake each other);
#   - pgbench with a new connection (a fork) per transaction;
#   - a statement timeout (SIGALRM into a backend's latch wait) cancels a
#     sleep long before it ends;
#   - a parallel query whose workers report through shared-memory queues
#     and latches;
#   - LISTEN/NOTIFY between two sessions;
#   - a backend killed with SIGKILL: the postmaster ends the others,
#     reinitialises, and serves queries again;
#   - a fast shutdown (SIGINT) that ends every process.
# The same checks run on the server as it is first (the kernel's objects).
#
#   postgres.sh PRELOAD   exit 77 (skipped) when PostgreSQL is not installed,
#                         or when run as root with no "postgres" user
set -u
preload=$1
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
for p in postgres initdb pgbench psql pg_isready; do
  [[ -n $bin && -x $bin/$p ]] ||
    { echo "SKIP: PostgreSQL ($p) is not installed"; exit 77; }
done
unset UEPOLL_INTERPOSE UEPOLL_FORK_MODE
as=()
if ((EUID == 0)); then  # the server refuses to run as root
  id postgres >/dev/null 2>&1 ||
    { echo "SKIP: running as root and there is no postgres user"; exit 77; }
  as=(runuser -u postgres --)
fi
work=$(mktemp -d /tmp/uepoll-postgres.XXXXXX)
pid=  # the process started (runuser, or the postmaster itself)
pm=   # the postmaster
cleanup() {
  if [[ -n $pm ]]; then pkill -9 -P "$pm" 2>/dev/null; kill -9 "$pm" 2>/dev/null; fi
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
  rm -rf -- "$work"
}
trap cleanup EXIT
chmod 755 "$work"
# The server's user may not reach the build tree: it loads a copy.
cp "$preload" "$work/interpose.so"
chmod 755 "$work/interpose.so"
((EUID == 0)) && chown postgres "$work"
run() { "${as[@]}" env -u LD_PRELOAD "$@"; }
run "$bin/initdb" -D "$work/data" -A trust -U postgres --no-sync \
  >"$work/initdb.log" 2>&1 || { echo "FAIL: initdb"; cat "$work/initdb.log"; exit 1; }

check() {  # check NAME PORT [env...]: 0 if every step gave the expected answer
  local name=$1 port=$2 ok=0
  shift 2
  local log=$work/$name.log
  local sql=(run "$bin/psql" -X -h "$work" -p "$port" -U postgres -d postgres -Atq)
  "${as[@]}" env "$@" "$bin/postgres" -D "$work/data" -k "$work" -p "$port" \
    -c listen_addresses= -c max_parallel_workers_per_gather=2 \
    -c fsync=off >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 150); do
    run "$bin/pg_isready" -q -h "$work" -p "$port" && break
    sleep 0.1
  done
  step() {  # step WHAT EXPECTED ACTUAL
    if [[ $3 == "$2" ]]; then echo "$name: $1 ok"; else
      echo "$name: $1: expected '$2', got '$3'"; ok=1; fi
  }
  step ready ok "$(run "$bin/pg_isready" -q -h "$work" -p "$port" && echo ok)"
  pm=$(head -1 "$work/data/postmaster.pid" 2>/dev/null)
  local loaded=no
  grep -q interpose.so "/proc/$pm/maps" 2>/dev/null && loaded=yes
  step "interposer loaded" "$([[ $name == kernel ]] && echo no || echo yes)" "$loaded"
  local out
  out=$(run "$bin/pgbench" -h "$work" -p "$port" -U postgres -i -s 2 -q postgres 2>&1)
  step "pgbench -i" ok "$(grep -q '^done in' <<<"$out" && echo ok)"
  out=$(run "$bin/pgbench" -h "$work" -p "$port" -U postgres -c 8 -j 2 -t 150 postgres 2>&1)
  step "pgbench, 8 clients" "1200/1200" \
    "$(sed -n 's/^number of transactions actually processed: //p' <<<"$out")"
  out=$(run "$bin/pgbench" -h "$work" -p "$port" -U postgres -C -S -c 4 -j 2 -t 40 postgres 2>&1)
  step "pgbench, a connection per transaction" "160/160" \
    "$(sed -n 's/^number of transactions actually processed: //p' <<<"$out")"
  local t0=$SECONDS
  out=$("${sql[@]}" -c "set statement_timeout = 300" -c "select pg_sleep(20)" 2>&1)
  step "statement timeout" ok \
    "$(grep -q 'canceling statement due to statement timeout' <<<"$out" &&
       ((SECONDS - t0 < 15)) && echo ok)"
  out=$("${sql[@]}" -c "set parallel_setup_cost = 0" -c "set parallel_tuple_cost = 0" \
    -c "set min_parallel_table_scan_size = 0" \
    -c "explain (analyze, costs off, timing off, summary off) select count(*) from pgbench_accounts" \
    -c "select count(*) from pgbench_accounts" 2>&1)
  step "parallel workers" ok "$(grep -q 'Workers Launched: [12]' <<<"$out" && echo ok)"
  step "parallel count" 200000 "$(tail -1 <<<"$out")"
  # The listener sleeps in a query while the other session notifies; the
  # notification reaches it through its latch and arrives before the
  # answer to its next query.
  out=$( { echo "listen ch;"; echo "select pg_sleep(1.5);"; sleep 2.5
           echo "select 'after';"; } |
         run "$bin/psql" -X -h "$work" -p "$port" -U postgres -d postgres -Aq 2>&1 &
         sleep 0.5
         "${sql[@]}" -c "notify ch, 'hello'"
         wait)
  step "listen/notify" ok \
    "$(grep -q 'Asynchronous notification "ch" with payload "hello"' <<<"$out" && echo ok)"
  # A backend killed: the postmaster ends every child and starts again.
  "${sql[@]}" -c "select pg_sleep(30)" >/dev/null 2>&1 &
  local sleeper=$! victim=
  for _ in $(seq 100); do
    victim=$("${sql[@]}" -c "select pid from pg_stat_activity where query like 'select pg_sleep(30)%' and state = 'active'" 2>/dev/null)
    [[ -n $victim ]] && break
    sleep 0.1
  done
  [[ -n $victim ]] && kill -9 "$victim"
  wait "$sleeper" 2>/dev/null
  for _ in $(seq 150); do
    grep -q 'all server processes terminated; reinitializing' "$log" &&
      [[ $("${sql[@]}" -c "select 1" 2>/dev/null) == 1 ]] && break
    sleep 0.1
  done
  step "restart after a killed backend" 2 \
    "$("${sql[@]}" -c "select count(*) from pgbench_branches" 2>&1)"
  kill -INT "$pm"
  local ended=no
  for _ in $(seq 300); do
    kill -0 "$pm" 2>/dev/null || { ended=yes; break; }
    sleep 0.1
  done
  step "fast shutdown" yes "$ended"
  [[ $ended == yes ]] && wait "$pid" 2>/dev/null
  step "shut down cleanly" ok "$(grep -q 'database system is shut down' "$log" && echo ok)"
  [[ $ended == yes ]] && pid= pm=
  [[ $ok == 0 ]] || { echo "--- $name server log"; tail -30 "$log"; }
  return $ok
}

check kernel 16432 || { echo "FAIL: the kernel's run"; exit 1; }
check uepoll 16433 LD_PRELOAD="$work/interpose.so" ||
  { echo "FAIL: under the interposer"; exit 1; }
echo "PASS: PostgreSQL under the interposer: every check as on the kernel"
