#!/usr/bin/env bash
# Failure budgets made for long jobs: a training job whose rank 0 is SIGKILLed 20 times,
# each time after the job made healthy progress (restart_policy.healthy_steps past where it
# resumed), outlives all 20 kills (3 user-code restarts are its budget) with every restart
# after the initial backoff, and succeeds. A job that fails right after every start still
# fails fast.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_two_worker_cluster

KILLS=20
HEALTHY=30
cat >"$TMP/long.yaml" <<YAML
name: many-failures
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, global_batch: 64, lr: 0.05, seed: 7, hidden: [64], log_every: 5, threads: 1, checkpoint_every: 10, keep_checkpoints: 2}
workers: {min: 2}
budget: {max_steps: 100000}
checkpoint_dir: $TMP/ckpt
restart_policy: {max_user_restarts: 3, healthy_steps: $HEALTHY}
YAML
mkdir -p "$TMP/ckpt"
JOB=$("$BATON" submit "$TMP/long.yaml")

# progressed: the current generation is RUNNING and reported a step HEALTHY + 10 past the
# step it resumed at (0 for the first; known once it reported its first step).
progressed() {
  job_field "$JOB" "d['state'] == 'JOB_STATE_RUNNING' and (lambda r: r is not None and int(d.get('result', {}).get('steps', 0)) >= int(r) + $HEALTHY + 10)(0 if int(d['generation']) == 1 else ([f for f in d.get('restarts', {}).get('failures', []) if int(f.get('next_generation', 0)) == int(d['generation'])] or [{}])[0].get('resumed_step'))" | grep -qx True
}
for kill in $(seq "$KILLS"); do
  wait_for 120 progressed
  read -r GEN PID < <(generation_and_pid "$JOB" 0)
  kill -KILL "$PID"
  next() { [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
  wait_for 60 next
done
echo "$KILLS kills, each after healthy progress; generation $(job_field "$JOB" 'd["generation"]')"
"$BATON" cancel "$JOB" >/dev/null

"$PY" - <("$BATON" describe "$JOB" -o json) "$KILLS" <<'PY' || fail "the restarts were not judged as recent"
import json, sys
d = json.load(open(sys.argv[1]))
kills = int(sys.argv[2])
r = d["restarts"]
failures = [f for f in r["failures"] if f.get("reason") == "RankFailed"]
assert len(failures) == kills, "%d RankFailed failures, want %d" % (len(failures), kills)
assert int(r.get("user", 0)) == kills, r.get("user")
assert int(r.get("recent_user", 0)) <= 1, r.get("recent_user")
assert all(f.get("healthy_before") for f in failures), [f.get("healthy_before") for f in failures]
assert all(f.get("backoff") == "0.500s" for f in failures), [f.get("backoff") for f in failures]
print("%d user-code restarts, %d recent; every backoff 0.5 s" % (kills, int(r.get("recent_user", 0))))
PY

# No progress between failures: fails as fast as before (here a crash loop: no step twice).
cat >"$TMP/loop.yaml" <<YAML
name: fails-at-start
command: {argv: ["/bin/sh", "-c", "exit 3"]}
workers: {min: 1}
restart_policy: {max_user_restarts: 3}
YAML
LOOP=$("$BATON" submit "$TMP/loop.yaml")
failed() { [[ $(job_state "$LOOP") == JOB_STATE_FAILED ]]; }
wait_for 60 failed
job_field "$LOOP" 'd["message"]' | grep -Eq "crash loop|restart budget spent" || fail "$(job_field "$LOOP" 'd["message"]')"
echo "PASS"
