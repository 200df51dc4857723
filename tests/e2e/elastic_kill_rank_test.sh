#!/usr/bin/env bash
# Issue 4, case 1: SIGKILL one training process mid-run (after a checkpoint exists). The
# job restarts as generation 2 from the newest checkpoint (in memory or on disk) at the
# same world size and ends SUCCEEDED; `baton describe` shows the user-code failure, the
# generation change and the recovery phases; the final weights are bit-identical to an
# uninterrupted run of the same job.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster

# job_yaml NAME: the same training job, checkpoints in $TMP/NAME-ckpt.
job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 64, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 10, threads: 1, checkpoint_every: 25}
workers: {min: 2}
budget: {max_steps: 500}
checkpoint_dir: $TMP/$1-ckpt
YAML
  mkdir -p "$TMP/$1-ckpt"
}

# The uninterrupted reference run.
job_yaml reference
run_reference
[[ -s "$TMP/reference-ckpt/final.pt" ]] || fail "no final weights from the reference run"

# The same job, with rank 1 killed once a checkpoint exists.
job_yaml killed
JOB=$("$BATON" submit "$TMP/killed.yaml")
has_checkpoint() { compgen -G "$TMP/killed-ckpt/ckpt-*.pt" >/dev/null; }
wait_for 60 has_checkpoint
# Generation and pid in one snapshot (an unrelated failure may have restarted it already).
read -r GEN PID < <(generation_and_pid "$JOB" 1)
kill -KILL "$PID" || fail "rank 1 (pid $PID) of generation $GEN was already gone"

wait_for 120 job_succeeded "$JOB"

# The kill failed generation GEN: class user, attributed to the earliest failed exit by
# the workers' clocks (rank 1's SIGKILL), even when rank 0's exit on the vanished peer
# reached the coordinator first.
expect_recovered "$JOB" "$GEN" 2 user "^rank 1 on worker .* was killed by signal 9$" \
  occurred_time stopped_time running_time first_step_time
[[ $(job_field "$JOB" "int($F['next_generation'])") == "$NEXT" ]] || fail "no generation change"
grep -Eq "$GEN->$NEXT +user +RankFailed +1 " "$TMP/describe.out" || fail "describe does not show the failure"
grep -q "user: *[1-3]/3" "$TMP/describe.out" || fail "describe does not show the user budget"
"$BATON" logs "$JOB" >"$TMP/logs.out"
grep -Eq "restored (.*ckpt-|in-memory snapshot )" "$TMP/logs.out" ||
  fail "generation $NEXT did not restore a checkpoint or an in-memory snapshot"

# describe and the coordinator's /metrics agree on the restarts and the goodput.
curl -sf "http://127.0.0.1:$(cat "$TMP/coordinator.metrics_port")/metrics" >"$TMP/metrics.txt" \
  || fail "cannot scrape the coordinator"
"$BATON" describe "$JOB" -o json >"$TMP/describe.json"
"$PY" - "$JOB" "$TMP/metrics.txt" "$TMP/describe.json" <<'PY' || fail "describe and /metrics disagree"
import json, sys
job, metrics, describe = sys.argv[1], open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
def metric(name):
    prefix = '%s{job_id="%s"} ' % (name, job)
    values = [float(l[len(prefix):]) for l in metrics.splitlines() if l.startswith(prefix)]
    assert len(values) == 1, (name, values)
    return values[0]
r = describe["restarts"]
restarts = sum(int(r.get(k, 0)) for k in ("infra", "user", "stall"))
assert restarts >= 1 and metric("baton_coordinator_job_restarts_total") == restarts, restarts
goodput = float(describe["result"]["goodput"])
assert 0 < goodput < 1 and abs(metric("baton_coordinator_job_goodput_ratio") - goodput) < 1e-6, goodput
print("restarts %d and goodput %.4f: describe == /metrics" % (restarts, goodput))
PY
grep -q "Restarts: *$(job_field "$JOB" 'sum(int(d["restarts"].get(k, 0)) for k in ("infra", "user", "stall"))')" \
  "$TMP/describe.out" || fail "describe's text does not show the restarts"

# Bit-identical final weights.
weights_identical reference killed
echo "PASS"
