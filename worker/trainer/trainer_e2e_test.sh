#!/usr/bin/env bash
# End-to-end test of baton-trainer as real processes, launched the way the worker daemon
# does: torchrun environment, BATON_METRICS_FD on an inherited descriptor.
#   args: <make_mnist> <baton-trainer>
set -euo pipefail

source worker/trainer/testing/e2e_lib.sh "$@"

"$MAKE_MNIST" --out_dir=data --train_size=2000 --test_size=500 --seed=5 > /dev/null

# ---- 1. Two ranks train and agree ------------------------------------------------------
PORT=$(free_port)
pids=()
for rank in 0 1; do
  env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" BATON_JOB_ID=j-e2e BATON_GENERATION=1 \
    BATON_METRICS_FD=3 \
    timeout 120 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
      --lr=0.05 --momentum=0.9 --seed=1 --hidden=64,32 --log_every=20 --threads=1 \
      --max_steps=60 --checkpoint_dir=ckpt --rendezvous_timeout=60s \
      3> "metrics.$rank.jsonl" > "out.$rank.txt" 2> "err.$rank.txt" &
  pids+=($!)
done
for i in 0 1; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  [[ $rc -eq 0 ]] || { cat "out.$i.txt" "err.$i.txt" >&2; fail "rank $i exited $rc"; }
done
cat out.0.txt
grep -q '^done: steps=60 loss=[0-9.]* accuracy=[0-9.]* eval_accuracy=[0-9.]* skipped=0 wall_s=[0-9.]* peak_rss_mib=[1-9][0-9.]*$' out.0.txt ||
  fail "no summary line from rank 0"
grep -q '^done: steps=60 ' out.1.txt || fail "no summary line from rank 1"
# Both ranks on this host: the default CPU backend is shared memory.
grep -q '^baton-trainer: rank 0/2 .* on cpu (shm)' out.0.txt || fail "rank 0 did not use shm"
[[ ! -e ckpt/final.pt.tmp.* ]] || fail "temporary checkpoint left behind"
[[ -s ckpt/ckpt-00000060-g1.pt ]] || fail "no training-state checkpoint of the last step"
[[ $(cat ckpt/gen-00000001.start) == $'baton-generation-start-v1\njob j-e2e\ngeneration 1\nresumed_step 0' ]] ||
  fail "no start record of generation 1"

"$PY" - <<'PY' || fail "metrics or checkpoint check failed"
import json, torch
required = {"step", "epoch", "loss", "accuracy", "samples_per_sec", "lr", "time_step_s",
            "time_data_s", "time_forward_s", "time_backward_s", "time_comm_wait_s",
            "time_optimizer_s", "grad_norm", "comm_bytes"}
# MLP 784-64-32-10: every fp32 gradient all-reduced once per step.
params = 784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10
evals = []
for rank in (0, 1):
    lines = open(f"metrics.{rank}.jsonl").read().splitlines()
    # Heartbeat lines (contract.h) are checked below; the metric lines are the rest.
    beats = [json.loads(l) for l in lines if '"beat"' in l]
    points = [json.loads(l) for l in lines if '"beat"' not in l]
    assert beats and [b["beat"] for b in beats] == list(range(1, len(beats) + 1)), beats
    assert all({"step", "phase", "phase_s", "coll", "waiting"} <= set(b) for b in beats), beats
    assert [p["step"] for p in points] == [20, 40, 60], points
    for p in points:
        assert required <= set(p), p
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in p.values()), p
        assert p["lr"] == 0.05 and p["samples_per_sec"] > 0 and 0 <= p["accuracy"] <= 1, p
        assert p["comm_bytes"] == 4 * params, p
    assert "eval_accuracy" not in points[0], points[0]
    assert points[-1]["loss"] < points[0]["loss"], points
    evals.append(points[-1]["eval_accuracy"])
assert evals[0] == evals[1] and evals[0] > 0.5, evals

weights = torch.load("ckpt/final.pt")
assert isinstance(weights, dict), type(weights)
shapes = {k: tuple(v.shape) for k, v in weights.items()}
assert all(isinstance(v, torch.Tensor) for v in weights.values())
assert shapes == {"layers.0.weight": (64, 784), "layers.0.bias": (64,),
                  "layers.1.weight": (32, 64), "layers.1.bias": (32,),
                  "layers.2.weight": (10, 32), "layers.2.bias": (10,)}, shapes
