#!/usr/bin/env bash
# Hang detection for command jobs, with real processes:
# * a Python job whose baton.report() is its heartbeat: SIGSTOPped, it stops reporting and
#   the coordinator fails the generation as a stall naming it once report_stall_floor +
#   stall_factor x its longest time between reports passed;
# * output silence is opt-in: of two jobs that print one line and then nothing, the one with
#   restart_policy.output_silence fails as a stall, the other keeps running.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster

HELPER="$RUNFILES/client/python"
cat >"$TMP/report.py" <<PY
import sys, time
sys.path.insert(0, "$HELPER")
import baton
step = 0
while True:
    step += 1
    baton.report(step=step, loss=1.0 / step, samples=64)
    time.sleep(0.1)
PY
cat >"$TMP/report.yaml" <<YAML
name: reports
command: {argv: ["$PY", "-B", "$TMP/report.py"]}
workers: {min: 1}
restart_policy: {max_stall_restarts: 0, report_stall_floor: 2s}
YAML
JOB=$("$BATON" submit "$TMP/report.yaml")
reported() { [[ $(job_field "$JOB" 'int(d.get("result", {}).get("steps", 0))') -ge 10 ]]; }
wait_for 60 reported
read -r _ PID < <(generation_and_pid "$JOB" 0)
kill -STOP "$PID"
failed() { [[ $(job_state "$JOB") == JOB_STATE_FAILED ]]; }
wait_for 60 failed
F="d['restarts']['failures'][0]"
[[ $(job_field "$JOB" "$F['failure_class']") == FAILURE_CLASS_STALL ]] || fail "$(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "$F['hang_evidence']") == no-report ]] || fail "$(job_field "$JOB" "$F")"
job_field "$JOB" "$F['cause']" | grep -Eq "no rank made progress for .* \(timeout [0-9.]+s = 2s \+ 3 x [0-9.]+m?s, the longest recent time between reports\); rank 0 on worker w[12] stopped first at step [0-9]+" \
  || fail "cause: $(job_field "$JOB" "$F['cause']")"
detect=$(job_field "$JOB" "round((__import__('datetime').datetime.fromisoformat($F['fail_time'].rstrip('Z')) - __import__('datetime').datetime.fromisoformat($F['occurred_time'].rstrip('Z'))).total_seconds(), 3)")
echo "report() silence detected after ${detect}s"
kill -CONT "$PID" 2>/dev/null || true

# Output silence: opt-in.
for name in quiet-watched quiet-unwatched; do
  extra=""
  [[ $name == quiet-watched ]] && extra="output_silence: 3s, "
  cat >"$TMP/$name.yaml" <<YAML
name: $name
command: {argv: ["/bin/sh", "-c", "echo started; exec sleep 100000"]}
workers: {min: 1}
restart_policy: {${extra}max_stall_restarts: 0}
YAML
done
WATCHED=$("$BATON" submit "$TMP/quiet-watched.yaml")
UNWATCHED=$("$BATON" submit "$TMP/quiet-unwatched.yaml")
watched_failed() { [[ $(job_state "$WATCHED") == JOB_STATE_FAILED ]]; }
wait_for 60 watched_failed
F="d['restarts']['failures'][0]"
[[ $(job_field "$WATCHED" "$F['hang_evidence']") == output-silence ]] || fail "$(job_field "$WATCHED" "$F")"
job_field "$WATCHED" "$F['cause']" | grep -q "no rank wrote output for 3.*(restart_policy.output_silence 3s)" \
  || fail "cause: $(job_field "$WATCHED" "$F['cause']")"
# The other stays: watched for as long again (monitoring, not synchronisation).
for _ in $(seq 40); do
  [[ $(job_state "$UNWATCHED") == JOB_STATE_RUNNING ]] || fail "the unwatched job is $(job_state "$UNWATCHED")"
  sleep 0.1
done
"$BATON" cancel "$UNWATCHED" >/dev/null
echo "PASS"
