#!/usr/bin/env bash
# Coordinator replicas on etcd: the leader is killed (SIGKILL) mid-training; a standby
# leads, the workers follow it and re-attach, the job goes on in the same generation with
# the same processes and succeeds. Clients and workers are given every replica's address.
# An operator's cordon (`baton cordon`), set on the old leader, is in etcd: the new leader
# shows it and lifts it.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_etcd
start_replicas a b c
start_worker w1
start_worker w2
wait_for_workers 2

# A standby answers with a redirect naming the leader, and says it is no leader.
LEADER=$(leader_name)
[[ $(replica_metric "$LEADER" baton_coordinator_leader) == 1.0 ]] || fail "the leader's metric is not 1"
for name in a b c; do
  [[ $name == "$LEADER" ]] && continue
  [[ $(replica_metric "$name" baton_coordinator_leader) == 0.0 ]] || fail "standby $name's metric is not 0"
  out=$(BATON_COORDINATOR=127.0.0.1:${REPLICA_PORTS[$name]} "$BATON" jobs 2>&1) && fail "standby $name answered: $out"
  grep -q "is a standby; the leader is $(leader_address)" <<<"$out" || fail "no redirect from $name: $out"
done

# A real training job (two ranks of the built-in trainer), the leader killed mid-run. Long
# enough (about 3 ms a step here) to outlast the failover.
make_data "$TMP/mnist"
STEPS=5000
cat >"$TMP/ha.yaml" <<YAML
name: ha
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 48, global_batch: 96, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 20, threads: 1, checkpoint_every: 1000, keep_checkpoints: 2}
workers: {min: 2, max: 2}
budget: {max_steps: $STEPS}
checkpoint_dir: $TMP/ha-ckpt
YAML
mkdir -p "$TMP/ha-ckpt"
JOB=$("$BATON" submit "$TMP/ha.yaml")
past() { (($(job_step "$JOB") >= 100)); }
wait_for 120 past
BEFORE=$(generation_and_pid "$JOB" 0; generation_and_pid "$JOB" 1)
STEP_BEFORE=$(job_step "$JOB")

"$BATON" cordon w2 --reason "fan noise" | grep -qx "worker w2 cordoned" || fail "cordon refused"
kill -KILL "${REPLICA_PIDS[$LEADER]}"
wait "${REPLICA_PIDS[$LEADER]}" 2>/dev/null || true
new_leader() { local n; n=$(leader_name) && [[ $n != "$LEADER" ]]; }
wait_for 30 new_leader
NEW=$(leader_name)
echo "leader $LEADER killed; $NEW leads"

reattached() { job_field "$JOB" '[e["reason"] for e in d["events"]]' | grep -q Reattached; }
wait_for 60 reattached
AFTER=$(generation_and_pid "$JOB" 0; generation_and_pid "$JOB" 1)
[[ "$AFTER" == "$BEFORE" ]] || fail "the job restarted across the failover: $BEFORE -> $AFTER"
# Training went on, reporting to the new leader, and the job finished all its steps.
advanced() { (($(job_step "$JOB") > STEP_BEFORE)); }
wait_for 60 advanced
"$BATON" workers | grep -E "^w2 .*cordoned by e2e .*: fan noise$" \
  || fail "the new leader does not show the cordon: $("$BATON" workers)"
"$BATON" uncordon w2 | grep -qx "worker w2 uncordoned" || fail "uncordon refused"
wait_for 300 job_succeeded "$JOB"
[[ $(job_step "$JOB") == "$STEPS" ]] || fail "the job ended at step $(job_step "$JOB"), not $STEPS"
[[ $(job_field "$JOB" 'd["generation"]') == "${BEFORE%% *}" ]] || fail "the generation changed"
echo "PASS"
