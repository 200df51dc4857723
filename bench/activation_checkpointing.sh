#!/usr/bin/env bash
# Activation checkpointing (trainer.activation_checkpointing): peak memory and step time of
# baton-trainer with --activation_checkpointing=blocks vs the baseline, the same trainer with
# --activation_checkpointing=none. One rank, 1 thread, the GPT model on synthetic tokens at
# a sequence length where activations dominate memory (the attention maps, [batch, heads,
# T, T] per block, dwarf the 1.3M parameters). Every run is a fresh process, the variants
# alternate. Peak memory is the process's high-water mark (VmHWM of /proc/self/status), which
# baton-trainer prints at exit (peak_rss_mib= on its summary line); it includes LibTorch's
# code and the model, so the ratio understates the saving on activations alone. Step time:
# samples/s from the trainer's metric lines after the warmup. Both variants must end with
# the same loss (checkpointing changes no value).
#
# Prints min/median/max per variant; the last line is
# `ratio=<checkpointed / plain peak memory, medians>`.
#
# Usage: bench/activation_checkpointing.sh [REPEATS=3] [STEPS=4]
# Needs: bazel build //worker/trainer:baton-trainer (done here).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-4}
WARMUP=1
PY=/usr/bin/python3
# The model and data: 6 blocks of width 128, 4 heads, 512 tokens, batch 8.
GPT=(--model=gpt --dataset=synthetic --gpt_layers=6 --gpt_heads=4 --gpt_width=128
  --vocab_size=512 --context_length=512 --synthetic_samples=128 --batch_size=8
  --optimizer=adamw --lr=0.001 --threads=1 --loader_threads=0 --log_every=1)

source bench/lib.sh
trainer_bench_setup

echo "== BLAS in use: $(readlink -f "$(ldd "$TRAINER" | awk '/libblas/ {print $3}')")"

# run MODE: one fresh single-rank process; prints "<peak MiB> <samples/s> <final loss>".
run() {
  local out="$TMP/out-$1" metrics="$TMP/metrics-$1.jsonl"
  if ! RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$(free_port)" BATON_METRICS_FD=3 "$TRAINER" "${GPT[@]}" \
    --activation_checkpointing="$1" --max_steps=$((WARMUP + STEPS)) \
    3>"$metrics" >"$out" 2>"$TMP/err-$1"; then
    tail -n 5 "$TMP/err-$1" "$out" >&2
    exit 1
  fi
  local summary
  summary=$(grep '^done: ' "$out")
  local peak=${summary##*peak_rss_mib=}
  local loss=${summary#*loss=}
  echo "${peak%% *} $(baton_rate "$metrics") ${loss%% *}"
}


echo "== GPT 6x128 (4 heads), T=512, batch 8, AdamW, 1 rank x 1 thread; ${STEPS} timed steps after ${WARMUP}; ${REPEATS} repeats"
PLAIN_MEM=(); PLAIN_RATE=(); CKPT_MEM=(); CKPT_RATE=()
for ((i = 0; i < REPEATS; i++)); do
  read -r pm pr pl <<<"$(run none)"
  read -r cm cr cl <<<"$(run blocks)"
  PLAIN_MEM+=("$pm"); PLAIN_RATE+=("$pr"); CKPT_MEM+=("$cm"); CKPT_RATE+=("$cr")
  printf '  repeat %d: none %s MiB %.2f samples/s loss %s | blocks %s MiB %.2f samples/s loss %s\n' \
    $((i + 1)) "$pm" "$pr" "$pl" "$cm" "$cr" "$cl"
  if [[ "$pl" != "$cl" ]]; then
    echo "final losses differ ($pl vs $cl): checkpointing changed the training" >&2
    exit 1
  fi
done
summary "peak RSS, none (baseline)" MiB "${PLAIN_MEM[@]}"
summary "peak RSS, blocks" MiB "${CKPT_MEM[@]}"
summary "samples/s, none (baseline)" "samples/s" "${PLAIN_RATE[@]}"
summary "samples/s, blocks" "samples/s" "${CKPT_RATE[@]}"
echo "step time blocks / none (medians): $(ratio "$(median "${PLAIN_RATE[@]}")" "$(median "${CKPT_RATE[@]}")")"
echo "ratio=$(ratio "$(median "${CKPT_MEM[@]}")" "$(median "${PLAIN_MEM[@]}")")"