print("metrics and checkpoint OK:", shapes)
PY

# ---- 2. A restarted gang resumes from the last checkpoint (over Gloo); every option parses
PORT=$(free_port)
pids=()
for rank in 0 1; do
  env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" BATON_JOB_ID=j-e2e BATON_GENERATION=2 \
    BATON_METRICS_FD=3 \
    timeout 120 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
      --lr=0.05 --momentum=0.9 --seed=1 --hidden=64,32 --log_every=20 --threads=1 \
      --max_steps=80 --checkpoint_dir=ckpt --checkpoint_every=20 --keep_checkpoints=2 \
      --precision=fp32 --accumulation_steps=1 --bucket_cap_mb=0.01 --grad_compression=none \
      --max_grad_norm=0 --rendezvous_timeout=60s --cpu_backend=gloo \
      3> "resume.$rank.jsonl" > "resume.$rank.txt" 2> "resume-err.$rank.txt" &
  pids+=($!)
done
for i in 0 1; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  [[ $rc -eq 0 ]] || { cat "resume.$i.txt" "resume-err.$i.txt" >&2; fail "resumed rank $i exited $rc"; }
done
grep -q '^restored ckpt/ckpt-00000060-g1.pt at step 60' resume.0.txt || { cat resume.0.txt >&2; fail "rank 0 did not resume"; }
grep -q '^restored ckpt/ckpt-00000060-g1.pt at step 60' resume.1.txt || fail "rank 1 did not resume"
grep -q '^done: steps=80 ' resume.0.txt || fail "no summary line after resuming"
grep -q '^baton-trainer: rank 0/2 .* on cpu (gloo)' resume.0.txt || fail "--cpu_backend=gloo ignored"
"$PY" - <<'PY' || fail "resumed metrics check failed"
import json
for rank in (0, 1):
    points = [json.loads(l) for l in open(f"resume.{rank}.jsonl") if '"beat"' not in l]
    assert [p["step"] for p in points] == [80], points
PY
ls ckpt/ckpt-*.pt | wc -l | grep -qx 2 || { ls ckpt >&2; fail "keep_checkpoints=2 not honoured"; }

# One process through every mixed-precision / optimiser / schedule flag, on synthetic data.
BATON_METRICS_FD=3 timeout 120 "$TRAINER" --model=mlp --dataset=synthetic --synthetic_samples=512 \
  --num_classes=4 --image_size=8 --hidden=32 --batch_size=16 --max_steps=12 --log_every=6 \
  --precision=bf16 --accumulation_steps=2 --grad_compression=bf16 --max_grad_norm=1.5 \
  --optimizer=adamw --lr=0.003 --weight_decay=0.01 --adam_beta1=0.9 --adam_beta2=0.99 \
  --adam_eps=1e-7 --lr_schedule=cosine --warmup_steps=3 --min_lr=0.0001 --base_batch=32 \
  --loader_threads=1 --prefetch_batches=2 --device=cpu \
  3> mixed.jsonl > mixed.txt 2>&1 || { cat mixed.txt >&2; fail "mixed-precision run failed"; }
"$PY" - <<'PY' || { cat mixed.txt >&2; fail "mixed-precision metrics check failed"; }
import json
points = [json.loads(l) for l in open("mixed.jsonl") if '"beat"' not in l]
assert [p["step"] for p in points] == [6, 12], points
assert points[0]["lr"] > points[1]["lr"] > 0, points  # cosine decay after warmup
assert all(p["grad_norm"] > 0 for p in points), points
PY
BATON_METRICS_FD=3 timeout 120 "$TRAINER" --model=mlp --dataset=synthetic --synthetic_samples=256 \
  --num_classes=4 --image_size=8 --hidden=16 --batch_size=16 --max_steps=4 --log_every=2 \
  --precision=fp16 --device=cpu 3> fp16.jsonl > fp16.txt 2>&1 || { cat fp16.txt >&2; fail "fp16 run failed"; }
