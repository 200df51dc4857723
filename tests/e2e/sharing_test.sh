#!/usr/bin/env bash
# Sharing a cluster with real daemons: a coordinator with a queue file and three one-slot
# workers. Queues research (2 slots) and prod (1 slot) lend each other within cohort lab.
#  1. Priority, shrink first: an elastic job of research (workers 2..3, priority low) runs
#     on all three workers, borrowing prod's idle slot. A one-worker job of research at
#     priority high arrives: the elastic job is not preempted but shrinks to its min (a
#     planned resize: rank 0 checkpoints first), and the new job runs on the worker it gave
#     up. Both finish; no restart budget is spent.
#  2. Reclaim, preempt: a job of prod that cannot shrink (workers 2..2) borrows research's
#     idle slot. A job of research arrives: research reclaims its quota, so the prod job is
#     preempted (rank 0 checkpoints, every rank stops, it goes back to QUEUED: "Preempted",
#     then "Requeued"), and `baton describe` says why it waits. The research job runs; when
#     it ends the prod job is admitted again, resumes from its checkpoint, and ends with
#     final weights bit-identical to an uninterrupted run's, every step on the same samples
#     and none run twice.
#  3. SIGHUP: a queue file with an error keeps the queues in force; a good one applies.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

cat >"$TMP/queues.yaml" <<EOF
default_queue: research
priority_classes:
  - {name: low, value: 0}
  - {name: high, value: 100}
queues:
  - {name: research, cohort: lab, quota: {slots: 2}, users: ["*"]}
  - {name: prod, cohort: lab, quota: {slots: 1}, users: ["*"]}
EOF
COORDINATOR_FLAGS=(--queue_file="$TMP/queues.yaml")
make_data "$TMP/mnist"
start_coordinator
for w in w1 w2 w3; do start_worker "$w"; done
wait_for_workers 3

# queue_field QUEUE EXPR: EXPR over QUEUE's entry of `baton queues -o json` (as q).
queue_field() {
  "$BATON" queues -o json |
    json_get "[$2 for q in d['queues'] if q['name'] == '$1'][0]"
}
# events JOB: the job's event reasons, one line.
events() { job_field "$1" '" ".join(e.get("reason", "") for e in d.get("events", []))'; }
state_is() { [[ $(job_state "$1") == "JOB_STATE_$2" ]]; }
past_step() { (($(job_step "$1") >= $2)); }
# with_queue NAME QUEUE [PRIORITY]: adds queue (and priority) to $TMP/NAME.yaml.
with_queue() {
  echo "queue: $2" >>"$TMP/$1.yaml"
  [[ -z ${3:-} ]] || echo "priority: $3" >>"$TMP/$1.yaml"
}
# short_job NAME WORKERS QUEUE PRIORITY: a trainer job of 30 steps on WORKERS workers.
short_job() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, lr: 0.05, seed: 3, hidden: [64], log_every: 5, threads: 1}
workers: {min: $2, max: $2}
budget: {max_steps: 30}
checkpoint_dir: $TMP/$1-ckpt
YAML
  mkdir -p "$TMP/$1-ckpt"
  with_queue "$1" "$3" "$4"
}

# The uninterrupted run of the job phase 2 preempts (2 workers, prod).
elastic_job_yaml reference 2 2 300
with_queue reference prod
run_reference

echo "--- 1. a high-priority job makes an elastic job shrink to its min"
elastic_job_yaml elastic 2 3 400
with_queue elastic research low
ELASTIC=$("$BATON" submit "$TMP/elastic.yaml")
_three_ranks() { state_is "$ELASTIC" RUNNING && [[ $(job_field "$ELASTIC" 'len(d["ranks"])') == 3 ]]; }
wait_for 60 _three_ranks
[[ $(job_field "$ELASTIC" 'd["queueing"].get("borrowing", False)') == True ]] \
  || fail "three slots of a 2-slot queue should show as borrowing"
wait_for 60 past_step "$ELASTIC" 20
short_job urgent 1 research high
URGENT=$("$BATON" submit "$TMP/urgent.yaml")
_shrunk() { [[ $(events "$ELASTIC") == *Shrinking* ]]; }
wait_for 30 _shrunk
wait_for 120 job_succeeded "$URGENT"
F="[f for f in d['restarts']['failures'] if f.get('reason') == 'Shrinking'][0]"
[[ $(job_field "$ELASTIC" "$F['failure_class']") == FAILURE_CLASS_PLANNED ]] \
  || fail "the shrink is not a planned resize: $(job_field "$ELASTIC" "$F")"
