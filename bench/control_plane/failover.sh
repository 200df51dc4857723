# Sourced by run.sh when FAILOVER=1 (not run on its own): the coordinator killed -9 under
# N simulated workers, today's restart path against a failover of replicas on etcd, side
# by side, and the steady state on etcd against SQLite.
#
#   FAILOVER=1 REPEATS=3 STEADY=10s bench/control_plane/run.sh 100 1000
#
# For each N, REPEATS times, each run on fresh daemons and a fresh etcd member:
#   restart   one coordinator on SQLite (today). load_generator --failover registers N
#             workers, submits N / JOB_WORKERS jobs, waits until each is RUNNING, then
#             SIGKILLs the coordinator (the pid in the file the script keeps current).
#             The script runs the coordinator in a loop that starts it again on the same
#             port and state directory as soon as it exits (a supervisor's immediate
#             restart; Kubernetes' first restart of a pod is as quick): the generator only
#             kills and then polls the address until it serves again, so neither waits for
#             the other and no signalling between them is needed.
#   failover  etcd and three replicas (--store=etcd://..., --election_ttl=TTL for each TTL
#             in ELECTION_TTLS): the generator finds the leader by its health and kills it.
#   Both measure from the kill: leader_s (a replica's health SERVING again), reattach_s
#   (every worker re-registered), reattached_event_s (the coordinator's last "Reattached"
#   event), restarted_jobs (jobs no longer RUNNING in their generation: expected 0). The
#   script adds, from the daemons' logs (glog times) against the kill: leading_s (the new
#   leader won the election) and listening_s (it, or the restarted coordinator, serves).
# Then, unless STEADY_COMPARE=0, the steady state at each N, REPEATS times: run.sh's
# baton_once against SQLite and against one replica on etcd: submit -> RUNNING, the
# coordinator's CPU s/s, etcd's writes per second (proposals committed, puts, txns from
# its /metrics) and etcd's CPU over the window; with the ratios etcd / SQLite.
#
# Timings, stated in the output: the worker lease (coordinator default, 10 s), the agent's
# reconnect (backoff 100 ms doubling to 5 s with 20% jitter; 200 ms retries while replicas
# answer as standbys), the replicas' etcd lease (--election_ttl, renewed every 0.5 s; a
# standby polls the leader key every 100 ms).
#
# Environment: ELECTION_TTLS ("3s 2s"), JOB_WORKERS (workers per job; default N: one job),
# SETTLE (2s: every job RUNNING -> the kill), ETCD_MAX_TXN_OPS (128, etcd's default: etcd's
# --max-txn-ops and the store's max_txn_ops), STEADY_COMPARE (1).

ELECTION_TTLS=${ELECTION_TTLS:-3s 2s}
SETTLE=${SETTLE:-2s}
ETCD_MAX_TXN_OPS=${ETCD_MAX_TXN_OPS:-128}
STEADY_COMPARE=${STEADY_COMPARE:-1}
ETCD_PID=
ETCD_ENDPOINT=

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
etcdctl_() { ETCDCTL_API=3 /usr/bin/etcdctl --endpoints="$ETCD_ENDPOINT" "$@"; }

# forget_pid PID: PID is no longer one for cleanup to stop.
forget_pid() {
  local kept=() p
  for p in "${EXTRA_PIDS[@]}"; do [[ $p == "$1" ]] || kept+=("$p"); done
  EXTRA_PIDS=("${kept[@]}")
}

# stop_pid PID: SIGTERM, then wait for it (a child of this shell).
stop_pid() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  forget_pid "$1"
}

# spawn PIDFILE LOG CMD...: CMD in the background, its stderr appended to LOG, its pid in
# PIDFILE and SPAWNED once it started. A subshell reaps it, so that no "Killed" notice
# from this shell follows the generator's SIGKILL.
spawn() {
  local pidfile=$1 log=$2
  shift 2
  rm -f "$pidfile"
  (
    "$@" 2>>"$log" &
    echo $! >"$pidfile.tmp" && mv "$pidfile.tmp" "$pidfile"
    wait $!
  ) 2>/dev/null &
  until [[ -s $pidfile ]]; do sleep 0.01; done
  SPAWNED=$(cat "$pidfile")
  EXTRA_PIDS+=("$SPAWNED")
}

