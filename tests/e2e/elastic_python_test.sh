#!/usr/bin/env bash
# Issue 15: a Python command job (examples/torchrun_ddp.py, PyTorch DDP over Gloo, using the
# in-script helper client/python/baton) declared `command: {elastic: true}`:
# * `baton submit --wait` shows the progress it reports (step, loss, samples/s);
# * SIGTERM to the worker of its rank 2 drains it: rank 0 gets SIGUSR1, saves at its next
#   step boundary and exits 75, and the job goes on at world size 2 (class planned);
# * a new worker joins: it scales back up to 3 the same way;
# * no step is lost or repeated, every step trained on exactly the samples of an
#   uninterrupted run at world size 3, and the weights match it (compare_runs in lib.sh:
#   within 1e-5 at the first checkpoint after the last resume, within 0.1 at the end).
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
STEPS=300

# python_job_yaml NAME MIN MAX: the example as an elastic command job on MIN..MAX workers,
# checkpointing every 25 steps into $TMP/NAME-ckpt, with its sample log kept there too
# (the rank may write only inside its spec's paths: see "Job isolation").
python_job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
command:
  argv: ["$PY", "torchrun_ddp.py"]
  working_dir: $EXAMPLES
  elastic: true
workers: {min: $2, max: $3}
checkpoint_dir: $TMP/$1-ckpt
budget: {max_steps: $STEPS}
env: {OMP_NUM_THREADS: "1", PYTHONDONTWRITEBYTECODE: "1", STEPS: "$STEPS", CHECKPOINT_EVERY: "25", STEP_SECONDS: "0.05", SAMPLE_LOG: "$TMP/$1-ckpt/samples"}
YAML
  mkdir -p "$TMP/$1-ckpt"
}

# move_sample_logs NAME: where compare_runs looks for them ($TMP/NAME-samples.<rank>).
move_sample_logs() {
  local f
  for f in "$TMP/$1-ckpt"/samples.*; do mv "$f" "$TMP/$1-samples.${f##*.}"; done
}

start_coordinator
start_worker w1
start_worker w2
start_worker w3
wait_for_workers 3

python_job_yaml reference 3 3
run_reference
cat "$TMP/reference.out"
grep -Eq "^step [0-9]+/$STEPS \([0-9]+%\)  loss [0-9.]+  [0-9]+ samples/s" "$TMP/reference.out" \
  || fail "submit --wait showed no progress line"
REF=$("$BATON" jobs -o json | json_get '[j["id"] for j in d["jobs"] if j["spec"]["name"] == "reference"][0]')
[[ $(job_step "$REF") == "$STEPS" ]] || fail "the reference reported step $(job_step "$REF")"

python_job_yaml elastic 2 3
JOB=$("$BATON" submit "$TMP/elastic.yaml")
past_step() { (($(job_step "$JOB") >= $1)); }
drain_rank_worker "$JOB" 2 40

# The next generation runs at world size 2 and trains; then a fourth worker joins.
running_at() {
  [[ $(job_field "$JOB" "int(d['generation']), len(d['ranks']), d['state']") == "$1 $2 JOB_STATE_RUNNING" ]]
}
wait_for 60 running_at $((GEN + 1)) 2
DRAINED_AT=$(job_step "$JOB")
wait_for 60 past_step $((DRAINED_AT + 10))
start_worker w4
wait_for 60 running_at $((GEN + 2)) 3

wait_for 120 job_succeeded "$JOB"
"$BATON" describe "$JOB" | tee "$TMP/describe.out"
grep -q "planned: *2$" "$TMP/describe.out" || fail "describe does not count two resizes"
grep -q "infra: *0/" "$TMP/describe.out" || fail "a resize used the infra budget"
grep -q "user: *0/" "$TMP/describe.out" || fail "a resize used the user budget"
F="d['restarts']['failures']"
[[ $(job_field "$JOB" "[f['failure_class'] for f in $F]") == "['FAILURE_CLASS_PLANNED', 'FAILURE_CLASS_PLANNED']" ]] \
  || fail "not two planned resizes: $(job_field "$JOB" "$F")"
job_field "$JOB" "$F[0]['cause']" | grep -q "leaves: it is draining (received SIGTERM)" \
  || fail "first resize: $(job_field "$JOB" "$F[0]['cause']")"
job_field "$JOB" "$F[1]['cause']" | grep -q "w4 can join: growing from 2 to 3 workers" \
  || fail "second resize: $(job_field "$JOB" "$F[1]['cause']")"
[[ $(job_step "$JOB") == "$STEPS" ]] || fail "the job reported step $(job_step "$JOB")"
"$BATON" logs "$JOB" >"$TMP/logs.out"
[[ $(grep -c "checkpointed: step=.* (requested); exiting 75" "$TMP/logs.out") == 2 ]] \
  || { cat "$TMP/logs.out"; fail "rank 0 did not checkpoint on both requests"; }
grep -q "resumed: step=[0-9]* from ckpt-.* at world size 2" "$TMP/logs.out" \
  || fail "no resume at world size 2"
grep -q "resumed: step=[0-9]* from ckpt-.* at world size 3" "$TMP/logs.out" \
  || fail "no resume at world size 3"

move_sample_logs reference
move_sample_logs elastic
compare_runs reference elastic no-repeats
echo "PASS"
