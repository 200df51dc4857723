#!/usr/bin/env bash
# A rolling update of coordinator replicas on etcd: each of the three is stopped (SIGTERM,
# as Kubernetes does) and started again, one at a time, while a job runs. The leader's
# SIGTERM resigns its leadership, so a standby takes over at once; the job never restarts
# (same generation, same rank processes) and succeeds once released.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

start_etcd
start_replicas a b c
start_worker w1
start_worker w2
wait_for_workers 2

release_job_yaml "$TMP/long.yaml" outlives-the-update
JOB=$("$BATON" submit "$TMP/long.yaml")
running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 60 running
BEFORE=$(generation_and_pid "$JOB" 0; generation_and_pid "$JOB" 1)

# Standbys first, the leader last (the order a careful operator, or the PDB, allows);
# whichever order, each replica is replaced while the others serve.
LEADER=$(leader_name)
for name in a b c; do [[ $name != "$LEADER" ]] && ORDER+=("$name"); done
ORDER+=("$LEADER")
for name in "${ORDER[@]}"; do
  was_leader=$([[ $(leader_name) == "$name" ]] && echo yes || echo no)
  kill -TERM "${REPLICA_PIDS[$name]}"
  wait "${REPLICA_PIDS[$name]}" || fail "replica $name exited with status $? on SIGTERM"
  if [[ $was_leader == yes ]]; then
    grep -q "resigned: /e2e/leader released" "$TMP/$name.log" || fail "leader $name did not resign"
    other_leads() { local n; n=$(leader_name) && [[ $n != "$name" ]]; }
    wait_for 30 other_leads
  fi
  start_replica "$name" "${REPLICA_PORTS[$name]}"
  echo "replaced $name (leader: $was_leader); $(leader_name) leads"
  serves() { "$BATON" describe "$JOB" >/dev/null; }
  wait_for 30 serves
done

both_attached() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]] && [[ $(ready_workers) == 2 ]]; }
wait_for 60 both_attached
AFTER=$(generation_and_pid "$JOB" 0; generation_and_pid "$JOB" 1)
[[ "$AFTER" == "$BEFORE" ]] || fail "the job restarted during the update: $BEFORE -> $AFTER"
touch "$TMP/release"
wait_for 60 job_succeeded "$JOB"
[[ $(job_field "$JOB" 'len(d.get("restarts", {}).get("failures", []))') == 0 ]] || fail "failures recorded"
echo "PASS"
