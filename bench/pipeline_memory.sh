#!/usr/bin/env bash
# Pipeline parallelism (trainer.pipeline), memory: parameters and peak memory per rank of
# baton-trainer training the GPT model with AdamW at --pipeline_stages=2 (two processes, one
# pipeline) vs one rank without pipeline, the same model, data and global batch. Parameters
# per rank: from each rank's "pipeline stage s of S ...: N of M parameter elements" line
# (the tied wte counts on both the first and the last stage). Peak memory: the process's
# high-water mark (VmHWM), peak_rss_mib= on the trainer's summary line; it includes
# LibTorch's code and, on a pipeline rank, the whole model for the moment it is built before
# the split (stage_factory.h), so the ratio understates the saving on parameters, gradients
# and AdamW state alone. Every run is a fresh process (or pair), alternating.
#
# Usage: bench/pipeline_memory.sh [REPEATS=3] [STEPS=3]
# Last line: ratio=<S=2 rank's peak / one rank's peak, worst rank, medians>
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-3}
PY=/usr/bin/python3
# 8 blocks of width 512 (25M parameters with the 4096 x 512 embedding), 64 tokens.
GPT=(--model=gpt --dataset=synthetic --gpt_layers=8 --gpt_heads=8 --gpt_width=512
  --vocab_size=4096 --context_length=64 --synthetic_samples=256 --batch_size=8
  --optimizer=adamw --lr=0.001 --threads=1 --loader_threads=0 --log_every=1
  --max_steps="$STEPS")

source bench/lib.sh
trainer_bench_setup

# peak FILE: peak_rss_mib of a summary line.
peak() { local s; s=$(grep '^done: ' "$1"); echo "${s##*peak_rss_mib=}"; }

# one: a single rank; prints "<peak MiB>".
one() {
  if ! RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$(free_port)" BATON_METRICS_FD=3 "$TRAINER" "${GPT[@]}" \
    3>/dev/null >"$TMP/one.out" 2>"$TMP/one.err"; then
    tail -n 5 "$TMP/one.err" >&2
    exit 1
  fi
  peak "$TMP/one.out"
}

# two: two ranks as the two stages; prints "<peak rank 0> <peak rank 1> <params 0> <params 1>
# <model params>".
two() {
  local port pids=()
  port=$(free_port)
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" BATON_METRICS_FD=3 "$TRAINER" "${GPT[@]}" --pipeline_stages=2 \
      --pipeline_micro_batches=4 3>/dev/null >"$TMP/two.$r.out" 2>"$TMP/two.$r.err" &
    pids+=($!)
  done
  for r in 0 1; do
    wait "${pids[$r]}" || { tail -n 5 "$TMP/two.$r.err" >&2; exit 1; }
  done
  local p0 p1
  p0=$(sed -n 's/^pipeline stage .*: \([0-9]*\) of \([0-9]*\) parameter elements$/\1 \2/p' "$TMP/two.0.out")
  p1=$(sed -n 's/^pipeline stage .*: \([0-9]*\) of \([0-9]*\) parameter elements$/\1/p' "$TMP/two.1.out")
  echo "$(peak "$TMP/two.0.out") $(peak "$TMP/two.1.out") ${p0%% *} $p1 ${p0##* }"
}

echo "== GPT 8x512 (8 heads), vocab 4096, T=64, batch 8, AdamW, 1 thread per rank;" \
  "$STEPS steps; $REPEATS repeats; $(nproc) cores"
ONE=(); R0=(); R1=(); WORST=()
for ((i = 0; i < REPEATS; i++)); do
  ONE+=("$(one)")
  read -r a b p0 p1 total <<<"$(two)"
  R0+=("$a"); R1+=("$b"); WORST+=("$($PY -c "print(max($a, $b))")")
done
echo "parameters: one rank $total; S=2: stage 0 $p0, stage 1 $p1"
summary "peak RSS, one rank" MiB "${ONE[@]}"
summary "peak RSS, S=2 stage 0" MiB "${R0[@]}"
summary "peak RSS, S=2 stage 1" MiB "${R1[@]}"
$PY -c 'import statistics,sys; n=len(sys.argv)//2; one=list(map(float,sys.argv[1:n+1])); two=list(map(float,sys.argv[n+1:]))
print("ratio=%.3f" % (statistics.median(two) / statistics.median(one)))' "${ONE[@]}" "${WORST[@]}"