# stop_daemon PID: SIGTERM, waits (10 s) until it is gone, else SIGKILL; no-op if gone.
stop_daemon() {
  local deadline=$((SECONDS + 10))
  kill "$1" 2>/dev/null || true
  while kill -0 "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || kill -9 "$1" 2>/dev/null || true
    sleep 0.05
  done
  forget_pid "$1"
}

# start_etcd DIR: a fresh etcd member on OS-picked loopback ports, data in DIR/etcd; sets
# ETCD_ENDPOINT (HOST:PORT) and ETCD_PID.
start_etcd() {
  local client peer deadline=$((SECONDS + 30))
  client=$(free_port)
  peer=$(free_port)
  ETCD_ENDPOINT=127.0.0.1:$client
  /usr/bin/etcd --name=m0 --data-dir="$1/etcd" \
    --listen-client-urls="http://$ETCD_ENDPOINT" --advertise-client-urls="http://$ETCD_ENDPOINT" \
    --listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
    --initial-cluster="m0=http://127.0.0.1:$peer" --max-txn-ops="$ETCD_MAX_TXN_OPS" \
    --logger=zap --log-level=warn 2>>"$1/etcd.log" &
  ETCD_PID=$!
  EXTRA_PIDS+=("$ETCD_PID")
  until etcdctl_ endpoint health >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "etcd did not start" >&2 && tail -5 "$1/etcd.log" >&2 && return 1; }
    sleep 0.1
  done
}

stop_etcd() { stop_pid "$ETCD_PID"; }

