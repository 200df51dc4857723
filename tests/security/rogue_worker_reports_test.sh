#!/usr/bin/env bash
# Attack (issue 26, 2.4): a holder of a worker certificate (w2's: a compromised host)
# reports on alice's job, which runs on w1: log lines into its logs, metric points into
# its progress, rank 0's exit and an AssignmentFailed "PathNotAllowed", which used to
# fail the job outright. The coordinator must refuse each (the job runs on, untouched)
# and count them in baton_coordinator_worker_reports_refused_total.
source "${TEST_SRCDIR}/baton/tests/security/lib.sh"

start_coordinator
start_worker w1
wait_for_workers 1
worker_tls w2  # issued, as to any worker; no daemon runs it

cat >"$TMP/victim.yaml" <<YAML
name: victim
command: {argv: ["/bin/sh", "-c", "echo honest line; exec sleep 1000"]}
workers: {min: 1, max: 1}
YAML
JOB=$(submit_as alice "$TMP/victim.yaml")
_running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 60 _running
_honest_logged() { as alice logs "$JOB" | grep -q "honest line"; }
wait_for 30 _honest_logged

PYTHONPATH=$RUNFILES/tests/security/worker_stubs "$PY" "$RUNFILES/tests/security/testing/rogue_worker.py" \
  "$BATON_COORDINATOR" "$PKI/ca.crt" "$PKI/workers/w2.crt" "$PKI/workers/w2.key" w2 "$JOB" 1 \
  | grep -q "^sent$" || fail "the rogue worker could not deliver its reports"

[[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] || fail "the job was ended by w2: $(as alice describe "$JOB")"
[[ $(job_field "$JOB" "[r for r in d['ranks'] if r.get('rank', 0) == 0][0].get('exit')") == None ]] \
  || fail "w2 recorded an exit of rank 0"
(($(job_step "$JOB") < 999999)) || fail "w2's metric point became the job's progress"
as alice logs "$JOB" >"$TMP/logs.out"
grep -q "planted" "$TMP/logs.out" && fail "w2's line is in alice's logs"
for kind in logs metrics process_exited assignment_failed; do
  v=$(coordinator_metric "baton_coordinator_worker_reports_refused_total{kind=\"$kind\"}")
  [[ $v == 1 ]] || fail "refused $kind reports: $v, want 1"
done
grep -q "worker w2 reported log lines of job $JOB" "$TMP/coordinator.log" || fail "the refusal was not logged"
as alice cancel "$JOB" >/dev/null
echo "PASS"
