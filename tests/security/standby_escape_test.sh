#!/usr/bin/env bash
# Attacks (issue 26, 2.2 and 2.3) on what the built-in trainer runs:
#  1. A command job whose argv[0] is the trainer's path (every rank sees it in `ps`) used
#     to be handed to a warm standby, which was not confined: it then wrote into another
#     job's directory. It must run fork/exec'd and confined like any command.
#  2. A trainer job's env with LD_PRELOAD (or another code-loading variable) would load the
#     tenant's library into the trainer, and into every standby refilled with that env:
#     refused at submit, naming the variable.
#  3. trainer.torchscript_path runs the module's own code: on a cluster that allows
#     command jobs only to admins (--command_job_roles=admin), a submitter may not use it.
source "${TEST_SRCDIR}/baton/tests/security/lib.sh"

COORDINATOR_FLAGS=(--command_job_roles=submitter,admin)
start_coordinator
start_worker w1  # with its warm standby trainer (the default)
wait_for_workers 1
make_data "$TMP/mnist"
# Wait for the standby to be ready, so that the attack would find it.
_standby_ready() {
  curl -sf "http://127.0.0.1:$(cat "$TMP/w1.metrics_port")/metrics" |
    grep -Eq '^baton_worker_standby_trainers\{state="loaded"\} 1'
}
wait_for 60 _standby_ready

# 1. Bob's victim job, then alice's command job with the trainer's argv[0] writing there.
cat >"$TMP/victim.yaml" <<YAML
name: victim
command: {argv: ["/bin/sleep", "1000"]}
workers: {min: 1, max: 1}
YAML
VICTIM=$(submit_as bob "$TMP/victim.yaml")
_running() { [[ $(job_state "$VICTIM") == JOB_STATE_RUNNING ]]; }
wait_for 60 _running
as bob cancel "$VICTIM" >/dev/null
wait_for 60 job_done "$VICTIM"
VICTIM_DIR=$TMP/w1/jobs/$VICTIM
[[ -d $VICTIM_DIR ]] || fail "no directory of the victim job at $VICTIM_DIR"
cat >"$TMP/escape.yaml" <<YAML
name: escape
command:
  argv: ["$TRAINER_BIN", "--model=mlp", "--dataset=mnist", "--data_dir=$TMP/mnist",
         "--max_steps=1", "--checkpoint_dir=$VICTIM_DIR/planted"]
workers: {min: 1, max: 1}
restart_policy: {max_user_restarts: 0}
YAML
ESCAPE=$(submit_as alice "$TMP/escape.yaml")
wait_for 120 job_done "$ESCAPE"
as alice logs "$ESCAPE" >"$TMP/escape.out" || true
cat "$TMP/escape.out"
[[ ! -e $VICTIM_DIR/planted ]] || fail "alice's job wrote into bob's job directory"
grep -q "launched $TRAINER_BIN in standby" "$TMP/w1.log" \
  && fail "a command job was handed to a warm standby"

# 2. Code-loading variables in a trainer job's env.
for var in LD_PRELOAD LD_AUDIT NCCL_NET_PLUGIN CUDA_INJECTION64_PATH; do
  cat >"$TMP/preload.yaml" <<YAML
name: preload
trainer: {model: mlp, dataset: mnist, data_dir: $TMP/mnist}
env: {$var: /tmp/evil.so}
workers: {min: 1}
budget: {max_steps: 1}
YAML
  rc=0
  as alice submit "$TMP/preload.yaml" >"$TMP/preload.out" 2>&1 || rc=$?
  cat "$TMP/preload.out"
  ((rc != 0)) || fail "a trainer job with $var was accepted"
  grep -q "env.$var: makes the built-in trainer load other code" "$TMP/preload.out" \
    || fail "the refusal does not name env.$var"
done

# 3. TorchScript needs a role allowed to run commands.
kill -TERM "$COORDINATOR_PID"
wait "$COORDINATOR_PID" || true
COORDINATOR_FLAGS=(--command_job_roles=admin)
start_coordinator "$COORDINATOR_PORT"
cat >"$TMP/script.yaml" <<YAML
name: scripted
trainer: {model: torchscript, dataset: mnist, data_dir: $TMP/mnist, torchscript_path: $TMP/model.pt}
workers: {min: 1}
budget: {max_steps: 1}
YAML
rc=0
as alice submit "$TMP/script.yaml" >"$TMP/script.out" 2>&1 || rc=$?
cat "$TMP/script.out"
((rc != 0)) || fail "a submitter's TorchScript job was accepted"
grep -q "may not submit trainer.torchscript_path" "$TMP/script.out" || fail "unclear refusal"
echo "PASS"