"$PY" - <<'PY' || { cat fp16.txt >&2; fail "fp16 metrics check failed"; }
import json
points = [json.loads(l) for l in open("fp16.jsonl") if '"beat"' not in l]
assert all(p["loss_scale"] == 65536 and p["skipped_steps"] == 0 for p in points), points
PY

# ---- 3. Failures exit with the contract's code and one line on stderr ------------------
expect_exit() {  # expect_exit CODE PATTERN -- command...
  local want=$1 pattern=$2; shift 3
  local rc=0
  "$@" > /dev/null 2> err.txt || rc=$?
  [[ $rc -eq $want ]] || { cat err.txt >&2; fail "$* exited $rc, want $want"; }
  # Exactly one error line of ours, and it is the last line (LibTorch's own log lines,
  # e.g. from c10d's socket code, may come before it).
  [[ $(grep -c '^baton-trainer: ' err.txt) -eq 1 ]] || { cat err.txt >&2; fail "want one error line"; }
  tail -n 1 err.txt | grep -q "^baton-trainer: .*$pattern" ||
    { cat err.txt >&2; fail "last stderr line lacks '$pattern'"; }
}
expect_exit 2 "unknown flag --no_such_flag" -- "$TRAINER" --data_dir=data --max_steps=1 --no_such_flag=1
expect_exit 2 "--batch_size=abc" -- "$TRAINER" --data_dir=data --max_steps=1 --batch_size=abc
expect_exit 2 "--model: 'resnet' is not supported" -- "$TRAINER" --data_dir=data --max_steps=1 --model=resnet
expect_exit 2 "--precision: 'fp8' is not supported" -- "$TRAINER" --data_dir=data --max_steps=1 --precision=fp8
expect_exit 2 "--grad_compression: 'int8' is not supported" -- "$TRAINER" --data_dir=data --max_steps=1 --grad_compression=int8
expect_exit 2 "--accumulation_steps: 0 is out of range" -- "$TRAINER" --data_dir=data --max_steps=1 --accumulation_steps=0
expect_exit 2 "--keep_checkpoints: 5000 is out of range; must be 1..1000" -- "$TRAINER" --data_dir=data --max_steps=1 --keep_checkpoints=5000
expect_exit 2 "--activation_checkpointing: 'blocks' is not supported by --model=mlp" -- "$TRAINER" --data_dir=data --max_steps=1 --activation_checkpointing=blocks
expect_exit 2 "--zero_offload_optimizer: true needs --zero_stage 1 or 2" -- "$TRAINER" --data_dir=data --max_steps=1 --zero_offload_optimizer=true
expect_exit 2 "--device=tpu" -- "$TRAINER" --data_dir=data --max_steps=1 --device=tpu
expect_exit 2 "max_epochs" -- "$TRAINER" --data_dir=data
expect_exit 2 "RANK=5" -- env WORLD_SIZE=2 RANK=5 "$TRAINER" --data_dir=data --max_steps=1
expect_exit 3 "nowhere/train-images-idx3-ubyte" -- "$TRAINER" --data_dir=nowhere --max_steps=1
head -c 1000 data/train-images-idx3-ubyte > truncated-images
mkdir -p corrupt && cp data/train-labels-idx1-ubyte corrupt/ && mv truncated-images corrupt/train-images-idx3-ubyte
expect_exit 3 "truncated" -- "$TRAINER" --data_dir=corrupt --max_steps=1
DEAD_PORT=$(free_port)  # Nothing listens there.
expect_exit 4 "rendezvous at 127.0.0.1:$DEAD_PORT failed" -- \
  env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$DEAD_PORT" \
  "$TRAINER" --data_dir=data --max_steps=1 --rendezvous_timeout=2s

# ---- 4. SIGTERM stops a run promptly with 143 ------------------------------------------
BATON_METRICS_FD=3 "$TRAINER" --data_dir=data --max_steps=1000000 --log_every=1 \
  3> sigterm.jsonl > sigterm.out 2>&1 &
