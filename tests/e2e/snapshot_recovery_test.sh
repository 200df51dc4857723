#!/usr/bin/env bash
# Issue 29: recovery that loses no step, through the whole system. A 2-rank job on 3 workers
# (each with its own work_dir, so its own snapshot directory, as on separate hosts) takes an
# in-memory snapshot every step. (1) Rank 1 is SIGKILLed at a random step: generation 2
# resumes from the newest snapshot, at exactly the last step generation 1 completed (no
# checkpoint on disk exists yet). (2) The worker daemon of rank 1 is SIGKILLed, so the copy
# on its host is gone with it: generation 3 (on the two other workers) resumes from the
# survivor's copy, again at the last completed step. (3) Both workers of the job are
# SIGKILLed at once, taking every in-memory copy: generation 4 (on two fresh workers) falls
# back to the disk checkpoint (written from a snapshot at step 150), says so, and loses the
# steps since it. The final weights are bit-identical to an uninterrupted run.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

make_data "$TMP/mnist"
start_coordinator
start_worker w1
start_worker w2
start_worker w3
wait_for_workers 3

snapshot_job_yaml reference 1200 150
run_reference

# rank0_log JOB GEN: generation GEN's rank 0 stdout, on whichever worker ran it.
rank0_log() { ls "$TMP"/w?/jobs/"$1"/gen-"$2"/rank-0/stdout.log 2>/dev/null | head -1; }
# last_step JOB GEN: the last step generation GEN's rank 0 completed (it logs every step).
last_step() { sed -n 's/^step \([0-9]*\)\/.*/\1/p' "$(rank0_log "$1" "$2")" | tail -1; }
# restored JOB GEN: generation GEN's rank 0 has logged where it resumed.
restored() {
  local log
  log=$(rank0_log "$1" "$2")
  [[ -n $log ]] && grep -q "^restored in-memory snapshot of generation \|^no in-memory snapshot " "$log"
}
# expect_resumed_from_memory JOB GEN STEP: generation GEN restored the in-memory snapshot of STEP.
expect_resumed_from_memory() {
  wait_for 60 restored "$1" "$2"
  grep -q "^restored in-memory snapshot of generation .* at step $3 " "$(rank0_log "$1" "$2")" ||
    { cat "$(rank0_log "$1" "$2")"; fail "generation $2 did not resume at step $3 from memory"; }
}
generation_past() { [[ $(job_field "$1" 'd["generation"]') -gt $2 && $(job_step "$1") -gt $3 ]]; }

snapshot_job_yaml killed 1200 150
JOB=$("$BATON" submit "$TMP/killed.yaml")
KILL_AT=$((40 + RANDOM % 50))
at_step() { [[ $(job_step "$JOB") -ge $KILL_AT ]]; }
wait_for 120 at_step

# (1) A rank dies.
read -r GEN PID < <(generation_and_pid "$JOB" 1)
kill -KILL "$PID" || fail "rank 1 (pid $PID) of generation $GEN was already gone"
after_rank_kill() { generation_past "$JOB" "$GEN" "$KILL_AT"; }
wait_for 120 after_rank_kill
LAST=$(last_step "$JOB" "$GEN")
NEXT=$((GEN + 1))
expect_resumed_from_memory "$JOB" "$NEXT" "$LAST"
echo "rank 1 killed after step $KILL_AT: generation $NEXT resumed at step $LAST, no step lost"
compgen -G "$TMP/killed-ckpt/ckpt-*.pt" >/dev/null && fail "a disk checkpoint exists; the test means to show memory alone"

# (2) A worker daemon dies, and the snapshot copy on its host with it.
GEN=$NEXT
at_more() { [[ $(job_step "$JOB") -ge $((LAST + 30)) ]]; }
wait_for 120 at_more
WORKER=$(worker_pid_of "$JOB" 1)
kill -KILL "$WORKER"
STEP=$(job_step "$JOB")
after_worker_kill() { generation_past "$JOB" "$GEN" "$STEP"; }
wait_for 120 after_worker_kill
LAST=$(last_step "$JOB" "$GEN")
NEXT=$((GEN + 1))
expect_resumed_from_memory "$JOB" "$NEXT" "$LAST"
echo "worker daemon of rank 1 killed: generation $NEXT resumed at step $LAST, no step lost"

# (3) Both workers of the job die at once: no copy newer than the disk checkpoint is left.
GEN=$NEXT
start_worker w4
start_worker w5
wait_for_workers 4
past_disk() { [[ $(job_step "$JOB") -ge 170 ]] && compgen -G "$TMP/killed-ckpt/ckpt-*.pt" >/dev/null; }
wait_for 120 past_disk
WORKER_A=$(worker_pid_of "$JOB" 0)
WORKER_B=$(worker_pid_of "$JOB" 1)
kill -KILL "$WORKER_A" "$WORKER_B"
STEP=$(job_step "$JOB")
after_both() { [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] && [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 120 after_both
NEXT=$(job_field "$JOB" 'd["generation"]')
DISK=$(ls "$TMP/killed-ckpt" | sed -n 's/^ckpt-0*\([0-9][0-9]*\)-g[0-9]*\.pt$/\1/p' | sort -n | tail -1)
wait_for 60 restored "$JOB" "$NEXT"
grep -q "^no in-memory snapshot newer than step $DISK on any rank: resuming from .*ckpt-0*$DISK-g[0-9]*\.pt" "$(rank0_log "$JOB" "$NEXT")" ||
  { cat "$(rank0_log "$JOB" "$NEXT")"; fail "generation $NEXT did not fall back to the disk checkpoint of step $DISK"; }
LAST=$(last_step "$JOB" "$GEN")
echo "both workers killed after step $STEP: generation $NEXT fell back to the disk checkpoint of step $DISK," \
  "$((LAST - DISK)) completed steps lost (the last was $LAST)"

wait_for 180 job_succeeded "$JOB"
weights_identical reference killed
echo "PASS"
