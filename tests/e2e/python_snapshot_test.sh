#!/usr/bin/env bash
# Issue 29, Python scripts too: examples/torchrun_ddp.py (PyTorch DDP over Gloo) calls
# baton.snapshot(state, step) after every step and baton.restore() at start. Rank 1 is
# SIGKILLed at a random step: generation 2 resumes from memory at the last step any rank
# completed (no disk checkpoint exists), every step trained on the reference's samples, no
# step twice but the one in flight, and the final weights equal an uninterrupted run's.
source "${TEST_SRCDIR}/baton/tests/e2e/lib.sh"
STEPS=300

python_job_yaml() {
  cat >"$TMP/$1.yaml" <<YAML
name: $1
command:
  argv: ["$PY", "torchrun_ddp.py"]
  working_dir: $EXAMPLES
workers: {min: 2, max: 2}
checkpoint_dir: $TMP/$1-ckpt
budget: {max_steps: $STEPS}
restart_policy: {backoff_initial: 0s}
env: {OMP_NUM_THREADS: "1", PYTHONDONTWRITEBYTECODE: "1", STEPS: "$STEPS", STEP_SECONDS: "0.02", SAMPLE_LOG: "$TMP/$1-ckpt/samples"}
YAML
  mkdir -p "$TMP/$1-ckpt"
}

start_coordinator
start_worker w1
start_worker w2
wait_for_workers 2

python_job_yaml reference
run_reference

python_job_yaml killed
JOB=$("$BATON" submit "$TMP/killed.yaml")
KILL_AT=$((60 + RANDOM % 120))
at_step() { [[ $(job_step "$JOB") -ge $KILL_AT ]]; }
wait_for 120 at_step
read -r GEN PID < <(generation_and_pid "$JOB" 1)
kill -KILL "$PID" || fail "rank 1 (pid $PID) was already gone"
wait_for 180 job_succeeded "$JOB"

NEXT=$((GEN + 1))
OUT=$(ls "$TMP"/w?/jobs/"$JOB"/gen-"$NEXT"/rank-0/stdout.log | head -1)
RESUMED=$(sed -n 's/^resumed: step=\([0-9]*\) from memory .*/\1/p' "$OUT")
[[ -n $RESUMED ]] || { cat "$OUT"; fail "generation $NEXT did not resume from memory"; }
compgen -G "$TMP/killed-ckpt/ckpt-*.pt" >/dev/null &&
  [[ $(ls "$TMP/killed-ckpt"/ckpt-*.pt | wc -l) -gt 1 ]] && fail "disk checkpoints besides the final one"

"$PY" - "$TMP" "$GEN" "$RESUMED" <<'PY' || fail "sample logs or weights differ"
import glob, sys, torch
tmp, gen, resumed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def entries(name):
    out = {}  # (step, rank) -> [(generation, ids)]
    for path in glob.glob(f"{tmp}/{name}-ckpt/samples.*"):
        for line in open(path):
            g, step, rank, ids = line.split()
            out.setdefault((int(step), int(rank)), []).append((int(g), ids))
    return out
ref, run = entries("reference"), entries("killed")
assert sorted(ref) == sorted(run), "steps or ranks differ"
logged_before = max(s for (s, r), l in run.items() if any(g == gen for g, _ in l))
assert resumed >= logged_before - 1, (resumed, logged_before)
for key, logged in run.items():
    assert max(logged)[1] == ref[key][0][1], key
    if len(logged) > 1:
        assert key[0] == resumed + 1, (key, logged, "trained twice, not the step in flight")
a, b = (torch.load(f"{tmp}/{n}-ckpt/final.pt") for n in ("reference", "killed"))
assert all(torch.equal(a[k], b[k]) for k in a), "final weights differ"
print(f"killed at step >= {logged_before - 1}; resumed at {resumed} from memory; weights identical")
PY
echo "PASS"