pid=$!
# A metric line, not just a heartbeat: the run is training.
has_metric_line() { grep -q '"loss"' "$1" 2>/dev/null; }
for _ in $(seq 600); do has_metric_line sigterm.jsonl && break; sleep 0.1; done  # Poll, 60 s deadline.
has_metric_line sigterm.jsonl || fail "no metric line before SIGTERM"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[[ $rc -eq 143 ]] || { cat sigterm.out >&2; fail "SIGTERM exit $rc, want 143"; }
grep -q '^stopped: steps=' sigterm.out || fail "no stopped summary"

# ---- 5. SIGUSR1: rank 0 checkpoints at the next step boundary and leaves with 75; the
# gang restarted from that checkpoint loses no step ----------------------------------------
PORT=$(free_port)
pids=()
for rank in 0 1; do
  env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" BATON_JOB_ID=j-usr1 BATON_GENERATION=1 \
    BATON_METRICS_FD=3 \
    timeout 120 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
      --seed=1 --hidden=64,32 --log_every=1 --threads=1 --max_steps=1000000 \
      --checkpoint_dir=usr1 --rendezvous_timeout=60s --collective_timeout=20s \
      3> "usr1.$rank.jsonl" > "usr1.$rank.txt" 2> "usr1-err.$rank.txt" &
  pids+=($!)
done
for _ in $(seq 600); do has_metric_line usr1.0.jsonl && break; sleep 0.1; done  # Poll, 60 s deadline.
has_metric_line usr1.0.jsonl || fail "no metric line before SIGUSR1"
# The trainers are the children of `timeout`, which must not get the signal itself.
kill -USR1 "$(pgrep -P "${pids[1]}")"  # Ignored by rank 1.
kill -USR1 "$(pgrep -P "${pids[0]}")"
rc0=0; wait "${pids[0]}" || rc0=$?
rc1=0; wait "${pids[1]}" || rc1=$?
[[ $rc0 -eq 75 ]] || { cat usr1.0.txt usr1-err.0.txt >&2; fail "rank 0 exited $rc0 after SIGUSR1, want 75"; }
[[ $rc1 -eq 4 ]] || { cat usr1.1.txt usr1-err.1.txt >&2; fail "rank 1 exited $rc1 after rank 0 left, want 4"; }
saved=$(sed -n 's/^checkpointed: steps=\([0-9]*\) .*/\1/p' usr1.0.txt)
[[ -n $saved ]] || { cat usr1.0.txt >&2; fail "no checkpointed summary"; }
last_logged=$(grep -v '"beat"' usr1.0.jsonl | tail -n 1 | "$PY" -c 'import json,sys; print(int(json.load(sys.stdin)["step"]))')
[[ $last_logged -eq $saved ]] || fail "rank 0 logged step $last_logged but checkpointed $saved"
[[ -s usr1/ckpt-$(printf %08d "$saved")-g1.pt ]] || { ls usr1 >&2; fail "no checkpoint of step $saved"; }
PORT=$(free_port)
pids=()
for rank in 0 1; do
  env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" BATON_JOB_ID=j-usr1 BATON_GENERATION=2 \
    timeout 120 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
      --seed=1 --hidden=64,32 --log_every=1 --threads=1 --max_steps=$((saved + 3)) \
      --checkpoint_dir=usr1 --rendezvous_timeout=60s > "usr1b.$rank.txt" 2>&1 &
  pids+=($!)
done
for i in 0 1; do wait "${pids[$i]}" || { cat usr1b.*.txt >&2; fail "restarted rank $i failed"; }; done
grep -q "^restored usr1/ckpt-$(printf %08d "$saved")-g1.pt at step $saved" usr1b.0.txt ||
  { cat usr1b.0.txt >&2; fail "the restarted gang did not resume at step $saved"; }

# ---- 6. Warm standby (contract/standby_protocol.h): `--standby` waits for its request on
# stdin; EOF releases it silently; a gang started through standbys trains exactly like section 1's ----
rc=0
"$TRAINER" --standby < /dev/null > released.txt 2>&1 || rc=$?
[[ $rc -eq 0 && ! -s released.txt ]] || { cat released.txt >&2; fail "released standby exited $rc"; }

