#!/usr/bin/env bash
# Attacks (issue 26, 2.6) on what every tenant shares, by one holding a `submitter` token:
#  - a rank prints as fast as it can, to flood the coordinator's log store and the
#    worker's disk: past --max_rank_log_lines_per_second lines are dropped with a marker
#    line saying how many, past --max_rank_log_bytes the rank's log file ends with a marker;
#  - a tenant holds many `baton logs -f` open, to take the coordinator's stream slots:
#    past --max_streams_per_user, and past --max_streams for all users, a stream is
#    refused naming the limit; a closed stream's slot is free again;
#  - seventeen jobs with 1 MiB of argv each, which once made `baton jobs` fail for
#    every user (a page over gRPC's message limit): another user still lists them all.
source "${TEST_SRCDIR}/baton/tests/security/lib.sh"

COORDINATOR_FLAGS=(--max_streams_per_user=2 --max_streams=3)
WORKER_FLAGS=(--max_rank_log_lines_per_second=50 --max_rank_log_bytes=4096)
start_coordinator
start_worker w1
wait_for_workers 1

# --- A rank that floods its output ------------------------------------------------------
cat >"$TMP/flood.yaml" <<YAML
name: flood
command:
  argv: ["/bin/sh", "-c", "i=0; while [ \$i -lt 3000 ]; do echo flood line \$i; i=\$((i+1)); done"]
workers: {min: 1, max: 1}
YAML
FLOOD=$(submit_as alice "$TMP/flood.yaml")
wait_for 120 job_done "$FLOOD"
[[ $(job_state "$FLOOD") == JOB_STATE_SUCCEEDED ]] || fail "the flood job $(job_state "$FLOOD")"
as alice logs "$FLOOD" >"$TMP/flood.logs"
relayed=$(grep -c "^.*flood line" "$TMP/flood.logs" || true)
echo "relayed $relayed of 3000 lines"
((relayed < 3000)) || fail "every line was relayed: no rate limit"
grep -q "line(s) of this rank's stdout were not relayed: over the worker's --max_rank_log_lines_per_second=50" \
  "$TMP/flood.logs" || fail "no marker for the lines dropped"
LOG="$TMP/w1/jobs/$FLOOD/gen-1/rank-0/stdout.log"
size=$(stat -c %s "$LOG")
echo "rank log: $size bytes"
((size < 4096 + 512)) || fail "the rank's log file holds $size bytes, over --max_rank_log_bytes=4096"
tail -n 1 "$LOG" | grep -q "this log reached its limit of 4096 bytes" || fail "no marker at the end of the log file"
[[ $(daemon_metric w1 baton_worker_rank_logs_capped_total) == 1 ]] || fail "capped logs not counted"
dropped=$(daemon_metric w1 baton_worker_rank_log_lines_dropped_total)
[[ $dropped == $((3000 - relayed)) ]] || fail "dropped lines counted $dropped, want $((3000 - relayed))"

# --- Stream slots -----------------------------------------------------------------------
cat >"$TMP/sleeper.yaml" <<YAML
name: sleeper
command: {argv: ["/bin/sh", "-c", "echo hello; exec sleep 1000"]}
workers: {min: 1, max: 1}
YAML
SLEEPER=$(submit_as alice "$TMP/sleeper.yaml")
_said_hello() { as alice logs "$SLEEPER" 2>/dev/null | grep -q hello; }
wait_for 60 _said_hello
# follow USER N: `baton logs -f` as USER in the background, output in $TMP/follow.N; once
# it printed the job's line its stream is open.
follow() {
  (BATON_TOKEN=$(cat "$PKI/users/$1.token") exec "$BATON" logs "$SLEEPER" -f >"$TMP/follow.$2" 2>&1) &
  echo $! >"$TMP/follow.$2.pid"
  wait_for 30 test -s "$TMP/follow.$2"
  grep -q hello "$TMP/follow.$2" || { cat "$TMP/follow.$2"; fail "follow $2 was refused"; }
}
# refused USER LIMIT: a `baton logs` (one more stream) as USER fails naming LIMIT.
refused() {
  local rc=0
  as "$1" logs "$SLEEPER" >"$TMP/refused.out" 2>&1 || rc=$?
  cat "$TMP/refused.out"
  ((rc != 0)) || fail "$1's stream over $2 was accepted"
  grep -q -- "$2" "$TMP/refused.out" || fail "the refusal does not name $2"
}
follow alice 1
follow alice 2
refused alice "--max_streams_per_user=2"
follow bob 3
refused bob "--max_streams);"
kill "$(cat "$TMP/follow.1.pid")"
_slot_free() { as alice logs "$SLEEPER" >/dev/null 2>&1; }
wait_for 30 _slot_free
echo "streams: refused past 2 per user and 3 in all; a closed one's slot was free again"
for n in 2 3; do kill "$(cat "$TMP/follow.$n.pid")" 2>/dev/null || true; done
as alice cancel "$SLEEPER" >/dev/null

# --- Seventeen jobs of 1 MiB each -------------------------------------------------------
"$PY" - "$TMP/big.yaml" <<'PY'
import json, sys
argv = ["/bin/true"] + [chr(ord("a") + i % 26) * 32000 for i in range(32)]
# Two workers needed, one exists: they stay queued and never run.
open(sys.argv[1], "w").write("name: big\nworkers: {min: 2, max: 2}\ncommand: {argv: %s}\n" % json.dumps(argv))
PY
for i in $(seq 17); do submit_as alice "$TMP/big.yaml" >/dev/null; done
as bob jobs -o name >"$TMP/jobs.out" 2>"$TMP/jobs.err" || { cat "$TMP/jobs.err"; fail "bob cannot list jobs"; }
listed=$(wc -l <"$TMP/jobs.out")
((listed == 19)) || fail "bob listed $listed jobs, want 19 (17 big, the flood, the sleeper)"
echo "PASS"
