#!/usr/bin/env bash
# The simulated workers against a real coordinator: 20 workers register, a job needing all
# of them reaches RUNNING, every worker gets its StartAssignment, and after every rank
# reported exit 0 the job SUCCEEDS; then 10 more workers run a job that is cancelled: every
# one is sent its StopAssignment (load_generator checks each and exits non-zero if one
# fails; this checks its result line too); then 6 workers and a spare: one running worker
# goes silent, and the job restarts on the others no sooner than the lease allows.
#   args: <baton-coordinator> <load_generator>
set -euo pipefail

COORDINATOR=$1
GENERATOR=$2
TMP=${TEST_TMPDIR:-$(mktemp -d)}
COORDINATOR_PID=

fail() {
  echo "FAIL: $*" >&2
  [[ -f $TMP/coordinator.log ]] && tail -30 "$TMP/coordinator.log" >&2
  exit 1
}
cleanup() { [[ -n $COORDINATOR_PID ]] && kill "$COORDINATOR_PID" 2>/dev/null && wait "$COORDINATOR_PID" 2>/dev/null; true; }
trap cleanup EXIT

"$COORDINATOR" --insecure --listen=127.0.0.1:0 --port_file="$TMP/port" \
  --metrics_listen=127.0.0.1:0 --metrics_port_file="$TMP/metrics_port" \
  --worker_lease=4s --worker_lease_margin=500ms \
  --state_dir="$TMP/state" 2>"$TMP/coordinator.log" &
COORDINATOR_PID=$!
deadline=$((SECONDS + 30))
until [[ -s $TMP/port && -s $TMP/metrics_port ]]; do
  kill -0 "$COORDINATOR_PID" 2>/dev/null || fail "the coordinator exited"
  ((SECONDS < deadline)) || fail "no port file from the coordinator within 30 s"
  sleep 0.05
done

# run_generator NAME ARGS...: a load_generator run against the coordinator; its output in
# $TMP/NAME.out, its result line in $line.
run_generator() {
  local name=$1 rc=0
  shift
  timeout 120 "$GENERATOR" --coordinator="127.0.0.1:$(cat "$TMP/port")" \
    --coordinator_pid="$COORDINATOR_PID" --timeout=60s "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" || rc=$?
  cat "$TMP/$name.out"
  [[ $rc -eq 0 ]] || { cat "$TMP/$name.err" >&2; fail "load_generator ($name) exited $rc"; }
  line=$(grep '^result ' "$TMP/$name.out") || fail "no result line ($name)"
}

# expect WANT...: each WANT (key=value) is on the result line.
expect() {
  local want
  for want in "$@"; do
    [[ " $line " == *" $want "* ]] || fail "result line lacks $want: $line"
  done
}

# ---- 1. 20 workers; every rank exits 0: SUCCEEDED ---------------------------------------
run_generator finish --workers=20 --workers_per_channel=8 --watchers=3 --steady=2s \
  --metric_period=500ms --list_period=500ms --id_prefix=a-
expect workers=20 started_workers=20 running=1 ended=SUCCEEDED failed_streams=0 list_errors=0
# The window saw heartbeats (acknowledged), metric points and a live coordinator process.
[[ $line =~ acks_per_s=([0-9.]+) ]] && awk "BEGIN{exit !(${BASH_REMATCH[1]} > 5)}" ||
  fail "too few heartbeat acks: $line"
[[ $line =~ points_per_s=([0-9.]+) ]] && awk "BEGIN{exit !(${BASH_REMATCH[1]} > 0)}" ||
  fail "no metric points: $line"
[[ $line =~ coord_rss_mib=([0-9.]+) ]] && awk "BEGIN{exit !(${BASH_REMATCH[1]} > 0)}" ||
  fail "no coordinator RSS: $line"

# ---- 2. 10 other workers, same coordinator; CancelJob: CANCELLED, StopAssignment each ----
run_generator cancel --workers=10 --workers_per_channel=4 --watchers=1 --steady=1s \
  --metric_period=500ms --id_prefix=b- --end=cancel
expect workers=10 started_workers=10 running=1 ended=CANCELLED stops_received=10 failed_streams=0

# ---- 3. 6 workers + a spare; one goes silent: RESTARTING after its lease, then RUNNING ----
run_generator lose --workers=6 --workers_per_channel=4 --watchers=2 --steady=2s \
  --metric_period=200ms --id_prefix=c- --lose_worker --metrics="127.0.0.1:$(cat "$TMP/metrics_port")"
expect workers=6 started_workers=7 running=1 ended=SUCCEEDED failed_streams=0
# Not before the lease (4 s) and its margin (0.5 s) from the last heartbeat; the restart
# after the detection.
[[ $line =~ detect_s=([0-9.]+) ]] && detect=${BASH_REMATCH[1]} || fail "no detect_s: $line"
[[ $line =~ restart_s=([0-9.]+) ]] && restart=${BASH_REMATCH[1]} || fail "no restart_s: $line"
awk "BEGIN{exit !($detect >= 4.5 && $restart > $detect)}" ||
  fail "detect_s $detect, restart_s $restart: want >= 4.5 and restart after detect"
# The window saw store transactions (the points) and the watchers received points.
[[ $line =~ store_commits_per_s=([0-9.]+) ]] && awk "BEGIN{exit !(${BASH_REMATCH[1]} > 0)}" ||
  fail "no store transactions: $line"
[[ $line =~ watch_latency_p50_ms=([0-9.]+) ]] && awk "BEGIN{exit !(${BASH_REMATCH[1]} > 0)}" ||
  fail "no watch latency: $line"
echo PASS