# handoff ENV_FILE ARGV...: one request on stdout (environment from a NUL-separated file,
# working directory $PWD), written the way baton-worker's StandbyLauncher writes it.
handoff() {
  "$PY" - "$@" <<'PY'
import os, struct, sys
env = [e for e in open(sys.argv[1], "rb").read().split(b"\0") if e]
argv = [a.encode() for a in sys.argv[2:]]
fields = [str(len(argv)).encode(), *argv, str(len(env)).encode(), *env, os.getcwd().encode()]
payload = b"".join(f + b"\0" for f in fields)
sys.stdout.buffer.write(b"BSR1" + struct.pack("=I", len(payload)) + payload)
PY
}
# The standbys' stdin is a FIFO opened read-write, so opening it never blocks.
pids=()
for rank in 0 1; do
  rm -f "req.$rank" && mkfifo "req.$rank"
  "$TRAINER" --standby 0<>"req.$rank" 3> "standby.$rank.jsonl" > "standby.$rank.txt" \
    2> "standby-err.$rank.txt" &
  pids+=($!)
done
# Both must be blocked in read(0, ...): LibTorch is loaded and initialised before the request.
for pid in "${pids[@]}"; do
  waiting=
  for _ in $(seq 600); do  # Poll, 60 s deadline.
    read -r nr fd _ < "/proc/$pid/syscall" 2>/dev/null || true
    if [[ ${nr:-} == 0 && ${fd:-} == 0x0 ]]; then waiting=1; break; fi
    sleep 0.1
  done
  [[ -n $waiting ]] || fail "standby $pid is not waiting for its request"
done
PORT=$(free_port)
for rank in 0 1; do
  (export RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
     MASTER_ADDR=127.0.0.1 MASTER_PORT="$PORT" BATON_JOB_ID=j-e2e BATON_GENERATION=1 \
     BATON_METRICS_FD=3 && env -0 > "env.$rank")
  handoff "env.$rank" "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
    --lr=0.05 --momentum=0.9 --seed=1 --hidden=64,32 --log_every=20 --threads=1 \
    --max_steps=60 --checkpoint_dir=ckpt-standby --rendezvous_timeout=60s > "req.$rank"
done
for i in 0 1; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  [[ $rc -eq 0 ]] || { cat "standby.$i.txt" "standby-err.$i.txt" >&2; fail "standby rank $i exited $rc"; }
done
grep -q '^done: steps=60 ' standby.0.txt || { cat standby.0.txt >&2; fail "no summary line from the standby gang"; }
grep -q '^baton-trainer: rank 1/2 .* on cpu (shm)' standby.1.txt || fail "standby rank 1 did not get its environment"
"$PY" - <<'PY' || fail "the standby-started gang trained differently from the cold one"
import json
keys = ("step", "epoch", "loss", "accuracy", "lr", "grad_norm", "comm_bytes", "eval_accuracy")
for rank in (0, 1):
    cold = [json.loads(l) for l in open(f"metrics.{rank}.jsonl") if '"beat"' not in l]
    warm = [json.loads(l) for l in open(f"standby.{rank}.jsonl") if '"beat"' not in l]
    assert [[p.get(k) for k in keys] for p in warm] == [[p.get(k) for k in keys] for p in cold], (warm, cold)
print("standby gang trained like the cold one; losses:", [p["loss"] for p in warm])
PY

# ---- 7. Split brain (checkpoint/checkpoint_manager.h): generation 2 is cut off (SIGSTOP, as by a
# partition) while it checkpoints; generation 3 resumes from its newest file and trains on in
# the same directory; thawed, generation 2 is refused at its next checkpoint and exits
# naming generation 3, having replaced or deleted none of generation 3's files -------------
SPLIT_FLAGS=(--model=mlp --dataset=mnist --data_dir=data --batch_size=32 --seed=1
  --hidden=64,32 --threads=1 --log_every=1000 --checkpoint_every=5 --checkpoint_dir=split)
BATON_GENERATION=2 timeout 120 "$TRAINER" "${SPLIT_FLAGS[@]}" --max_steps=1000000 \
  > split2.out 2> split2.err &
