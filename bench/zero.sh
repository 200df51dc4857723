#!/usr/bin/env bash
# ZeRO (trainer.zero.stage): memory per rank and speed of baton-trainer at stages 1 and 2
# vs the baseline, stage 0 (the same trainer, every rank holding the whole optimizer state
# and gradient; the same overlapped bucketed all-reduce as DDP), for the GPT model with
# AdamW at world size 2 (two processes, shared-memory collectives, 1 thread each), 4 MiB
# gradient buckets for every stage.
#
# Per rank: optimizer-state bytes (AdamW's two fp32 moments per element it updates: the
# whole model at stage 0, its shard at stages 1 and 2, read from the trainer's "zero stage
# S: each of N ranks updates K of T parameter elements" line), gradient bytes (fp32: the
# whole model at stages 0 and 1, where the all-reduce leaves every rank every gradient; at
# stage 2 the shard, plus at most two 4 MiB buckets in flight during backward), and the
# process's peak RSS (VmHWM, peak_rss_mib= on the trainer's summary line; includes
# LibTorch, the model and activations). Speed: global samples/s from rank 0's metric lines
# after the warmup. Every run is a pair of fresh processes; the stages alternate; all must
# end at the same loss (world size 2: the stages change no value).
#
# Prints min/median/max per stage; the last line is
# `ratio=<stage 2 / stage 0 peak RSS per rank, medians>`.
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
  --optimizer=adamw --lr=0.001 --threads=1 --loader_threads=0 --log_every=1
  --bucket_cap_mb=4)

source bench/lib.sh
trainer_bench_setup

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
        m = re.search(r"zero stage \d: each of \d+ ranks updates (\d+) of (\d+) parameter elements", out)
        if m:
            shard, total = int(m.group(1)), int(m.group(2))
print(max(peaks), rate, loss, shard or 0, total or 0)
PY
}


echo "== BLAS in use: $(readlink -f "$(ldd "$TRAINER" | awk '/libblas/ {print $3}')")"
echo "== GPT 6x256 (4 heads), vocab 16384, T=64, batch 8/rank, AdamW, 2 ranks x 1 thread;" \
  "${STEPS} timed steps after ${WARMUP}; ${REPEATS} repeats"
declare -A MEM RATE
SHARD=0 TOTAL=0
for ((i = 0; i < REPEATS; i++)); do
  line="  repeat $((i + 1)):"
  losses=()
  for stage in 0 1 2; do
    read -r m r l shard total <<<"$(run "$stage")"
    MEM[$stage]+="$m "; RATE[$stage]+="$r "; losses+=("$l")
    [[ "$stage" == 2 ]] && SHARD=$shard TOTAL=$total
    line+=$(printf ' stage %d %s MiB %.2f samples/s loss %s |' "$stage" "$m" "$r" "$l")
  done
  echo "${line% |}"
  [[ "${losses[0]}" == "${losses[1]}" && "${losses[0]}" == "${losses[2]}" ]] ||
    { echo "final losses differ (${losses[*]})" >&2; exit 1; }
done
$PY - "$SHARD" "$TOTAL" <<'PY'
import sys
shard, total = int(sys.argv[1]), int(sys.argv[2])
mib = lambda b: b / 2**20
print("per rank, bytes:               optimizer state    gradients")
print("  stage 0 (baseline)           %8.1f MiB       %8.1f MiB" % (mib(8 * total), mib(4 * total)))
print("  stage 1                      %8.1f MiB       %8.1f MiB   (state %.3f of stage 0)"
      % (mib(8 * shard), mib(4 * total), shard / total))
print("  stage 2                      %8.1f MiB       %8.1f MiB + <= 8 MiB of buckets in flight"
      "   (state and gradients %.3f of stage 0)" % (mib(8 * shard), mib(4 * shard), shard / total))
PY
# shellcheck disable=SC2086  # The per-stage lists are space-separated numbers.
{
  summary "peak RSS per rank, stage 0 (baseline)" MiB ${MEM[0]}
  summary "peak RSS per rank, stage 1" MiB ${MEM[1]}
  summary "peak RSS per rank, stage 2" MiB ${MEM[2]}
  summary "samples/s, stage 0 (baseline)" "samples/s" ${RATE[0]}
  summary "samples/s, stage 1" "samples/s" ${RATE[1]}
  summary "samples/s, stage 2" "samples/s" ${RATE[2]}
  echo "samples/s stage 1 / stage 0 (medians): $(ratio "$(median ${RATE[1]})" "$(median ${RATE[0]})")"
  echo "samples/s stage 2 / stage 0 (medians): $(ratio "$(median ${RATE[2]})" "$(median ${RATE[0]})")"
  echo "peak RSS stage 1 / stage 0 (medians): $(ratio "$(median ${MEM[1]})" "$(median ${MEM[0]})")"
  echo "ratio=$(ratio "$(median ${MEM[2]})" "$(median ${MEM[0]})")"
}
