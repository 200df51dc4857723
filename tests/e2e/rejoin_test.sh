#!/usr/bin/env bash
# Issue 29: healthy ranks stay alive, through the whole system. A 2-rank job of the built-in
# trainer on 2 workers (as on separate hosts), an in-memory snapshot every step. Rank 1 is
# SIGKILLed at a random step: rank 0's process is not restarted. It waits for the next
# generation, its worker keeps it when the coordinator stops generation 1 (the exit it
# reports says "kept alive"), and generation 2 takes it over: the same pid, told its part on
# its rejoin socket; only rank 1 starts anew. Generation 2 resumes from the newest snapshot,
# at exactly the last step generation 1 completed, and the final weights are bit-identical
# to an uninterrupted run. Then it happens again (generation 3): a rank that rejoined can
# rejoin again.
#
# With the argument zero1 or zero2 the job shards its optimizer state (ZeRO): no snapshot
# can be taken on the loss (the lost rank's shard is gone with it), so each generation
# resumes from the last periodic snapshot, taken every step: the last completed step, or
# the one before when the loss came while that step's snapshot was being gathered.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
MODE=${1:-}
[[ -z $MODE || $MODE == zero[12] ]] || fail "unknown mode '$MODE' (zero1, zero2 or none)"
# The steps a generation may resume before the last one completed.
SLACK=0

start_two_worker_cluster

snapshot_job_yaml reference 1000 100000
snapshot_job_yaml kept 1000 100000
if [[ -n $MODE ]]; then
  zero_job_yaml reference "${MODE#zero}"
  zero_job_yaml kept "${MODE#zero}"
  SLACK=1
fi
run_reference

# rank0_output JOB: rank 0's stdout over its generations, in order (a process that rejoined
# writes to its generation's log once its worker relabelled it, to the previous one before).
rank0_output() { cat $(ls "$TMP"/w?/jobs/"$1"/gen-*/rank-0/stdout.log | sort -t- -k2 -n) 2>/dev/null; }
# restored_at JOB GEN: the step at which rank 0 restored generation GEN's in-memory snapshot.
restored_at() { rank0_output "$1" | sed -n "s/^restored in-memory snapshot of generation $2 .* at step \([0-9]*\) .*/\1/p" | tail -1; }
# completed_before_loss JOB GEN: the last step rank 0 completed (it logs every step) before
# generation GEN lost its peer.
completed_before_loss() {
  # Reads to the end (quitting early would fail the pipeline with SIGPIPE).
  rank0_output "$1" | awk -v g="$2" '
    index($0, "baton-trainer: generation " g " lost a peer") == 1 { done = 1 }
    !done && /^step [0-9]+\// { split($2, a, "/"); s = a[1] }
    END { print s }'
}

JOB=$("$BATON" submit "$TMP/kept.yaml")

kill_and_rejoin() {
  local kill_at=$1 gen pid0 pid1 next step
  at_step() { [[ $(job_step "$JOB") -ge $kill_at ]]; }
  wait_for 120 at_step
  read -r gen pid0 < <(generation_and_pid "$JOB" 0)
  read -r _ pid1 < <(generation_and_pid "$JOB" 1)
  kill -KILL "$pid1" || fail "rank 1 (pid $pid1) of generation $gen was already gone"
  next=$((gen + 1))
  running_next() { [[ $(job_field "$JOB" 'd["generation"]') -ge $next ]] && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
  wait_for 120 running_next
  read -r _ now0 < <(generation_and_pid "$JOB" 0)
  [[ $now0 == "$pid0" ]] || fail "rank 0 was restarted (pid $pid0 -> $now0); it should have rejoined generation $next"
  alive "$pid0" || fail "rank 0 (pid $pid0) is gone"
  "$BATON" describe "$JOB" -o json | json_get "[e['message'] for e in d['events'] if 'kept alive' in e['message']]" |
    grep -q "rank 0 on worker w[12] was kept alive for the next generation" ||
    fail "no event says rank 0 was kept: $("$BATON" describe "$JOB")"
  has_restored() { [[ -n $(restored_at "$JOB" "$gen") ]]; }
  wait_for 60 has_restored
  step=$(restored_at "$JOB" "$gen")
  last=$(completed_before_loss "$JOB" "$gen")
  [[ -n $last && $step -le $last && $step -ge $((last - SLACK)) ]] ||
    { rank0_output "$JOB" | tail -40; fail "generation $next resumed at step $step, not at the last step completed ($last, or up to $SLACK before)"; }
  echo "rank 1 killed after step $kill_at: rank 0 (pid $pid0) rejoined generation $next, which resumed at step $step from memory ($((last - step)) before the last step completed)"
}

kill_and_rejoin $((40 + RANDOM % 60))
kill_and_rejoin $(($(job_step "$JOB") + 30))

wait_for 180 job_succeeded "$JOB"
weights_identical reference kept
echo "PASS"
