#!/usr/bin/env bash
# End-to-end test of pipeline parallelism in baton-trainer: two real processes as the two
# stages of one pipeline (--pipeline_stages=2) train an MLP, report the loss on rank 0's
# metric lines, write per-stage checkpoints, resume from them, and a run without pipeline
# refuses them.
#   args: <make_mnist> <baton-trainer>
set -euo pipefail

source worker/trainer/testing/e2e_lib.sh "$@"

"$MAKE_MNIST" --out_dir=data --train_size=2000 --test_size=200 --seed=5 > /dev/null

# run_pipeline GENERATION MAX_STEPS: two ranks, stage 0 and stage 1.
run_pipeline() {
  local port pids=() rc
  port=$(free_port)
  for rank in 0 1; do
    env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 GROUP_RANK=0 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" BATON_JOB_ID=j-pipe BATON_GENERATION="$1" \
      BATON_METRICS_FD=3 \
      timeout 120 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
        --lr=0.05 --momentum=0.9 --seed=1 --hidden=64,32 --log_every=10 --threads=1 \
        --max_steps="$2" --checkpoint_every=10 --checkpoint_dir=ckpt \
        --pipeline_stages=2 --pipeline_micro_batches=4 --pipeline_schedule=1f1b \
        --rendezvous_timeout=60s \
        3> "metrics.$1.$rank.jsonl" > "out.$1.$rank.txt" 2> "err.$1.$rank.txt" &
    pids+=($!)
  done
  for i in 0 1; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    [[ $rc -eq 0 ]] || { cat "out.$1.$i.txt" "err.$1.$i.txt" >&2; fail "rank $i exited $rc"; }
  done
}

# ---- 1. Two stages train; rank 0 (the first stage) reports the last stage's loss ----------
run_pipeline 1 30
cat out.1.0.txt
grep -q '^pipeline stage 0 of 2, replica 0 of 1 (1f1b, 4 micro-batches): ' out.1.0.txt ||
  fail "rank 0 is not stage 0"
grep -q '^pipeline stage 1 of 2, replica 0 of 1 ' out.1.1.txt || fail "rank 1 is not stage 1"
grep -q '^done: steps=30 loss=[0-9.]* ' out.1.0.txt || fail "no loss on rank 0's summary"
for s in 0 1; do
  [[ -s ckpt/pipeline-2-stage-$s/ckpt-00000030-g1.pt ]] || fail "no checkpoint of stage $s"
  [[ -s ckpt/pipeline-2-stage-$s/final.pt ]] || fail "no final.pt of stage $s"
done

"$PY" - <<'PY' || fail "metrics or checkpoint check failed"
import json, torch
for rank in (0, 1):
    points = [json.loads(l) for l in open(f"metrics.1.{rank}.jsonl").read().splitlines()
              if '"beat"' not in l]
    assert [p["step"] for p in points] == [10, 20, 30], points
    assert all(p["loss"] > 0 for p in points), points
    assert points[-1]["loss"] < points[0]["loss"], points
a = [json.loads(l) for l in open("metrics.1.0.jsonl") if '"beat"' not in l]
b = [json.loads(l) for l in open("metrics.1.1.jsonl") if '"beat"' not in l]
assert [p["loss"] for p in a] == [p["loss"] for p in b], (a, b)
# Each stage holds its layers only (hidden 64,32: three Linear layers, stage 0 has two).
s0 = torch.load("ckpt/pipeline-2-stage-0/final.pt")
s1 = torch.load("ckpt/pipeline-2-stage-1/final.pt")
assert sorted(s0) == ["layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight"], s0.keys()
assert sorted(s1) == ["layers.2.bias", "layers.2.weight"], s1.keys()
print("pipeline metrics and stage checkpoints OK")
PY

# ---- 2. The pipeline resumes from its stage checkpoints -------------------------------
run_pipeline 2 40
grep -q '^restored .*pipeline-2-stage-0/ckpt-00000030-g1.pt at step 30' out.2.0.txt ||
  fail "stage 0 did not resume"
grep -q '^done: steps=40 ' out.2.1.txt || fail "stage 1 did not finish"

# ---- 3. A run without pipeline refuses them ------------------------------------------
rc=0
env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 BATON_JOB_ID=j-pipe \
  BATON_GENERATION=3 BATON_METRICS_FD=3 \
  timeout 60 "$TRAINER" --model=mlp --dataset=mnist --data_dir=data --batch_size=32 \
    --hidden=64,32 --threads=1 --max_steps=50 --checkpoint_dir=ckpt \
    3> /dev/null > out.3.txt 2> err.3.txt || rc=$?
[[ $rc -ne 0 ]] || fail "a run without pipeline restored pipeline checkpoints"
grep -q 'holds checkpoints of pipeline stages 2 but this run has pipeline stages 1' \
  out.3.txt err.3.txt || { cat out.3.txt err.3.txt >&2; fail "no clear refusal"; }
echo PASS
