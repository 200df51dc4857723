#!/usr/bin/env bash
# ZeRO (trainer.zero.stage): memory per rank and speed of baton-trainer at stage 1 vs the
# baseline, stage 0 (the same trainer, every rank holding the whole optimizer state), for
# the GPT model with AdamW at world size 2 (two processes, shared-memory collectives, 1
# thread each). Stage 2 is not implemented yet: its row says so.
#
# Per rank: optimizer-state bytes (AdamW's two fp32 moments per element it updates: the
# whole model at stage 0, its shard at stage 1, read from the trainer's "zero stage 1:
# each of N ranks updates S of T parameter elements" line), gradient bytes (fp32, the
# whole model at stages 0 and 1: the all-reduce leaves every rank every gradient), and
# the process's peak RSS (VmHWM, peak_rss_mib= on the trainer's summary line; includes
# LibTorch, the model and activations). Speed: global samples/s from rank 0's metric
# lines after the warmup. Every run is a pair of fresh processes; the stages alternate;
# both must end at the same loss (stage 1 changes no value).
#
# Prints min/median/max per stage; the last line is
# `ratio=<stage 1 / stage 0 peak RSS per rank, medians>` (stage 2's, once it exists).
#
# Usage: bench/zero.sh [REPEATS=3] [STEPS=6]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-6}
WARMUP=2
PY=/usr/bin/python3
# 6 blocks of width 256 and a 16384-token vocabulary (embeddings tied or not, the
# parameters dominate memory at T=64): ~9M parameters, AdamW state ~72 MB at stage 0.
GPT=(--model=gpt --dataset=synthetic --gpt_layers=6 --gpt_heads=4 --gpt_width=256
  --vocab_size=16384 --context_length=64 --synthetic_samples=512 --batch_size=8
  --optimizer=adamw --lr=0.001 --threads=1 --loader_threads=0 --log_every=1)

source bench/lib.sh
build_trainer
TRAINER=$BIN/worker/trainer/baton-trainer
TMP=$(mktemp -d -t baton-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# run STAGE: two fresh ranks; prints "<max peak MiB over ranks> <samples/s> <final loss>
# <elements updated per rank> <total elements>".
run() {
  local stage=$1 port pids=() r
  port=$(free_port)
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" BATON_METRICS_FD=3 "$TRAINER" "${GPT[@]}" --zero_stage="$stage" \
      --max_steps=$((WARMUP + STEPS)) 3>"$TMP/metrics-$stage-$r.jsonl" >"$TMP/out-$stage-$r" \
      2>"$TMP/err-$stage-$r" &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}" || { tail -n 5 "$TMP/err-$stage-$r" "$TMP/out-$stage-$r" >&2; exit 1; }
  done
  $PY - "$TMP" "$stage" "$(baton_rate "$TMP/metrics-$stage-0.jsonl")" <<'PY'
import re, sys
tmp, stage, rate = sys.argv[1], sys.argv[2], sys.argv[3]
peaks, loss, shard, total = [], None, None, None
for r in (0, 1):
    out = open("%s/out-%s-%d" % (tmp, stage, r)).read()
    peaks.append(float(re.search(r"peak_rss_mib=([0-9.]+)", out).group(1)))
    if r == 0:
        loss = re.search(r"^done: steps=\d+ loss=([0-9.]+)", out, re.M).group(1)
        m = re.search(r"zero stage 1: each of \d+ ranks updates (\d+) of (\d+) parameter elements", out)
        if m:
            shard, total = int(m.group(1)), int(m.group(2))
print(max(peaks), rate, loss, shard or 0, total or 0)
PY
}


echo "== BLAS in use: $(readlink -f "$(ldd "$TRAINER" | awk '/libblas/ {print $3}')")"
echo "== GPT 6x256 (4 heads), vocab 16384, T=64, batch 8/rank, AdamW, 2 ranks x 1 thread;" \
  "${STEPS} timed steps after ${WARMUP}; ${REPEATS} repeats"
S0_MEM=(); S0_RATE=(); S1_MEM=(); S1_RATE=()
for ((i = 0; i < REPEATS; i++)); do
  read -r m0 r0 l0 _ _ <<<"$(run 0)"
  read -r m1 r1 l1 shard total <<<"$(run 1)"
  S0_MEM+=("$m0"); S0_RATE+=("$r0"); S1_MEM+=("$m1"); S1_RATE+=("$r1")
  printf '  repeat %d: stage 0 %s MiB %.2f samples/s loss %s | stage 1 %s MiB %.2f samples/s loss %s\n' \
    $((i + 1)) "$m0" "$r0" "$l0" "$m1" "$r1" "$l1"
  [[ "$l0" == "$l1" ]] || { echo "final losses differ ($l0 vs $l1)" >&2; exit 1; }
done
$PY - "$shard" "$total" <<'PY'
import sys
shard, total = int(sys.argv[1]), int(sys.argv[2])
mib = lambda b: b / 2**20
print("per rank, bytes:               optimizer state    gradients")
print("  stage 0 (baseline)           %8.1f MiB       %8.1f MiB" % (mib(8 * total), mib(4 * total)))
print("  stage 1                      %8.1f MiB       %8.1f MiB   (state %.3f of stage 0)"
      % (mib(8 * shard), mib(4 * total), shard / total))
print("  stage 2                      not implemented yet")
PY
summary "peak RSS per rank, stage 0 (baseline)" MiB "${S0_MEM[@]}"
summary "peak RSS per rank, stage 1" MiB "${S1_MEM[@]}"
summary "samples/s, stage 0 (baseline)" "samples/s" "${S0_RATE[@]}"
summary "samples/s, stage 1" "samples/s" "${S1_RATE[@]}"
echo "samples/s stage 1 / stage 0 (medians): $(ratio "$(median "${S1_RATE[@]}")" "$(median "${S0_RATE[@]}")")"
echo "ratio=$(ratio "$(median "${S1_MEM[@]}")" "$(median "${S0_MEM[@]}")")"