job_field "$ELASTIC" "$F['cause']" | grep -q "to job $URGENT: shrinking from 3 to 2 workers" \
  || fail "shrink cause: $(job_field "$ELASTIC" "$F['cause']")"
released=$(job_field "$ELASTIC" "$F['released_workers'][0]")
# The urgent job ran on the worker the elastic job gave up.
job_field "$URGENT" '[r["worker_id"] for r in d["ranks"]]' | grep -q "'$released'" \
  || fail "the urgent job did not run on the released worker $released"
wait_for 180 job_succeeded "$ELASTIC"
# (To a file first: grep -q stops reading at the first match, and the pipe would fail.)
"$BATON" logs "$ELASTIC" >"$TMP/elastic.logs"
grep -q "checkpointed: steps=" "$TMP/elastic.logs" \
  || fail "the shrinking job's rank 0 did not checkpoint on request"
[[ $(job_field "$ELASTIC" 'd["restarts"].get("infra", 0) + d["restarts"].get("user", 0)') == 0 ]] \
  || fail "a shrink spent a restart budget"
[[ $(queue_field research 'q.get("shrinks", 0)') == 1 ]] || fail "research counts no shrink"

echo "--- 2. a reclaim preempts a borrowing job, which resumes exactly"
elastic_job_yaml borrower 2 2 300
with_queue borrower prod
BORROWER=$("$BATON" submit "$TMP/borrower.yaml")
wait_for 60 past_step "$BORROWER" 60
[[ $(queue_field prod 'q["borrowed"].get("slots", 0)') == 1 ]] || fail "prod does not borrow"
short_job owner 2 research low
OWNER=$("$BATON" submit "$TMP/owner.yaml")
_requeued() { state_is "$BORROWER" QUEUED && [[ $(events "$BORROWER") == *"Preempted"*"Requeued"* ]]; }
wait_for 60 _requeued
"$BATON" describe "$BORROWER" | tee "$TMP/preempted.out"
grep -qi "queue: *prod" "$TMP/preempted.out" || fail "describe does not show the queue"
"$BATON" jobs >"$TMP/jobs.out"
grep -Eq "^$BORROWER +borrower +QUEUED +prod +0 +1 " "$TMP/jobs.out" \
  || { cat "$TMP/jobs.out"; fail "baton jobs does not show the queue, priority and position"; }
[[ -n $(job_field "$BORROWER" 'd["queueing"].get("pending_reason", "")') ]] \
  || fail "a waiting job does not say why"
[[ $(job_field "$BORROWER" 'd["queueing"].get("preemptions", 0)') == 1 ]] || fail "not counted"
[[ $(queue_field prod 'q.get("preemptions", 0)') == 1 ]] || fail "prod counts no preemption"
wait_for 120 job_succeeded "$OWNER"
wait_for 180 job_succeeded "$BORROWER"
F="[f for f in d['restarts']['failures'] if f.get('reason') == 'Preempted'][0]"
[[ $(job_field "$BORROWER" "$F['failure_class']") == FAILURE_CLASS_PLANNED ]] \
  || fail "the preemption is not a planned resize"
job_field "$BORROWER" "$F['cause']" | grep -q "queue research reclaims its quota" \
  || fail "preemption cause: $(job_field "$BORROWER" "$F['cause']")"
[[ $(job_field "$BORROWER" 'd["restarts"].get("infra", 0) + d["restarts"].get("user", 0)') == 0 ]] \
  || fail "a preemption spent a restart budget"
"$BATON" logs "$BORROWER" >"$TMP/borrower.logs"
grep -q "checkpointed: steps=" "$TMP/borrower.logs" \
  || fail "the preempted job's rank 0 did not checkpoint on request"
compare_runs reference borrower no-repeats
weights_identical reference borrower

echo "--- 3. SIGHUP: a bad queue file keeps the queues, a good one applies"
echo "queues: [{name: Bad Name}]" >"$TMP/queues.yaml"
kill -HUP "$COORDINATOR_PID"
_kept() { grep -q "the previous queues stay in force" "$TMP/coordinator.log"; }
wait_for 30 _kept
[[ $(queue_field prod 'q["nominal"]["slots"]') == 1 ]] || fail "the bad file changed the queues"
cat >"$TMP/queues.yaml" <<EOF
queues:
  - {name: research, cohort: lab, quota: {slots: 2}, users: ["*"]}
  - {name: prod, cohort: lab, quota: {slots: 3}, users: ["*"]}
EOF
kill -HUP "$COORDINATOR_PID"
_applied() { [[ $(queue_field prod 'q["nominal"]["slots"]') == 3 ]]; }
wait_for 30 _applied
echo "PASS"
