#!/usr/bin/env bash
# Coordinator replicas on a three-member etcd cluster, under a training job:
# * One member hung (SIGSTOP): nothing changes (same leader, same generation and processes,
#   steps go on).
# * Then one lost (SIGKILL), etcd's own Raft leader (the worst one to lose: etcd answers
#   nothing until it elects another, 1-2 s, more on a loaded host): nothing a job sees
#   changes (same generation and processes, steps go on). The coordinators' leader may change
#   when etcd's election outlasts its renewals (ttl - 0.5 s): a re-attach, not a restart.
# * Quorum lost (a second member): the leader stops leading (it cannot renew its lease:
#   fail-stop, it exits saying so) and no standby can be elected; the ranks stop when their
#   workers' lease runs out, as documented; nothing is decided meanwhile.
# * Quorum back: a replica leads, the workers register again and the job resumes from its
#   checkpoint as a new generation.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_etcd 3
# A 3 s election lease rides out etcd's own leader election when members go, so that the
# leader stays put while one member of three is lost.
COORDINATOR_FLAGS=(--worker_lease=6s --worker_lease_margin=1s --election_ttl=3s)
start_replicas a b
has_leader() { leader_name; }
LEADER=$(leader_name)
start_worker w1
start_worker w2
wait_for_workers 2

make_data "$TMP/mnist"
cat >"$TMP/job.yaml" <<YAML
name: outlives-quorum
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, global_batch: 64, lr: 0.05, seed: 7, hidden: [256, 128], log_every: 5, threads: 1, checkpoint_every: 200, keep_checkpoints: 2}
workers: {min: 2}
budget: {max_steps: 1000000}
checkpoint_dir: $TMP/ckpt
YAML
mkdir -p "$TMP/ckpt"
JOB=$("$BATON" submit "$TMP/job.yaml")
has_checkpoint() { compgen -G "$TMP/ckpt/ckpt-*.pt" >/dev/null; }
wait_for 120 has_checkpoint
read -r GEN PID0 < <(generation_and_pid "$JOB" 0)
read -r _ PID1 < <(generation_and_pid "$JOB" 1)

# One member of three hangs (SIGSTOP: its connections stay open, nothing answers), the one
# every replica asks first: invisible to the job, the leader stays. Not etcd's own Raft
# leader (that loss, which needs an election, is the next case): if it leads, leadership
# moves to member 1 first (without that, a loaded machine's election could outlast the
# coordinators' renewals, and the case tested would be the next one).
if [[ $(etcd_raft_leader) == 0 ]]; then
  ETCD_ENDPOINTS=${ETCD_CLIENT[0]} etcdctl_ move-leader "$(etcd_member_id 1)" >/dev/null \
    || fail "could not move etcd's leadership off member 0"
  not_member0() { [[ $(etcd_raft_leader) != 0 ]]; }
  wait_for 30 not_member0
fi
kill -STOP "${ETCD_PIDS[0]}"
STEP=$(job_step "$JOB")
hung_progress() { (($(job_step "$JOB") > STEP + 200)) && [[ $(ETCD_ENDPOINTS=${ETCD_CLIENT[1]} leader_name) == "$LEADER" ]]; }
wait_for 60 hung_progress
kill -CONT "${ETCD_PIDS[0]}"
grep -q "lost leadership" "$TMP/$LEADER.log" && fail "a hung etcd member deposed the leader"
[[ $(job_field "$JOB" 'd["generation"]') == "$GEN" ]] || fail "a hung etcd member restarted the job"
echo "one member hung: leader $LEADER, generation $GEN, step $STEP -> $(job_step "$JOB")"
# Every member answers again (the one that hung has caught up) before the next loss.
wait_for 60 etcdctl_ endpoint health

# One member of three lost, etcd's Raft leader: invisible to the job.
LOST=$(etcd_raft_leader) || fail "no etcd member says which is its leader"
stop_etcd_member "$LOST"
STEP=$(job_step "$JOB")
progressed() { (($(job_step "$JOB") > STEP + 200)); }
wait_for 60 progressed
[[ $(job_field "$JOB" 'd["generation"]') == "$GEN" ]] || fail "losing one etcd member restarted the job"
alive "$PID0" && alive "$PID1" || fail "a rank stopped when one etcd member was lost"
wait_for 30 has_leader
FORMER=$LEADER
LEADER=$(leader_name)
# A deposed leader exited (fail-stop); its supervisor would start it again.
alive "${REPLICA_PIDS[$FORMER]}" || start_replica "$FORMER" "${REPLICA_PORTS[$FORMER]}"
echo "one member lost (etcd's leader, m$LOST): coordinators' leader $FORMER -> $LEADER," \
  "generation $GEN, step $STEP -> $(job_step "$JOB")"

# Quorum lost (a second member): the leader fails stop; no replica leads; the ranks stop at
# the worker lease.
SECOND=$(((LOST + 1) % 3))
stop_etcd_member "$SECOND"
leader_gone() { ! alive "${REPLICA_PIDS[$LEADER]}"; }
wait_for 30 leader_gone
grep -q "lost leadership" "$TMP/$LEADER.log" || fail "the leader did not say why it stopped"
stopped() { ! alive "$PID0" && ! alive "$PID1"; }
wait_for 60 stopped
grep -q "lease ran out" "$TMP/w1.log" || grep -q "lease ran out" "$TMP/w2.log" \
  || fail "no worker stopped its ranks on its lease"
for name in a b; do
  [[ $name == "$LEADER" ]] && continue
  alive "${REPLICA_PIDS[$name]}" || fail "standby $name died without quorum"
  # Its metrics say it: no leader here, and the election's etcd calls failing.
  [[ $(replica_metric "$name" baton_coordinator_leader) == 0.0 ]] || fail "$name claims to lead"
  erring() { [[ $(replica_metric "$name" baton_coordinator_election_errors_total) != 0.0 ]]; }
  wait_for 30 erring
done
echo "quorum lost: leader $LEADER stopped, ranks stopped at the worker lease"

# Quorum back (the members restart on their data); the stopped leader is restarted as its
# supervisor would. A replica leads and the job resumes from its checkpoint.
start_etcd_member "$LOST"
start_etcd_member "$SECOND"
wait_for 60 etcdctl_ endpoint health
start_replica "$LEADER" "${REPLICA_PORTS[$LEADER]}"
wait_for 60 has_leader
resumed() {
  [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] \
    && [[ $(job_field "$JOB" "[f for f in d['restarts']['failures'] if int(f['generation']) == $GEN][0].get('resumed_step', -1)") -gt 0 ]]
}
wait_for 120 resumed
echo "quorum back: $(leader_name) leads; generation $(job_field "$JOB" 'd["generation"]') resumed" \
  "at step $(job_field "$JOB" "[f for f in d['restarts']['failures'] if int(f['generation']) == $GEN][0]['resumed_step']")"
"$BATON" cancel "$JOB" >/dev/null
echo "PASS"