# await_leader PREFIX: waits (30 s) until a replica holds /PREFIX/leader.
await_leader() {
  local deadline=$((SECONDS + 30))
  until [[ -n $(etcdctl_ get --print-value-only "/$1/leader" 2>/dev/null) ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# log_breakdown KILLED_AT LOG...: "leading_s=X listening_s=Y", the first "leading:" line and
# the first "listening on port" line after the kill (KILLED_AT, Unix seconds) in the log
# that serves first, from the kill (-1: none). glog writes local time.
log_breakdown() {
  python3 - "$@" <<'PYEOF'
import datetime, re, sys
killed = float(sys.argv[1])
year = datetime.datetime.fromtimestamp(killed).year
stamp = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) ")
best = None
for path in sys.argv[2:]:
    leading = listening = None
    for line in open(path, errors="replace"):
        m = stamp.match(line)
        if not m:
            continue
        mo, d, h, mi, s, frac = m.groups()
        t = datetime.datetime(year, int(mo), int(d), int(h), int(mi), int(s)).timestamp()
        t += float("0." + frac)
        if t < killed:
            continue
        if leading is None and "leading:" in line:
            leading = t
        if listening is None and "listening on port" in line:
            listening = t
    if listening is not None and (best is None or listening < best[1]):
        best = (leading, listening)
rel = lambda t: -1.0 if t is None else t - killed
print("leading_s=%.3f listening_s=%.3f" % (rel(best and best[0]), rel(best and best[1])))
PYEOF
}

# supervise DIR: runs a SQLite coordinator in DIR again each time it exits (on the port of
# its first start, same state), its pid in DIR/pid, until DIR/stop exists; each restart's
# time in DIR/restarted.
supervise() {
  local dir=$1 port=0 child=
  trap '[[ -n $child ]] && kill "$child" 2>/dev/null; exit 0' TERM
  while [[ ! -e $dir/stop ]]; do
    [[ -s $dir/port ]] && port=$(cat "$dir/port")
    "$COORDINATOR" --insecure --listen="127.0.0.1:$port" --port_file="$dir/port" \
      --metrics_listen= --state_dir="$dir/state" 2>>"$dir/coordinator.log" &
    child=$!
    echo "$child" >"$dir/pid.tmp" && mv "$dir/pid.tmp" "$dir/pid"
    wait "$child" || true
    [[ -e $dir/stop ]] || date +%s.%N >>"$dir/restarted"
  done
}

# run_failover_generator DIR N ADDRESSES PIDFILES [ARGS...]: appends the result line and
# the tags in TAG to RESULTS; 1 if the generator failed.
run_failover_generator() {
  local dir=$1 n=$2 rc=0
  shift 2
  local job_workers=${JOB_WORKERS:-$n}
  timeout 600 "$GENERATOR" --failover --coordinator="$1" --pid_files="$2" --workers="$n" \
    --jobs=$((n / job_workers)) --settle="$SETTLE" --timeout=120s "${@:3}" \
    >"$dir/out.txt" 2>"$dir/err.txt" || rc=$?
  local line
  line=$(grep '^result ' "$dir/out.txt") || line=
  if [[ $rc -ne 0 || -z $line ]]; then
    echo "$(basename "$dir"): load_generator --failover exited $rc" >&2
    tail -n 5 "$dir/err.txt" >&2
    [[ -n $line ]] && echo "$line$TAG" | tee -a "$RESULTS"
    return 1
  fi
  echo "$line$TAG $(log_breakdown "$(sed 's/.*killed_at_unix=\([0-9.]*\).*/\1/' <<<"$line")" \
    "${LOGS[@]}")" | tee -a "$RESULTS"
}

# restart_once N REP: today's path, one SQLite coordinator killed and restarted.
restart_once() {
  local dir=$TMP/restart-$1-$2 sup
  mkdir -p "$dir"
  supervise "$dir" 2>/dev/null &  # its shell's "Killed" notices
  sup=$!
  EXTRA_PIDS+=("$sup")
  await_file "$dir/port" "$sup" || { echo "restart N=$1: no coordinator" >&2 && return 1; }
  TAG=" restart=1" LOGS=("$dir/coordinator.log")
  run_failover_generator "$dir" "$1" "127.0.0.1:$(cat "$dir/port")" "$dir/pid" || true
  touch "$dir/stop"
  kill "$(cat "$dir/pid")" 2>/dev/null || true
  wait "$sup" 2>/dev/null || true
  forget_pid "$sup"
}

# failover_once N REP TTL: etcd, three replicas with --election_ttl=TTL, the leader killed.
failover_once() {
  local dir=$TMP/failover-$1-$2-$3 r addresses=() pid_files=() pids=()
  mkdir -p "$dir"
  start_etcd "$dir"
  for r in 0 1 2; do
    spawn "$dir/r$r.pid" "$dir/r$r.log" "$COORDINATOR" \
      --store="etcd://$ETCD_ENDPOINT/fo?max_txn_ops=$ETCD_MAX_TXN_OPS" \
      --listen=127.0.0.1:0 --port_file="$dir/r$r.port" --insecure --metrics_listen= \
      --state_dir="$dir/r$r" --election_ttl="$3"
    pids+=("$SPAWNED")
    pid_files+=("$dir/r$r.pid")
  done
  for r in 0 1 2; do
    await_file "$dir/r$r.port" "${pids[r]}" || { echo "replica $r did not start" >&2 && return 1; }
    addresses+=("127.0.0.1:$(cat "$dir/r$r.port")")
  done
  await_leader fo || { echo "no leader elected" >&2 && return 1; }
  TAG=" restart=0 election_ttl_s=${3%s}" LOGS=("$dir"/r?.log)
  run_failover_generator "$dir" "$1" "$(IFS=,; echo "${addresses[*]}")" \
    "$(IFS=,; echo "${pid_files[*]}")" --etcd_metrics="$ETCD_ENDPOINT" || true
  for r in 0 1 2; do stop_daemon "${pids[r]}"; done
  stop_etcd
}

failover_main() {
  echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $REPEATS repeats;" \
    "jobs of ${JOB_WORKERS:-N} workers; settle $SETTLE; raw lines in $RESULTS"
  echo "timings: worker lease 10s (+1s margin), coordinator defaults; workers reconnect as" \
    "the agent: backoff 100ms x2 to 5s, 20% jitter; 200ms retries while an election is" \
    "under way; replicas: etcd lease --election_ttl in {$ELECTION_TTLS}, renewed every" \
    "0.5s; standbys poll the leader key every 100ms; etcd --max-txn-ops=$ETCD_MAX_TXN_OPS"
  local n rep ttl
  for n in "${SIZES[@]}"; do
    for rep in $(seq "$REPEATS"); do
      restart_once "$n" "$rep"
      for ttl in $ELECTION_TTLS; do failover_once "$n" "$rep" "$ttl"; done
    done
  done
  if [[ $STEADY_COMPARE != 0 ]]; then
    echo "steady state: window $STEADY, $WATCHERS watchers, metric period $METRIC_PERIOD," \
      "lease $LEASE + $LEASE_MARGIN (run.sh's baton_once)"
    for n in "${SIZES[@]}"; do
      for rep in $(seq "$REPEATS"); do
        baton_once "$n" "$rep" sqlite || true
        baton_once "$n" "$rep" etcd || true
      done
    done
  fi
  python3 "$HERE/failover_summary.py" "$RESULTS"
}
