#!/usr/bin/env bash
# Issue 10, partition cases 1 and 2: one worker host of a running 3-worker job (min 2,
# max 3) is cut off, either from the coordinator only ("coordinator": nftables rules; its
# peers still reach it) or from every host ("everything": its link taken down). Its lease
# runs out, it kills its ranks, and only then does the coordinator start the next
# generation on the other two: no process of the old generation is alive once the job
# moved on, and no checkpoint of the old generation is written after the new one started.
# The new generation resumes from the survivors' in-memory snapshot (issue 29), at or after
# the last step the old one reported, not from the older disk checkpoint. After the heal the
# worker registers again, is READY, and the job (below workers.max) scales back onto it.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
source "${TEST_SRCDIR}/baton/tests/multihost/cluster.sh"
MODE=${1:?usage: partition_worker_test.sh coordinator|everything}

cluster_create 4
make_data "$TMP/mnist"
cluster_start_coordinator 0 --worker_lease=3s --worker_lease_margin=1s
for i in 1 2 3; do cluster_start_worker "w$i" "$i" 1; done
wait_for_workers 3

cat >"$TMP/job.yaml" <<YAML
name: partitioned
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, global_batch: 96, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 25, keep_checkpoints: 1000, snapshot_every: 1}
workers: {min: 2, max: 3}
budget: {max_steps: 100000}
checkpoint_dir: $TMP/ckpt
YAML
submit_until_checkpoint "$TMP/job.yaml"
[[ $(job_field "$JOB" 'len(d["ranks"])') == 3 ]] || fail "expected world size 3 first"
read -r GEN PID < <(generation_and_pid "$JOB" 1)
NAME=$(worker_name_of "$JOB" 1)
CUT=${WORKER_HOST[$NAME]}
echo "cutting host $CUT ($NAME, rank 1, pid $PID) from $MODE in generation $GEN"
watch_stale "$JOB" "$GEN" "$PID"
case $MODE in
  coordinator) cut "$CUT" 0 ;;      # nftables drop rules between it and host 0
  everything) link_down "$CUT" ;;  # its cable pulled
  *) fail "unknown mode $MODE" ;;
esac

# The job recovers on the other two.
moved_on() {
  [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] \
    && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] \
    && [[ $(job_field "$JOB" 'int(d.get("result", {}).get("steps", 0))') -gt 0 ]]
}
wait_for 120 moved_on
NEXT=$(job_field "$JOB" 'd["generation"]')
[[ $(job_field "$JOB" 'len(d["ranks"])') == 2 ]] || fail "expected world size 2 after the cut"
expect_no_overlap
alive "$PID" && fail "rank 1 of generation $GEN still runs"
grep -q "lease ran out" "$TMP/$NAME.log" || fail "$NAME did not kill its ranks on its lease"
F="[f for f in d['restarts']['failures'] if int(f['generation']) == $GEN][0]"
[[ $(job_field "$JOB" "$F['reason']") == LeaseExpired ]] \
  || fail "not a lease expiry: $(job_field "$JOB" "$F")"
[[ $(job_field "$JOB" "'lease_expired_time' in $F") == True ]] || fail "no lease expiry recorded"
# Resumed from memory at the last step any survivor completed, which is no earlier than the
# last step the old generation reported (the disk checkpoints are up to 24 steps older).
REPORTED=$(job_field "$JOB" "int($F.get('step', 0))")
OUT=$(ls "$TMP"/w?/jobs/"$JOB"/gen-"$NEXT"/rank-0/stdout.log | head -1)
# The snapshot decision is the restore's last line: either restored from memory, or none.
decided() { grep -q "^restored in-memory snapshot \|^no in-memory snapshot " "$OUT"; }
wait_for 60 decided
RESUMED=$(sed -n 's/^restored .* at step \([0-9]*\) .*/\1/p' "$OUT" | tail -1)
[[ -n $RESUMED && $RESUMED -ge $REPORTED ]] ||
  { cat "$OUT"; fail "generation $NEXT resumed at step '$RESUMED', before the reported $REPORTED"; }
grep -q "^restored in-memory snapshot of generation $GEN " "$OUT" || ((RESUMED % 25 == 0)) ||
  { cat "$OUT"; fail "generation $NEXT did not resume from the survivors' snapshot"; }
echo "generation $NEXT resumed at step $RESUMED (generation $GEN reported step $REPORTED)"
"$BATON" describe "$JOB" | tee "$TMP/describe.out"
grep -Eq "$GEN->$NEXT +infra +LeaseExpired" "$TMP/describe.out" || fail "describe lacks the row"
# The partition as metrics: the coordinator lost a worker to lease expiry, the cut-off
# worker killed its rank when its lease ran out.
scrape 0 "$TMP/coordinator.metrics_port" >"$TMP/coordinator.metrics"
grep -q '^baton_coordinator_worker_losses_total{cause="lease_expired"} 1$' \
  "$TMP/coordinator.metrics" || fail "$(grep worker_losses "$TMP/coordinator.metrics")"
scrape "$CUT" "$TMP/$NAME.metrics_port" >"$TMP/$NAME.metrics"
grep -q '^baton_worker_lease_expirations_total 1$' "$TMP/$NAME.metrics" \
  || fail "$(grep lease "$TMP/$NAME.metrics")"
# Files of the new generation so far: they must be there, unchanged, at the end.
wait_for 120 compgen -G "$TMP/ckpt/ckpt-*-g$NEXT.pt"
NEW_FILES=$(cd "$TMP/ckpt" && stat -c '%n %i %Y' ckpt-*-g"$NEXT".pt)

# Heal: the worker comes back, is READY, and the job grows back to 3 workers.
case $MODE in
  coordinator) heal "$CUT" 0 ;;
  everything) link_up "$CUT" ;;
esac
grown() {
  [[ $(job_field "$JOB" 'd["generation"]') -gt $NEXT ]] \
    && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] \
    && [[ $(job_field "$JOB" 'len(d["ranks"])') == 3 ]]
}
wait_for 120 grown
[[ $(ready_workers) == 3 ]] || fail "the healed worker is not READY"
"$BATON" describe "$JOB" >"$TMP/describe.out"
grep -Eq "$NEXT->[0-9]+ +planned +ScalingUp" "$TMP/describe.out" \
  || fail "the job did not scale up: $(cat "$TMP/describe.out")"
"$BATON" cancel "$JOB" >/dev/null
[[ $(cd "$TMP/ckpt" && stat -c '%n %i %Y' ckpt-*-g"$NEXT".pt | head -n "$(wc -l <<<"$NEW_FILES")") \
  == "$NEW_FILES" ]] || fail "a checkpoint of generation $NEXT was replaced or deleted"
checkpoints_fenced "$TMP/ckpt" "$JOB" "$GEN"
echo "PASS"
