#!/usr/bin/env bash
# Side-by-side training throughput: baton-trainer vs torchrun + DDP (Debian's python3-torch,
# gloo) on the same model, the same data, batch 64 per rank, SGD with momentum, 1 thread per
# rank, alternating runs. Prints samples/s min/median/max per configuration, the step-time
# split, and ratios; the last line is `ratio=<baton / torchrun samples/s, MLP, medians>`.
# Also one process of plain PyTorch eager (ddp_baseline.py without torchrun: no DDP, no
# process group), the single-rank baseline, and each side's scaling efficiency:
# (2-rank samples/s) / (2 x 1-process samples/s). And the machine's own ceiling for two
# ranks: two independent 1-rank trainers at once (no communication at all), whose summed
# rate over 2 x the rate of one alone bounds any 2-rank scaling efficiency here (shared
# memory bandwidth and caches, or vCPUs that share a physical core).
# baton-trainer keeps freed host memory for the next step (worker/trainer/device/
# host_allocator.h); torchrun also runs with the same glibc malloc settings
# (GLIBC_TUNABLES, "torchrun tuned"), and every Baton / torchrun ratio is against the faster
# of the two.
# Baton runs with its default CPU backend (shared memory between ranks on one host) and, for
# comparison, with --cpu_backend=gloo (the transport torchrun's DDP uses).
#
# Usage: bench/trainer_vs_torchrun.sh [REPEATS=3] [STEPS=300] [RESNET_STEPS=10]
# (RESNET_STEPS=0 skips the ResNet-18 comparison, which is slow on CPUs.)
# Needs: bazel build //worker/trainer:baton-trainer //tools:make_mnist (done here).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-300}
RESNET_STEPS=${3:-10}
WARMUP=30
LOG_EVERY=10
PY=/usr/bin/python3
source bench/lib.sh
build_trainer
TRAINER=$BIN/worker/trainer/baton-trainer
TMP=$(mktemp -d -t baton-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
"$BIN/tools/make_mnist" --out_dir="$TMP/mnist" --train_size=12000 --test_size=100 >/dev/null

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "== BLAS in use"
echo "baton-trainer: $(readlink -f "$(ldd "$TRAINER" | awk '/libblas/ {print $3}')")"
echo "python3-torch: $($PY -c '
import torch, re
torch.ones(64, 64) @ torch.ones(64, 64)
print(sorted({l.split()[-1] for l in open("/proc/self/maps") if "blas" in l}))')"

# run_baton WORLD MODEL_FLAGS...: prints samples/s.
run_baton() {
  local world=$1; shift
  local port; port=$(free_port)
  local pids=()
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_RANK=$r LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port \
      BATON_METRICS_FD=3 "$TRAINER" "$@" --batch_size=64 --threads=1 --lr=0.05 --momentum=0.9 \
      --max_steps=$((WARMUP + STEPS)) --log_every=$LOG_EVERY 3>"$TMP/metrics-$r.jsonl" >/dev/null 2>"$TMP/err-$r" &
    pids+=($!)
  done
  # One failed rank ends the run at once (the others would wait for it).
  for _ in "${pids[@]}"; do
    if ! wait -n; then
      kill "${pids[@]}" 2>/dev/null || true
      tail -n 3 "$TMP"/err-* >&2
      exit 1
    fi
  done
  baton_rate "$TMP/metrics-0.jsonl"
}

# run_pair MODEL_FLAGS...: two independent 1-rank baton-trainers at once; prints their
# summed samples/s.
run_pair() {
  local pids=()
  for r in 0 1; do
    RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$(free_port) \
      BATON_METRICS_FD=3 "$TRAINER" "$@" --batch_size=64 --threads=1 --lr=0.05 --momentum=0.9 \
      --max_steps=$((WARMUP + STEPS)) --log_every=$LOG_EVERY 3>"$TMP/pair-$r.jsonl" >/dev/null 2>"$TMP/pair-err-$r" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { tail -n 3 "$TMP"/pair-err-* >&2; exit 1; }
  done
  $PY -c "print($(baton_rate "$TMP/pair-0.jsonl") + $(baton_rate "$TMP/pair-1.jsonl"))"
}

# run_torchrun WORLD ARGS...: prints samples/s. TUNED=1: with baton-trainer's malloc settings.
TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
# tuned_is_faster "PLAIN..." "TUNED...": true (and says so) if TUNED has the higher median.
tuned_is_faster() {
  if [[ $($PY -c "print(int($(median $2) > $(median $1)))") == 1 ]]; then
    echo "(the ratios below are against torchrun tuned)"
  else
    return 1
  fi
}

run_torchrun() {
  local world=$1; shift
  GLIBC_TUNABLES=$([[ ${TUNED:-0} == 1 ]] && echo "$TUNABLES") /usr/bin/torchrun --nproc_per_node="$world" --redirects 9:1 --tee 9:1 \
    --master_port="$(free_port)" bench/ddp_baseline.py "$@" --steps="$STEPS" \
    --warmup="$WARMUP" --batch_size=64 --threads=1 2>/dev/null \
    | $PY -c 'import json,sys
for l in sys.stdin:
    l = l.split("]:", 1)[-1].strip()
    if l.startswith("{"): print(json.loads(l)["samples_per_sec"])'
}

# run_eager MODEL_FLAGS...: plain PyTorch, one process; prints samples/s.
run_eager() {
  $PY bench/ddp_baseline.py "$@" --steps="$STEPS" --warmup="$WARMUP" --batch_size=64 --threads=1 \
    | $PY -c 'import json,sys
for l in sys.stdin:
    if l.startswith("{"): print(json.loads(l)["samples_per_sec"])'
}

echo "== MLP 784-512-512-10 on MNIST-format data, batch 64/rank, ${STEPS} timed steps after ${WARMUP}, ${REPEATS} repeats"
MLP=(--model=mlp --dataset=mnist --data_dir="$TMP/mnist" --hidden=512,512)
B2=(); G2=(); B1=(); T2=(); TT=(); E1=(); P2=()
for ((i = 0; i < REPEATS; i++)); do
  B2+=("$(run_baton 2 "${MLP[@]}")")
  cp "$TMP/metrics-0.jsonl" "$TMP/split-shm.jsonl"
  T2+=("$(run_torchrun 2 --model=mlp --data_dir="$TMP/mnist" --hidden=512,512)")
  TT+=("$(TUNED=1 run_torchrun 2 --model=mlp --data_dir="$TMP/mnist" --hidden=512,512)")
  G2+=("$(run_baton 2 "${MLP[@]}" --cpu_backend=gloo)")
  cp "$TMP/metrics-0.jsonl" "$TMP/split-gloo.jsonl"
  B1+=("$(run_baton 1 "${MLP[@]}")")
  cp "$TMP/metrics-0.jsonl" "$TMP/split-one.jsonl"
  E1+=("$(run_eager --model=mlp --data_dir="$TMP/mnist" --hidden=512,512)")
  P2+=("$(run_pair "${MLP[@]}")")
  echo "  repeat $((i + 1)): baton x2 ${B2[-1]%.*}  torchrun x2 ${T2[-1]%.*} (tuned ${TT[-1]%.*})  baton x2 gloo ${G2[-1]%.*}  baton x1 ${B1[-1]%.*}  eager x1 ${E1[-1]%.*}  2 x independent baton x1 ${P2[-1]%.*} samples/s"
done
echo "baton-trainer, 2 ranks (shm):   $(stats "${B2[@]}") samples/s"
echo "torchrun+DDP,  2 ranks (gloo):  $(stats "${T2[@]}") samples/s"
echo "torchrun tuned, 2 ranks (gloo): $(stats "${TT[@]}") samples/s"
# The strongest baseline: whichever torchrun configuration had the higher median.
if tuned_is_faster "${T2[*]}" "${TT[*]}"; then T2=("${TT[@]}"); fi
echo "baton-trainer, 2 ranks (gloo):  $(stats "${G2[@]}") samples/s"
echo "baton-trainer, 1 rank:          $(stats "${B1[@]}") samples/s"
echo "PyTorch eager, 1 process:       $(stats "${E1[@]}") samples/s"
echo "2 independent baton x1 at once: $(stats "${P2[@]}") samples/s (summed)"
echo "step-time split, rank 0, last repeat (ms):"
echo "  baton x2 shm:   $(baton_split "$TMP/split-shm.jsonl")"
echo "  baton x2 gloo:  $(baton_split "$TMP/split-gloo.jsonl")"
echo "  baton x1:       $(baton_split "$TMP/split-one.jsonl")"
MLP_RATIO=$(ratio "$(median "${B2[@]}")" "$(median "${T2[@]}")")
echo "ratio baton/torchrun (2 ranks, medians):      $MLP_RATIO"
echo "ratio baton gloo/torchrun (2 ranks, medians): $(ratio "$(median "${G2[@]}")" "$(median "${T2[@]}")")"
echo "ratio baton 2 ranks / 1 rank (medians):       $(ratio "$(median "${B2[@]}")" "$(median "${B1[@]}")")"
echo "ratio baton 1 rank / PyTorch eager (medians): $(ratio "$(median "${B1[@]}")" "$(median "${E1[@]}")")"
echo "scaling efficiency, baton (2 ranks / 2 x 1 rank):        $(ratio "$(median "${B2[@]}")" "(2 * $(median "${B1[@]}"))")"
echo "scaling efficiency, torchrun (2 ranks / 2 x eager):      $(ratio "$(median "${T2[@]}")" "(2 * $(median "${E1[@]}"))")"
echo "machine ceiling (2 independent x1 / 2 x 1 rank alone):   $(ratio "$(median "${P2[@]}")" "(2 * $(median "${B1[@]}"))")"
echo "per repeat (each ratio within one repeat; the machine's speed drifts between repeats):"
echo "  baton / torchrun, 2 ranks:        $(paired_ratios "${B2[*]}" "${T2[*]}")"
echo "  baton 1 rank / PyTorch eager:     $(paired_ratios "${B1[*]}" "${E1[*]}")"
echo "  scaling efficiency, baton:        $(paired_ratios "${B2[*]}" "${B1[*]}" 2)"
echo "  scaling efficiency, torchrun:     $(paired_ratios "${T2[*]}" "${E1[*]}" 2)"
echo "  machine ceiling:                  $(paired_ratios "${P2[*]}" "${B1[*]}" 2)"

if ((RESNET_STEPS > 0)); then
  STEPS=$RESNET_STEPS WARMUP=3 LOG_EVERY=1
  echo "== ResNet-18 (CIFAR stem) on CIFAR-10-shaped synthetic data (3x32x32), batch 64/rank, ${STEPS} timed steps after ${WARMUP}"
  RB=(); RT=(); RM=()
  for ((i = 0; i < REPEATS; i++)); do
    RB+=("$(run_baton 2 --model=resnet18 --dataset=synthetic --image_size=32 --num_classes=10 --synthetic_samples=4096)")
    cp "$TMP/metrics-0.jsonl" "$TMP/split-resnet.jsonl"
    RT+=("$(run_torchrun 2 --model=resnet18)")
    RM+=("$(TUNED=1 run_torchrun 2 --model=resnet18)")
    echo "  repeat $((i + 1)): baton x2 ${RB[-1]%.*}  torchrun x2 ${RT[-1]%.*} (tuned ${RM[-1]%.*}) samples/s"
  done
  echo "baton-trainer,  2 ranks:  $(stats "${RB[@]}") samples/s"
  echo "torchrun+DDP,   2 ranks:  $(stats "${RT[@]}") samples/s"
  echo "torchrun tuned, 2 ranks:  $(stats "${RM[@]}") samples/s"
  if tuned_is_faster "${RT[*]}" "${RM[*]}"; then RT=("${RM[@]}"); fi
  echo "step-time split, rank 0, last repeat (ms): $(baton_split "$TMP/split-resnet.jsonl")"
  echo "ratio baton/torchrun (ResNet-18, 2 ranks, medians): $(ratio "$(median "${RB[@]}")" "$(median "${RT[@]}")")"
  echo "  per repeat: $(paired_ratios "${RB[*]}" "${RT[*]}")"
fi
# The contract for scripts: the MLP ratio, last.
echo "ratio=$MLP_RATIO"
