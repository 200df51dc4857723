#!/usr/bin/env bash
# Two coordinators never share a state directory: the second refuses to start, naming the
# first one's pid, and the first keeps serving. Once the first is gone (even by SIGKILL),
# a new one starts on the directory and finds its jobs.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_coordinator
cat >"$TMP/job.yaml" <<YAML
name: kept
command: {argv: ["/bin/true"]}
workers: {min: 1}
YAML
JOB=$("$BATON" submit "$TMP/job.yaml")

rc=0
"$COORDINATOR_BIN" --listen=127.0.0.1:0 "${COORDINATOR_TLS[@]}" --state_dir="$TMP/state" 2>"$TMP/second.err" || rc=$?
((rc == 1)) || fail "the second coordinator exited with $rc, want 1"
grep -q "state directory $TMP/state is in use by another baton-coordinator (pid $COORDINATOR_PID)" \
  "$TMP/second.err" || fail "unexpected message: $(cat "$TMP/second.err")"
[[ $(wc -l <"$TMP/second.err") -eq 1 ]] || fail "the refusal is not one line: $(cat "$TMP/second.err")"
[[ $(job_state "$JOB") == JOB_STATE_QUEUED ]] || fail "the first coordinator stopped serving"

kill -KILL "$COORDINATOR_PID"
wait "$COORDINATOR_PID" 2>/dev/null || true
start_coordinator
[[ $(job_state "$JOB") == JOB_STATE_QUEUED ]] || fail "the restarted coordinator lost $JOB"
echo PASS