pid=$!
gen2_saved() { compgen -G "split/ckpt-*-g2.pt" > /dev/null; }
for _ in $(seq 600); do gen2_saved && break; sleep 0.1; done  # Poll, 60 s deadline.
gen2_saved || { cat split2.out split2.err >&2; fail "generation 2 wrote no checkpoint"; }
stale=$(pgrep -P "$pid")  # The trainer, not `timeout`.
kill -STOP "$stale"
# steps_of GENERATION: the steps of its checkpoint files in split/, ascending.
steps_of() { ls split | sed -n "s/^ckpt-0*\([0-9][0-9]*\)-g$1\.pt\$/\1/p" | sort -n; }
newest=$(steps_of 2 | tail -n 1)
BATON_GENERATION=3 timeout 120 "$TRAINER" "${SPLIT_FLAGS[@]}" --max_steps=$((newest + 10)) \
  > split3.out 2>&1 || { cat split3.out >&2; fail "generation 3 failed"; }
grep -q "^restored split/ckpt-$(printf %08d "$newest")-g2.pt at step $newest" split3.out ||
  { cat split3.out >&2; fail "generation 3 did not resume from generation 2's step $newest"; }
grep -q "^done: steps=$((newest + 10)) " split3.out || fail "generation 3 did not train on"
mkdir kept && cp split/*-g3.pt split/gen-00000003.start split/final.pt kept/
kill -CONT "$stale"
rc=0
wait "$pid" || rc=$?
[[ $rc -eq 3 ]] || { cat split2.out split2.err >&2; fail "stale generation 2 exited $rc, want 3"; }
tail -n 1 split2.err |
  grep -q '^baton-trainer: FAILED_PRECONDITION: generation 2 is superseded by generation 3 ' ||
  { cat split2.err >&2; fail "generation 2's last line does not name generation 3"; }
for f in kept/*; do
  cmp -s "$f" "split/${f#kept/}" || { ls split >&2; fail "split/${f#kept/} replaced or deleted"; }
done
[[ $(steps_of 2 | tail -n 1) -eq $newest ]] || { ls split >&2; fail "generation 2 committed after $newest"; }
# A generation-2 process started now refuses at once; generation 4 resumes from generation 3.
expect_exit 3 "generation 2 is superseded by generation 3" -- \
  env BATON_GENERATION=2 "$TRAINER" "${SPLIT_FLAGS[@]}" --max_steps=1000000
BATON_GENERATION=4 timeout 120 "$TRAINER" "${SPLIT_FLAGS[@]}" --max_steps=$((newest + 15)) \
  > split4.out 2>&1 || { cat split4.out >&2; fail "generation 4 failed"; }
grep -q "^restored split/ckpt-$(printf %08d $((newest + 10)))-g3.pt at step $((newest + 10))" \
  split4.out || { cat split4.out >&2; fail "generation 4 did not resume from generation 3"; }

# ---- Fencing: the lease page (BATON_LEASE_FD) ----------------------------------------------
# with_lease SECONDS command...: runs the command with a lease page as the worker makes one,
# whose lease runs out SECONDS from now (negative: already ran out).
with_lease() {
  "$PY" - "$@" <<'PY'
import os, struct, sys, time
fd = os.memfd_create("baton-lease", 0)  # Inherited across exec.
os.write(fd, struct.pack("=q", time.clock_gettime_ns(time.CLOCK_BOOTTIME) + int(float(sys.argv[1]) * 1e9)))
os.environ["BATON_LEASE_FD"] = str(fd)
os.execvp(sys.argv[2], sys.argv[2:])
PY
}
# Run out: not one step, the retryable exit, and why.
expect_exit 4 "fenced: the worker's lease ran out" -- \
  with_lease -1 "$TRAINER" --data_dir=data --max_steps=5 --checkpoint_dir=fenced
[[ ! -e fenced/ckpt-00000001-g0.pt && ! -e fenced/final.pt ]] || fail "a fenced rank trained"
# Holding: trains as without one.
with_lease 3600 "$TRAINER" --data_dir=data --max_steps=5 > leased.out 2>&1 ||
  { cat leased.out >&2; fail "a rank holding its lease failed"; }
grep -q '^done: steps=5 ' leased.out || { cat leased.out >&2; fail "no summary line"; }
echo PASS
