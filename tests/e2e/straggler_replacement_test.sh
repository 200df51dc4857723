#!/usr/bin/env bash
# A straggling worker is replaced at the job's next restart when a healthy spare exists,
# with real processes: of three workers, w2 runs its ranks at nice 19 on a core that a busy
# loop keeps occupied, so its rank's own work per step is several times the others'. A
# two-worker job lands on w1 and w2 (w3 stays a spare); once the coordinator has found rank
# 1 straggling (the Straggler event), rank 0 is SIGKILLed: the next generation runs on w1
# and w3, and the StragglerReplaced event names w2 and its evidence (`baton describe`).
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"

(($(nproc) >= 2)) || { echo "SKIP: needs 2 cores"; exit 0; }
make_data "$TMP/mnist"
start_coordinator
start_worker w1
# w2: every rank on core 1 at nice 19, with a busy loop there at nice 0.
cat >"$TMP/slow_trainer.sh" <<SH
#!/bin/sh
exec nice -n 19 taskset -c 1 "$TRAINER_BIN" "\$@"
SH
chmod +x "$TMP/slow_trainer.sh"
taskset -c 1 bash -c 'while :; do :; done' &
EXTRA_PIDS+=($!)
TRAINER_BIN="$TMP/slow_trainer.sh" start_worker w2
wait_for_workers 2
start_worker w3
wait_for_workers 3

cat >"$TMP/job.yaml" <<YAML
name: straggler
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist, batch_size: 32, lr: 0.05, seed: 7, hidden: [128], log_every: 5, threads: 1, checkpoint_every: 20}
workers: {min: 2}
budget: {max_steps: 100000}
checkpoint_dir: $TMP/ckpt
restart_policy: {backoff_initial: 0s}
YAML
mkdir -p "$TMP/ckpt"
JOB=$("$BATON" submit "$TMP/job.yaml")
running() { [[ $(job_state "$JOB") == JOB_STATE_RUNNING ]]; }
wait_for 120 running
gang() { job_field "$JOB" 'sorted(set(r["worker_id"] for r in d["ranks"]))'; }
[[ $(gang) == "['w1', 'w2']" ]] || fail "first gang: $(gang)"
straggling() {
  job_field "$JOB" "any(e.get('reason') == 'Straggler' and 'rank 1 ' in e.get('message', '') for e in d['events'])" | grep -qx True
}
wait_for 180 straggling

read -r GEN PID < <(generation_and_pid "$JOB" 0)
kill -KILL "$PID"
restarted() { [[ $(job_field "$JOB" 'd["generation"]') -gt $GEN ]] && running; }
wait_for 120 restarted
[[ $(gang) == "['w1', 'w3']" ]] || fail "the straggler was not replaced: gang $(gang)"
"$BATON" describe "$JOB" >"$TMP/describe.out"
grep -q "StragglerReplaced.*worker w2 left out of generation $((GEN + 1)) as a straggler (rank 1 at [0-9.]*x the median step time" "$TMP/describe.out" \
  || { cat "$TMP/describe.out"; fail "describe shows no StragglerReplaced naming w2"; }
"$BATON" cancel "$JOB" >/dev/null
echo "PASS"
